"""Streamable HTTP in front of the router: a raw ASGI callable on uvicorn that only frames and admits.

Why raw ASGI and not the SDK's transport: the router already owns the protocol (it answers `initialize`,
ties every message to its request), so the front needs no SDK session; it reads one POST body, parses it
once, hands it to the router and writes back what the router releases for that request. Per request:

- a reply that comes before anything else for its request is plain `application/json` (when the client's
  Accept allows it); progress, logs or server requests of that request first make the response an SSE
  stream, ended by the reply;
- 2025-11-25 (handshake) clients get a session per `initialize` (`Mcp-Session-Id`), bound to the principal
  that opened it: another principal's requests with that id get 404 and cannot DELETE it; a principal has
  at most `max_sessions_per_principal` sessions (then 429 with a JSON-RPC error, others unaffected), and a
  session idle for `idle_timeout_s` (no request in flight, no GET stream open) is closed;
- 2026-07-28 exchanges are bounded the same way: at most `max_exchanges_per_principal` (default: the
  session quota) in flight per principal, then 429;
- GET opens a session's standalone SSE stream (notifications and server requests of no request);
- a Host or Origin header that does not name a loopback address is refused (421, 403): the gateway listens
  only on loopback, so such a request comes from a page that rebound its DNS name to us;
- 2026-07-28 requests (an `MCP-Protocol-Version` header of that era, or an envelope without a session) are
  self-contained: each is a router session of its own, closed with its reply; the header ladder (version,
  `Mcp-Method`, `Mcp-Name`) is checked with the SDK's own classifier; closing the response cancels it.

Every accepted connection has TCP_NODELAY: a reply is a few small writes, and Nagle's algorithm with the
peer's delayed ACK would hold each one back ~40 ms. A connection must send a request's head within
`HEADER_TIMEOUT_S` of opening (or of its first byte after a response; an idle keep-alive connection is uvicorn's
to close, after 5 s), and may pause at most `BODY_TIMEOUT_S` within a body (then 408): a connection that never
sends a request is closed instead of holding a file descriptor forever.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import socket
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from interceptors import InvocationContext, Principal
from interceptors.codec import dumps_exact
from interceptors.errors import InterceptorsError
from interceptors.protocol.eras import HANDSHAKE_VERSIONS
from interceptors.protocol.framing import HEAD_BYTES, MAX_LINE_BYTES, Oversized
from interceptors.protocol.messages import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    Kind,
    Message,
    RequestId,
    error_message,
    parse,
    recover_id,
)

from .catalog import Catalog
from .chain_adapter import ChainAdapter
from .replay import (
    DEFAULT_MAX_DETACHED_PER_SESSION,
    DEFAULT_MAX_REPLAY_BYTES,
    DEFAULT_MAX_REPLAY_EVENTS,
    DEFAULT_RESUME_WINDOW_S,
    EXPIRED,
    UNKNOWN,
    Event,
    ReplayBuffer,
    Unresolved,
    event_id,
    new_token,
    parse_event_id,
)
from .router import Router, SendDownstream
from .runner import UPSTREAM_GONE, NoDownstream, Runner, UpstreamShell, declared_capabilities

logger = logging.getLogger("interceptors.gateway")

DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: Final = 256
DEFAULT_IDLE_TIMEOUT_S: Final = 1800.0
HEADER_TIMEOUT_S: Final = 10.0
"""How long a connection may take to send a request's head (from its opening, or from its first byte after a
response) before it is closed."""
BODY_TIMEOUT_S: Final = 30.0
"""The longest pause within a request's body before the request is refused (408) and its connection closed."""
SSE_PING_S: Final = 15.0
"""Seconds without a message before the front commits a waiting request to SSE and pings (proxy timeouts)."""
MCP_PATH: Final = "/mcp"
METADATA_PATH: Final = "/.well-known/oauth-protected-resource"
"""RFC 9728 protected-resource metadata (also at this path + `/mcp`), served when clients authenticate."""
TOO_MANY_SESSIONS: Final = -32000
HEADER_MISMATCH: Final = -32020

_JSON_HEADERS: Final = [(b"content-type", b"application/json")]
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_ERROR_STATUS: Final = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32601: 404}
"""HTTP status of a 2026-07-28 error reply sent as JSON (the SDK's table); handshake replies are always 200."""
_CLOSE: Final = (b"connection", b"close")
_ROUTING_HEADERS: Final = frozenset({"mcp-protocol-version", "mcp-method", "mcp-name"})
_DUPLICATED: Final = " duplicated"  # not a header name (headers have no spaces)
_CLOSED: Final = object()
_TIMEOUT: Final = object()
_GONE: Final = object()
PRIMING_SINCE: Final = "2025-11-25"
"""The first revision whose clients take a priming event (an id, empty data); older ones get ids on messages."""

Perform = Callable[[list[Any]], None]


