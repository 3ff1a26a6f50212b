"""What the HTTP front remembers about its clients: sessions, their streams, who owns them, when they go.

Why a module of its own: the front (`http_front.py`) reads requests and writes responses; which session a
request may use, how many a principal may hold, where a message for a session goes, what a dropped connection
leaves behind and when it is forgotten are rules, tested here as tables without a socket, an event loop or a
clock (every time is passed in), like the replay buffer (`replay.py`) they use.

- A 2025-era (handshake) session is opened by `initialize`, named by a random id and bound to the principal
  that opened it: another principal naming it finds nothing. A principal holds at most
  `max_sessions_per_principal` of them; one idle for `idle_timeout_s` (no request in flight, no GET stream
  written) is closed.
- A 2026-07-28 exchange is a session of one request (`modern`), closed with its reply, never looked up by id;
  a principal has at most `max_exchanges_per_principal` (default: the session quota) in flight.
- A stream is one response (a request's, or the session's GET stream). A 2025-era SSE stream is resumable:
  when its connection drops it is detached and keeps what comes in its replay buffer, until a GET with a
  `Last-Event-ID` of it attaches a new connection (a new `generation`; a writer of an older one stops). A
  detached stream with its reply is kept `resume_window_s` (at most `max_detached_per_session` of them).
"""

from __future__ import annotations

import itertools
import secrets
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final

from interceptors.protocol.messages import RequestId

from .replay import (
    DEFAULT_MAX_DETACHED_PER_SESSION,
    DEFAULT_MAX_REPLAY_BYTES,
    DEFAULT_MAX_REPLAY_EVENTS,
    DEFAULT_RESUME_WINDOW_S,
    UNKNOWN,
    Event,
    ReplayBuffer,
    Unresolved,
    new_token,
    parse_event_id,
)
from .router import SendDownstream

DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: Final = 256
DEFAULT_IDLE_TIMEOUT_S: Final = 1800.0
HEADER_TIMEOUT_S: Final = 10.0
"""How long a connection may take to send a request's head (from its opening, or from its first byte after a
response) before it is closed."""
BODY_TIMEOUT_S: Final = 30.0
"""The longest pause within a request's body before the request is refused (408) and its connection closed."""
MAX_EARLY_REQUESTS: Final = 16
"""Requests to the client tied to no call that wait for the session's first GET stream."""


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """The HTTP edge's settings, plain data: the book reads its limits, the front its Host rule and body pause,
    serving its head deadline."""

    max_sessions_per_principal: int = DEFAULT_MAX_SESSIONS_PER_PRINCIPAL
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_exchanges_per_principal: int | None = None
    """2026-07-28 exchanges (session-less POSTs) one principal may have in flight; None: the session quota."""
    replay_max_events: int = DEFAULT_MAX_REPLAY_EVENTS
    replay_max_bytes: int = DEFAULT_MAX_REPLAY_BYTES
    """Bounds of one stream's replay buffer (the newest event is always kept)."""
    resume_window_s: float = DEFAULT_RESUME_WINDOW_S
    max_detached_per_session: int = DEFAULT_MAX_DETACHED_PER_SESSION
    any_host: bool = False
    """Listening beyond loopback, behind authentication: any Host is admitted (a bearer token, which a page
    that rebound its DNS name has not got, guards `/mcp`), and an Origin must be loopback or the Host's own."""
    header_timeout_s: float = HEADER_TIMEOUT_S
    """A connection that has not sent a whole request head this long after opening (or after its first byte
    following a response) is closed."""
    body_timeout_s: float = BODY_TIMEOUT_S
    """The longest pause within a request's body (then 408, and the connection closes)."""


class _Signal:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


GONE: Final = _Signal("GONE")
"""`Stream.take`: this connection no longer writes the stream (it was lost, or a newer one took it over)."""
CLOSED: Final = _Signal("CLOSED")
"""`Stream.take`: the stream is over (its session closed, or a request's stream has nothing after its reply)."""


