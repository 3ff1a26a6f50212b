"""The HTTP front's session book (`integrations/gateway/http_sessions.py`): rows of state and input -> the
book's decision, without a socket, an event loop or a clock (every time is passed in); Hypothesis where the
rule is general (a session answers only to the principal that opened it; quotas count back to zero)."""

from __future__ import annotations

import ast
from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrations.gateway.http_sessions import (
    CLOSED,
    DROPPED,
    EARLY,
    GONE,
    KEPT,
    MAX_EARLY_REQUESTS,
    REFUSED_DETACHED,
    REFUSED_NO_STREAM,
    SENT,
    Delivery,
    HttpSession,
    HttpSettings,
    SessionBook,
    Stream,
)
from integrations.gateway.replay import EXPIRED, UNKNOWN, Unresolved, event_id
from integrations.gateway.router import SendDownstream
from tests.conftest import ROOT

ALICE: Hashable = ("user", "alice")
BOB: Hashable = ("user", "bob")


def test_the_book_is_pure_no_io_no_event_loop_no_clock_no_sdk() -> None:
    tree = ast.parse((ROOT / "integrations/gateway/http_sessions.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    roots = {name.split(".")[0] for name in imported}
    assert not roots & {"asyncio", "anyio", "socket", "time", "mcp", "uvicorn", "h11", "starlette", "logging"}
    assert roots <= {"__future__", "enum", "itertools", "secrets", "collections", "dataclasses", "typing",
                     "interceptors", "replay", "router"}  # fmt: skip


def _book(**settings_: Any) -> SessionBook:
    return SessionBook(HttpSettings(**settings_))


# Ownership ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("named", "asker", "found"),
    [
        ("alice's", ALICE, True),
        ("alice's", BOB, False),  # another principal: as if unknown (404), so it cannot DELETE it either
        ("alice's", None, False),  # an unauthenticated caller is not the owner either
        ("alice's exchange", ALICE, False),  # a 2026-07-28 exchange is never named by a client
        ("closed", ALICE, False),
        ("unknown", ALICE, False),
        ("none", ALICE, False),  # no Mcp-Session-Id header
    ],
)
def test_a_session_answers_only_to_the_principal_that_opened_it(named: str, asker: Hashable, found: bool) -> None:
    book = _book()
    mine = book.open(ALICE, 1.0, modern=False)
    exchange = book.open(ALICE, 1.0, modern=True)
    gone = book.open(ALICE, 1.0, modern=False)
    book.close(gone.id)
    session_id = {
        "alice's": mine.id, "alice's exchange": exchange.id, "closed": gone.id, "unknown": "f" * 32, "none": None,
    }[named]  # fmt: skip
    session = book.find(session_id, asker, 9.0)
    assert (session is mine) if found else session is None
    assert mine.last_seen == (9.0 if found else 1.0)  # seen only by its owner's requests


def test_handshake_ids_are_random_and_exchange_ids_never_collide_with_them() -> None:
    book = _book()
    ids = [book.open(ALICE, 0.0, modern=False).id for _ in range(200)]
    assert len(set(ids)) == 200 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    modern = [book.open(ALICE, 0.0, modern=True).id for _ in range(3)]
    assert modern == ["modern-1", "modern-2", "modern-3"] and not set(modern) & set(ids)


# Quotas ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("limit", "opened", "closed", "alice_may", "bob_may"),
    [
        (2, 0, 0, True, True),
        (2, 1, 0, True, True),
        (2, 2, 0, False, True),  # the quota is per principal: bob is unaffected
        (2, 2, 1, True, True),  # closing one makes room
        (1, 1, 0, False, True),
    ],
)
def test_a_principal_holds_at_most_its_quota_of_handshake_sessions(
    limit: int, opened: int, closed: int, alice_may: bool, bob_may: bool
) -> None:
    book = _book(max_sessions_per_principal=limit)
    sessions = [book.open(ALICE, 0.0, modern=False) for _ in range(opened)]
    book.open(ALICE, 0.0, modern=True)  # exchanges are not sessions of the quota
    for session in sessions[:closed]:
        book.close(session.id)
    assert (book.may_open(ALICE), book.may_open(BOB)) == (alice_may, bob_may)


@pytest.mark.parametrize(
    ("max_exchanges", "max_sessions", "admitted"),
    [(None, 3, 3), (2, 3, 2), (5, 1, 5), (None, 1, 1)],
)
def test_exchanges_in_flight_are_bounded_by_their_own_limit_or_the_session_quota(
    max_exchanges: int | None, max_sessions: int, admitted: int
) -> None:
    book = _book(max_exchanges_per_principal=max_exchanges, max_sessions_per_principal=max_sessions)
    assert [book.begin_exchange(ALICE) for _ in range(admitted + 1)] == [True] * admitted + [False]
    assert book.begin_exchange(BOB)
    book.end_exchange(ALICE)
    assert book.begin_exchange(ALICE) and not book.begin_exchange(ALICE)