class _Exchange:
    """One response stream (a POSTed request's, or a session's GET): messages in order, then closed.

    A resumable stream (`replay` set: an SSE stream of a 2025-era session) outlives its connection: when the
    connection drops it is detached (what comes is kept in its replay buffer only), and a GET with a
    `Last-Event-ID` of it attaches a new connection, which gets the events after that id, then the live ones.
    Each attachment is a `generation`: a writer of an older one stops (its connection lost, or taken over).
    """

    __slots__ = (
        "attached", "closed", "done", "finished", "generation", "idle_since", "items", "replay", "request_id",
        "streams", "waiter",
    )  # fmt: skip

    def __init__(self, request_id: RequestId | None = None, *, streams: bool = True) -> None:
        self.request_id = request_id  # None: the session's standalone (GET) stream
        self.streams = streams  # False: a JSON-only response, which carries the reply and nothing before it
        self.items: deque[Event] = deque()
        self.waiter: asyncio.Future[None] | None = None
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

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self, generation: int, timeout: float | None) -> Event | object:
        """The next event; `_GONE` when this connection is no longer the stream's, `_CLOSED` when the stream is
        over (the session closed, or a request's stream has nothing after its reply), `_TIMEOUT` after
        `timeout` seconds of nothing."""
        while True:
            if generation != self.generation or not self.attached:
                return _GONE
            if self.items:
                return self.items.popleft()
            if self.closed or (self.finished and self.request_id is not None):
                return _CLOSED
            waiter = self.waiter = asyncio.get_running_loop().create_future()
            try:
                if timeout is None:
                    await waiter
                else:
                    try:
                        await asyncio.wait_for(waiter, timeout)
                    except TimeoutError:
                        return _TIMEOUT
            finally:
                if self.waiter is waiter:
                    self.waiter = None


MAX_EARLY_REQUESTS: Final = 16


@dataclass(slots=True)
class HttpSession:
    id: str
    owner: Hashable
    modern: bool
    last_seen: float
    exchanges: dict[RequestId, _Exchange] = field(default_factory=dict)
    """Requests in flight (their stream attached or not)."""
    standalone: _Exchange | None = None
    resumable: dict[str, _Exchange] = field(default_factory=dict)
    """Streams a `Last-Event-ID` may name, by token: in flight, the standalone one, or detached with a reply."""
    early: list[bytes] | None = field(default_factory=list)
    """Requests to the client tied to no call (the roots a server asks at start-up) that came before the
    session's first GET stream: they wait for it (at most `MAX_EARLY_REQUESTS`); None once a GET opened."""

    @property
    def busy(self) -> bool:
        standalone = self.standalone
        return bool(self.exchanges) or (standalone is not None and standalone.attached)


@dataclass(frozen=True, slots=True)
class HttpSettings:
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


