"""The HTTP front's resumability (SSE event ids, `Last-Event-ID`) and its 2026-07-28 `Mcp-Param-*` check.

Tables where the rule is pure (event ids, the replay buffer, the header check), then real `proxy --listen`
subprocesses: the SDK's own client resuming a call whose connection was cut (through a loopback relay that
cuts it, the way a proxy or a flaky network would), and raw HTTP for the wire (ids, statuses, foreign ids).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrations.gateway.http_front import param_header_rejection
from integrations.gateway.replay import EXPIRED, UNKNOWN, ReplayBuffer, event_id, new_token, parse_event_id
from interceptors.protocol.messages import parse
from tests.integrations.gateway.router.test_router_http import (
    ACCEPT_BOTH,
    ENVELOPE,
    MODERN,
    headers_for,
    http_gateway,
    open_session,
    rpc,
    sdk_client,
    tokens_file,
)
from tests.integrations.gateway.test_gateway import STEP_S, TEST_S, text_of
from tests.servers.header_server import ROUTE_SCHEMA

HEADER_UPSTREAM = [sys.executable, "-m", "tests.servers.header_server"]
TOKEN = "0123456789abcdef01234567"


# Event ids ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (f"{TOKEN}.0", (TOKEN, 0)),
        (f"{TOKEN}.42", (TOKEN, 42)),
        (f" {TOKEN}.7 ", (TOKEN, 7)),
        (f"{TOKEN}.", None),
        (f"{TOKEN}.-1", None),
        (f"{TOKEN}.1e3", None),
        (f"{TOKEN}.\u0661", None),  # a digit, but not an ASCII one
        (f"{TOKEN}.{'9' * 19}", None),  # beyond the bound
        (f"{TOKEN.upper()}.1", None),
        (f"{TOKEN[:-1]}.1", None),
        (f"{TOKEN}0.1", None),
        (TOKEN, None),
        ("", None),
        ("1", None),
        ("x" * 10_000, None),
    ],
)
def test_event_ids_parse_only_as_this_front_spells_them(value: str, parsed: tuple[str, int] | None) -> None:
    assert parse_event_id(value) == parsed


def test_event_ids_are_unique_per_stream_and_round_trip() -> None:
    tokens = {new_token() for _ in range(1000)}
    assert len(tokens) == 1000
    for token in list(tokens)[:20]:
        assert parse_event_id(event_id(token, 5)) == (token, 5)


# The replay buffer -----------------------------------------------------------------------------------
def _filled(count: int, *, max_events: int = 4, max_bytes: int = 1 << 20, size: int = 1) -> ReplayBuffer:
    buffer = ReplayBuffer(TOKEN, max_events=max_events, max_bytes=max_bytes)
    for index in range(1, count + 1):
        buffer.append(bytes([48 + index % 10]) * size, index == count)
    return buffer


@pytest.mark.parametrize(
    ("count", "max_events", "after", "expected"),
    [
        (0, 4, 0, []),  # the priming id of a stream with nothing yet
        (3, 4, 0, [1, 2, 3]),
        (3, 4, 2, [3]),
        (3, 4, 3, []),  # the client has everything
        (3, 4, 4, UNKNOWN),  # never sent
        (6, 4, 2, [3, 4, 5, 6]),  # the oldest kept is the one after it: nothing lost
        (6, 4, 1, EXPIRED),  # event 2 went: a gap
        (6, 4, 6, []),
        (6, 4, 99, UNKNOWN),
    ],
)
def test_a_resumption_gets_every_event_after_its_id_or_a_clear_reason(
    count: int, max_events: int, after: int, expected: Any
) -> None:
    replayed = _filled(count, max_events=max_events).after(after)
    if isinstance(expected, list):
        assert isinstance(replayed, list) and [event[2] for event in replayed] == expected
        assert all(event[1] == (event[2] == count) for event in replayed)  # the final one is the reply
    else:
        assert replayed is expected


def test_the_byte_bound_keeps_the_newest_event_whatever_its_size() -> None:
    buffer = _filled(5, max_events=100, max_bytes=25, size=10)
    assert len(buffer) == 2 and buffer.bytes == 20
    big = ReplayBuffer(TOKEN, max_events=100, max_bytes=25)
    big.append(b"x" * 10, False)
    big.append(b"y" * 100, True)  # the reply alone is over the bound: it is still replayable
    replayed = big.after(1)
    assert isinstance(replayed, list) and replayed == [(b"y" * 100, True, 2)]
    assert big.after(0) is EXPIRED


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=50), max_size=40),
    max_events=st.integers(min_value=1, max_value=10),
    max_bytes=st.integers(min_value=0, max_value=200),
    after=st.integers(min_value=0, max_value=45),
)
def test_a_replay_is_always_the_exact_suffix_or_a_refusal_and_the_bounds_hold(
    sizes: list[int], max_events: int, max_bytes: int, after: int
) -> None:
    buffer = ReplayBuffer(TOKEN, max_events=max_events, max_bytes=max_bytes)
    sent = [buffer.append(bytes(size), False) for size in sizes]
    assert len(buffer) <= max_events and (buffer.bytes <= max_bytes or len(buffer) == 1)
    replayed = buffer.after(after)
    if after > len(sent):
        assert replayed is UNKNOWN
    elif isinstance(replayed, list):
        assert replayed == sent[after:]  # no gap, no duplicate, the bytes as sent
    else:
        assert replayed is EXPIRED and len(buffer) < len(sent) - after


# Mcp-Param-* headers (the SDK's rules on the catalog's schema) --------------------------------------
def _call(arguments: Any) -> Any:
    return parse(json.dumps(rpc(1, "tools/call", {"name": "route", "arguments": arguments, "_meta": ENVELOPE})))


def _schemas(name: str) -> Any:
    return ROUTE_SCHEMA if name == "route" else None


@pytest.mark.parametrize(
    ("arguments", "headers", "refused"),
    [
        ({"region": "eu"}, [("mcp-param-region", "eu")], None),
        ({"region": "eu", "shard": 3}, [("mcp-param-region", "eu"), ("mcp-param-shard", "3")], None),
        ({"region": "eu", "shard": 3}, [("mcp-param-region", "eu"), ("mcp-param-shard", "3.0")], None),  # numeric
        ({"region": "eu"}, [("mcp-param-region", "us")], "does not match"),
        ({"region": "eu"}, [], "is missing"),
        ({"note": "n"}, [("mcp-param-region", "eu")], "is present but"),
        ({"region": "eu"}, [("mcp-param-region", "eu"), ("mcp-param-region", "us")], "more than once"),
        ({"region": "eu"}, [("mcp-param-region", "=?base64?!!?=")], "malformed base64"),
        ({"region": "é"}, [("mcp-param-region", "=?base64?w6k=?=")], None),  # a non-token value, wrapped
        ({"region": "eu"}, [("mcp-param-region", "eu"), ("mcp-param-other", "x")], None),  # not annotated
        ({}, [], None),
        (None, [], None),
        ("not an object", [("mcp-param-region", "eu")], None),  # the call itself refuses it
    ],
)
def test_mcp_param_headers_must_agree_with_the_arguments_as_the_sdk_decides(
    arguments: Any, headers: list[tuple[str, str]], refused: str | None
) -> None:
    raw = [(name.encode(), value.encode()) for name, value in headers]
    rejection = param_header_rejection(_call(arguments), raw, _schemas)
    if refused is None:
        assert rejection is None
    else:
        assert rejection is not None and rejection[0] == -32020 and refused in rejection[1]


def test_a_tool_the_catalog_does_not_know_is_not_checked_here() -> None:
    message = parse(json.dumps(rpc(1, "tools/call", {"name": "other", "arguments": {"region": "eu"}})))
    assert param_header_rejection(message, [(b"mcp-param-region", b"us")], _schemas) is None


# End to end: a loopback relay that cuts a connection -------------------------------------------------
class CuttingRelay:
    """Forwards loopback TCP to the gateway; the first connection whose response carries `cut_after` is cut
    right after that chunk reaches the client (both sides closed), as a dropped network would. Later
    connections pass untouched."""

    def __init__(self, target: tuple[str, int], cut_after: bytes) -> None:
        self.target = target
        self.cut_after = cut_after
        self.cut = asyncio.Event()
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp"

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, watch: bool) -> None:
        tail = b""  # the end of the previous chunk: the pattern may straddle two reads
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
                if watch and not self.cut.is_set() and self.cut_after in tail + chunk:
                    self.cut.set()
                    return
                tail = chunk[-len(self.cut_after) :]
        except (ConnectionError, OSError):
            return
        finally:
            writer.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        to_gateway = asyncio.ensure_future(self._pipe(client_reader, upstream_writer, False))
        await self._pipe(upstream_reader, client_writer, True)
        upstream_writer.close()
        client_writer.close()
        to_gateway.cancel()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[CuttingRelay]:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        try:
            yield self
        finally:
            self.server.close()


def _target(url: str) -> tuple[str, int]:
    host_port = url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    return host, int(port)


def _events(text: str) -> list[tuple[str | None, str]]:
    """(id, data) of each SSE event in a body (comments skipped)."""
    events: list[tuple[str | None, str]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        ids = [line[3:].strip() for line in lines if line.startswith("id:")]
        data = "\n".join(line[5:].strip() for line in lines if line.startswith("data:"))
        events.append((ids[0] if ids else None, data))
    return events


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_sdk_client_resumes_a_cut_call_and_gets_every_event_once_then_the_reply() -> None:
    """The call's response stream is cut after its first progress event; the SDK's client reconnects with
    GET and `Last-Event-ID`, and gets the rest: every progress step exactly once, the logs, the reply."""
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with anyio.fail_after(TEST_S):
        async with http_gateway() as gateway:
            relay = CuttingRelay(_target(gateway.url), b"notifications/progress")
            async with relay.running():
                http, client = sdk_client(relay.url, "legacy")
                async with http, client:
                    arguments = {"text": "resumed", "steps": 4, "interval": 0.3}
                    result = await client.call_tool("progress", arguments, progress_callback=on_progress)
                    assert relay.cut.is_set()  # the stream was cut, so the reply came over a resumption
                    assert text_of(result) == "done: resumed"
                    assert progress == [1, 2, 3, 4]
                    assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_cut_stream_resumes_after_its_id_and_foreign_unknown_or_malformed_ids_are_refused(
    tmp_path: Any,
) -> None:
    with anyio.fail_after(TEST_S):
        async with (
            http_gateway("--tokens", tokens_file(tmp_path)) as gateway,
            httpx2.AsyncClient(timeout=STEP_S) as http,
        ):
            url = gateway.url
            alices = await open_session(http, url, "alice-token")
            bobs = await open_session(http, url, "bob-token")
            params = {"name": "progress", "arguments": {"text": "r", "steps": 3, "interval": 0.2},
                      "_meta": {"progressToken": "p"}}  # fmt: skip
            seen: list[tuple[str | None, str]] = []
            request = http.build_request("POST", url, json=rpc(7, "tools/call", params),
                                         headers=headers_for(alices, "alice-token"))  # fmt: skip
            response = await http.send(request, stream=True)
            assert response.headers["content-type"].startswith("text/event-stream")
            buffer = ""
            async for chunk in response.aiter_text():  # read up to the first progress event, then hang up
                buffer += chunk
                seen = [event for event in _events(buffer) if event[1]]
                if seen:
                    break
            await response.aclose()
            priming = _events(buffer)[0]
            assert priming[1] == "" and priming[0] is not None  # 2025-11-25: an id before anything else
            last_id = seen[-1][0]
            assert last_id is not None and json.loads(seen[-1][1])["method"] == "notifications/progress"
            get_headers = {**headers_for(alices, "alice-token"), "accept": "text/event-stream"}
            resumed = await http.get(url, headers={**get_headers, "last-event-id": last_id})
            assert resumed.status_code == 200 and resumed.headers["mcp-session-id"] == alices
            replayed = _events(resumed.text)
            ids = [event[0] for event in replayed]
            assert None not in ids and len(set(ids)) == len(ids) and last_id not in ids
            messages = [json.loads(data) for _, data in replayed]
            steps = [m["params"]["progress"] for m in [json.loads(d) for _, d in seen] + messages
                     if m.get("method") == "notifications/progress"]  # fmt: skip
            assert steps == [1, 2, 3]  # each exactly once across the cut
            assert messages[-1]["id"] == 7 and messages[-1]["result"]["content"][0]["text"] == "done: r"
            # the stream is over once its reply was written: its ids name nothing any more
            with anyio.fail_after(STEP_S):  # a wait, never a claim: the front forgets it as the reply is written
                while (
                    again := await http.get(url, headers={**get_headers, "last-event-id": last_id})
                ).status_code != 400:
                    await anyio.sleep(0.05)
            assert again.json()["error"]["message"] == "Unknown Last-Event-ID"
            # another principal's session with alice's id: as if unknown (no oracle, nothing of hers)
            bob_get = {**headers_for(bobs, "bob-token"), "accept": "text/event-stream"}
            foreign = await http.get(url, headers={**bob_get, "last-event-id": priming[0]})
            assert foreign.status_code == 400 and "dump" not in foreign.text and "done: r" not in foreign.text
            stolen = await http.get(url, headers={**bob_get, "mcp-session-id": alices, "last-event-id": last_id})
            assert stolen.status_code == 404  # alice's session does not exist for bob
            for bad in ("nonsense", f"{'0' * 24}.1", f"{last_id.split('.')[0]}.999999"):
                refused = await http.get(url, headers={**get_headers, "last-event-id": bad})
                assert refused.status_code == 400 and refused.json()["error"]["code"] == -32600, bad
                assert refused.json()["error"]["data"]["reason"]


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_standalone_stream_keeps_what_came_while_detached_for_its_resuming_get() -> None:
    with anyio.fail_after(TEST_S):
        async with http_gateway() as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            url = gateway.url
            session = await open_session(http, url)
            get_headers = {**headers_for(session), "accept": "text/event-stream"}
            async with http.stream("GET", url, headers=get_headers) as stream:
                buffer = ""
                async for chunk in stream.aiter_text():
                    buffer += chunk
                    if "\n\n" in buffer:
                        break
            priming_id = _events(buffer)[0][0]
            assert priming_id is not None
            # what comes now finds the stream detached (or about to be: then its buffer has it all the same)
            changed = await http.post(url, json=rpc(1, "tools/call", {"name": "add_tool", "arguments": {}}),
                                      headers=headers_for(session))  # fmt: skip
            assert changed.status_code == 200
            resumed: list[dict[str, Any]] = []
            headers = {**get_headers, "last-event-id": priming_id}
            async with http.stream("GET", url, headers=headers) as stream:
                assert stream.status_code == 200
                buffer = ""
                async for chunk in stream.aiter_text():
                    buffer += chunk
                    resumed = [json.loads(data) for _, data in _events(buffer) if data]
                    if len(resumed) >= 3:
                        break
            methods = sorted(message["method"] for message in resumed)
            assert methods == ["notifications/prompts/list_changed", "notifications/resources/list_changed",
                               "notifications/tools/list_changed"]  # fmt: skip


# End to end: Mcp-Param-* at 2026-07-28 ---------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.parametrize("policy", ["none", "standard"])
async def test_a_2026_07_28_call_whose_mcp_param_headers_disagree_with_its_arguments_is_refused(policy: str) -> None:
    with anyio.fail_after(TEST_S):
        async with (
            http_gateway("--policy", policy, upstream=HEADER_UPSTREAM) as gateway,
            httpx2.AsyncClient(timeout=STEP_S) as http,
        ):
            url = gateway.url
            base = {
                "accept": ACCEPT_BOTH, "content-type": "application/json", "mcp-protocol-version": MODERN,
                "mcp-method": "tools/call", "mcp-name": "route",
            }  # fmt: skip
            params = {"name": "route", "arguments": {"region": "eu", "shard": 2}, "_meta": ENVELOPE}
            agreed = await http.post(url, json=rpc(1, "tools/call", params),
                                     headers={**base, "mcp-param-region": "eu", "mcp-param-shard": "2"})  # fmt: skip
            assert agreed.status_code == 200, agreed.text
            assert agreed.json()["result"]["content"][0]["text"] == "routed to eu"
            for headers, words in (
                ({"mcp-param-region": "us", "mcp-param-shard": "2"}, "does not match"),
                ({"mcp-param-shard": "2"}, "is missing"),
                ({"mcp-param-region": "eu", "mcp-param-shard": "3"}, "does not match"),
            ):
                refused = await http.post(url, json=rpc(2, "tools/call", params), headers={**base, **headers})
                assert refused.status_code == 400 and refused.headers["content-type"] == "application/json"
                error = refused.json()["error"]
                assert error["code"] == -32020 and words in error["message"] and refused.json()["id"] == 2
            # the SDK's own client mirrors the headers from the schema it was listed: it is never refused
            http_client, client = sdk_client(url, "auto")
            async with http_client, client:
                await client.list_tools()
                assert text_of(await client.call_tool("route", {"region": "ap", "shard": 9})) == "routed to ap"


# The front's stream lifecycle, in process (the real router behind it, no socket) ----------------------
@pytest.mark.anyio
async def test_a_detached_stream_keeps_its_reply_for_the_window_then_is_forgotten_and_the_cap_holds() -> None:
    from integrations.gateway.http_front import HttpFront, _Exchange
    from integrations.gateway.http_sessions import HttpSettings
    from integrations.gateway.router import SendDownstream
    from tests.router_helpers import ready_router

    performed: list[Any] = []

    async def drain() -> None:
        return None

    settings_ = HttpSettings(resume_window_s=3600.0, max_detached_per_session=2)
    front = HttpFront(ready_router(), performed.extend, drain, settings=settings_)
    session = front._open("owner", None, modern=False)
    streams = []
    for request_id in (1, 2, 3):
        exchange = session.exchanges[request_id] = _Exchange(request_id)
        front._resumable(session, exchange, None)
        front.deliver(SendDownstream(session.id, b'{"progress":1}', request_id, False))
        front._settle(session, exchange, 0)  # its connection dropped before the reply: detached, still in flight
        assert not exchange.attached and request_id in session.exchanges
        front.deliver(SendDownstream(session.id, b'{"reply":1}', request_id, True))
        assert request_id not in session.exchanges  # the id is free again; the stream is kept to resume
        streams.append(exchange)
    tokens = [exchange.replay.token for exchange in streams if exchange.replay is not None]
    assert list(session.resumable) == tokens[1:]  # at most 2 replied streams kept: the oldest went
    replayed = streams[2].replay.after(0) if streams[2].replay is not None else None
    assert replayed == [(b'{"progress":1}', False, 1), (b'{"reply":1}', True, 2)]
    assert front.expire_detached() == 0
    front.settings = HttpSettings(resume_window_s=-1.0)  # the window has passed
    assert front.expire_detached() == 2 and not session.resumable
    # a notification for the detached GET stream is kept for its resumption; the session counts as idle
    standalone = session.standalone = _Exchange()
    front._resumable(session, standalone, None)
    front._settle(session, standalone, 0)
    assert session.standalone is standalone and not standalone.attached and not session.busy
    front.deliver(SendDownstream(session.id, b'{"method":"notifications/x"}', None, False))
    assert standalone.replay is not None and len(standalone.replay) == 1
    front.close(session.id)
    assert not session.resumable and standalone.closed
