"""The upstream server over Streamable HTTP: raw messages both ways, no SDK session in between.

One pool of persistent connections (`http_wire.Pool`: one write per request, the response read straight off
the socket, SSE parsed from its bytes; no per-call client objects). Messages are POSTed in the order the
router sends them: a notification or a reply waits for its answer (202) before the next message goes, so
`notifications/initialized` is in before the first request; a request's POST is read in a task of its
own, so a slow tool holds up nothing else. A request's reply comes as JSON or on an SSE stream, and
everything on that stream reaches the router with `related=` the request's upstream id (its progress, logs
and server requests belong to it). The session id from `initialize` and the negotiated version go on every
later message; the GET stream, when the server offers one, carries what belongs to no request; `aclose`
DELETEs the session.

A transport failure (connection refused or cut) ends `lines()`: the router then answers every pending
request and the gateway exits 1 (or, with `--restart-upstream`, reconnects), as when a stdio upstream
exits. An HTTP error status, an oversized message, a reply that is not JSON-RPC or a stream that ends
unanswered answers only the request it came with, at once (-32603, the reason in `data`), with the server's
own JSON-RPC error when it sent one. Lines of a reply body or of one event's data that are not JSON (garbage
before the reply) are skipped with a log line, and the JSON lines among them go on. A request whose reused
connection the server had closed (its keep-alive ended) before any byte of a reply is sent again on a new
connection when that is safe (`RETRY_SAFE`, notifications and replies), else answered with an error.

A 404 for the gateway's session (the server expired it, or restarted) opens a new session at once: the
router's own `initialize` again (same era, a private id) and `notifications/initialized`, then
`RENEWED` in `lines()` (the runner renews subscriptions and compares the catalog). The request that got
the 404 is sent again on the new session when that is safe (`RETRY_SAFE`: reads and lists; never a
`tools/call`, which is answered with `data.sessionLost`); at most `MAX_RENEWALS` new sessions within
`RENEWAL_WINDOW_S`, then the upstream counts as dead. A cancellation waits until its request's body is
sent, so it never reaches the server before the request it cancels.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx2
import orjson

from interceptors.errors import InterceptorsError
from interceptors.protocol.framing import MAX_LINE_BYTES
from interceptors.protocol.methods import METHODS

from .http_wire import ConnectFailed, Event, EventTooLarge, Pool, Response, StaleConnection, WireError, WireTimeout
from .recovery import RENEWED, Renewed

logger = logging.getLogger("interceptors.gateway")

SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
CONNECT_S: Final = 30.0
NOTIFY_S: Final = 30.0
"""How long a notification or reply POST may take before the next message goes anyway."""
CLOSE_S: Final = 2.0
"""How long `aclose` waits for the DELETE of the session."""
RECONNECT_S: Final = 1.0
"""The pause before the GET stream is opened again after the server ended it (unless it said `retry`)."""
MAX_RESUMES: Final = 5
"""Resumptions of a request's stream in a row that bring no new event before the request may be given up."""
RESUME_PATIENCE_S: Final = 10.0
"""...and the time since the last new event that must also have passed (a loaded server is slow, not gone)."""
ERROR_BODY_BYTES: Final = 64 * 1024
INTERNAL_ERROR: Final = -32603

MAX_RENEWALS: Final = 5
"""New sessions opened after a 404 within `RENEWAL_WINDOW_S` before the upstream counts as dead."""
RENEWAL_WINDOW_S: Final = 60.0
RETRY_SAFE: Final = frozenset(METHODS.names(lambda row: row.retry_safe))
"""Requests sent again on a new session after a 404: reads, lists and idempotent settings. Anything else
(`tools/call` first of all: it may act) is answered with an error instead, never sent twice."""
STALE: Final = (
    "the upstream closed the connection before replying (its keep-alive ended as the request left); the request "
    "is not sent again (it might act twice): send it again"
)
SESSION_LOST: Final = (
    "the upstream server no longer knew the gateway's session (HTTP 404); a new session is open, but this "
    "request is not sent again (it might act twice): send it again"
)


UpstreamItem = bytes | tuple[bytes, int] | Renewed
"""A message from the upstream; with the upstream id of the request whose stream carried it."""