class HttpFront:
    """The ASGI app (`await front(scope, receive, send)`) and `deliver(SendDownstream)` for the runner.

    `perform` performs router actions (the runner's), `drain` waits for the upstream's write buffer;
    `tokens` (BearerTokens) authenticates every request (401 without a valid bearer token), else every
    client is `default_principal`.
    """

    def __init__(
        self,
        router: Router,
        perform: Perform,
        drain: Callable[[], Awaitable[None]],
        *,
        tokens: Any = None,
        default_principal: Principal | None = None,
        settings: HttpSettings | None = None,
        tool_schema: Callable[[str], Any] | None = None,
        upstream_for: Callable[[dict[str, Any]], Awaitable[bool]] | None = None,
    ) -> None:
        self.router = router
        self.upstream_for = upstream_for
        """Waits until the upstream is ready, the first call starting its handshake with the capabilities the
        client declared (the runner's `upstream_for`); None: the upstream was ready before clients came."""
        self.tool_schema = tool_schema
        """A tool's input schema by name (the catalog's), to check a 2026-07-28 call's `Mcp-Param-*` headers."""
        self.perform = perform
        self.drain = drain
        from .auth import StaticTokens

        self.tokens = tokens
        self.auth = None if tokens is None else tokens if hasattr(tokens, "admit") else StaticTokens(tokens)
        """Who may call `/mcp` (`auth.Authenticator`): a tokens file or OAuth JWTs; None: `default_principal`."""
        self.default_principal = default_principal
        self.settings = settings or HttpSettings()
        self.sessions: dict[str, HttpSession] = {}
        self.side_apps: dict[str, Any] = {}
        """Other ASGI apps by path, served beside `/mcp` without tokens (e.g. `/metrics`, `/healthz`)."""
        self._owned: dict[Hashable, int] = {}
        self._exchanging: dict[Hashable, int] = {}
        """2026-07-28 exchanges in flight per principal (bounded like the sessions of the handshake era)."""
        self._modern_ids = itertools.count(1)
        import mcp.shared.inbound  # the 2026-07-28 header ladder (a slow import: at start, not on a request)

        del mcp

    # Delivery (called by the runner, synchronously, in the router's order) -------------------------
    def deliver(self, action: SendDownstream) -> None:
        session = self.sessions.get(action.session)
        if session is None:
            return
        if action.related is not None:
            exchange = session.exchanges.get(action.related)
            if exchange is not None and (exchange.streams or action.outgoing is None):
                if exchange.attached or action.outgoing is None:
                    exchange.put(action.data, action.final)
                    if action.final and not exchange.attached:  # kept for its client to resume
                        del session.exchanges[action.related]
                        self._retain(session, exchange)
                    return
                logger.info("session %s: a request to its client while its stream is detached; refused upstream",
                            action.session[:8])  # fmt: skip
                self.perform(self.router.undeliverable(action.session, action.outgoing))
                return
        if action.final:
            return  # its client went away: a reply has no other stream to go to
        standalone = session.standalone
        if standalone is not None and (standalone.attached or action.outgoing is None):
            standalone.put(action.data, False)  # kept for a resuming GET while no connection is open
        elif (
            action.outgoing is not None
            and action.related is None  # tied to no call (a call's own request has its stream, or none)
            and session.early is not None
            and len(session.early) < MAX_EARLY_REQUESTS
        ):
            session.early.append(action.data)  # its client opens the GET stream right after its handshake
        elif action.outgoing is not None:  # a request to the client nothing can carry: answer the upstream
            logger.info("session %s has no stream for a request to its client; refused upstream", action.session[:8])
            self.perform(self.router.undeliverable(action.session, action.outgoing))
        else:
            logger.debug("dropped a message for session %s: no GET stream is open", action.session[:8])

    # Sessions ----------------------------------------------------------------------------------
    def _open(self, owner: Hashable, principal: Principal | None, *, modern: bool) -> HttpSession:
        session_id = f"modern-{next(self._modern_ids)}" if modern else secrets.token_hex(16)
        context = InvocationContext(principal=principal, session_id=None if modern else session_id)
        self.router.open_session(session_id, context=context, principal=owner)
        session = HttpSession(session_id, owner, modern, _now())
        self.sessions[session_id] = session
        if not modern:
            self._owned[owner] = self._owned.get(owner, 0) + 1
        return session

    def close(self, session_id: str) -> None:
        """End a session: its requests are cancelled upstream, its waiting responses and GET stream end."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        if not session.modern:
            left = self._owned.get(session.owner, 1) - 1
            if left:
                self._owned[session.owner] = left
            else:
                self._owned.pop(session.owner, None)
        for exchange in session.exchanges.values():
            exchange.close()
        for exchange in session.resumable.values():
            exchange.close()
        if session.standalone is not None:
            session.standalone.close()
        session.resumable.clear()
        self.perform(self.router.close_session(session_id))

    def expire_idle(self) -> int:
        """Close the handshake sessions idle for longer than the timeout; returns how many."""
        cutoff = _now() - self.settings.idle_timeout_s
        idle = [s.id for s in self.sessions.values() if not s.modern and not s.busy and s.last_seen < cutoff]
        for session_id in idle:
            logger.info("closing session %s after %.0f s idle", session_id[:8], self.settings.idle_timeout_s)
            self.close(session_id)
        return len(idle)

    async def sweep(self) -> None:
        """Expire idle sessions and unclaimed streams forever (a task of the runner)."""
        shortest = min(self.settings.idle_timeout_s, self.settings.resume_window_s)
        interval = min(max(shortest / 4, 0.05), 30.0)
        while True:
            await anyio.sleep(interval)
            self.expire_idle()
            self.expire_detached()

    # Resumability ------------------------------------------------------------------------------
    def _resumable(self, session: HttpSession, exchange: _Exchange, head: Event | None) -> Event | None:
        """Give a stream its event ids and replay buffer (it is going to SSE); returns `head` numbered."""
        settings = self.settings
        token = new_token()
        replay = ReplayBuffer(token, max_events=settings.replay_max_events, max_bytes=settings.replay_max_bytes)
        session.resumable[token] = exchange
        return exchange.make_resumable(replay, head)

    def _settle(self, session: HttpSession, exchange: _Exchange, generation: int) -> None:
        """A connection of `exchange` ended: forget the stream, or keep it detached for its client to resume."""
        if generation != exchange.generation:
            return  # a newer connection took the stream over
        replay = exchange.replay
        live = self.sessions.get(session.id) is session
        if exchange.done or replay is None or not live or exchange.closed:
            if exchange.request_id is not None and session.exchanges.get(exchange.request_id) is exchange:
                del session.exchanges[exchange.request_id]
            if replay is not None:
                session.resumable.pop(replay.token, None)
            if session.standalone is exchange:
                session.standalone = None
            return
        exchange.lost(generation)
        exchange.idle_since = _now()
        if exchange.finished and exchange.request_id is not None:
            session.exchanges.pop(exchange.request_id, None)
            self._retain(session, exchange)

    def _retain(self, session: HttpSession, exchange: _Exchange) -> None:
        """Keep a detached stream with its reply for resumption; the oldest such ones go beyond the bound."""
        exchange.idle_since = _now()
        kept = [e for e in session.resumable.values() if e.finished and not e.attached and e.request_id is not None]
        for old in kept[: max(0, len(kept) - self.settings.max_detached_per_session)]:
            assert old.replay is not None
            del session.resumable[old.replay.token]

    def expire_detached(self) -> int:
        """Forget the detached streams no client resumed within the window (a request's only after its reply);
        returns how many."""
        cutoff = _now() - self.settings.resume_window_s
        forgotten = 0
        for session in self.sessions.values():
            for token, exchange in list(session.resumable.items()):
                idle = not exchange.attached and exchange.idle_since < cutoff
                if idle and (exchange.finished or exchange.request_id is None):
                    del session.resumable[token]
                    if session.standalone is exchange:
                        session.standalone = None
                    forgotten += 1
        return forgotten

    def shutdown(self) -> None:
        for session_id in list(self.sessions):
            self.close(session_id)

    # ASGI --------------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "").rstrip("/")
        headers = _headers(scope)
        # Every path (`/metrics` and `/healthz` too) is behind the Host/Origin checks: against DNS rebinding
        host = headers.get("host", "")
        any_host = self.settings.any_host
        if not any_host and not _loopback_name(host, with_scheme=False):
            await _send_error(send, 421, None, INVALID_REQUEST, "Invalid Host header")
            return
        origin = headers.get("origin")
        same_origin = any_host and origin is not None and origin.partition("://")[2].lower() == host.lower()
        if origin is not None and not _loopback_name(origin, with_scheme=True) and not same_origin:
            await _send_error(send, 403, None, INVALID_REQUEST, "Invalid Origin header")
            return
        if path != MCP_PATH:
            if self.auth is not None and path in (METADATA_PATH, METADATA_PATH + MCP_PATH):
                await _send_metadata(send, self.auth, host, scope["method"])
                return
            side = self.side_apps.get(path)
            if side is not None:
                await side(scope, receive, send)
                return
            await _send_error(send, 404, None, INVALID_REQUEST, "Not Found")
            return
        principal = self.default_principal
        if self.auth is not None:
            admitted = await self.auth.admit(headers.get("authorization"))
            if not isinstance(admitted, Principal):
                await _send_refusal(send, self.auth, admitted, host)
                return
            principal = admitted
        owner = (principal.type, principal.id) if principal is not None else None
        method = scope["method"]
        if method == "POST":
            await self._post(headers, owner, principal, receive, send, scope.get("headers", ()))
        elif method == "GET":
            await self._get(headers, owner, receive, send)
        elif method == "DELETE":
            await self._delete(headers, owner, send)
        else:
            await _send_error(
                send, 405, None, INVALID_REQUEST, "Method Not Allowed", extra=[(b"allow", b"GET, POST, DELETE")]
            )

    def _session_of(self, headers: dict[str, str], owner: Hashable) -> HttpSession | None:
        """The handshake session the request names, only when its principal opened it (else as if unknown)."""
        session = self.sessions.get(headers.get("mcp-session-id", ""))
        if session is None or session.modern or session.owner != owner:
            return None
        session.last_seen = _now()
        return session

    async def _post(
        self,
        headers: dict[str, str],
        owner: Hashable,
        principal: Principal | None,
        receive: Any,
        send: Any,
        raw_headers: Any = (),
    ) -> None:
        has_json, has_sse = _accepts(headers.get("accept", ""))
        if not (has_json or has_sse):
            await _send_error(send, 406, None, INVALID_REQUEST, "Not Acceptable: accept application/json")
            return
        if headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/json":
            await _send_error(send, 415, None, INVALID_REQUEST, "Unsupported Media Type: send application/json")
            return
        body = await _read_body(receive, self.settings.body_timeout_s)
        if body is _TIMEOUT:
            await _send_error(
                send, 408, None, INVALID_REQUEST, "Request Timeout: the body stopped coming", extra=[_CLOSE]
            )
            return
        if isinstance(body, Oversized):  # answered with its id when its first bytes hold one, as on stdio
            request_id = recover_id(body.head)
            size = f"{MAX_LINE_BYTES >> 20} MiB"
            if request_id is None:
                logger.warning("dropped a client message over the %s limit (no id in its first bytes)", size)
            else:
                logger.warning("refused a client request over the %s limit", size)
            reason = {"reason": f"a message larger than the {size} limit"}
            await _send_error(send, 413, request_id, INVALID_REQUEST, "Invalid Request", reason, extra=[_CLOSE])
            return
        message = parse(body)
        if message.kind is Kind.INVALID:
            assert message.problem is not None
            problem = message.problem
            request_id = message.id if message.answer_id_known else None
            await _send_error(send, 400, request_id, problem.code, problem.message, problem.data)
            return
        version = headers.get("mcp-protocol-version")
        session_id = headers.get("mcp-session-id")
        modern = (version is not None and version not in HANDSHAKE_VERSIONS) or (
            session_id is None and message.method != "initialize" and message.protocol_version is not None
        )
        if modern:
            await self._post_modern(message, headers, raw_headers, owner, principal, has_json, has_sse, receive, send)
            return
        session: HttpSession | None
        if session_id is None:
            if message.kind is not Kind.REQUEST or message.method != "initialize":
                reason = {"reason": "send initialize first (its reply carries Mcp-Session-Id), or a 2026-07-28 request"}
                await _send_error(send, 400, message.id, INVALID_REQUEST, "Bad Request: Missing session ID", reason)
                return
            if self._owned.get(owner, 0) >= self.settings.max_sessions_per_principal:
                limit = self.settings.max_sessions_per_principal
                logger.warning("refused a new session: the principal already has %d open", limit)
                data = {"limit": limit, "reason": "close a session (DELETE) or let one expire"}
                await _send_error(send, 429, message.id, TOO_MANY_SESSIONS, "Too many open sessions", data)
                return
            if not await self._upstream_ready(message, send):
                return
            session = self._open(owner, principal, modern=False)
        else:
            session = self._session_of(headers, owner)
            if session is None:
                await _send_error(send, 404, message.id, INVALID_REQUEST, "Session not found")
                return
        extra = [(b"mcp-session-id", session.id.encode())]
        if message.kind is not Kind.REQUEST:
            self._receive(session.id, message)
            await self.drain()
            await _send_empty(send, 202, extra)
            return
        assert message.id is not None
        if message.id in session.exchanges:
            reason = {"reason": "this id is already in use by a request in flight"}
            await _send_error(send, 400, message.id, INVALID_REQUEST, "Invalid Request", reason, extra=extra)
            return
        exchange = session.exchanges[message.id] = _Exchange(message.id, streams=has_sse)
        version = version or _initialize_version(message)
        try:
            self._receive(session.id, message)
            await self.drain()
            await self._respond(exchange, has_json, has_sse, extra, None, receive, send, session, version)
        finally:
            self._settle(session, exchange, 0)
            session.last_seen = _now()

    async def _post_modern(
        self,
        message: Message,
        headers: dict[str, str],
        raw_headers: Any,
        owner: Hashable,
        principal: Principal | None,
        has_json: bool,
        has_sse: bool,
        receive: Any,
        send: Any,
    ) -> None:
        if message.kind is Kind.NOTIFICATION:
            await _send_empty(send, 202, [])  # no client notification travels this wire at 2026-07-28
            return
        if message.kind is not Kind.REQUEST:
            reason = {"reason": "a 2026-07-28 server sends the client no requests, so there is nothing to answer"}
            await _send_error(send, 400, None, INVALID_REQUEST, "Invalid Request", reason)
            return
        if message.method == "subscriptions/listen" and not has_sse:  # its response is a stream, never JSON
            await _send_error(send, 406, message.id, INVALID_REQUEST, "Not Acceptable: a listen stream needs SSE")
            return
        rejection = _header_rejection(message, headers)
        if rejection is not None:
            code, text, data = rejection
            await _send_error(send, _ERROR_STATUS.get(code, 400), message.id, code, text, data)
            return
        if not await self._upstream_ready(message, send):  # (the catalog is read: the headers are checked on it)
            return
        if message.method == "tools/call" and self.tool_schema is not None:
            rejection = param_header_rejection(message, raw_headers, self.tool_schema)
            if rejection is not None:
                code, text, data = rejection
                await _send_error(send, _ERROR_STATUS.get(code, 400), message.id, code, text, data)
                return
        assert message.id is not None
        limit = self.settings.max_exchanges_per_principal or self.settings.max_sessions_per_principal
        in_flight = self._exchanging.get(owner, 0)
        if in_flight >= limit:
            logger.warning("refused a 2026-07-28 request: the principal already has %d in flight", limit)
            data = {"limit": limit, "reason": "too many requests in flight: wait for a reply before sending more"}
            await _send_error(send, 429, message.id, TOO_MANY_SESSIONS, "Too many requests in flight", data)
            return
        self._exchanging[owner] = in_flight + 1
        try:
            session = self._open(owner, principal, modern=True)
            exchange = session.exchanges[message.id] = _Exchange(message.id, streams=has_sse)
            try:
                self._receive(session.id, message)
                await self.drain()
                await self._respond(exchange, has_json, has_sse, [], _error_status, receive, send)
            finally:
                self.close(session.id)  # cancels the request upstream when the client closed the stream first
                await self.drain()
        finally:
            left = self._exchanging.get(owner, 1) - 1
            if left:
                self._exchanging[owner] = left
            else:
                self._exchanging.pop(owner, None)

    async def _upstream_ready(self, message: Message, send: Any) -> bool:
        """The first client's opening message starts the upstream's handshake with what it declared; every
        request that opens a session waits for it. False (answered 503) when the upstream went away."""
        if self.upstream_for is None or await self.upstream_for(declared_capabilities(message)):
            return True
        await _send_error(send, 503, message.id, INTERNAL_ERROR, UPSTREAM_GONE)
        return False

    def _receive(self, session_id: str, message: Message) -> None:
        try:
            actions = self.router.receive_downstream_message(session_id, message)
        except Exception as exc:  # a router defect: the request still gets an answer
            logger.error("the router failed on a client message: %s", type(exc).__name__)
            error = {"code": INTERNAL_ERROR, "message": "Internal error"}
            data = dumps_exact({"jsonrpc": "2.0", "id": message.id, "error": error})
            actions = [SendDownstream(session_id, data, message.id, True)]
        self.perform(actions)

    async def _respond(
        self,
        exchange: _Exchange,
        has_json: bool,
        has_sse: bool,
        extra: list[tuple[bytes, bytes]],
        status_of: Callable[[bytes], int] | None,
        receive: Any,
        send: Any,
        session: HttpSession | None = None,
        version: str | None = None,
    ) -> None:
        """Write one request's response: JSON when its reply comes first (and the client takes JSON), else SSE.

        `status_of` gives a JSON reply's status (2026-07-28), else 200; with `session` (a 2025-era one) an SSE
        response is resumable: its events carry ids, and a 2025-11-25 client first gets a priming event."""
        watcher = asyncio.ensure_future(_watch_disconnect(receive, exchange, 0))
        try:
            item = await exchange.get(0, SSE_PING_S if has_sse else None)
            if not has_sse:  # JSON only: what comes before the reply has no wire here
                while isinstance(item, tuple) and not item[1]:
                    item = await exchange.get(0, None)
            if item is _GONE:
                return
            if item is _CLOSED:
                await _send_error(send, 404, None, INVALID_REQUEST, "Session terminated", extra=extra)
                return
            if isinstance(item, tuple) and item[1] and has_json:
                data = item[0]
                status = 200 if status_of is None else status_of(data)
                length = (b"content-length", b"%d" % len(data))  # one write for the body, no chunked framing
                await send(
                    {"type": "http.response.start", "status": status, "headers": [*_JSON_HEADERS, length, *extra]}
                )
                await send({"type": "http.response.body", "body": data})
                exchange.done = True
                return
            if session is not None:  # numbered before any await: nothing that comes meanwhile goes unnumbered
                head = self._resumable(session, exchange, item if isinstance(item, tuple) else None)
                if head is not None:
                    item = head
            await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *extra]})
            if session is not None:
                await _prime(exchange, version, send)
            await _pump(exchange, 0, item, send)
        finally:
            watcher.cancel()

    async def _get(self, headers: dict[str, str], owner: Hashable, receive: Any, send: Any) -> None:
        _, has_sse = _accepts(headers.get("accept", ""))
        if not has_sse:
            await _send_error(send, 406, None, INVALID_REQUEST, "Not Acceptable: accept text/event-stream")
            return
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_VERSIONS:
            await _send_empty(send, 405, [(b"allow", b"POST")])  # 2026-07-28 has no standalone stream
            return
        if "mcp-session-id" not in headers:
            await _send_error(send, 400, None, INVALID_REQUEST, "Bad Request: Missing session ID")
            return
        session = self._session_of(headers, owner)
        if session is None:
            await _send_error(send, 404, None, INVALID_REQUEST, "Session not found")
            return
        extra = [(b"mcp-session-id", session.id.encode())]
        last_event_id = headers.get("last-event-id")
        if last_event_id is not None:
            await self._resume(session, last_event_id, extra, receive, send)
            return
        standalone = session.standalone
        if standalone is not None and standalone.attached:
            await _send_error(send, 409, None, INVALID_REQUEST, "Conflict: one GET stream per session", extra=extra)
            return
        if standalone is not None and standalone.replay is not None:  # a new stream, not a resumption of it
            session.resumable.pop(standalone.replay.token, None)
        stream = session.standalone = _Exchange()
        self._resumable(session, stream, None)
        early, session.early = session.early or [], None
        for data in early:
            stream.put(data, False)
        watcher = asyncio.ensure_future(_watch_disconnect(receive, stream, 0))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *extra]})
            if not await _prime(stream, version, send):
                await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
            await _pump(stream, 0, await stream.get(0, SSE_PING_S), send)
        finally:
            watcher.cancel()
            self._settle(session, stream, 0)
            session.last_seen = _now()

    async def _resume(
        self, session: HttpSession, last_event_id: str, extra: list[tuple[bytes, bytes]], receive: Any, send: Any
    ) -> None:
        """GET with `Last-Event-ID`: the events of that stream after it, then the stream live (a request's ends
        with its reply). Only this session's streams are looked up: an id of another session's is unknown."""
        parsed = parse_event_id(last_event_id)
        exchange = session.resumable.get(parsed[0]) if parsed is not None else None
        events: list[Event] | Unresolved = UNKNOWN
        if exchange is not None and parsed is not None:
            assert exchange.replay is not None
            events = exchange.replay.after(parsed[1])
        if exchange is None or isinstance(events, Unresolved):
            gone = events is EXPIRED
            reason = events.reason if isinstance(events, Unresolved) else UNKNOWN.reason
            data = {"reason": reason, "lastEventId": last_event_id[:64]}
            text = "Last-Event-ID expired" if gone else "Unknown Last-Event-ID"
            await _send_error(send, 410 if gone else 400, None, INVALID_REQUEST, text, data, extra=extra)
            return
        generation = exchange.attach(events)  # a connection still writing it (half-open) stops here
        watcher = asyncio.ensure_future(_watch_disconnect(receive, exchange, generation))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *extra]})
            await _pump(exchange, generation, await exchange.get(generation, SSE_PING_S), send)
        finally:
            watcher.cancel()
            self._settle(session, exchange, generation)
            session.last_seen = _now()

    async def _delete(self, headers: dict[str, str], owner: Hashable, send: Any) -> None:
        if "mcp-session-id" not in headers:
            await _send_error(send, 400, None, INVALID_REQUEST, "Bad Request: Missing session ID")
            return
        session = self._session_of(headers, owner)
        if session is None:
            await _send_error(send, 404, None, INVALID_REQUEST, "Session not found")
            return
        self.close(session.id)
        await self.drain()
        await _send_empty(send, 200, [])


# Helpers ------------------------------------------------------------------------------------------
def _now() -> float:
    return asyncio.get_running_loop().time()


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request's headers by lowercase name; a routing header sent twice is noted under `_DUPLICATED`
    (first-copy and last-copy readers would disagree about it)."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1")
        if name in headers and name in _ROUTING_HEADERS:
            headers[_DUPLICATED] = name
        headers[name] = raw_value.decode("latin-1")
    return headers


_LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "[::1]"})


def _loopback_name(value: str, *, with_scheme: bool) -> bool:
    """Whether a Host (`name[:port]`) or Origin (`scheme://name[:port]`) names this loopback server: the
    gateway listens only on loopback, so any other name is a page that rebound its DNS to us."""
    if with_scheme:
        scheme, sep, value = value.partition("://")
        if not sep or scheme.lower() not in ("http", "https"):
            return False
    name = value.lower()
    if name.startswith("["):
        name = name[: name.find("]") + 1]
    else:
        name, _, port = name.partition(":")
        if port and not port.isdigit():
            return False
    return name in _LOOPBACK_NAMES


def _accepts(accept: str) -> tuple[bool, bool]:
    """(JSON, SSE) for an Accept header, wildcards included (RFC 9110 media ranges).

    JSON is offered only where the client does not state it prefers a stream: a client whose Accept ranks
    `text/event-stream` above `application/json` (a higher q, or the same q and listed first, as
    `text/event-stream, application/json`) gets SSE, as from the SDK's own server; the SDK clients (TypeScript
    and Python) list JSON first and get plain JSON where nothing precedes the reply."""
    ranked: dict[str, tuple[float, int]] = {}
    for position, part in enumerate(accept.split(",")):
        kind, _, parameters = part.partition(";")
        quality = 1.0
        for parameter in parameters.split(";"):
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value.strip())
                except ValueError:
                    quality = 0.0
        kind = kind.strip().lower()
        if kind and quality > 0 and kind not in ranked:
            ranked[kind] = (quality, -position)
    json_rank = max((ranked[k] for k in ("*/*", "application/*", "application/json") if k in ranked), default=None)
    sse_rank = max((ranked[k] for k in ("*/*", "text/*", "text/event-stream") if k in ranked), default=None)
    if json_rank is not None and sse_rank is not None and sse_rank > json_rank:
        return False, True
    return json_rank is not None, sse_rank is not None


def _header_rejection(message: Message, headers: dict[str, str]) -> tuple[int, str, Any] | None:
    """The 2026-07-28 header ladder, by the SDK's own rules: the routing headers must agree with the body."""
    from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request  # imported at start

    duplicated = headers.get(_DUPLICATED)
    if duplicated is not None:
        return HEADER_MISMATCH, f"{duplicated} header appears more than once", None
    assert message.body is not None
    verdict = classify_inbound_request(message.body, headers=headers)
    if isinstance(verdict, InboundLadderRejection):
        return verdict.code, verdict.message, verdict.data
    return None


