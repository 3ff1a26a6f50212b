"""Supervised remote interceptor servers: spawned over stdio or reached over Streamable HTTP.

One MCP session per server; concurrent invokes are multiplexed on it under a concurrency limit. When the
process dies every pending request fails at once (the transport wakes them with "connection closed");
the supervisor restarts the process with capped exponential backoff and rediscovers. In-flight
requests are never retried: the chain resolves them as failures, by each interceptor's mode and failOpen.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import IO, Any, Literal

import anyio
import anyio.abc
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from .concurrency import Slots
from .connection import SessionConnection
from .stdio_pipe import express_capable, open_stdio_pipe

logger = logging.getLogger("interceptors.remote")

_STDERR_LINE_LIMIT = 1000


class ServerUnavailable(MCPError):
    """The server is not connected (starting, restarting, or stopped)."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(CONNECTION_CLOSED, f"interceptor server {name!r} is unavailable: {why}")


class _StderrPump:
    """The child's stderr, line by line into our log: bounded per line and in what is kept."""

    def __init__(self, name: str, keep: int) -> None:
        self.name = name
        self.recent: collections.deque[str] = collections.deque(maxlen=keep)
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self.writer: IO[str] = os.fdopen(write_fd, "w")
        self._thread = threading.Thread(target=self._pump, name=f"stderr:{name}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with self._reader:
            for line in self._reader:
                text = line.rstrip("\n")[:_STDERR_LINE_LIMIT]
                self.recent.append(text)
                logger.info("[%s stderr] %s", self.name, text)

    def close_writer(self) -> None:
        """The child holds its own copy; closing ours lets the pump end when the child exits."""
        if not self.writer.closed:
            self.writer.close()


class RemoteServer:
    """A supervised connection to one interceptor server. Use as an async context manager.

    Exactly one of `command` (spawned, spoken to over stdio) or `url` (Streamable HTTP) is given.
    """

    def __init__(
        self,
        name: str,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        mode: Literal["auto", "legacy"] = "auto",
        max_concurrency: int = 64,
        startup_timeout_s: float = 20.0,
        backoff_s: tuple[float, float] = (0.2, 10.0),
        stderr_lines: int = 200,
        unavailable_wait_s: float = 2.0,
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("give exactly one of command or url")
        if command is not None and not command:
            raise ValueError("command must not be empty")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.name = name
        self.command = list(command) if command is not None else None
        self.url = url
        self.env = env
        self.cwd = cwd
        self.mode = mode
        self.startup_timeout_s = startup_timeout_s
        self.backoff_s = backoff_s
        self.unavailable_wait_s = unavailable_wait_s
        self.restarts = 0
        self.on_restart: Callable[[], Awaitable[None]] | None = None
        self._limit = Slots(max_concurrency)
        self._connection: SessionConnection | None = None
        self._lost = anyio.Event()
        self._ready = anyio.Event()
        self._startup_error: BaseException | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._stderr = _StderrPump(name, stderr_lines) if command is not None else None

    @property
    def connected(self) -> bool:
        return self._connection is not None

    @property
    def session(self) -> ClientSession | None:
        """The live MCP session, if connected (it changes on every restart)."""
        return None if self._connection is None else self._connection.session

    @property
    def recent_stderr(self) -> list[str]:
        return list(self._stderr.recent) if self._stderr is not None else []

    # Connection protocol ------------------------------------------------------------------
    async def request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
        connection = self._connection
        if connection is None:
            # Restarting: wait a bounded time for it to come back rather than failing at once.
            with anyio.move_on_after(min(timeout_s or self.unavailable_wait_s, self.unavailable_wait_s)):
                await self._ready.wait()
            connection = self._connection
            if connection is None:
                raise ServerUnavailable(self.name, "not connected")
        async with self._limit:
            try:
                return await connection.request(method, params, timeout_s)
            except MCPError as exc:
                if exc.error.code == CONNECTION_CLOSED:
                    self._lost.set()
                    raise ServerUnavailable(self.name, "the connection closed") from None
                raise

    # Lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> RemoteServer:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._supervise)
        with anyio.move_on_after(self.startup_timeout_s):
            await self._ready.wait()
        if self._connection is None:
            why = "did not start in time" if self._startup_error is None else type(self._startup_error).__name__
            await self.aclose()
            raise ServerUnavailable(self.name, why)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        group, self._group = self._group, None
        if group is not None:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
        self._connection = None
        if self._stderr is not None:
            self._stderr.close_writer()

    async def _supervise(self) -> None:
        delay = self.backoff_s[0]
        first = True
        while True:
            try:
                async with self._session() as connection:
                    self._connection = connection
                    self._lost = anyio.Event()
                    if not first:
                        self.restarts += 1
                        logger.warning("interceptor server %r restarted (restart %d)", self.name, self.restarts)
                        if self.on_restart is not None:
                            await self.on_restart()
                    first = False
                    delay = self.backoff_s[0]
                    self._ready.set()
                    await self._lost.wait()
                    logger.warning("interceptor server %r lost its connection", self.name)
            except Exception as exc:
                logger.warning("interceptor server %r failed: %s", self.name, type(exc).__name__)
                if first:  # it never came up: report to __aenter__ instead of retrying forever
                    self._startup_error = exc
                    self._ready.set()
                    return
            finally:
                self._connection = None
                if self._ready.is_set():
                    self._ready = anyio.Event()
            await anyio.sleep(delay)
            delay = min(delay * 2, self.backoff_s[1])

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[SessionConnection]:
        if self.url is not None:
            async with Client(self.url, mode=self.mode) as client:
                yield SessionConnection(client.session)
            return
        assert self.command is not None and self._stderr is not None
        parameters = StdioServerParameters(command=self.command[0], args=self.command[1:], env=self.env, cwd=self.cwd)
        if sys.platform == "win32":
            async with Client(_watched_stdio(parameters, self._stderr.writer, self), mode=self.mode) as client:
                yield SessionConnection(client.session)
            return
        async with (
            open_stdio_pipe(parameters, self._stderr.writer, lambda: self._lost.set()) as pipe,
            Client(pipe.transport(), mode=self.mode) as client,
        ):
            express = pipe.request if express_capable(client.session) else None
            yield SessionConnection(client.session, express)


@asynccontextmanager
async def _watched_stdio(
    parameters: StdioServerParameters, errlog: IO[str], owner: RemoteServer
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport (where `stdio_pipe` does not run), plus a relay that notices the child's
    stdout closing (it died)."""
    async with stdio_client(parameters, errlog=errlog) as (read, write):  # type: ignore[arg-type]
        relay_send, relay_receive = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            try:
                async with relay_send:
                    async for message in read:
                        await relay_send.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                owner._lost.set()

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            try:
                yield relay_receive, write
            finally:
                group.cancel_scope.cancel()
