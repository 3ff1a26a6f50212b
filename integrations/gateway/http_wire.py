"""A lean HTTP/1.1 client for the upstream hop: one pool of persistent connections, one write per request,
responses read straight off asyncio streams, SSE parsed from the body's bytes as they come.

Why not a general client: the gateway's HTTP upstream sends small JSON POSTs to one URL, and a general client's
per-request work (request and response models, auth and redirect flows, a pool that checks every connection on
every request, text decoding of every SSE chunk) cost more CPU than the rest of the gateway's path together
(doc/PERFORMANCE.md, "The HTTP upstream"). What this keeps: keep-alive connections reused last-in first-out, a
bound on open connections, a connect timeout, a response-head timeout where the caller asks for one, TLS for
https (the system's trust store, or `SSL_CERT_FILE`), Content-Length, chunked and close-delimited bodies, 1xx
responses skipped. Not kept: HTTP proxies from the environment, HTTP/2, redirects, cookies (the MCP transport
uses none of them).

A connection the server closed while it sat idle is dropped when it is taken; a request that finds its
(reused) connection closed before any byte of a response raises `StaleConnection`, so the caller decides
whether sending it again is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from interceptors.errors import InterceptorsError

logger = logging.getLogger("interceptors.gateway")

MAX_HEAD_BYTES: Final = 64 * 1024
READ_CHUNK: Final = 64 * 1024
MAX_CONNECTIONS: Final = 256
MAX_IDLE: Final = 64


class WireError(InterceptorsError):
    """The exchange failed at the transport (no HTTP status to report)."""


class ConnectFailed(WireError):
    """No connection could be opened (refused, unreachable, or the connect timeout)."""


class WireTimeout(WireError):
    """The response's head did not come within the caller's timeout."""


class ProtocolFailure(WireError):
    """The connection closed early, or what came is not an HTTP/1.1 response."""


class StaleConnection(ProtocolFailure):
    """A reused connection closed before any byte of the response: the server may never have read the request."""


class EventTooLarge(InterceptorsError):
    """An SSE event (or the line being read) is larger than the parser's bound."""


@dataclass(frozen=True, slots=True)
class Event:
    """One server-sent event: its data as bytes (lines joined with `\\n`), type, id and retry."""

    data: bytes
    event: str = "message"
    id: str = ""
    retry: int | None = None


