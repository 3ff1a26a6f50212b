"""A stdio client transport for interceptor servers, with an express path for the invoker's own requests.

Why: on the SDK's stdio transport every message is parsed into a pydantic model, crosses two memory
streams and a relay task, and is matched to its waiter by the dispatcher; for a small `interceptor/invoke`
that is most of the round trip. Here the invoker's requests are written as JSON bytes with string ids
("x1", "x2", … never an id the SDK allocates) and their replies are matched straight off the reader.
Every other message still flows through the SDK session (handshake, discovery, server requests,
notifications), so the session sees an ordinary transport.

Writes are coalesced: messages queued while a write is in progress leave together. The process is
spawned and stopped as the SDK's transport does it (own process group; close stdin, wait, then
terminate the group). POSIX only; elsewhere `RemoteServer` uses the SDK's transport.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import IO, Any

import anyio
import anyio.abc
import mcp_types
from mcp import StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

from interceptors.codec import dumps_exact, loads_exact
from interceptors.jsonlines import DEFAULT_MAX_LINE_BYTES as DEFAULT_MAX_LINE_BYTES
from interceptors.jsonlines import JunkLines, reply_problem, size_text, unreadable_problem
from interceptors.protocol.framing import LineSplitter, Oversized
from interceptors.protocol.messages import recover_id

from . import _sdk
from .failures import MalformedReply

logger = logging.getLogger("interceptors.remote")

_READ_BYTES = 1 << 20
_SESSION_IDS_KEPT = 10_000
DEFAULT_STOP_GRACE_S = 2.0
STOP_GRACE_ENV = "MCP_INTERCEPTORS_STOP_GRACE_S"
_FLUSH_S = 0.5


def stop_grace_s() -> float:
    """How long a server being stopped may take to exit after its stdin closes, and again after SIGTERM
    before SIGKILL: `$MCP_INTERCEPTORS_STOP_GRACE_S` seconds (default 2). Read at each stop, so a test suite
    that stops hung servers on purpose can shorten the wait; a value that is not a positive number is ignored."""
    raw = os.environ.get(STOP_GRACE_ENV)
    if raw is None:
        return DEFAULT_STOP_GRACE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        logger.warning("%s=%r is not a positive number of seconds: using %g", STOP_GRACE_ENV, raw[:40],
                       DEFAULT_STOP_GRACE_S)  # fmt: skip
        return DEFAULT_STOP_GRACE_S
    return value


class _Waiter:
    __slots__ = ("done", "failure", "reply")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.reply: dict[str, Any] | None = None  # None once done: the connection closed
        self.failure: MalformedReply | None = None


class StdioPipe:
    """One spawned server: SDK-facing streams plus `request` for the express path.

    `who` names the server in error texts ("interceptor server 'dlp'"). Lines that are not JSON-RPC are
    counted and logged (the first few, by size only: they may hold anything); with `junk_limit`, more
    than that many in a row without one good message mean the server is broken and the pipe closes.
    """

    def __init__(
        self,
        process: anyio.abc.Process,
        on_close: Callable[[], None],
        *,
        who: str = "the server",
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        junk_limit: int | None = None,
    ) -> None:
        self._process = process
        self._on_close = on_close
        self.who = who
        self.max_line_bytes = max_line_bytes
        self.junk_limit = junk_limit
        self.messages_in = 0
        """Replies the server sent, late ones included (a server that answers after our deadline is slow, not
        hung); notifications do not count."""
        self._junk_lines = JunkLines(who, logger, junk_limit)
        self._waiters: dict[str, _Waiter] = {}
        self._session_pending: dict[str | int, None] = {}
        self._next_id = 0
        self._out = bytearray()
        self._out_ready = anyio.Event()
        self._closed = False
        self._to_session, self.read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self.write_stream, self._from_session = anyio.create_memory_object_stream[SessionMessage](0)

    @asynccontextmanager
    async def transport(self) -> AsyncIterator[tuple[Any, Any]]:
        """The (read, write) streams for `mcp.Client`, as the transport context it expects."""
        yield self.read_stream, self.write_stream

    # Express path ---------------------------------------------------------------------------
    async def request(
        self, session: ClientSession, method: str, params: dict[str, Any], timeout_s: float | None
    ) -> dict[str, Any]:
        """Send one request and return its result; errors as MCPError, like the SDK's `send_raw_request`."""
        if self._closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        data: dict[str, Any] = {"method": method, "params": dict(params)}
        _sdk.stamp(session, data, {})  # the era envelope, as the session stamps its own requests
        self._next_id += 1
        request_id = f"x{self._next_id}"
        waiter = self._waiters[request_id] = _Waiter()
        timeout = timeout_s if timeout_s is not None else _sdk.read_timeout(session)
        try:
            self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": data["params"]})
            if timeout is None:
                await waiter.done.wait()
            else:
                with anyio.fail_after(timeout):
                    await waiter.done.wait()
        except TimeoutError:
            self._cancel(request_id, f"timed out after {timeout}s")
            raise MCPError(code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out") from None
        except anyio.get_cancelled_exc_class():
            self._cancel(request_id, "caller cancelled")
            raise
        finally:
            self._waiters.pop(request_id, None)
        if waiter.failure is not None:
            raise waiter.failure
        return self._outcome(waiter.reply)

    def _cancel(self, request_id: str, reason: str) -> None:
        if not self._closed:
            self._send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": reason}})  # fmt: skip

    def _send(self, message: dict[str, Any]) -> None:
        self._queue(dumps_exact(message) + b"\n")

    def _queue(self, data: bytes) -> None:
        self._out += data
        self._out_ready.set()

    def _outcome(self, reply: dict[str, Any] | None) -> dict[str, Any]:
        if reply is None:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        problem = reply_problem(reply)
        if problem is not None:
            raise MalformedReply(self.who, problem)
        if "error" in reply:
            error = reply["error"]
            raise MCPError(code=error["code"], message=error["message"], data=error.get("data"))
        result: dict[str, Any] = reply["result"]
        return result

    # Pumps ----------------------------------------------------------------------------------
    async def read_pump(self) -> None:
        """The server's stdout: replies to express requests resolved here, everything else to the session."""
        stdout = self._process.stdout
        assert stdout is not None
        framer = LineSplitter(self.max_line_bytes)
        try:
            async with self._to_session:
                while not self._closed:
                    try:
                        chunk = await stdout.receive(_READ_BYTES)
                    except anyio.EndOfStream:
                        break
                    for line in framer.feed(chunk):
                        if isinstance(line, Oversized):
                            await self._oversized(line.head)
                        else:  # the framing skips blank lines
                            await self._deliver(line)
                # A last line without its newline was torn by the exit: the connection closed, it is no reply.
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            self._close()

    async def _oversized(self, head: bytes) -> None:
        limit = size_text(self.max_line_bytes)
        logger.warning("%s wrote a line over the %s line limit; it was discarded", self.who, limit)
        if not await self._fail_pending(recover_id(head), f"it is larger than the {limit} line limit"):
            self._junk()

    async def _deliver(self, line: bytes) -> None:
        try:
            message = loads_exact(line)
        except ValueError:
            if not await self._fail_pending(recover_id(line), unreadable_problem(line)):
                self._junk()
            return
        if not isinstance(message, dict):
            self._junk()
            return
        if "method" not in message:
            request_id = message.get("id")
            waiter = self._waiters.get(request_id) if isinstance(request_id, str) else None
            if waiter is not None:
                self._junk_lines.good()
                self.messages_in += 1
                waiter.reply = message
                waiter.done.set()
                return
        try:
            item = SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError:
            problem = reply_problem(message)
            if problem is None or not await self._fail_pending(message.get("id"), problem):
                self._junk()
            return
        self._junk_lines.good()
        message = item.message
        reply = isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError)
        if reply:
            self._session_pending.pop(message.id, None)  # type: ignore[union-attr,arg-type]
            self.messages_in += 1  # a reply, even a late one: the server is alive
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._to_session.send(item)

    async def _fail_pending(self, request_id: Any, problem: str) -> bool:
        """Fail the pending request `request_id` (express or the session's) with `problem`; False if none."""
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return False
        failure = MalformedReply(self.who, problem)
        logger.warning("%s", failure.error.message)
        waiter = self._waiters.get(request_id) if isinstance(request_id, str) else None
        if waiter is not None:
            self._junk_lines.good()
            waiter.failure = failure
            waiter.done.set()
            return True
        if request_id not in self._session_pending:
            return False
        self._junk_lines.good()
        del self._session_pending[request_id]
        error = mcp_types.ErrorData(code=INTERNAL_ERROR, message=failure.error.message, data=failure.error.data)
        answer = SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._to_session.send(answer)
        return True

    def _junk(self) -> None:
        """One more line that is not JSON-RPC: logged (bounded, never its content), and past the limit fatal."""
        if self._junk_lines.add():
            self._close()

    @property
    def junk_lines(self) -> int:
        """Lines the server wrote that were not JSON-RPC, so far."""
        return self._junk_lines.count

    async def session_pump(self) -> None:
        """The session's outgoing messages, serialised as the SDK's transport does."""
        with suppress(anyio.ClosedResourceError, anyio.EndOfStream):
            async with self._from_session:
                async for item in self._from_session:
                    message = item.message
                    if isinstance(message, mcp_types.JSONRPCRequest):
                        self._remember_session_request(message.id)
                    text = message.model_dump_json(by_alias=True, exclude_unset=True)
                    self._queue(text.encode() + b"\n")

    def _remember_session_request(self, request_id: str | int) -> None:
        pending = self._session_pending
        pending[request_id] = None
        if len(pending) > _SESSION_IDS_KEPT:  # ids of requests the session gave up on: forget the oldest
            del pending[next(iter(pending))]

    async def write_pump(self) -> None:
        """Everything queued leaves in one write; queued meanwhile leaves in the next."""
        assert self._process.stdin is not None
        try:
            while True:
                await self._out_ready.wait()
                self._out_ready = anyio.Event()
                if self._out:
                    data, self._out = bytes(self._out), bytearray()
                    await self._process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            self._close()

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (the process's stdout ended, a write failed, or the pipe was closed)."""
        return self._closed

    def _close(self) -> None:
        """The connection is gone: every waiter wakes now, the session sees the end, the owner is told."""
        if self._closed:
            return
        self._closed = True
        for waiter in self._waiters.values():
            waiter.done.set()
        self._to_session.close()
        self._on_close()

    async def flush(self) -> None:
        """Bounded: give queued messages a moment to leave before stdin closes."""
        with anyio.move_on_after(_FLUSH_S):
            while self._out and not self._closed:
                await anyio.sleep(0.005)


def express_capable(session: ClientSession) -> bool:
    """The session exposes the stamp and read timeout the express path relies on (private SDK API)."""
    return _sdk.can_stamp(session)


@asynccontextmanager
async def open_stdio_pipe(
    parameters: StdioServerParameters,
    errlog: IO[str],
    on_close: Callable[[], None],
    *,
    who: str = "the server",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    junk_limit: int | None = None,
    stop_grace_s: float | None = None,
) -> AsyncIterator[StdioPipe]:
    """Spawn the server in its own process group and yield its pipe; stop it (bounded) on exit.

    `stop_grace_s`: each of the two waits of the stop (after closing stdin, after SIGTERM); default
    `$MCP_INTERCEPTORS_STOP_GRACE_S`. A program that cannot be started is an OSError naming it
    (`FileNotFoundError.filename`)."""
    try:
        process = await anyio.open_process(
            [parameters.command, *parameters.args],
            env=get_default_environment() | (parameters.env or {}),
            stderr=errlog,
            cwd=parameters.cwd,
            start_new_session=True,
        )
    except OSError as exc:
        if exc.filename is None:  # uvloop's spawn does not name the program, asyncio's does
            exc.filename = parameters.command
        raise
    pipe = StdioPipe(process, on_close, who=who, max_line_bytes=max_line_bytes, junk_limit=junk_limit)
    async with anyio.create_task_group() as group:
        group.start_soon(pipe.read_pump)
        group.start_soon(pipe.session_pump)
        group.start_soon(pipe.write_pump)
        try:
            yield pipe
        finally:
            with anyio.CancelScope(shield=True):
                pipe.read_stream.close()  # the reader drains from now on: a server blocked writing can exit
                await pipe.flush()
                await _stop(process, stop_grace_s)
            group.cancel_scope.cancel()


async def _stop(process: anyio.abc.Process, grace_s: float | None = None) -> None:
    """Close stdin, wait, then terminate the whole group: nothing the server started outlives it."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    grace = stop_grace_s() if grace_s is None else grace_s
    if not await _exited(process, grace):
        await terminate_posix_process_tree(process, grace)
        if not await _exited(process, grace):
            logger.warning("server process %d survived the kill; abandoning it", process.pid)
    with suppress(OSError):  # the leader is gone; anything it left in its group goes too
        os.killpg(process.pid, signal.SIGTERM)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


async def _exited(process: anyio.abc.Process, timeout_s: float) -> bool:
    """Poll the return code (process.wait() also waits for pipe EOF, which a grandchild can hold)."""
    with anyio.move_on_after(timeout_s):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False