# Idle expiry -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("last_seen", "now", "state", "closed"),
    [
        (0.0, 10.0, "idle", False),  # within the timeout (10 s)
        (0.0, 10.5, "idle", True),
        (0.0, 99.0, "request in flight", False),
        (0.0, 99.0, "GET stream written", False),
        (0.0, 99.0, "GET stream detached", True),  # a detached stream keeps nothing alive
        (0.0, 99.0, "exchange", False),  # exchanges end with their reply, never by idleness
    ],
)
def test_a_handshake_session_idle_beyond_the_timeout_is_closed(
    last_seen: float, now: float, state: str, closed: bool
) -> None:
    book = _book(idle_timeout_s=10.0)
    session = book.open(ALICE, last_seen, modern=state == "exchange")
    if state == "request in flight":
        book.add_request(session, Stream(1))
    elif state.startswith("GET"):
        book.open_standalone(session, Stream())
        if state.endswith("detached"):
            book.settle(session, session.standalone or Stream(), 0, last_seen)
    assert book.idle(now) == ([session.id] if closed else [])


# Delivery ----------------------------------------------------------------------------------------------
def _prepared(setup: str) -> tuple[SessionBook, HttpSession]:
    """A session in one of the states a message can find it in (request 1 in flight unless said)."""
    book = _book()
    session = book.open(ALICE, 0.0, modern=False)
    if setup == "request streaming":
        book.add_request(session, Stream(1))
    elif setup == "request json only":
        book.add_request(session, Stream(1, streams=False))
    elif setup == "request detached":
        stream = Stream(1)
        book.add_request(session, stream)
        book.make_resumable(session, stream, None)
        book.settle(session, stream, 0, 0.0)
    elif setup == "GET streaming":
        book.open_standalone(session, Stream())
    elif setup == "GET detached":
        book.open_standalone(session, Stream())
        book.settle(session, session.standalone or Stream(), 0, 0.0)
    elif setup == "early full":
        session.early = [b"{}"] * MAX_EARLY_REQUESTS
    elif setup == "GET closed":  # a GET stream was opened and ended: nothing waits for one any more
        book.open_standalone(session, Stream())
        session.standalone = None
    return book, session


PROGRESS = {"related": 1}
REPLY = {"related": 1, "final": True}
CALL_REQUEST = {"related": 1, "outgoing": 7}  # sampling within call 1
LONE_REQUEST = {"outgoing": 7}  # roots asked at start-up, tied to no call
NOTIFICATION: dict[str, Any] = {}


@pytest.mark.parametrize(
    ("setup", "message", "outcome"),
    [
        ("request streaming", PROGRESS, SENT),
        ("request streaming", REPLY, SENT),
        ("request streaming", CALL_REQUEST, SENT),
        ("request json only", PROGRESS, SENT),  # queued; the front skips what precedes the reply
        ("request json only", CALL_REQUEST, REFUSED_NO_STREAM),  # JSON cannot carry it, nor a GET here
        ("request detached", PROGRESS, KEPT),
        ("request detached", REPLY, KEPT),
        ("request detached", CALL_REQUEST, REFUSED_DETACHED),  # no one would answer it in time
        ("none", REPLY, DROPPED),  # its client went away: a reply has no other stream
        ("GET streaming", NOTIFICATION, SENT),
        ("GET streaming", LONE_REQUEST, SENT),
        ("GET streaming", PROGRESS, SENT),  # its request is gone: the GET stream carries it
        ("GET detached", NOTIFICATION, KEPT),
        ("GET detached", LONE_REQUEST, REFUSED_NO_STREAM),  # a GET came once: requests wait no more
        ("none", LONE_REQUEST, EARLY),
        ("early full", LONE_REQUEST, REFUSED_NO_STREAM),
        ("GET closed", LONE_REQUEST, REFUSED_NO_STREAM),
        ("none", NOTIFICATION, DROPPED),
        ("none", CALL_REQUEST, REFUSED_NO_STREAM),  # its call's request is not in flight
    ],
)
def test_a_message_goes_to_its_request_stream_else_the_get_stream_else_waits_or_is_refused(
    setup: str, message: dict[str, Any], outcome: Delivery
) -> None:
    book, session = _prepared(setup)
    assert book.deliver(SendDownstream(session.id, b"{}", **message), 0.0) is outcome


def test_a_message_for_an_unknown_session_is_dropped() -> None:
    assert _book().deliver(SendDownstream("nobody", b"{}", None), 0.0) is DROPPED


