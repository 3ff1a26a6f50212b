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
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from .concurrency import Slots
from .connection import SessionConnection
from .failures import ConnectionLost, InvokerFailure, describe
from .stdio_pipe import DEFAULT_MAX_LINE_BYTES, StdioPipe, express_capable, open_stdio_pipe

logger = logging.getLogger("interceptors.remote")

_STDERR_LINE_LIMIT = 1000


class ServerUnavailable(InvokerFailure):
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
    A server whose requests time out `restart_after_timeouts` times in a row, sending nothing meanwhile, and
    that then does not answer a `ping` either is hung: it is restarted like a crashed one (a server that
    answers late, or never answers what we cancelled, is slow, not hung). `junk_line_limit`: more lines in a
    row that are not JSON-RPC mean it is broken (stdio).
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
        restart_after_timeouts: int | None = 3,
        junk_line_limit: int | None = 16,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("give exactly one of command or url")
        if command is not None and not command:
            raise ValueError("command must not be empty")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if restart_after_timeouts is not None and restart_after_timeouts < 1:
            raise ValueError("restart_after_timeouts must be at least 1 (or None: never)")
        self.name = name
        self.command = list(command) if command is not None else None
        self.url = url
        self.env = env
        self.cwd = cwd
        self.mode = mode
        self.startup_timeout_s = startup_timeout_s
        self.backoff_s = backoff_s
        self.unavailable_wait_s = unavailable_wait_s
        self.restart_after_timeouts = restart_after_timeouts
        self.junk_line_limit = junk_line_limit
        self.max_line_bytes = max_line_bytes
        self.restarts = 0
        self._timeouts_in_a_row = 0
        self._probing = False
        self._pipe: StdioPipe | None = None
        self._junk_before = 0
        self._lost_why: str | None = None
        self.on_restart: Callable[[], Awaitable[None]] | None = None
        self._limit = Slots(max_concurrency)
        self._connection: SessionConnection | None = None
        self._lost = anyio.Event()
        self._ready = anyio.Event()
        self._startup_error: BaseException | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._stderr = _StderrPump(name, stderr_lines) if command is not None else None

    @property
    def _who(self) -> str:
        return f"interceptor server {self.name!r}"

    @property
    def connected(self) -> bool:
        return self._connection is not None

    @property
    def session(self) -> ClientSession | None:
        """The live MCP session, if connected (it changes on every restart)."""
        return None if self._connection is None else self._connection.session

    @property
    def junk_lines(self) -> int:
        """Lines this server wrote that were not JSON-RPC, over all its processes (stdio only)."""
        return self._junk_before + (self._pipe.junk_lines if self._pipe is not None else 0)

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
            deadline = anyio.current_effective_deadline()
            heard = self._heard()
            try:
                result = await connection.request(method, params, timeout_s)
            except ConnectionLost:
                self._lost.set()
                raise ServerUnavailable(self.name, "the connection closed") from None
            except MCPError as exc:  # the server's own answer (a timeout answer too) or our deadline
                if exc.error.code == REQUEST_TIMEOUT:  # a reply the server did send moved `heard`: not counted
                    self._timed_out(connection, heard)
                else:
                    self._timeouts_in_a_row = 0
                raise
            except anyio.get_cancelled_exc_class():
                if anyio.current_time() >= deadline:  # the caller's deadline fired: a timeout, not a cancel
                    self._timed_out(connection, heard)
                raise
            self._timeouts_in_a_row = 0
            return result

    def _heard(self) -> int | None:
        """How many messages the server has sent so far (None where the transport cannot tell)."""
        return None if self._pipe is None else self._pipe.messages_in

    def _timed_out(self, connection: SessionConnection, heard: int | None) -> None:
        """One more timeout in a row; at the limit the server is treated as hung and restarted.

        A timeout while the server answered other requests is a slow interceptor, not a hung server:
        it does not count."""
        if connection is not self._connection:
            return
        if heard is not None and self._heard() != heard:
            return
        self._timeouts_in_a_row += 1
        limit = self.restart_after_timeouts
        if limit is not None and self._timeouts_in_a_row >= limit and not self._probing and self._group is not None:
            self._probing = True
            self._group.start_soon(self._probe, connection, self._timeouts_in_a_row)

    async def _probe(self, connection: SessionConnection, timeouts: int) -> None:
        """Timeouts alone do not prove a server hung: a peer may answer a cancelled request never, or after our
        deadline. A `ping` it answers keeps it; one it does not answer (or a closed connection) restarts it."""
        try:
            with anyio.fail_after(self.unavailable_wait_s):
                await connection.request("ping", {}, self.unavailable_wait_s)
            alive = True
        except MCPError as exc:  # an error answer is an answer; our own failures and deadlines are not
            alive = not isinstance(exc, InvokerFailure) and exc.error.code != REQUEST_TIMEOUT
        except Exception:
            alive = False
        finally:
            self._probing = False
        if connection is not self._connection:
            return
        if alive:
            self._timeouts_in_a_row = 0
        else:
            self._lost_why = f"timed out {timeouts} times in a row and did not answer a ping"
            self._lost.set()

    # Lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> RemoteServer:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._supervise)
        with anyio.move_on_after(self.startup_timeout_s):
            await self._ready.wait()
        if self._connection is None:
            why = "it did not start in time" if self._startup_error is None else describe(self._startup_error)
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
                    self._timeouts_in_a_row = 0
                    if not first:
                        self.restarts += 1
                        logger.warning("interceptor server %r restarted (restart %d)", self.name, self.restarts)
                        if self.on_restart is not None:
                            await self.on_restart()
                    first = False
                    delay = self.backoff_s[0]
                    self._ready.set()
                    await self._lost.wait()
                    why, self._lost_why = self._lost_why, None
                    logger.warning("interceptor server %r %s: restarting it", self.name, why or "closed the connection")
            except Exception as exc:
                if first:
                    logger.warning("interceptor server %r could not start: %s", self.name, describe(exc))
                else:
                    logger.warning("interceptor server %r failed to restart: %s", self.name, describe(exc))
                logger.info("interceptor server %r failure", self.name, exc_info=True)  # -v shows the cause
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
                yield SessionConnection(client.session, who=self._who)
            return
        assert self.command is not None and self._stderr is not None
        parameters = StdioServerParameters(command=self.command[0], args=self.command[1:], env=self.env, cwd=self.cwd)
        if sys.platform == "win32":
            async with Client(_watched_stdio(parameters, self._stderr.writer, self), mode=self.mode) as client:
                yield SessionConnection(client.session, who=self._who)
            return
        async with (
            open_stdio_pipe(
                parameters,
                self._stderr.writer,
                lambda: self._lost.set(),
                who=f"interceptor server {self.name!r}",
                max_line_bytes=self.max_line_bytes,
                junk_limit=self.junk_line_limit,
            ) as pipe,
        ):
            self._pipe = pipe
            try:
                async with Client(pipe.transport(), mode=self.mode) as client:
                    express = pipe.request if express_capable(client.session) else None
                    yield SessionConnection(client.session, express, closed=lambda: pipe.closed, who=self._who)
            finally:
                self._pipe = None
                self._junk_before += pipe.junk_lines


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
