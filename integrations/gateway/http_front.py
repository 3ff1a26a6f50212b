"""Streamable HTTP in front of the router: a raw ASGI callable that only frames and admits.

Why raw ASGI and not the SDK's transport: the router already owns the protocol (it answers `initialize`,
ties every message to its request), so the front needs no SDK session; it reads one POST body, parses it
once, hands it to the router and writes back what the router releases for that request. What it remembers
about sessions and streams (ownership, quotas, expiry, resumption) is the session book's
(`http_sessions.py`); binding, uvicorn and the runner are serving's (`downstream_http.py`). Per request:

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
  `Mcp-Method`, `Mcp-Name`) is checked with the SDK's own classifier; closing the response cancels it;
- a body may pause at most `BODY_TIMEOUT_S` (then 408).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Final

import anyio

from interceptors import InvocationContext, Principal
from interceptors.codec import dumps_exact
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

from .http_sessions import (
    BODY_TIMEOUT_S,
    CLOSED,
    DROPPED,
    GONE,
    REFUSED_DETACHED,
    HttpSession,
    HttpSettings,
    SessionBook,
    Stream,
)
from .replay import EXPIRED, Event, Unresolved, event_id
from .router import Router, SendDownstream
from .runner import UPSTREAM_GONE, declared_capabilities

logger = logging.getLogger("interceptors.gateway")

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
_TIMEOUT: Final = object()
PRIMING_SINCE: Final = "2025-11-25"
"""The first revision whose clients take a priming event (an id, empty data); older ones get ids on messages."""

Perform = Callable[[list[Any]], None]


class _Exchange(Stream):
    """A stream a connection writes: `get` waits for its next event (the book's `Stream` is plain state)."""

    __slots__ = ("waiter",)

    def __init__(self, request_id: RequestId | None = None, *, streams: bool = True) -> None:
        super().__init__(request_id, streams=streams)
        self.waiter: asyncio.Future[None] | None = None

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self, generation: int, timeout: float | None) -> Event | object:
        """The next event; `GONE` when this connection is no longer the stream's, `CLOSED` when the stream is
        over, `_TIMEOUT` after `timeout` seconds of nothing."""
        while True:
            item = self.take(generation)
            if item is not None:
                return item
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
        self.book = SessionBook(settings or HttpSettings())
        """The sessions and their streams."""
        self.side_apps: dict[str, Any] = {}
        """Other ASGI apps by path, served beside `/mcp` without tokens (e.g. `/metrics`, `/healthz`)."""
        import mcp.shared.inbound  # the 2026-07-28 header ladder (a slow import: at start, not on a request)

        del mcp

    @property
    def settings(self) -> HttpSettings:
        return self.book.settings

    @settings.setter
    def settings(self, settings: HttpSettings) -> None:
        self.book.settings = settings

    # Delivery (called by the runner, synchronously, in the router's order) -------------------------
    def deliver(self, action: SendDownstream) -> None:
        outcome = self.book.deliver(action, _now())
        if outcome.refused:
            assert action.outgoing is not None
            if outcome is REFUSED_DETACHED:
                logger.info("session %s: a request to its client while its stream is detached; refused upstream",
                            action.session[:8])  # fmt: skip
            else:
                logger.info("session %s has no stream for a request to its client; refused upstream",
                            action.session[:8])  # fmt: skip
            self.perform(self.router.undeliverable(action.session, action.outgoing))
        elif outcome is DROPPED and not action.final and action.session in self.book.sessions:
            logger.debug("dropped a message for session %s: no GET stream is open", action.session[:8])

    # Sessions ----------------------------------------------------------------------------------
    def _open(self, owner: Hashable, principal: Principal | None, *, modern: bool) -> HttpSession:
        session = self.book.open(owner, _now(), modern=modern)
        context = InvocationContext(principal=principal, session_id=None if modern else session.id)
        self.router.open_session(session.id, context=context, principal=owner)
        return session

    def close(self, session_id: str) -> None:
        """End a session: its requests are cancelled upstream, its waiting responses and GET stream end."""
        if self.book.close(session_id) is not None:
            self.perform(self.router.close_session(session_id))

    def expire_idle(self) -> int:
        """Close the handshake sessions idle for longer than the timeout; returns how many."""
        idle = self.book.idle(_now())
        for session_id in idle:
            logger.info("closing session %s after %.0f s idle", session_id[:8], self.settings.idle_timeout_s)
            self.close(session_id)
        return len(idle)

    def expire_detached(self) -> int:
        """Forget the detached streams no client resumed within the window; returns how many."""
        return self.book.expire_detached(_now())

    async def sweep(self) -> None:
        """Expire idle sessions and unclaimed streams forever (a task of the runner)."""
        shortest = min(self.settings.idle_timeout_s, self.settings.resume_window_s)
        interval = min(max(shortest / 4, 0.05), 30.0)
        while True:
            await anyio.sleep(interval)
            self.expire_idle()
            self.expire_detached()

    def shutdown(self) -> None:
        for session_id in list(self.book.sessions):
            self.close(session_id)

    def _resumable(self, session: HttpSession, exchange: Stream, head: Event | None) -> Event | None:
        """The book's `make_resumable` (a stream going to SSE), by its old name."""
        return self.book.make_resumable(session, exchange, head)

    def _settle(self, session: HttpSession, exchange: Stream, generation: int) -> None:
        """The book's `settle` now (a connection of `exchange` ended), by its old name."""
        self.book.settle(session, exchange, generation, _now())

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
        return self.book.find(headers.get("mcp-session-id"), owner, _now())

    async def _named_session(self, headers: dict[str, str], owner: Hashable, send: Any) -> HttpSession | None:
        """For a GET or DELETE: the session the request names, else None with the client answered (400 when no
        session is named, 404 when it is unknown or another principal's)."""
        if "mcp-session-id" not in headers:
            await _send_error(send, 400, None, INVALID_REQUEST, "Bad Request: Missing session ID")
            return None
        session = self._session_of(headers, owner)
        if session is None:
            await _send_error(send, 404, None, INVALID_REQUEST, "Session not found")
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
            if not self.book.may_open(owner):
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
        exchange = _Exchange(message.id, streams=has_sse)
        if not self.book.add_request(session, exchange):
            reason = {"reason": "this id is already in use by a request in flight"}
            await _send_error(send, 400, message.id, INVALID_REQUEST, "Invalid Request", reason, extra=extra)
            return
        version = version or _initialize_version(message)
        try:
            self._receive(session.id, message)
            await self.drain()
            await self._respond(exchange, has_json, has_sse, extra, None, receive, send, session, version)
        finally:
            now = _now()
            self.book.settle(session, exchange, 0, now)
            session.last_seen = now

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
        if not self.book.begin_exchange(owner):
            limit = self.book.exchange_limit
            logger.warning("refused a 2026-07-28 request: the principal already has %d in flight", limit)
            data = {"limit": limit, "reason": "too many requests in flight: wait for a reply before sending more"}
            await _send_error(send, 429, message.id, TOO_MANY_SESSIONS, "Too many requests in flight", data)
            return
        try:
            session = self._open(owner, principal, modern=True)
            exchange = _Exchange(message.id, streams=has_sse)
            self.book.add_request(session, exchange)  # a session of its own: the id is free
            try:
                self._receive(session.id, message)
                await self.drain()
                await self._respond(exchange, has_json, has_sse, [], _error_status, receive, send)
            finally:
                self.close(session.id)  # cancels the request upstream when the client closed the stream first
                await self.drain()
        finally:
            self.book.end_exchange(owner)

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
            if item is GONE:
                return
            if item is CLOSED:
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
                head = self.book.make_resumable(session, exchange, item if isinstance(item, tuple) else None)
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
        session = await self._named_session(headers, owner, send)
        if session is None:
            return
        extra = [(b"mcp-session-id", session.id.encode())]
        last_event_id = headers.get("last-event-id")
        if last_event_id is not None:
            await self._resume(session, last_event_id, extra, receive, send)
            return
        if session.listening:
            await _send_error(send, 409, None, INVALID_REQUEST, "Conflict: one GET stream per session", extra=extra)
            return
        stream = _Exchange()
        self.book.open_standalone(session, stream)
        watcher = asyncio.ensure_future(_watch_disconnect(receive, stream, 0))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *extra]})
            if not await _prime(stream, version, send):
                await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
            await _pump(stream, 0, await stream.get(0, SSE_PING_S), send)
        finally:
            watcher.cancel()
            now = _now()
            self.book.settle(session, stream, 0, now)
            session.last_seen = now

    async def _resume(
        self, session: HttpSession, last_event_id: str, extra: list[tuple[bytes, bytes]], receive: Any, send: Any
    ) -> None:
        """GET with `Last-Event-ID`: the events of that stream after it, then the stream live (a request's ends
        with its reply). Only this session's streams are looked up: an id of another session's is unknown."""
        found = self.book.resumption(session, last_event_id)
        if isinstance(found, Unresolved):
            gone = found is EXPIRED
            data = {"reason": found.reason, "lastEventId": last_event_id[:64]}
            text = "Last-Event-ID expired" if gone else "Unknown Last-Event-ID"
            await _send_error(send, 410 if gone else 400, None, INVALID_REQUEST, text, data, extra=extra)
            return
        exchange, events = found
        assert isinstance(exchange, _Exchange)
        generation = exchange.attach(events)  # a connection still writing it (half-open) stops here
        watcher = asyncio.ensure_future(_watch_disconnect(receive, exchange, generation))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *extra]})
            await _pump(exchange, generation, await exchange.get(generation, SSE_PING_S), send)
        finally:
            watcher.cancel()
            now = _now()
            self.book.settle(session, exchange, generation, now)
            session.last_seen = now

    async def _delete(self, headers: dict[str, str], owner: Hashable, send: Any) -> None:
        session = await self._named_session(headers, owner, send)
        if session is None:
            return
        self.close(session.id)
        await self.drain()
        await _send_empty(send, 200, [])


# Helpers ------------------------------------------------------------------------------------------
_now: Final = time.monotonic
"""The times the front gives the session book (monotonic; compared only with each other; a few calls per request,
so not the loop's `time()`, which first looks the loop up)."""


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
        if item is GONE:
            return
        if item is CLOSED:
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