async def _read_body(receive: Any, pause_s: float = BODY_TIMEOUT_S) -> Any:
    """The whole request body; its first bytes (`Oversized`) when it is larger than one message may be, `_TIMEOUT`
    when it paused for longer than `pause_s` (a body that has all come in, the usual case, is read without a
    timer)."""
    event = await receive()
    if event["type"] == "http.disconnect":
        return b""
    chunk = event.get("body", b"")
    if not event.get("more_body", False):
        return chunk if len(chunk) <= MAX_LINE_BYTES else Oversized(chunk[:HEAD_BYTES])
    chunks = [chunk]
    size = len(chunk)
    while True:
        try:
            event = await asyncio.wait_for(receive(), pause_s)
        except TimeoutError:
            logger.info("refused a request whose body paused for over %g s", pause_s)
            return _TIMEOUT
        if event["type"] == "http.disconnect":
            return b""
        chunk = event.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_LINE_BYTES:
            head = b""
            for part in chunks:  # (no copy of the whole: only up to the head's length)
                head += part[: HEAD_BYTES - len(head)]
                if len(head) >= HEAD_BYTES:
                    break
            return Oversized(head)
        if not event.get("more_body", False):
            return b"".join(chunks)


async def _watch_disconnect(receive: Any, exchange: _Exchange, generation: int) -> None:
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            exchange.lost(generation)
            return