class UpstreamUrlError(InterceptorsError, ValueError):
    """The `--upstream` URL is not an http(s) URL."""


_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{0,15}$")


def redact_url(url: str) -> str:
    """The URL as logs may show it: userinfo and query (where credentials travel) replaced, no fragment."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "(an unparseable URL)"
    if not host:
        return "(a URL without a host)"
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    if "@" in parts.netloc:
        netloc = "REDACTED@" + netloc
    return urlunsplit((parts.scheme, netloc, parts.path, "REDACTED" if parts.query else "", ""))


def _url_problem(url: str) -> str:
    """What is wrong with an `--upstream` value, never the value itself (it may hold a token)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return "it cannot be parsed"
    scheme = parts.scheme if _SCHEME.match(parts.scheme) else ""
    if scheme.lower() not in ("http", "https"):
        return f"its scheme is {scheme!r}" if scheme else "it has no scheme"
    return "it has no host" if not host else "it cannot be parsed"


def check_upstream_url(url: str) -> None:
    """UpstreamUrlError unless `url` is an http(s) URL with a host (the message never shows the URL)."""
    try:
        parsed = httpx2.URL(url)
    except Exception:  # httpx2.InvalidURL and the like
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise UpstreamUrlError(f"--upstream takes an http:// or https:// URL with a host; {_url_problem(url)}")