class _Connection:
    __slots__ = ("closing", "reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.closing = False  # the server said `Connection: close`: not reused

    def usable(self) -> bool:
        return not self.writer.transport.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.transport.abort()


class Response:
    """A response whose head has been read; its body is read once (`chunks`, `read`, or `Event`s from `events`),
    and `aclose` gives its connection back to the pool when the body was read to its end."""

    __slots__ = ("_connection", "_pool", "_remaining", "_state", "headers", "status")

    def __init__(
        self, pool: Pool, connection: _Connection, status: int, headers: dict[str, str], framing: str, length: int
    ) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self.status = status
        self.headers = headers
        self._state = framing  # "length", "chunked", "close", or "done"
        self._remaining = length

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def sized(self) -> bool:
        """Whether the body's length is known (Content-Length, or none): reading it cannot wait on a stream."""
        return self._state in ("length", "done")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they come (ProtocolFailure when the connection ends early)."""
        connection = self._connection
        if connection is None:
            return
        reader = connection.reader
        try:
            if self._state == "length":
                while self._remaining > 0:
                    data = await reader.read(min(self._remaining, READ_CHUNK))
                    if not data:
                        raise ProtocolFailure("the connection closed inside a response body")
                    self._remaining -= len(data)
                    yield data
                self._state = "done"
            elif self._state == "chunked":
                while True:
                    line = await reader.readuntil(b"\n")
                    size = int(line.split(b";", 1)[0].strip() or b"x", 16)
                    if size == 0:
                        while (await reader.readuntil(b"\n")).strip():  # trailers
                            pass
                        self._state = "done"
                        return
                    data = await reader.readexactly(size)
                    await reader.readexactly(2)
                    yield data
            elif self._state == "close":
                while data := await reader.read(READ_CHUNK):
                    yield data
                self._state = "eof"
        except ValueError as exc:  # a chunk size that is not hex; LimitOverrunError is one too
            raise ProtocolFailure("a malformed chunked body") from exc
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            raise ProtocolFailure(f"the connection failed inside a response body ({type(exc).__name__})") from exc

    async def read(self, limit: int) -> bytes | None:
        """The whole body, or None once it is larger than `limit` (the connection is then closed)."""
        if self._state == "length" and self._remaining > limit:
            return None
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            size += len(chunk)
            if size > limit:
                return None
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def events(self, max_event: int) -> AsyncIterator[Event]:
        """The body as server-sent events (EventTooLarge past `max_event` bytes in one)."""
        parser = SseParser(max_event)
        async for chunk in self.chunks():
            for event in parser.feed(chunk):
                yield event
        for event in parser.close():
            yield event

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._state == "done":
            self._pool._release(connection)
        else:
            connection.close()
            self._pool._forget(connection)


class Pool:
    """Persistent connections to the one origin of `url`; `request(...)` sends one request and reads its head."""

    def __init__(
        self,
        url: str,
        headers: Sequence[tuple[str, str]] = (),
        *,
        connect_timeout: float = 30.0,
        max_connections: int = MAX_CONNECTIONS,
        max_idle: int = MAX_IDLE,
        shown_url: str = "the upstream",
    ) -> None:
        self.shown_url = shown_url
        """The URL as debug lines show it (the caller's redaction: never userinfo or query)."""
        parts = urlsplit(url)
        self.https = parts.scheme.lower() == "https"
        host = parts.hostname or ""
        self.host = host
        self.port = parts.port or (443 if self.https else 80)
        self.target = ((parts.path or "/") + (f"?{parts.query}" if parts.query else "")).encode("ascii")
        default_port = self.port == (443 if self.https else 80)
        shown = f"[{host}]" if ":" in host else host
        authority = shown if default_port else f"{shown}:{self.port}"
        fixed = [("host", authority), *headers]
        if parts.username is not None and not any(name.lower() == "authorization" for name, _ in headers):
            import base64

            userinfo = f"{parts.username}:{parts.password or ''}"
            from urllib.parse import unquote

            token = base64.b64encode(unquote(userinfo).encode()).decode()
            fixed.append(("authorization", f"Basic {token}"))
        self._fixed = b"".join(_header_line(name, value) for name, value in fixed)
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if self.https else None
        self.closed = False

    async def request(
        self,
        method: str,
        headers: dict[str, str],
        body: bytes = b"",
        *,
        timeout: float | None = None,
        on_written: Callable[[], None] | None = None,
    ) -> Response:
        """Send one request (head and body in one write) and read its response's head. `timeout` bounds the
        wait for the head (None: none); `on_written` is called once the body has left for the socket."""
        head = bytearray(method.encode("ascii") + b" " + self.target + b" HTTP/1.1\r\n")
        head += self._fixed
        for name, value in headers.items():
            head += _header_line(name, value)
        if body or method in ("POST", "PUT", "PATCH"):
            head += b"content-length: %d\r\n" % len(body)
        head += b"\r\n"
        await self._slots.acquire()
        try:
            connection = await self._take()
            response = await self._exchange(connection, bytes(head), body, timeout, on_written)
        except BaseException:  # the response (which holds the slot until it is closed) never came
            self._slots.release()
            raise
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("HTTP Request: %s %s %d", method, self.shown_url, response.status)
        return response

    async def _exchange(
        self,
        connection: _Connection,
        head: bytes,
        body: bytes,
        timeout: float | None,
        on_written: Callable[[], None] | None,
    ) -> Response:
        writer = connection.writer
        got_bytes = False
        try:
            writer.write(head + body if len(body) < 65536 else head)
            if len(body) >= 65536:
                writer.write(body)
            await writer.drain()
            if on_written is not None:
                on_written()
            reader = connection.reader
            while True:  # 1xx responses (100 Continue, 103 Early Hints) come before the one that counts
                if timeout is None:
                    raw = await reader.readuntil(b"\r\n\r\n")
                else:
                    async with asyncio.timeout(timeout):
                        raw = await reader.readuntil(b"\r\n\r\n")
                got_bytes = True
                status, headers = _parse_head(raw)
                if status >= 200 or status == 101:
                    break
        except TimeoutError as exc:
            self._discard(connection)
            raise WireTimeout("no response head within the timeout") from exc
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            self._discard(connection)
            partial = isinstance(exc, asyncio.IncompleteReadError) and bool(exc.partial)
            if connection.reused and not got_bytes and not partial:
                raise StaleConnection("the reused connection closed before a response") from exc
            raise ProtocolFailure(f"the connection failed before a response ({type(exc).__name__})") from exc
        except (asyncio.LimitOverrunError, ValueError) as exc:
            self._discard(connection)
            raise ProtocolFailure("the response's head is malformed or too large") from exc
        except BaseException:
            self._discard(connection)
            raise
        try:
            framing, length = _framing(status, headers)
        except ValueError as exc:
            self._discard(connection)
            raise ProtocolFailure("the response's body framing is malformed") from exc
        connection.closing = headers.get("connection", "").lower() == "close"
        return Response(self, connection, status, headers, framing, length)

    async def _take(self) -> _Connection:
        idle = self._idle
        while idle:
            connection = idle.pop()
            if connection.usable():
                connection.reused = True
                return connection
            self._discard(connection)
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self._ssl, limit=MAX_HEAD_BYTES,
                    server_hostname=self.host if self._ssl is not None else None,
                )  # fmt: skip
        except TimeoutError as exc:
            raise ConnectFailed("the connect timeout passed") from exc
        except (OSError, ssl.SSLError) as exc:
            raise ConnectFailed(f"could not connect ({type(exc).__name__})") from exc
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(reader, writer)
        self._open.add(connection)
        return connection

    def _release(self, connection: _Connection) -> None:
        """A response read to its end: its connection goes back for the next request (or is closed)."""
        self._slots.release()
        if self.closed or connection.closing or not connection.usable() or len(self._idle) >= self.max_idle:
            connection.close()
            self._open.discard(connection)
            return
        self._idle.append(connection)

    def _forget(self, connection: _Connection) -> None:
        self._slots.release()
        self._open.discard(connection)

    def _discard(self, connection: _Connection) -> None:
        connection.close()
        self._open.discard(connection)

    async def aclose(self) -> None:
        self.closed = True
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()


def _header_line(name: str, value: str) -> bytes:
    if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
        raise ValueError("a header name or value holds a line break or a colon")
    return name.encode("latin-1") + b": " + value.encode("latin-1") + b"\r\n"


def _parse_head(raw: bytes) -> tuple[int, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError("not an HTTP/1.x status line")
    status = int(rest[:3])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise ValueError("a header line without a colon")
        name = name.strip().lower()
        value = value.strip()
        if name in headers and name in ("content-length",) and headers[name] != value:
            raise ValueError("conflicting Content-Length headers")
        headers.setdefault(name, value)
    if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    return status, headers


def _framing(status: int, headers: dict[str, str]) -> tuple[str, int]:
    if status in (204, 304) or 100 <= status < 200:
        return "done", 0
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked", 0
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise ValueError("a Content-Length that is no number")
        size = int(length)
        return ("length", size) if size else ("done", 0)
    return "close", 0


class SseParser:
    """Server-sent events from bytes as they arrive (any split), per the HTML living standard's parsing rules:
    lines end with CRLF, LF or CR; `data` lines join with LF; comments and unknown fields are ignored; an event
    is dispatched at a blank line."""

    __slots__ = ("_buffer", "_data", "_event", "_id", "_max", "_retry", "_size", "pending")

    def __init__(self, max_event: int) -> None:
        self._max = max_event
        self._buffer = b""
        self._data: list[bytes] = []
        self._event = ""
        self._id = ""
        self._retry: int | None = None
        self._size = 0
        self.pending = False

    def feed(self, chunk: bytes) -> list[Event]:
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            hold = buffer.endswith(b"\r")  # its LF may be in the next chunk
            body = buffer[:-1] if hold else buffer
            body = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            buffer = body + b"\r" if hold else body
        events: list[Event] = []
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            self._line(buffer[start:end], events)
            start = end + 1
        self._buffer = buffer[start:] if start else buffer
        if self._size + len(self._buffer) > self._max:
            raise EventTooLarge(f"a server-sent event larger than {self._max} bytes")
        return events

    def close(self) -> list[Event]:
        """The end of the stream: a CR held back for its LF ends its line (an event without its blank line is
        dropped, as the standard says)."""
        return self.feed(b"\n") if self._buffer.endswith(b"\r") else []

    def _line(self, line: bytes, events: list[Event]) -> None:
        if not line:
            if self.pending:
                events.append(Event(b"\n".join(self._data), self._event or "message", self._id, self._retry))
            self._data = []
            self._event = ""
            self._retry = None
            self._size = 0
            self.pending = False
            return
        if line[0] == 0x3A:  # ":" a comment
            return
        self._size += len(line)
        if self._size > self._max:
            raise EventTooLarge(f"a server-sent event larger than {self._max} bytes")
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self.pending = True
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
            self.pending = True
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
                self.pending = True
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
            self.pending = True