def test_requests_waiting_for_the_first_get_stream_are_its_first_events() -> None:
    book, session = _prepared("none")
    for index in range(2):
        book.deliver(SendDownstream(session.id, b"%d" % index, None, outgoing=index), 0.0)
    stream = Stream()
    book.open_standalone(session, stream)
    assert [stream.take(0), stream.take(0), stream.take(0)] == [(b"0", False, 1), (b"1", False, 2), None]
    assert session.early is None


def test_a_reply_to_a_detached_request_frees_its_id_and_is_kept_for_resumption_within_the_bound() -> None:
    book = _book(max_detached_per_session=2)
    session = book.open(ALICE, 0.0, modern=False)
    streams = []
    for request_id in (1, 2, 3):
        stream = Stream(request_id)
        assert book.add_request(session, stream) and not book.add_request(session, Stream(request_id))
        book.make_resumable(session, stream, None)
        book.settle(session, stream, 0, 5.0)
        book.deliver(SendDownstream(session.id, b"reply", request_id, final=True), 6.0)
        assert request_id not in session.exchanges and stream.idle_since == 6.0
        streams.append(stream)
    assert list(session.resumable.values()) == streams[1:]  # the oldest went beyond the bound


# Streams and resumption -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("done", "resumable", "live", "finished", "kept", "in_flight"),
    [
        (True, True, True, True, False, False),  # its reply was written: nothing to resume
        (False, False, True, False, False, False),  # a JSON response or an era without resumption
        (False, True, False, False, False, False),  # its session is closed
        (False, True, True, False, True, True),  # cut before its reply: detached, still in flight
        (False, True, True, True, True, False),  # its reply came but was not written: kept, id free
    ],
)
def test_a_connection_that_ends_leaves_its_stream_forgotten_or_detached(
    done: bool, resumable: bool, live: bool, finished: bool, kept: bool, in_flight: bool
) -> None:
    book = _book()
    session = book.open(ALICE, 0.0, modern=False)
    stream = Stream(1)
    book.add_request(session, stream)
    if resumable:
        book.make_resumable(session, stream, None)
    if finished:
        stream.put(b"reply", True)
    stream.done = done
    if not live:
        book.close(session.id)
    book.settle(session, stream, 0, 3.0)
    assert (stream in session.resumable.values(), 1 in session.exchanges) == (kept, in_flight)
    assert stream.attached == (not kept)  # detached only when kept (else the stream is simply over)


def test_a_settle_of_an_older_connection_changes_nothing() -> None:
    book = _book()
    session = book.open(ALICE, 0.0, modern=False)
    stream = Stream(1)
    book.add_request(session, stream)
    book.make_resumable(session, stream, None)
    book.settle(session, stream, 0, 1.0)
    generation = stream.attach([])
    book.settle(session, stream, generation - 1, 2.0)
    assert stream.attached and stream.take(generation) is None and stream.take(generation - 1) is GONE


@pytest.mark.parametrize(
    ("last_event_id", "expected"),
    [
        ("ours.1", [2, 3]),
        ("ours.0", [1, 2, 3]),  # the priming id: everything
        ("ours.3", []),
        ("ours.4", UNKNOWN),  # never sent
        ("theirs.1", UNKNOWN),  # another session's stream: never looked up
        ("not an id", UNKNOWN),
        ("", UNKNOWN),
    ],
)
def test_a_last_event_id_resolves_only_within_its_own_session(last_event_id: str, expected: Any) -> None:
    book = _book(replay_max_events=8)
    mine = book.open(ALICE, 0.0, modern=False)
    theirs = book.open(ALICE, 0.0, modern=False)
    tokens = {}
    for name, session in (("ours", mine), ("theirs", theirs)):
        stream = Stream(1)
        book.add_request(session, stream)
        book.make_resumable(session, stream, None)
        for index in (1, 2, 3):
            stream.put(b"%d" % index, index == 3)
        assert stream.replay is not None
        tokens[name] = stream.replay.token
    name, _, sequence = last_event_id.partition(".")
    wire = event_id(tokens[name], int(sequence)) if name in tokens else last_event_id
    found = book.resumption(mine, wire)
    if isinstance(expected, list):
        assert not isinstance(found, Unresolved) and [event[2] for event in found[1]] == expected
        assert found[0] is mine.exchanges[1]
    else:
        assert found is expected


def test_a_last_event_id_whose_events_went_is_expired() -> None:
    book = _book(replay_max_events=2)
    session = book.open(ALICE, 0.0, modern=False)
    stream = Stream(1)
    book.add_request(session, stream)
    book.make_resumable(session, stream, None)
    for _ in range(5):
        stream.put(b"x", False)
    assert stream.replay is not None
    assert book.resumption(session, event_id(stream.replay.token, 1)) is EXPIRED