async def _prime(exchange: _Exchange, version: str | None, send: Any) -> bool:
    """A resumable stream's priming event (its id, no data) for clients of 2025-11-25 on; whether it was sent."""
    replay = exchange.replay
    if replay is None or version is None or version < PRIMING_SINCE or version not in HANDSHAKE_VERSIONS:
        return False
    body = b"id: " + event_id(replay.token, 0).encode() + b"\ndata:\n\n"
    await send({"type": "http.response.body", "body": body, "more_body": True})
    return True


async def _pump(exchange: _Exchange, generation: int, item: Event | object, send: Any) -> None:
    """Write a stream's events as SSE until its reply, its end, or the loss of this connection."""
    replay = exchange.replay
    while True:
        if item is _GONE:
            return
        if item is _CLOSED:
            exchange.done = exchange.done or exchange.finished
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if item is _TIMEOUT:
            await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
        else:
            assert isinstance(item, tuple)
            data, final, sequence = item
            if replay is not None and sequence:
                head = b"id: " + event_id(replay.token, sequence).encode() + b"\nevent: message\ndata: "
            else:
                head = b"event: message\ndata: "
            await send({"type": "http.response.body", "body": head + data + b"\n\n", "more_body": not final})
            if final:
                exchange.done = True
                return
        item = await exchange.get(generation, SSE_PING_S)


