"""A faster stdio transport for serving: non-blocking pipes instead of a worker-thread hop per line.

The SDK's `stdio_server` reads and writes through `anyio.wrap_file`, one thread hop per line, which caps
a server near a thousand messages a second whatever the client multiplexes. On asyncio with pipe
descriptors we read and write the pipes directly; anywhere else we fall back to the SDK's transport.
Like the SDK, we take fds 0 and 1 off the wire while serving, so a stray print cannot corrupt it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import orjson
from mcp.server.stdio import stdio_server

from interceptors.errors import INVALID_REQUEST, PARSE_ERROR
from interceptors.protocol.framing import MAX_LINE_BYTES, LineSplitter, Oversized
from interceptors.protocol.messages import Kind, classify, error_line, is_request, recover_id

from .express import ExpressLane, PutBytes, WriteBytes

logger = logging.getLogger("interceptors.stdio")


def _is_pipe_like(fd: int) -> bool:
    """A descriptor the event loop can watch: a pipe, a socket or a terminal (not /dev/null, not a file:
    epoll refuses those, and the SDK's thread-based transport reads them to their end instead)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


def _judged(value: Any) -> tuple[dict[str, Any] | None, bytes | None]:
    """For a decoded line that is not a well-formed request or notification (`is_request`, asked first: it is
    the common case): (a message to go on with, None), or (None, the JSON-RPC error for a line the SDK would drop).

    The SDK answers what it can parse; a request with a bad shape (array params, a float id, …) would otherwise
    get no reply at all, and its caller would wait forever. The shape is judged by the protocol core's
    classification (`interceptors.protocol.messages.classify`), the one the gateway's router uses. (None, None)
    is a reply to one of the server's own requests: the SDK's to judge.
    """
    if isinstance(value, dict) and "method" in value and "id" in value and value["id"] is None:
        # A null id: the SDK takes the request for a notification (never answered), so it is judged as one.
        message = classify({key: item for key, item in value.items() if key != "id"})
    else:
        message = classify(value)
    kind = message.kind
    if kind is Kind.REQUEST or kind is Kind.NOTIFICATION:
        return value, None
    if kind is not Kind.INVALID or (isinstance(value, dict) and "method" not in value and _answers(value)):
        return None, None  # a response to one of our requests, well formed or not: never answered
    problem = message.problem
    assert problem is not None
    return None, error_line(message.id, problem.code, problem.message, problem.data)


def _answers(value: dict[str, Any]) -> bool:
    request_id = value.get("id")
    id_ok = isinstance(request_id, int | str) and not isinstance(request_id, bool)
    return ("result" in value or "error" in value) and id_ok


class _Lines(asyncio.Protocol):
    """The read side of the wire: `async for line in lines` gives the SDK text lines (invalid UTF-8 replaced).

    Framed by the protocol core's `LineSplitter` (the framing of every stdio edge), as the bytes arrive
    (`data_received`): lines the SDK could not answer are answered here (see `_judged`), oversized ones
    refused, and the requests the express lane takes are handed to it, all without waiting for the SDK;
    the replies answered from one read leave together (`_Writer.release`), and only the rest is queued for
    the SDK. Why: an inline invoke costs one event-loop turn (the read) and one write, and the invokes of
    one read share a write. Reading pauses while the SDK has more than twice the line bound queued.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, writer: _Writer, express: ExpressLane | None, max_line_bytes: int
    ) -> None:
        self._loop = loop
        self._max_line_bytes = max_line_bytes
        self._writer = writer
        self._express = express
        self._splitter = LineSplitter(max_line_bytes)
        self._queue: deque[str] = deque()
        self._queued_bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False
        self._ended = False

    # the protocol: called by the read pipe's transport ---------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for line in self._splitter.feed(data):
            self._line(line)
        self._writer.release()  # every complete line read so far is handled: their replies leave now, together
        if self._queue:  # (the lines the SDK is to read)
            self._wake()

    def eof_received(self) -> bool:
        last = self._splitter.rest()  # a last line without its newline
        if last is not None:
            self._line(last)
            self._writer.release()
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and (self._queue or self._ended) and not waiter.done():
            waiter.set_result(None)

    def _line(self, line: bytes | Oversized) -> None:
        if isinstance(line, Oversized):
            # Discarded and answered (with its id when its first bytes hold one); the connection lives on.
            logger.warning("discarding an input line over %d bytes", self._max_line_bytes)
            reason = {"reason": f"a message larger than the {self._max_line_bytes} byte line limit"}
            self._writer.put(error_line(recover_id(line.head), INVALID_REQUEST, "Request too large", reason))
            return
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            self._writer.put(error_line(recover_id(line), PARSE_ERROR, "Parse error", {"reason": "not valid JSON"}))
            return
        lane = self._express
        if is_request(value):
            if lane is not None and lane.take(value, line):
                return
        else:
            message, refusal = _judged(value)
            if refusal is not None:
                self._writer.put(refusal)
                return
            if message is not None and lane is not None and lane.take(message, line):
                return
        self._queue.append(line.decode("utf-8", "replace"))
        self._queued_bytes += len(line)
        if not self._paused and self._queued_bytes > 2 * self._max_line_bytes and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    # the SDK's side ----------------------------------------------------------------------------------
    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        queue = self._queue
        while not queue:
            if self._ended:
                raise StopAsyncIteration
            self._waiter = waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter:
                    self._waiter = None
        line = queue.popleft()
        self._queued_bytes -= len(line)  # (characters: close enough to the bytes for a pause threshold)
        if self._paused and self._queued_bytes <= self._max_line_bytes and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return line


class _Writer:
    """The `write`/`flush` pair the SDK's stdio transport expects, over a non-blocking pipe.

    Messages written in one event-loop iteration leave in one system call: under load, replies to
    concurrent requests share a write instead of paying one each. The reader's own replies (`put`: lines it
    refuses, inline invokes the express lane answers) wait for its `release` instead, at the end of each read's
    lines: one write for all, and no event-loop turn before it.
    """

    def __init__(self, writer: asyncio.StreamWriter, loop: asyncio.AbstractEventLoop) -> None:
        self._writer = writer
        self._transport = writer.transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._scheduled = False

    async def write(self, text: str) -> None:
        await self.write_bytes(text.encode("utf-8"))

    def put(self, data: bytes) -> None:
        """Queue `data` until the reader's `release` (or a scheduled send, whichever comes first)."""
        self._pending.append(data)
        self._pending_bytes += len(data)

    def release(self) -> None:
        """Send what is queued now, in one write."""
        pending = self._pending
        if pending:
            data = pending[0] if len(pending) == 1 else b"".join(pending)
            pending.clear()  # (kept: no list made per read)
            self._pending_bytes = 0
            self._transport.write(data)

    async def write_bytes(self, data: bytes) -> None:
        self.put(data)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._send)

    def _send(self) -> None:
        self._scheduled = False
        pending = self._pending
        if pending:
            data = pending[0] if len(pending) == 1 else b"".join(pending)
            pending.clear()
            self._pending_bytes = 0
            self._transport.write(data)

    async def flush(self) -> None:
        if self._pending_bytes > 1 << 20:  # a large backlog goes out now rather than at the end of the turn
            self._send()
        await self._writer.drain()


