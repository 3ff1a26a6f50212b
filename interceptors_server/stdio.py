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

from interceptors.codec import may_round_numbers
from interceptors.errors import INVALID_REQUEST, PARSE_ERROR
from interceptors.protocol.framing import MAX_LINE_BYTES, LineSplitter, Oversized
from interceptors.protocol.messages import Kind, classify, error_line, is_request, recover_id

from .express import ExpressLane, PutBytes, WriteBytes

logger = logging.getLogger("interceptors.stdio")

_READ_BYTES = 1 << 20


def _is_pipe_like(fd: int) -> bool:
    """A descriptor the event loop can watch: a pipe, a socket or a terminal (not /dev/null, not a file:
    epoll refuses those, and the SDK's thread-based transport reads them to their end instead)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


def _examine(line: bytes) -> tuple[dict[str, Any] | None, bytes | None]:
    """(the well-formed message, None), or (None, the JSON-RPC error for a line the SDK would drop).

    The SDK answers what it can parse; a request with a bad shape (array params, a float id, …) or a
    line that is not JSON would otherwise get no reply at all, and its caller would wait forever. The shape
    is judged by the protocol core's classification (`interceptors.protocol.messages.classify`), the one the
    gateway's router uses. (None, None) is a reply to one of the server's own requests: the SDK's to judge.
    """
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, error_line(recover_id(line), PARSE_ERROR, "Parse error", {"reason": "not valid JSON"})
    if is_request(value):
        return value, None
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


class _Lines:
    """`async for line in _Lines(reader)`: text lines, invalid UTF-8 replaced, oversized lines skipped.

    Framed by the protocol core's `LineSplitter` (the framing of every stdio edge). Lines the SDK could not
    answer are answered here (see `_examine`) and not passed on, and so are the requests the express lane takes.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: _Writer, express: ExpressLane | None, max_line_bytes: int
    ) -> None:
        self._max_line_bytes = max_line_bytes
        self._reader = reader
        self._writer = writer
        self._express = express
        self._splitter = LineSplitter(max_line_bytes)
        self._ready: deque[bytes | Oversized] = deque()
        self._ended = False

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        ready = self._ready
        while True:
            while not ready:
                # Every complete line read so far is handled: the replies answered meanwhile leave together, now.
                self._writer.release()
                if self._ended:
                    raise StopAsyncIteration
                chunk = await self._reader.read(_READ_BYTES)
                if chunk:
                    ready.extend(self._splitter.feed(chunk))
                    continue
                self._ended = True
                last = self._splitter.rest()  # a last line without its newline
                if last is not None:
                    ready.append(last)
            line = ready.popleft()
            if isinstance(line, Oversized):
                # Discarded and answered (with its id when its first bytes hold one); the connection lives on.
                logger.warning("discarding an input line over %d bytes", self._max_line_bytes)
                reason = {"reason": f"a message larger than the {self._max_line_bytes} byte line limit"}
                self._writer.put(error_line(recover_id(line.head), INVALID_REQUEST, "Request too large", reason))
                continue
            message, refusal = _examine(line)
            if refusal is not None:
                self._writer.put(refusal)
                continue
            lane = self._express
            if message is not None and lane is not None and lane.take(message, movable=not may_round_numbers(line)):
                continue
            self._writer.release()  # what was answered before this line goes out before the SDK sees it
            return line.decode("utf-8", "replace")


class _Writer:
    """The `write`/`flush` pair the SDK's stdio transport expects, over a non-blocking pipe.

    Messages written in one event-loop iteration leave in one system call: under load, replies to
    concurrent requests share a write instead of paying one each. The reader's own replies (`put`: lines it
    refuses, inline invokes the express lane answers) wait for its `release` instead, at the end of each read's
    lines: one write for all, and no event-loop turn before it.
    """

    def __init__(self, writer: asyncio.StreamWriter, loop: asyncio.AbstractEventLoop) -> None:
        self._writer = writer
        self._loop = loop
        self._pending = bytearray()
        self._scheduled = False

    async def write(self, text: str) -> None:
        await self.write_bytes(text.encode("utf-8"))

    def put(self, data: bytes) -> None:
        """Queue `data` until the reader's `release` (or a scheduled send, whichever comes first)."""
        self._pending += data

    def release(self) -> None:
        """Send what is queued now, in one write."""
        if self._pending:
            self._send()

    async def write_bytes(self, data: bytes) -> None:
        self._pending += data
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._send)

    def _send(self) -> None:
        self._scheduled = False
        if self._pending:
            data, self._pending = bytes(self._pending), bytearray()
            self._writer.write(data)

    async def flush(self) -> None:
        if len(self._pending) > 1 << 20:  # a large backlog goes out now rather than at the end of the turn
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
    reader = asyncio.StreamReader(limit=max_line_bytes, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(wire_in, "rb", buffering=0)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, reader, loop)
    out = _Writer(writer, loop)
    lane = express(out.write_bytes, out.put) if express is not None else None
    try:
        try:
            async with stdio_server(stdin=_Lines(reader, out, lane, max_line_bytes), stdout=out) as streams:  # type: ignore[arg-type]
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