@pytest.mark.parametrize(
    ("kind", "idle_since", "now", "forgotten"),
    [
        ("replied", 0.0, 10.0, False),  # within the window (10 s)
        ("replied", 0.0, 10.5, True),
        ("in flight", 0.0, 99.0, False),  # its reply is still to come: kept until it does
        ("GET", 0.0, 10.5, True),
        ("attached", 0.0, 99.0, False),
    ],
)
def test_a_detached_stream_is_forgotten_after_the_resume_window(
    kind: str, idle_since: float, now: float, forgotten: bool
) -> None:
    book = _book(resume_window_s=10.0)
    session = book.open(ALICE, 0.0, modern=False)
    stream = Stream(None if kind == "GET" else 1)
    if kind == "GET":
        book.open_standalone(session, stream)
    else:
        book.add_request(session, stream)
        book.make_resumable(session, stream, None)
    if kind == "replied":
        stream.put(b"reply", True)
    if kind != "attached":
        book.settle(session, stream, 0, idle_since)
    assert book.expire_detached(now) == int(forgotten)
    assert (stream not in session.resumable.values()) == forgotten
    if kind == "GET":
        assert (session.standalone is None) == forgotten  # a forgotten GET stream is no longer the session's


def test_closing_a_session_ends_every_stream_and_its_owners_count() -> None:
    book = _book(max_sessions_per_principal=1)
    session = book.open(ALICE, 0.0, modern=False)
    request, standalone = Stream(1), Stream()
    book.add_request(session, request)
    book.open_standalone(session, standalone)
    closed = book.close(session.id)
    assert closed is session and book.close(session.id) is None
    assert request.take(0) is CLOSED and standalone.take(0) is CLOSED
    assert not session.resumable and book.may_open(ALICE)


# Properties --------------------------------------------------------------------------------------------
PRINCIPALS = [ALICE, BOB, None]
operations = st.lists(
    st.tuples(
        st.sampled_from(["open", "open exchange", "close", "find"]), st.sampled_from(PRINCIPALS), st.integers(0, 9)
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_no_principal_ever_reaches_a_session_it_did_not_open_and_quotas_return_to_zero(
    steps: list[tuple[str, Hashable, int]],
) -> None:
    book = _book(max_sessions_per_principal=3)
    opened: list[tuple[str, Hashable, bool]] = []  # (id, owner, modern), in order
    live: set[str] = set()
    for operation, principal, pick in steps:
        if operation == "open" and book.may_open(principal):
            session = book.open(principal, 0.0, modern=False)
            opened.append((session.id, principal, False))
            live.add(session.id)
        elif operation == "open exchange":
            session = book.open(principal, 0.0, modern=True)
            opened.append((session.id, principal, True))
            live.add(session.id)
        elif operation == "close" and opened:
            session_id = opened[pick % len(opened)][0]
            assert (book.close(session_id) is not None) == (session_id in live)
            live.discard(session_id)
        elif operation == "find" and opened:
            session_id, owner, modern = opened[pick % len(opened)]
            found = book.find(session_id, principal, 1.0)
            assert (found is not None) == (session_id in live and owner == principal and not modern)
        for who in PRINCIPALS:
            held = sum(1 for i, o, m in opened if o == who and not m and i in live)
            assert held <= 3 and book.may_open(who) == (held < 3)
    for session_id in list(live):
        book.close(session_id)
    assert not book.sessions and not book._owned  # nothing counted for a principal with nothing open


stream_steps = st.lists(
    st.tuples(st.sampled_from(["request", "drop", "progress", "reply", "expire"]), st.integers(1, 4)),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(stream_steps, st.integers(0, 3))
def test_detached_streams_stay_bounded_and_a_replied_one_never_holds_its_id(
    steps: list[tuple[str, int]], bound: int
) -> None:
    book = _book(max_detached_per_session=bound, resume_window_s=5.0)
    session = book.open(ALICE, 0.0, modern=False)
    for now, (operation, request_id) in enumerate(steps):
        stream = session.exchanges.get(request_id)
        if operation == "request" and stream is None:
            stream = Stream(request_id)
            assert book.add_request(session, stream)
            book.make_resumable(session, stream, None)
        elif operation == "drop" and stream is not None:
            book.settle(session, stream, stream.generation, float(now))
        elif operation in ("progress", "reply"):
            book.deliver(SendDownstream(session.id, b"x", request_id, final=operation == "reply"), float(now))
            if operation == "reply" and stream is not None and stream.attached:  # its connection writes it, ends
                stream.done = True
                book.settle(session, stream, stream.generation, float(now))
        elif operation == "expire":
            book.expire_detached(float(now))
        replied = [s for s in session.resumable.values() if s.finished and not s.attached]
        assert len(replied) <= bound
        assert all(not s.finished for s in session.exchanges.values())  # a reply written or kept frees its id
        assert all(s.replay is not None and s.replay.token == token for token, s in session.resumable.items())