class Stream:
    """One response stream (a POSTed request's, or a session's GET): events in order, then over.

    Pure bookkeeping: the front's subclass adds the waiting (`_wake` is its hook, called whenever a writer
    waiting for `take` should look again)."""

    __slots__ = (
        "attached", "closed", "done", "finished", "generation", "idle_since", "items", "replay", "request_id",
        "streams",
    )  # fmt: skip

    def __init__(self, request_id: RequestId | None = None, *, streams: bool = True) -> None:
        self.request_id = request_id  # None: the session's standalone (GET) stream
        self.streams = streams  # False: a JSON-only response, which carries the reply and nothing before it
        self.items: deque[Event] = deque()
        self.closed = False  # the session is over: no more messages, ever
        self.attached = True  # a connection is writing this stream
        self.generation = 0
        self.replay: ReplayBuffer | None = None
        self.finished = False  # its reply was put (a request's stream has nothing after it)
        self.done = False  # its reply was written to a connection
        self.idle_since = 0.0  # when it was detached, or got its reply while detached

    def put(self, data: bytes, final: bool) -> None:
        replay = self.replay
        event = (data, final, 0) if replay is None else replay.append(data, final)
        self.finished = self.finished or final
        if self.attached:
            self.items.append(event)
            self._wake()

    def make_resumable(self, replay: ReplayBuffer, head: Event | None) -> Event | None:
        """Number what is queued (and `head`, already taken) from now on; returns `head` numbered."""
        self.replay = replay
        if head is not None:
            head = replay.append(head[0], head[1])
        self.items = deque(replay.append(data, final) for data, final, _ in self.items)
        return head

    def attach(self, events: list[Event]) -> int:
        """A new connection takes the stream over: it gets `events`, then what comes. Returns its generation."""
        self.generation += 1
        self.attached = True
        self.items = deque(events)
        self._wake()  # an older writer still waiting sees its generation is over
        return self.generation

    def lost(self, generation: int) -> None:
        """The connection of `generation` went away (a no-op when a newer one took the stream over)."""
        if generation == self.generation and self.attached:
            self.attached = False
            self.items.clear()  # kept in the replay buffer, when there is one
            self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def take(self, generation: int) -> Event | _Signal | None:
        """What the writer of `generation` writes next: an event, `GONE`, `CLOSED`, or None (nothing yet)."""
        if generation != self.generation or not self.attached:
            return GONE
        if self.items:
            return self.items.popleft()
        if self.closed or (self.finished and self.request_id is not None):
            return CLOSED
        return None

    def _wake(self) -> None:
        """A writer waiting for `take` should look again (nothing waits here: the front's subclass does)."""


@dataclass(slots=True)
class HttpSession:
    """A handshake session (named by its client, owned by the principal that opened it) or a 2026-07-28
    exchange (`modern`: one request, closed with its reply), with its streams."""

    id: str
    owner: Hashable
    modern: bool
    last_seen: float
    exchanges: dict[RequestId, Stream] = field(default_factory=dict)
    """Requests in flight (their stream attached or not)."""
    standalone: Stream | None = None
    resumable: dict[str, Stream] = field(default_factory=dict)
    """Streams a `Last-Event-ID` may name, by token: in flight, the standalone one, or detached with a reply."""
    early: list[bytes] | None = field(default_factory=list)
    """Requests to the client tied to no call (the roots a server asks at start-up) that came before the
    session's first GET stream: they wait for it (at most `MAX_EARLY_REQUESTS`); None once a GET opened."""

    @property
    def busy(self) -> bool:
        standalone = self.standalone
        return bool(self.exchanges) or (standalone is not None and standalone.attached)

    @property
    def listening(self) -> bool:
        """A connection is writing the session's GET stream (a second GET is refused meanwhile)."""
        standalone = self.standalone
        return standalone is not None and standalone.attached


class Delivery:
    """Where a message for a session went (`SessionBook.deliver`): one of the constants below. Plain instances,
    not an `Enum`: the front compares them on every message, and an enum member costs a lookup each time."""

    __slots__ = ("name", "reason", "refused")

    def __init__(self, name: str, reason: str, *, refused: bool = False) -> None:
        self.name = name
        self.reason = reason
        self.refused = refused
        """A request to the client that nothing carries: the front has the router answer the upstream."""

    def __repr__(self) -> str:
        return self.name


SENT: Final = Delivery("SENT", "onto a stream a connection is writing")
KEPT: Final = Delivery("KEPT", "into a detached stream's replay buffer, for its client to resume")
EARLY: Final = Delivery("EARLY", "held for the session's first GET stream")
REFUSED_DETACHED: Final = Delivery(
    "REFUSED_DETACHED", "a request to the client while its call's stream is detached", refused=True
)
REFUSED_NO_STREAM: Final = Delivery(
    "REFUSED_NO_STREAM", "a request to the client that no stream can carry", refused=True
)
DROPPED: Final = Delivery("DROPPED", "nowhere: no session, or no stream for it")


