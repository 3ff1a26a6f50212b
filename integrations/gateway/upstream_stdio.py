"""The upstream server as a child process on stdio: raw lines both ways, no SDK session in between.

The child gets its own process group, so stopping the gateway stops whatever the server itself started;
`aclose` closes its stdin, gives it a moment to exit on its own, then terminates and kills the group, and
always reaps it (no zombies). Its stderr is the gateway's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Final

from interceptors.errors import InterceptorsError
from interceptors.protocol.framing import MAX_LINE_BYTES, LineSplitter, Oversized
from interceptors_chain.stdio_pipe import stop_grace_s

READ_CHUNK: Final = 256 * 1024


class UpstreamStartError(InterceptorsError, OSError):
    """The upstream command could not be started (not found, not executable)."""


class StdioUpstream:
    """`await StdioUpstream.start(argv)`, then `send(line)` and `async for line in lines()`; `aclose()` at the end."""

    def __init__(self, process: asyncio.subprocess.Process, max_line: int = MAX_LINE_BYTES) -> None:
        self.process = process
        self.max_line = max_line
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._broken = False

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        max_line: int = MAX_LINE_BYTES,
        cwd: str | None = None,
    ) -> StdioUpstream:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=None,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise UpstreamStartError(f"cannot start the upstream server {argv[0]!r}: {exc.strerror or exc}") from None
        return cls(process, max_line)

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, data: bytes, request_id: int | None = None) -> None:
        """Queue one message (the newline is added here); a dead upstream is noticed by the reader."""
        if self._broken or self._stdin.is_closing():
            return
        try:
            self._stdin.write(data + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            self._broken = True

    async def drain(self) -> None:
        if self._broken:
            return
        try:
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            self._broken = True

    async def lines(self) -> AsyncIterator[bytes | Oversized]:
        """Every line the upstream writes, until it closes stdout."""
        splitter = LineSplitter(self.max_line)
        while True:
            chunk = await self._stdout.read(READ_CHUNK)
            if not chunk:
                last = splitter.rest()
                if last is not None:
                    yield last
                return
            for line in splitter.feed(chunk):
                yield line

    async def aclose(self) -> int | None:
        """Stop the upstream (stdin closed, then SIGTERM, then SIGKILL to its group) and reap it."""
        process = self.process
        grace = stop_grace_s()  # $MCP_INTERCEPTORS_STOP_GRACE_S, default 2 s
        with contextlib.suppress(OSError, RuntimeError):
            self._stdin.close()
        if process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), grace)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if process.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), grace)
        else:
            await process.wait()
        # Whatever the server left in its group goes too (its own children).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        return process.returncode