def _initialize_version(message: Message) -> str | None:
    """The revision an `initialize` asks for (its reply's stream is framed for it: the header comes later)."""
    params = message.params
    version = params.get("protocolVersion") if params is not None and message.method == "initialize" else None
    return version if isinstance(version, str) else None


def param_header_rejection(
    message: Message, raw_headers: Any, tool_schema: Callable[[str], Any]
) -> tuple[int, str, Any] | None:
    """A 2026-07-28 `tools/call` whose `Mcp-Param-*` headers disagree with its arguments, per the called tool's
    input schema (its `x-mcp-header` annotations), by the SDK's own rules; None when they agree (or nothing
    can be checked: no such tool, arguments that are no object, which the call itself then refuses)."""
    from mcp.shared.inbound import validate_mcp_param_headers  # imported at start
    from starlette.datastructures import Headers

    params = message.params or {}
    name = params.get("name")
    arguments = params.get("arguments")
    if not isinstance(name, str) or (arguments is not None and not isinstance(arguments, dict)):
        return None
    pairs = [(bytes(key).lower(), bytes(value)) for key, value in raw_headers]
    if not arguments and not any(key.startswith(b"mcp-param-") for key, _ in pairs):
        return None  # no value and no header: no annotation can be violated
    schema = tool_schema(name)
    if schema is None:
        return None
    verdict = validate_mcp_param_headers(schema, arguments or {}, Headers(raw=pairs))  # every copy: duplicates too
    if verdict is None:
        return None
    return verdict.code, verdict.message, verdict.data