@contextlib.asynccontextmanager
async def serve_streams(
    express: Callable[[WriteBytes, PutBytes], ExpressLane | None] | None = None,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> AsyncIterator[tuple[Any, Any]]:
    """(read_stream, write_stream) for `Server.run`, over stdin/stdout.

    `express` builds the lane that answers eligible requests without the SDK (see `express.py`). A line
    longer than `max_line_bytes` is discarded and answered "Request too large"; the connection lives on.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None or sys.platform == "win32" or not (_is_pipe_like(0) and _is_pipe_like(1)):
        async with stdio_server() as streams:
            yield streams
        return
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # handlers and children read EOF,
    os.dup2(2, 1)  # and their stray output goes to stderr, not onto the wire
    os.close(devnull)
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    out = _Writer(writer, loop)
    lane = express(out.write_bytes, out.put) if express is not None else None
    lines = _Lines(loop, out, lane, max_line_bytes)
    read_transport, _ = await loop.connect_read_pipe(lambda: lines, os.fdopen(wire_in, "rb", buffering=0))
    try:
        try:
            async with stdio_server(stdin=lines, stdout=out) as streams:  # type: ignore[arg-type]
                yield streams
        finally:
            if lane is not None:
                await lane.aclose()
    finally:
        try:
            # Shielded and bounded: even a cancelled exit flushes what was written, then restores the fds.
            with anyio.CancelScope(shield=True), anyio.move_on_after(2), contextlib.suppress(Exception):
                out._send()
                await writer.drain()
        finally:
            write_transport.close()
            read_transport.close()
            os.dup2(saved_in, 0)
            os.dup2(saved_out, 1)
            os.close(saved_in)
            os.close(saved_out)
