"""The downstream client on the gateway's own stdin/stdout: raw lines in, raw lines out.

Pipes (how MCP clients start a server) are read and written by the event loop directly; anything else
(a file, a terminal) falls back to a thread, so the gateway still works when run by hand. stdout carries
protocol data only.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import BinaryIO, Final

from interceptors.protocol.framing import MAX_LINE_BYTES, LineSplitter, Oversized

READ_CHUNK: Final = 256 * 1024


def _is_pipe_or_socket(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class StdioDownstream:
    """`await StdioDownstream.open()`; `send(line)`, `async for line in lines()`."""

    def __init__(self, stdin: BinaryIO, stdout: BinaryIO, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        self._stdin_file = stdin
        self._stdout_file = stdout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._closed = False

    @classmethod
    async def open(
        cls, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None, *, max_line: int = MAX_LINE_BYTES
    ) -> StdioDownstream:
        self = cls(stdin or sys.stdin.buffer, stdout or sys.stdout.buffer, max_line)
        loop = asyncio.get_running_loop()
        if _is_pipe_or_socket(self._stdin_file.fileno()):
            reader = asyncio.StreamReader(limit=2**31)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self._stdin_file)
            self._reader = reader
        if _is_pipe_or_socket(self._stdout_file.fileno()):
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, self._stdout_file)
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return self

    def send(self, data: bytes) -> None:
        if self._closed:
            return
        if self._writer is not None:
            if self._writer.is_closing():
                self._closed = True
                return
            self._writer.write(data + b"\n")
            return
        try:
            self._stdout_file.write(data + b"\n")
            self._stdout_file.flush()
        except (BrokenPipeError, OSError):
            self._closed = True

    async def drain(self) -> None:
        if self._writer is not None and not self._closed:
            try:
                await self._writer.drain()
            except (BrokenPipeError, ConnectionResetError):
                self._closed = True

    async def _chunks(self) -> AsyncIterator[bytes]:
        if self._reader is not None:
            while chunk := await self._reader.read(READ_CHUNK):
                yield chunk
            return
        loop = asyncio.get_running_loop()
        read = getattr(self._stdin_file, "read1", self._stdin_file.read)
        while chunk := await loop.run_in_executor(None, read, READ_CHUNK):
            yield chunk

    async def lines(self) -> AsyncIterator[bytes | Oversized]:
        """Every line the client writes, until it closes stdin."""
        splitter = LineSplitter(self.max_line)
        async for chunk in self._chunks():
            for line in splitter.feed(chunk):
                yield line
        last = splitter.rest()
        if last is not None:
            yield last

    async def aclose(self) -> None:
        await self.drain()
        self._closed = True