class SessionBook:
    """The sessions of one HTTP front and their streams; every method is a decision on plain state."""

    def __init__(self, settings: HttpSettings) -> None:
        self.settings = settings
        self.sessions: dict[str, HttpSession] = {}
        self._owned: dict[Hashable, int] = {}
        """Handshake sessions open per principal."""
        self._exchanging: dict[Hashable, int] = {}
        """2026-07-28 exchanges in flight per principal."""
        self._modern_ids = itertools.count(1)

    # Sessions ----------------------------------------------------------------------------------------
    def may_open(self, owner: Hashable) -> bool:
        """Whether `owner` may open one more handshake session (below `max_sessions_per_principal`)."""
        return self._owned.get(owner, 0) < self.settings.max_sessions_per_principal

    def open(self, owner: Hashable, now: float, *, modern: bool) -> HttpSession:
        """A new session of `owner`: a random id for a handshake session (it names the session on the wire), a
        counter's for an exchange (never named by a client)."""
        session_id = f"modern-{next(self._modern_ids)}" if modern else secrets.token_hex(16)
        session = HttpSession(session_id, owner, modern, now)
        self.sessions[session_id] = session
        if not modern:
            self._owned[owner] = self._owned.get(owner, 0) + 1
        return session

    def find(self, session_id: str | None, owner: Hashable, now: float) -> HttpSession | None:
        """The handshake session a request names, only when `owner` opened it (else as if unknown); it was seen
        `now`."""
        session = self.sessions.get(session_id or "")
        if session is None or session.modern or session.owner != owner:
            return None
        session.last_seen = now
        return session

    def close(self, session_id: str) -> HttpSession | None:
        """Forget a session and end its streams; the closed session (None when there was none)."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return None
        if not session.modern:
            _uncount(self._owned, session.owner)
        for stream in session.exchanges.values():
            stream.close()
        for stream in session.resumable.values():
            stream.close()
        if session.standalone is not None:
            session.standalone.close()
        session.resumable.clear()
        return session

    def idle(self, now: float) -> list[str]:
        """The handshake sessions to close `now`: idle (not busy) for longer than `idle_timeout_s`."""
        cutoff = now - self.settings.idle_timeout_s
        return [s.id for s in self.sessions.values() if not s.modern and not s.busy and s.last_seen < cutoff]

    @property
    def exchange_limit(self) -> int:
        return self.settings.max_exchanges_per_principal or self.settings.max_sessions_per_principal

    def begin_exchange(self, owner: Hashable) -> bool:
        """Count one more 2026-07-28 exchange of `owner` in flight; False (not counted) at the limit."""
        in_flight = self._exchanging.get(owner, 0)
        if in_flight >= self.exchange_limit:
            return False
        self._exchanging[owner] = in_flight + 1
        return True

    def end_exchange(self, owner: Hashable) -> None:
        _uncount(self._exchanging, owner)

    # Streams -------------------------------------------------------------------------------------------
    @staticmethod
    def add_request(session: HttpSession, stream: Stream) -> bool:
        """Give a request in flight its stream; False when its id is already in flight in this session."""
        assert stream.request_id is not None
        if stream.request_id in session.exchanges:
            return False
        session.exchanges[stream.request_id] = stream
        return True

    def make_resumable(self, session: HttpSession, stream: Stream, head: Event | None) -> Event | None:
        """Give a stream its event ids and replay buffer (it is going to SSE); returns `head` numbered."""
        settings = self.settings
        token = new_token()
        replay = ReplayBuffer(token, max_events=settings.replay_max_events, max_bytes=settings.replay_max_bytes)
        session.resumable[token] = stream
        return stream.make_resumable(replay, head)

    def open_standalone(self, session: HttpSession, stream: Stream) -> None:
        """`stream` becomes the session's GET stream (resumable; an older one can no longer be resumed), with
        the requests to the client that waited for it."""
        old = session.standalone
        if old is not None and old.replay is not None:  # a new stream, not a resumption of it
            session.resumable.pop(old.replay.token, None)
        session.standalone = stream
        self.make_resumable(session, stream, None)
        early, session.early = session.early or [], None
        for data in early:
            stream.put(data, False)

    @staticmethod
    def resumption(session: HttpSession, last_event_id: str) -> tuple[Stream, list[Event]] | Unresolved:
        """The stream a `Last-Event-ID` names and its events after that id, or why there are none. Only this
        session's streams are looked up: an id of another session's is unknown."""
        parsed = parse_event_id(last_event_id)
        stream = session.resumable.get(parsed[0]) if parsed is not None else None
        if stream is None or parsed is None or stream.replay is None:
            return UNKNOWN
        events = stream.replay.after(parsed[1])
        return events if isinstance(events, Unresolved) else (stream, events)

    def settle(self, session: HttpSession, stream: Stream, generation: int, now: float) -> None:
        """A connection of `stream` ended `now`: forget the stream, or keep it detached for its client to
        resume."""
        if generation != stream.generation:
            return  # a newer connection took the stream over
        replay = stream.replay
        live = self.sessions.get(session.id) is session
        if stream.done or replay is None or not live or stream.closed:
            if stream.request_id is not None and session.exchanges.get(stream.request_id) is stream:
                del session.exchanges[stream.request_id]
            if replay is not None:
                session.resumable.pop(replay.token, None)
            if session.standalone is stream:
                session.standalone = None
            return
        stream.lost(generation)
        stream.idle_since = now
        if stream.finished and stream.request_id is not None:
            session.exchanges.pop(stream.request_id, None)
            self._retain(session, stream, now)

    def _retain(self, session: HttpSession, stream: Stream, now: float) -> None:
        """Keep a detached stream with its reply for resumption; the oldest such ones go beyond the bound."""
        stream.idle_since = now
        kept = [s for s in session.resumable.values() if s.finished and not s.attached and s.request_id is not None]
        for old in kept[: max(0, len(kept) - self.settings.max_detached_per_session)]:
            assert old.replay is not None
            del session.resumable[old.replay.token]

    def expire_detached(self, now: float) -> int:
        """Forget the detached streams no client resumed within the window (a request's only after its reply);
        returns how many."""
        cutoff = now - self.settings.resume_window_s
        forgotten = 0
        for session in self.sessions.values():
            for token, stream in list(session.resumable.items()):
                idle = not stream.attached and stream.idle_since < cutoff
                if idle and (stream.finished or stream.request_id is None):
                    del session.resumable[token]
                    if session.standalone is stream:
                        session.standalone = None
                    forgotten += 1
        return forgotten

    # Delivery --------------------------------------------------------------------------------------------
    def deliver(self, action: SendDownstream, now: float) -> Delivery:
        """Put a message the router released for a session where it goes: its request's stream, else the GET
        stream (a reply has no other stream), else the requests waiting for the first GET."""
        session = self.sessions.get(action.session)
        if session is None:
            return DROPPED
        if action.related is not None:
            stream = session.exchanges.get(action.related)
            if stream is not None and (stream.streams or action.outgoing is None):
                if stream.attached or action.outgoing is None:
                    outcome = _placed(stream)
                    stream.put(action.data, action.final)
                    if action.final and not stream.attached:  # kept for its client to resume
                        del session.exchanges[action.related]
                        self._retain(session, stream, now)
                    return outcome
                return REFUSED_DETACHED
        if action.final:
            return DROPPED  # its client went away: a reply has no other stream to go to
        standalone = session.standalone
        if standalone is not None and (standalone.attached or action.outgoing is None):
            outcome = _placed(standalone)
            standalone.put(action.data, False)  # kept for a resuming GET while no connection is open
            return outcome
        if (
            action.outgoing is not None
            and action.related is None  # tied to no call (a call's own request has its stream, or none)
            and session.early is not None
            and len(session.early) < MAX_EARLY_REQUESTS
        ):
            session.early.append(action.data)  # its client opens the GET stream right after its handshake
            return EARLY
        if action.outgoing is not None:
            return REFUSED_NO_STREAM
        return DROPPED


def _placed(stream: Stream) -> Delivery:
    if stream.attached:
        return SENT
    return KEPT if stream.replay is not None else DROPPED


def _uncount(counts: dict[Hashable, int], owner: Hashable) -> None:
    left = counts.get(owner, 1) - 1
    if left:
        counts[owner] = left
    else:
        counts.pop(owner, None)