class _RedactedUrls(logging.Filter):
    """httpx2 logs each request's URL (`-v`): show it redacted, as the gateway's own lines do."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(arg, httpx2.URL) for arg in record.args):
            record.args = tuple(redact_url(str(a)) if isinstance(a, httpx2.URL) else a for a in record.args)
        return True


def _redact_client_logs() -> None:
    client_logger = logging.getLogger("httpx2")
    if not any(isinstance(f, _RedactedUrls) for f in client_logger.filters):
        client_logger.addFilter(_RedactedUrls())


def parse_header(text: str, position: int = 1) -> tuple[str, str]:
    """`Name: value` (for `--upstream-header`) as a pair; ValueError when it is not one (naming only its
    position: a header is where credentials go)."""
    name, colon, value = text.partition(":")
    name = name.strip()
    if not colon or not name or any(c.isspace() for c in name):
        raise ValueError(f"--upstream-header number {position} is not of the form 'Name: value'")
    return name, value.strip()


class HttpUpstream:
    """`await HttpUpstream.start(url)`, then `send(message, request_id)` and `async for item in lines()`."""

    def __init__(
        self,
        url: str,
        headers: Sequence[tuple[str, str]] = (),
        *,
        protocol_version: Callable[[], str | None] = lambda: None,
        max_message: int = MAX_LINE_BYTES,
    ) -> None:
        check_upstream_url(url)
        self.url = url
        self.shown_url = redact_url(url)
        """The URL for logs: userinfo and query redacted."""
        _redact_client_logs()
        self.protocol_version = protocol_version
        self.max_message = max_message
        self._pool = Pool(
            url, headers, connect_timeout=CONNECT_S, shown_url=self.shown_url
        )  # the router's shell owns request timeouts
        self.session_id: str | None = None
        self._init_body: bytes | None = None  # the router's initialize: sent again for a new session
        self._renewal: asyncio.Future[bool] | None = None
        self._renewals: deque[float] = deque()
        self._private_ids = itertools.count(1)
        self._sending: dict[int, asyncio.Event] = {}  # set once the request's body has been written
        self._listener: asyncio.Task[None] | None = None
        self.renewals = 0
        """New sessions opened after a 404."""
        self._outbox: asyncio.Queue[tuple[bytes, int | None]] = asyncio.Queue()
        self._inbox: asyncio.Queue[UpstreamItem | None] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._listening = False
        self._closing = False
        self.gone = False

    @classmethod
    async def start(
        cls,
        url: str,
        headers: Sequence[tuple[str, str]] = (),
        *,
        protocol_version: Callable[[], str | None] = lambda: None,
        max_message: int = MAX_LINE_BYTES,
    ) -> HttpUpstream:
        self = cls(url, headers, protocol_version=protocol_version, max_message=max_message)
        self._spawn(self._send_loop())
        return self

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # The router's side ------------------------------------------------------------------------------
    def send(self, data: bytes, request_id: int | None = None) -> None:
        """Queue one message; `request_id` when it is a request (its reply is read from its POST)."""
        if self.gone:
            return
        if request_id is not None:
            self._sending[request_id] = asyncio.Event()
            if self._init_body is None and b'"initialize"' in data and _method_of(data) == "initialize":
                self._init_body = data
        self._outbox.put_nowait((data, request_id))

    async def drain(self) -> None:
        """Nothing to wait for: POSTs leave in order from the send loop."""

    async def lines(self) -> AsyncIterator[UpstreamItem]:
        """Every message the upstream sends, until it is unreachable (or closed)."""
        while True:
            item = await self._inbox.get()
            if item is None:
                return
            yield item

    # HTTP ---------------------------------------------------------------------------------------------
    def _headers(self, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        headers = {"accept": accept, "content-type": "application/json"}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        version = self.protocol_version()
        if version is not None:
            headers[VERSION_HEADER] = version
        return headers

    async def _send_loop(self) -> None:
        while True:
            data, request_id = await self._outbox.get()
            if request_id is not None:
                self._spawn(self._post(data, request_id))
                continue
            if b'"notifications/cancelled"' in data:
                cancelled = _cancelled_id(data)
                sent = self._sending.get(cancelled) if cancelled is not None else None
                if sent is not None and not sent.is_set():
                    self._spawn(self._post_after(sent, data))  # after its request, never before it
                    continue
            await self._post(data, None)
            if not self._listening and self.session_id is not None and b'"notifications/initialized"' in data:
                self._listening = True
                self._listener = self._spawn(self._listen())

    async def _post_after(self, sent: asyncio.Event, data: bytes) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sent.wait(), NOTIFY_S)
        await self._post(data, None)

    async def _post(self, data: bytes, request_id: int | None) -> None:
        try:
            retry = await self._exchange(data, request_id)
            if retry:
                await self._exchange(data, request_id, retried=True)
        except Exception as exc:  # anything else (a decoding error, a defect): the request still gets an answer
            logger.warning("an exchange with the upstream failed: %s", type(exc).__name__)
            if request_id is not None:
                self._answer(request_id, f"the exchange with the upstream failed ({type(exc).__name__})")
        finally:
            if request_id is not None:
                sent = self._sending.pop(request_id, None)
                if sent is not None:
                    sent.set()

    async def _exchange(self, data: bytes, request_id: int | None, *, retried: bool = False) -> bool:
        """One POST and its reply; True when the server had forgotten the session and the request is to be
        sent again on the new one."""
        if self._renewal is not None:  # a new session is being opened: this message belongs to it
            await asyncio.shield(self._renewal)
        if self.gone:
            return False
        # A notification or reply gets a bounded wait (the next message waits for it); a request none (the clock
        # of the router's shell times requests, and a long tool may stream for a long time).
        timeout = None if request_id is not None else NOTIFY_S
        headers = self._headers()
        stale = self.session_id
        sent = self._sending.get(request_id) if request_id is not None else None
        written = sent.set if sent is not None and not sent.is_set() else None
        try:
            try:
                response = await self._pool.request("POST", headers, data, timeout=timeout, on_written=written)
            except StaleConnection:
                if request_id is not None and _method_of(data) not in RETRY_SAFE:
                    logger.warning("the upstream closed a kept-alive connection as a request left: not sent again")
                    self._answer(request_id, STALE, data={"reason": STALE, "connectionClosed": True})
                    return False
                response = await self._pool.request("POST", headers, data, timeout=timeout, on_written=written)
        except WireTimeout:
            logger.warning("the upstream did not take a notification or reply within %g s", NOTIFY_S)
            return False
        except WireError as exc:
            self._lost(exc)
            return False
        try:
            session = response.headers.get(SESSION_HEADER)
            if session and self.session_id is None and self._renewal is None:
                self.session_id = session
            status = response.status
            if status == 404 and stale is not None:
                return await self._session_lost(stale, data, request_id, retried)
            if request_id is None:
                if status >= 400:
                    logger.warning("the upstream refused a notification or reply (HTTP %d)", status)
                elif response.sized:
                    await response.read(ERROR_BODY_BYTES)  # (empty, as a rule): its connection is reused
                return False
            if status != 200:
                await self._refused(response, request_id)
                return False
            if _is_sse(response):
                await self._read_stream(response, request_id)
            elif not response.content_type.startswith("application/json"):
                self._answer(request_id, "the upstream answered with neither JSON nor an event stream")
            else:
                body = await response.read(self.max_message)
                if body is None:
                    self._answer(request_id, "the upstream's reply is larger than the gateway accepts")
                elif not self._deliver(body, request_id):
                    self._answer(request_id, "the upstream's reply is not a JSON-RPC response")
        except WireError as exc:
            self._lost(exc)
        finally:
            await response.aclose()
        return False

    def _deliver(self, raw: bytes, request_id: int) -> bool:
        """Hand a reply body or one event's data to the router; whether it held a response (not only requests or
        notifications of the server's). Data of several lines that is not one JSON text is read line by line:
        the JSON lines go on, the rest is garbage (logged, skipped)."""
        if b"\n" in raw:
            try:
                orjson.loads(raw)
            except orjson.JSONDecodeError:
                lines = [line for line in raw.split(b"\n") if line.strip()]
                kept = [line for line in lines if _is_json(line)]
                if len(kept) < len(lines):
                    logger.warning("skipped %d upstream line(s) that are not JSON", len(lines) - len(kept))
                answered = False
                for line in kept:
                    self._inbox.put_nowait((line, request_id))
                    answered = answered or _is_response(line)
                return answered
        self._inbox.put_nowait((raw, request_id))
        return _is_response(raw)

    async def _session_lost(self, stale: str, data: bytes, request_id: int | None, retried: bool) -> bool:
        """A 404 for session `stale`: a new session (once for every message that saw it go), then whether to
        send this message again. Notifications and replies of the old session are not: they belong to it."""
        if not await self._renew(stale):
            return False  # the upstream counts as dead: the router answers every pending request
        if request_id is None:
            logger.info("dropped a notification or reply of the upstream's old session")
            return False
        method = _method_of(data)
        if retried or method not in RETRY_SAFE:
            reason = "the upstream server ended the new session too (HTTP 404)" if retried else SESSION_LOST
            self._answer(request_id, reason, data={"reason": reason, "sessionLost": True, "method": method})
            return False
        return True

    async def _renew(self, stale: str) -> bool:
        """A new session in place of `stale`, opened once however many messages saw the 404."""
        if self.gone or self._closing:
            return False
        if self._renewal is not None:
            return await asyncio.shield(self._renewal)
        if self.session_id != stale:
            return self.session_id is not None  # someone else has renewed it already
        renewal = self._renewal = asyncio.get_running_loop().create_future()
        try:
            renewed = await self._open_session()
        except Exception as exc:  # a defect: the upstream counts as dead, never a hang
            self._lost(exc, f"could not open a new session with the upstream ({type(exc).__name__})")
            renewed = False
        finally:
            self._renewal = None
        renewal.set_result(renewed)
        return renewed

    async def _open_session(self) -> bool:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._renewals and now - self._renewals[0] > RENEWAL_WINDOW_S:
            self._renewals.popleft()
        if len(self._renewals) >= MAX_RENEWALS:
            self._lost(
                None,
                f"the upstream ended {MAX_RENEWALS} new sessions within {RENEWAL_WINDOW_S:g} s (HTTP 404): "
                "it counts as gone",
            )
            return False
        if self._init_body is None:
            self._lost(None, "the upstream ended the session (HTTP 404)")
            return False
        self._renewals.append(now)
        logger.warning("the upstream no longer knows the gateway's session (HTTP 404): opening a new one")
        self.session_id = None
        private_id = f"mcp-interceptors-renewal-{next(self._private_ids)}"
        body = orjson.loads(self._init_body)
        body["id"] = private_id
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        try:
            response = await self._pool.request("POST", headers, orjson.dumps(body), timeout=NOTIFY_S)
            try:
                session = response.headers.get(SESSION_HEADER)
                status = response.status
                reply = await self._handshake_reply(response, private_id) if status == 200 else None
            finally:
                await response.aclose()
            if reply is None or not isinstance(reply.get("result"), dict) or not session:
                self._lost(None, f"the upstream refused a new session (HTTP {status}, no usable initialize result)")
                return False
            self.session_id = session
            initialized = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
            answer = await self._pool.request("POST", self._headers(), initialized, timeout=NOTIFY_S)
            try:
                if answer.sized:
                    await answer.read(ERROR_BODY_BYTES)
            finally:
                await answer.aclose()
            if answer.status >= 400:
                self._lost(
                    None, f"the upstream refused the new session's notifications/initialized (HTTP {answer.status})"
                )
                return False
        except (WireError, EventTooLarge, orjson.JSONDecodeError) as exc:
            self._lost(exc, f"could not open a new session with the upstream ({type(exc).__name__})")
            return False
        self.renewals += 1
        if self._listening:  # the GET stream belonged to the old session
            if self._listener is not None:
                self._listener.cancel()
            self._listener = self._spawn(self._listen())
        self._inbox.put_nowait(RENEWED)
        return True

    async def _handshake_reply(self, response: Response, private_id: str) -> dict[str, Any] | None:
        """The reply to the renewal's `initialize` (JSON or on its SSE stream); None when there is none."""
        if _is_sse(response):
            async for event in response.events(self.max_message):
                if event.data:
                    message = orjson.loads(event.data)
                    if isinstance(message, dict) and message.get("id") == private_id:
                        return message
            return None
        body = await response.read(self.max_message)
        message = orjson.loads(body) if body else None
        return message if isinstance(message, dict) and message.get("id") == private_id else None

    async def _read_stream(self, response: Response, request_id: int) -> None:
        """A request's SSE stream to its reply; resumed with `Last-Event-ID` when the server ends it early
        (the polling of resumable servers), until the reply or `MAX_RESUMES` resumptions in a row bring nothing."""
        stream = _Stream()
        if not await self._events(response, request_id, stream):
            return
        resumes = 0
        moved = time.monotonic()
        while not stream.answered and stream.last_event is not None and not self._closing:
            if resumes >= MAX_RESUMES and time.monotonic() - moved >= RESUME_PATIENCE_S:
                break  # the server keeps ending the stream with nothing new: a loaded server gets this long
            resumes += 1
            await asyncio.sleep(stream.retry)
            seen = stream.last_event
            headers = self._headers("text/event-stream")
            headers.pop("content-type")
            headers["last-event-id"] = seen
            resumed = await self._pool.request("GET", headers)
            try:
                if resumed.status != 200 or not _is_sse(resumed):
                    break
                if not await self._events(resumed, request_id, stream):
                    return
            finally:
                await resumed.aclose()
            if stream.last_event != seen:
                resumes = 0
                moved = time.monotonic()
        if not stream.answered:
            self._answer(request_id, "the upstream closed the request's stream without answering it")

    async def _events(self, response: Response, request_id: int, stream: _Stream) -> bool:
        """Hand every message of one SSE response to the router; False when one was too large (answered)."""
        try:
            async for event in response.events(self.max_message):
                if event.id and _sendable(event.id):
                    stream.last_event = event.id
                if event.retry is not None:
                    stream.retry = event.retry / 1000
                if not event.data or event.event not in ("message", ""):
                    continue  # a priming event (resumability), or an event type MCP does not use
                stream.answered = self._deliver(event.data, request_id) or stream.answered
        except EventTooLarge:
            self._answer(request_id, "an upstream message is larger than the gateway accepts")
            return False
        return True

    async def _refused(self, response: Response, request_id: int) -> None:
        """An HTTP error for a request: the server's own JSON-RPC error for it when it sent one, else -32603."""
        status = response.status
        hint = " (check --upstream-header)" if status in (401, 403) else ""
        logger.warning("the upstream answered a request with HTTP %d%s", status, hint)
        body = await response.read(ERROR_BODY_BYTES)
        try:
            message = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            message = None
        if isinstance(message, dict) and message.get("id") == request_id and isinstance(message.get("error"), dict):
            self._inbox.put_nowait((body or b"", request_id))
            return
        self._answer(request_id, f"the upstream answered HTTP {status}", status=status)

    def _answer(
        self, request_id: int, reason: str, *, status: int | None = None, data: dict[str, object] | None = None
    ) -> None:
        data = data if data is not None else {"reason": reason}
        if status is not None:
            data["status"] = status
        error = {"code": INTERNAL_ERROR, "message": "upstream request failed", "data": data}
        self._inbox.put_nowait((orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}), request_id))

    async def _listen(self) -> None:
        """The GET stream (what belongs to no request), reopened when the server ends it; a 405 means none."""
        last_event: str | None = None
        while not self._closing and not self.gone:
            headers = self._headers("text/event-stream")
            headers.pop("content-type")
            stale = self.session_id
            if last_event is not None:
                headers["last-event-id"] = last_event
            delay = RECONNECT_S
            try:
                response = await self._pool.request("GET", headers)
                try:
                    if response.status == 404 and stale is not None:
                        self._spawn(self._renew_quietly(stale))  # the new session opens its own GET stream
                        return
                    if response.status != 200 or not _is_sse(response):
                        return  # the server offers no standalone stream
                    async for event in response.events(self.max_message):
                        if event.id and _sendable(event.id):
                            last_event = event.id
                        if event.retry is not None:
                            delay = event.retry / 1000
                        if event.data and event.event in ("message", ""):
                            self._push(event)
                finally:
                    await response.aclose()
            except EventTooLarge:
                logger.warning("dropped an upstream message larger than %d bytes", self.max_message)
            except ConnectFailed as exc:
                self._lost(exc)
                return
            except WireError:
                pass  # cut: reopen (a server that is gone refuses the next connection)
            await asyncio.sleep(delay)

    def _push(self, event: Event) -> None:
        """A message of the GET stream (no request's): lines that are not JSON are skipped when it has several."""
        raw = event.data
        if b"\n" in raw and not _is_json(raw):
            lines = [line for line in raw.split(b"\n") if line.strip()]
            kept = [line for line in lines if _is_json(line)]
            logger.warning("skipped %d upstream line(s) that are not JSON", len(lines) - len(kept))
            for line in kept:
                self._inbox.put_nowait(line)
            return
        self._inbox.put_nowait(raw)

    async def _renew_quietly(self, stale: str) -> None:
        await self._renew(stale)

    def _lost(self, exc: BaseException | None, reason: str | None = None) -> None:
        if self._closing or self.gone:
            return
        self.gone = True
        logger.warning("%s", reason or f"the upstream at {self.shown_url} is unreachable ({type(exc).__name__})")
        self._inbox.put_nowait(None)

    async def aclose(self) -> None:
        """Stop every POST and the GET stream, DELETE the session (briefly), close the pool."""
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.session_id is not None and not self.gone:
            with contextlib.suppress(WireError, TimeoutError):
                await asyncio.wait_for(self._delete(), CLOSE_S)
        await self._pool.aclose()
        self._inbox.put_nowait(None)  # whoever still reads `lines()` is done

    async def _delete(self) -> None:
        response = await self._pool.request("DELETE", self._headers())
        await response.aclose()