def _error_status(data: bytes) -> int:
    """A 2026-07-28 JSON reply's status: the SDK's table for an error code, else 200."""
    if b'"error":' not in data[:64]:
        return 200
    try:
        message = parse(data)
    except Exception:  # pragma: no cover - our own serialisation
        return 200
    if message.kind is Kind.ERROR:
        code = message.error.get("code")
        return _ERROR_STATUS.get(code, 200) if isinstance(code, int) else 200
    return 200


async def _send_error(
    send: Any,
    status: int,
    request_id: RequestId | None,
    code: int,
    text: str,
    data: Any = None,
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = error_message(request_id, code, text, data)
    headers = [*_JSON_HEADERS, (b"content-length", b"%d" % len(body)), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_refusal(send: Any, auth: Any, refusal: Any, host: str) -> None:
    """401/403 (or 503 when the issuer's keys cannot be had) with the RFC 6750 / RFC 9728 challenge."""
    from .auth import challenge

    text = {401: "Unauthorized", 403: "Forbidden"}.get(refusal.status, "Service Unavailable")
    data = None if refusal.description is None else {"reason": refusal.description}
    extra = [(b"www-authenticate", challenge(auth, refusal, host, MCP_PATH))]
    await _send_error(send, refusal.status, None, INVALID_REQUEST, text, data, extra=extra)


async def _send_metadata(send: Any, auth: Any, host: str, method: str) -> None:
    """The RFC 9728 protected-resource metadata: public, so any origin may read it (CORS)."""
    from .auth import metadata_document

    cors = [(b"access-control-allow-origin", b"*"), (b"access-control-allow-methods", b"GET, OPTIONS")]
    if method == "OPTIONS":
        await _send_empty(send, 204, [*cors, (b"access-control-allow-headers", b"mcp-protocol-version")])
        return
    if method not in ("GET", "HEAD"):
        await _send_empty(send, 405, [(b"allow", b"GET, OPTIONS")])
        return
    body = dumps_exact(metadata_document(auth, host, MCP_PATH))
    await send({"type": "http.response.start", "status": 200, "headers": [*_JSON_HEADERS, *cors]})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


async def _send_empty(send: Any, status: int, extra: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": extra})
    await send({"type": "http.response.body", "body": b""})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


# Serving ------------------------------------------------------------------------------------------
class NoDelayProtocol(H11Protocol):
    """uvicorn's h11 protocol with TCP_NODELAY set on every accepted connection, and a deadline for each request's
    head: uvicorn times only the keep-alive pause after a response, so a connection that opens and sends
    nothing (or half a head) would be held forever."""

    header_timeout_s: float = HEADER_TIMEOUT_S
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        set_nodelay(transport.get_extra_info("socket"))
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.conn.their_state is h11.IDLE:  # a new request begins
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)
        super().data_received(data)
        timer = self._head_timer
        if timer is not None and self.conn.their_state is not h11.IDLE:  # its head is in
            timer.cancel()
            self._head_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        busy = self.cycle is not None and not self.cycle.response_complete
        if self.conn.their_state is h11.IDLE and not busy and not self.transport.is_closing():
            logger.info("closed a connection that sent no request within %g s", self.header_timeout_s)
            self.transport.close()


def set_nodelay(sock: Any) -> None:
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ListenError(InterceptorsError, OSError):
    """The address cannot be listened on (in use, not ours)."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening, non-blocking socket with TCP_NODELAY (inherited by what it accepts on Linux)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        set_nodelay(sock)
        sock.bind((host, port))
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


class HttpServer(uvicorn.Server):
    """uvicorn serving one ASGI app on a given socket; the gateway owns the signals (uvicorn would re-raise)."""

    def __init__(self, app: Any, *, header_timeout_s: float = HEADER_TIMEOUT_S) -> None:
        protocol: type[NoDelayProtocol] = NoDelayProtocol
        if header_timeout_s != HEADER_TIMEOUT_S:
            protocol = type("NoDelayProtocol", (NoDelayProtocol,), {"header_timeout_s": header_timeout_s})
        config = uvicorn.Config(
            app,
            http=protocol,
            ws="none",
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
            proxy_headers=False,  # loopback only: no proxy in front whose X-Forwarded-* to believe (nor the cost)
        )
        super().__init__(config)

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def announce(host: str, port: int) -> None:
    shown = f"[{host}]" if ":" in host else host
    print(f"mcp-interceptors proxy: listening on http://{shown}:{port}{MCP_PATH}", file=sys.stderr, flush=True)


# The runner ---------------------------------------------------------------------------------------
class HttpRunner(Runner):
    """The router gateway serving Streamable HTTP: the upstream pump of `Runner`, uvicorn for the clients."""

    def __init__(
        self,
        router: Router,
        adapter: ChainAdapter,
        upstream: UpstreamShell,
        sock: socket.socket,
        *,
        tokens: Any = None,
        default_principal: Principal | None = None,
        settings: HttpSettings | None = None,
        catalog: Catalog | None = None,
        handle_signals: bool = False,
        on_listening: Callable[[str, int], None] | None = announce,
        timeout: float | None = None,
        local: Any = None,
    ) -> None:
        super().__init__(
            router, adapter, upstream, NoDownstream(), catalog=catalog, handle_signals=handle_signals, timeout=timeout,
            local=local,
        )  # fmt: skip
        self.sock = sock
        self.on_listening = on_listening
        self.front = HttpFront(
            router, self.perform, upstream.drain, tokens=tokens, default_principal=default_principal, settings=settings,
            tool_schema=catalog.tool_schema if catalog is not None else None, upstream_for=self.upstream_for,
        )  # fmt: skip

    def send_downstream(self, action: SendDownstream) -> None:
        self.front.deliver(action)

    async def run(self) -> int:
        http = HttpServer(self.front, header_timeout_s=self.front.settings.header_timeout_s)
        async with anyio.create_task_group() as tasks:
            served = anyio.Event()
            # the upstream's handshake waits for the first client (`upstream_for`), so it is told that client's
            # capabilities; the upstream pump runs from the start, so one that dies is noticed at once
            self._start_tasks(tasks)

            async def serve() -> None:
                try:
                    await http.serve(sockets=[self.sock])
                finally:
                    served.set()
                    self._finish(0)

            tasks.start_soon(serve)
            tasks.start_soon(self.front.sweep)
            if self.on_listening is not None:
                host, port = self.sock.getsockname()[:2]
                self.on_listening(host, port)
            await self._done.wait()
            http.should_exit = True  # answers already released still reach their clients
            with anyio.move_on_after(3):
                await served.wait()
            self.front.shutdown()
            for run in self._chain_runs:
                run.cancel()
            tasks.cancel_scope.cancel()
        return self.exit_code or 0
