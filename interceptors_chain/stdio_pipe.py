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

logger = logging.getLogger("interceptors.remote")

_EXIT_GRACE_S = 2.0  # after stdin closes, before the group is terminated
_KILL_GRACE_S = 2.0  # after SIGTERM, before SIGKILL
_FLUSH_S = 0.5
INVALID_REPLY_MESSAGE = "the server replied with a malformed result or error"


class _Waiter:
    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.reply: dict[str, Any] | None = None  # None once done: the connection closed


class StdioPipe:
    """One spawned server: SDK-facing streams plus `request` for the express path."""

    def __init__(self, process: anyio.abc.Process, on_close: Callable[[], None]) -> None:
        self._process = process
        self._on_close = on_close
        self._waiters: dict[str, _Waiter] = {}
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
        session._stamp(data, {})  # the era envelope, as the session stamps its own requests
        self._next_id += 1
        request_id = f"x{self._next_id}"
        waiter = self._waiters[request_id] = _Waiter()
        timeout = timeout_s if timeout_s is not None else session._session_read_timeout_seconds
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
        return _outcome(waiter.reply)

    def _cancel(self, request_id: str, reason: str) -> None:
        if not self._closed:
            self._send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": reason}})  # fmt: skip

    def _send(self, message: dict[str, Any]) -> None:
        self._queue(dumps_exact(message) + b"\n")

    def _queue(self, data: bytes) -> None:
        self._out += data
        self._out_ready.set()

    # Pumps ----------------------------------------------------------------------------------
    async def read_pump(self) -> None:
        """The server's stdout: replies to express requests resolved here, everything else to the session."""
        assert self._process.stdout is not None
        pending = b""
        try:
            async with self._to_session:
                async for chunk in self._process.stdout:
                    lines = (pending + chunk).split(b"\n")
                    pending = lines.pop()
                    for line in lines:
                        if line.strip():
                            await self._deliver(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            self._close()

    async def _deliver(self, line: bytes) -> None:
        try:
            message = loads_exact(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" not in message:
            request_id = message.get("id")
            waiter = self._waiters.get(request_id) if isinstance(request_id, str) else None
            if waiter is not None:
                waiter.reply = message
                waiter.done.set()
                return
        item: SessionMessage | Exception
        try:
            item = SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            logger.warning("a server wrote a line that is not valid JSON-RPC (%d bytes)", len(line))
            item = _answer_for(message) or exc
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._to_session.send(item)

    async def session_pump(self) -> None:
        """The session's outgoing messages, serialised as the SDK's transport does."""
        with suppress(anyio.ClosedResourceError, anyio.EndOfStream):
            async with self._from_session:
                async for item in self._from_session:
                    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    self._queue(text.encode() + b"\n")

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


def _answer_for(message: Any) -> SessionMessage | None:
    """An error reply for the session's request whose reply was malformed (a result that is not an object,
    an error without a code): the SDK cannot match an invalid reply to its waiter, which would wait forever."""
    if not isinstance(message, dict) or "method" in message or not ("result" in message or "error" in message):
        return None
    request_id = message.get("id")
    if not isinstance(request_id, int | str) or isinstance(request_id, bool):
        return None
    error = mcp_types.ErrorData(code=INTERNAL_ERROR, message=INVALID_REPLY_MESSAGE)
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _outcome(reply: dict[str, Any] | None) -> dict[str, Any]:
    if reply is None:
        raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
    if "error" in reply:
        error = reply["error"]
        if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
            raise MCPError(code=error["code"], message=error["message"], data=error.get("data"))
        raise TypeError(INVALID_REPLY_MESSAGE)
    result = reply.get("result")
    if not isinstance(result, dict):
        raise TypeError(INVALID_REPLY_MESSAGE)
    return result


def express_capable(session: ClientSession) -> bool:
    """The session exposes the stamp and read timeout the express path relies on (private SDK API)."""
    return callable(getattr(session, "_stamp", None)) and hasattr(session, "_session_read_timeout_seconds")


@asynccontextmanager
async def open_stdio_pipe(
    parameters: StdioServerParameters, errlog: IO[str], on_close: Callable[[], None]
) -> AsyncIterator[StdioPipe]:
    """Spawn the server in its own process group and yield its pipe; stop it (bounded) on exit."""
    process = await anyio.open_process(
        [parameters.command, *parameters.args],
        env=get_default_environment() | (parameters.env or {}),
        stderr=errlog,
        cwd=parameters.cwd,
        start_new_session=True,
    )
    pipe = StdioPipe(process, on_close)
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
                await _stop(process)
            group.cancel_scope.cancel()


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, wait, then terminate the whole group: nothing the server started outlives it."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, _EXIT_GRACE_S):
        await terminate_posix_process_tree(process, _KILL_GRACE_S)
        if not await _exited(process, _KILL_GRACE_S):
            logger.warning("interceptor server process %d survived the kill; abandoning it", process.pid)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


async def _exited(process: anyio.abc.Process, timeout_s: float) -> bool:
    """Poll the return code (process.wait() also waits for pipe EOF, which a grandchild can hold)."""
    with anyio.move_on_after(timeout_s):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False