class _Stream:
    """Where one request's SSE stream is: answered yet, the last event id, the server's retry delay."""

    __slots__ = ("answered", "last_event", "retry")

    def __init__(self) -> None:
        self.answered = False
        self.last_event: str | None = None
        self.retry = RECONNECT_S


def _sendable(event_id: str) -> bool:
    """Whether an event id can go back in a `Last-Event-ID` header (printable ASCII); another is not resumed."""
    return event_id.isascii() and event_id.isprintable()


def _is_json(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def _is_response(raw: bytes) -> bool:
    """Whether a message reads as a reply (a result or an error, no method): the stream that carried it is
    answered. A false positive (a text that only looks like one) leaves its request to the timeout."""
    return b'"method"' not in raw and (b'"result"' in raw or b'"error"' in raw)


def _method_of(data: bytes) -> str | None:
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def _cancelled_id(data: bytes) -> int | None:
    """The request a `notifications/cancelled` names (None for anything else)."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    params = message.get("params") if isinstance(message, dict) else None
    request_id = params.get("requestId") if isinstance(params, dict) else None
    return request_id if isinstance(request_id, int) and not isinstance(request_id, bool) else None


def _is_sse(response: Response) -> bool:
    return response.content_type.startswith("text/event-stream")


def upstream_headers(values: Sequence[str] | None) -> list[tuple[str, str]]:
    """Every `--upstream-header` as a pair (ValueError on a malformed one)."""
    return [parse_header(value, position) for position, value in enumerate(values or (), 1)]
