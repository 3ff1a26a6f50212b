"""`list` and `invoke` against a stdio server without loading the MCP SDK (issue 32: a CLI that answers at once).

Why: importing `mcp` costs about a second of CPU (its pydantic models), far more than the whole exchange with
a server. A server of the 2026 era (it answers `server/discover` listing 2026-07-28, as `serve` does) needs no
SDK to be asked one request: a JSON line out, a JSON line back. So the command spawns the server itself, asks
`server/discover`, then its one request, each with the era's `_meta` envelope. Any other answer to
`server/discover` (an older server's error, no 2026 version listed) raises `NotQuick` before anything is
yielded: the command then takes the SDK's path with a fresh process, as before.

The rules are the invoker's stdio pipe's (`interceptors_chain/stdio_pipe.py`, same framing and words from
`interceptors/jsonlines.py`): a reply that carries our request's id but cannot be used fails the request at
once naming the server; lines that are not JSON-RPC are counted (the first few logged by size only), and
more than `JUNK_LIMIT` in a row mean the server is broken; a server that exits is "the connection closed"; a
server's `ping` is answered, its other requests get -32601. The server runs in its own process group with
the SDK's short list of inherited environment variables, and is stopped however we leave (stdin closed, then
SIGTERM, then SIGKILL to the whole group, `stop_grace_s` each).
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import IO, Any

import anyio
import anyio.abc

from interceptors.codec import dumps_exact, loads_exact
from interceptors.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, InterceptorRpcError, InterceptorsError
from interceptors.jsonlines import DEFAULT_MAX_LINE_BYTES, JunkLines, reply_problem, size_text, unreadable_problem
from interceptors.protocol.framing import LineSplitter, Oversized
from interceptors.protocol.messages import recover_id

logger = logging.getLogger("interceptors.remote")

PROTOCOL = "2026-07-28"
"""The one era this path speaks: its handshake is a single stateless `server/discover`."""
INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What the server inherits of our environment, as with the SDK's stdio transport (never secrets by accident)."""
JUNK_LIMIT = 16
"""More lines than this in a row that are not JSON-RPC: the server is broken (the connection closes)."""
_READ_BYTES = 1 << 20
_ENVELOPE_KEYS = ("resultType", "_meta")
CONNECTION_CLOSED = -32000
"""The code the SDK gives a request its transport gave up on (shown only in the message, which names the server)."""


class NotQuick(InterceptorsError):
    """The server is not one this path can ask (it is left to the SDK's path)."""


class QuickFailure(InterceptorRpcError):
    """The request failed: the server's own error answer, a `malformed` reply, or a `closed` connection. Every
    message this path writes names the server."""

    def __init__(self, code: int, message: str, data: Any = None, *, closed: bool = False, malformed: bool = False):
        super().__init__(code, message, data)
        self.closed = closed
        self.malformed = malformed

    def lines(self) -> list[str]:
        """What the CLI prints for it: the SDK path's words for the same failure."""
        if self.closed:
            return [f"error: {self.message}"]
        lines = [f"error {self.code}: {self.message}"]
        if self.data is not None:
            lines.append(json.dumps(self.data, indent=2))
        return lines


def _envelope() -> dict[str, Any]:
    try:
        from importlib.metadata import version

        ours = version("mcp-interceptors")
    except Exception:  # not installed (a source checkout on PYTHONPATH)
        ours = "0"
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-interceptors", "version": ours},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


class QuickConnection:
    """One spawned server asked one request at a time: `request(method, params, timeout_s)` -> result. The
    server's output is read only while a request waits (one request at a time needs no reader task)."""

    def __init__(self, process: anyio.abc.Process, who: str, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._process = process
        self.who = who
        self.max_line_bytes = max_line_bytes
        self._framer = LineSplitter(max_line_bytes)
        self._meta = _envelope()
        self._next_id = 0
        self._pending: str | None = None
        self._answer: dict[str, Any] | None = None
        self._failure: QuickFailure | None = None
        self._closed = False
        self._junk_lines = JunkLines(who, logger, JUNK_LIMIT)

    async def handshake(self) -> None:
        """`server/discover`: a 2026 server lists the era; any other answer is `NotQuick`."""
        try:
            found = await self._ask("server/discover", {}, None)
        except QuickFailure as failure:
            if failure.closed or failure.malformed:  # the SDK's path would fail the same way
                raise
            raise NotQuick(failure.message) from None
        versions = found.get("supportedVersions")
        if not isinstance(versions, list) or PROTOCOL not in versions:
            raise NotQuick(f"{self.who} does not list {PROTOCOL}")

    async def request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
        """The result of one request, without the transport envelope; a failure is a `QuickFailure`."""
        result = await self._ask(method, params, timeout_s)
        if any(key in result for key in _ENVELOPE_KEYS):
            return {key: value for key, value in result.items() if key not in _ENVELOPE_KEYS}
        return result

    async def _ask(self, method: str, params: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
        if self._closed:
            raise self._connection_closed()
        self._next_id += 1
        request_id = self._pending = f"q{self._next_id}"
        self._answer = self._failure = None
        meta = {**(params.get("_meta") or {}), **self._meta}
        await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}})
        try:
            with anyio.fail_after(timeout_s):
                await self._read_until_answered()
        except BaseException as exc:  # a timeout or a cancellation: the server may stop working on it
            reason = "timed out" if isinstance(exc, TimeoutError) else "caller cancelled"
            with anyio.CancelScope(shield=True), anyio.move_on_after(0.1):
                cancel = {"requestId": request_id, "reason": reason}
                await self._send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
            raise
        finally:
            self._pending = None
        if self._failure is not None:
            raise self._failure
        answer = self._answer
        if answer is None:
            raise self._connection_closed()
        if "error" in answer:
            error = answer["error"]
            raise QuickFailure(error["code"], error["message"], error.get("data"))
        result: dict[str, Any] = answer["result"]
        return result

    def _connection_closed(self) -> QuickFailure:
        return QuickFailure(CONNECTION_CLOSED, f"{self.who}: the connection closed", closed=True)

    async def _send(self, message: dict[str, Any]) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            await stdin.send(dumps_exact(message) + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            self._closed = True

    # The server's output ---------------------------------------------------------------------------------
    async def _read_until_answered(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        limit = size_text(self.max_line_bytes)
        while self._answer is None and self._failure is None and not self._closed:
            try:
                chunk = await stdout.receive(_READ_BYTES)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                self._closed = True  # a last line without its newline was torn by the exit: no reply
                return
            for line in self._framer.feed(chunk):
                if isinstance(line, Oversized):
                    logger.warning("%s wrote a line over the %s line limit; it was discarded", self.who, limit)
                    self._broken(recover_id(line.head), f"it is larger than the {limit} line limit")
                else:  # the framing skips blank lines
                    await self._line(line)

    async def _line(self, line: bytes) -> None:
        try:
            message = loads_exact(line)
        except ValueError:
            self._broken(recover_id(line), unreadable_problem(line))
            return
        if not isinstance(message, dict):
            self._junk()
            return
        method, request_id = message.get("method"), message.get("id")
        if isinstance(method, str):  # the server's own request or notification
            self._junk_lines.good()
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                if method == "ping":
                    await self._send({"jsonrpc": "2.0", "id": request_id, "result": {}})
                else:
                    error = {"code": METHOD_NOT_FOUND, "message": "Method not found"}
                    await self._send({"jsonrpc": "2.0", "id": request_id, "error": error})
            return
        if "method" not in message and isinstance(request_id, str) and request_id == self._pending:
            problem = reply_problem(message)
            if problem is not None:
                self._broken(request_id, problem)
                return
            self._junk_lines.good()
            self._answer = message
            return
        if message.get("jsonrpc") == "2.0" and reply_problem(message) is None:
            self._junk_lines.good()  # a reply to a request given up on: late, not broken
            return
        self._junk()

    def _broken(self, request_id: Any, problem: str) -> None:
        """A reply that cannot be used: it fails our pending request when it carries its id, else it is junk."""
        if not isinstance(request_id, str) or request_id != self._pending:
            self._junk()
            return
        self._junk_lines.good()
        failure = QuickFailure(INTERNAL_ERROR, f"{self.who} sent a malformed reply: {problem}", malformed=True)
        logger.warning("%s", failure.message)
        self._failure = failure

    def _junk(self) -> None:
        if self._junk_lines.add():
            self._closed = True


@asynccontextmanager
async def quick_connection(
    argv: list[str], who: str, errlog: IO[str], *, stop_grace_s: float
) -> AsyncIterator[QuickConnection]:
    """Spawn `argv`, ask `server/discover` and yield the connection; `NotQuick` (raised before the yield, the
    process already stopped) when the server is not of the 2026 era. A program that cannot be started is an
    OSError naming it."""
    env = {key: value for key in INHERITED_ENV if (value := os.environ.get(key)) is not None}
    env = {key: value for key, value in env.items() if not value.startswith("()")}  # no shell functions
    process = await anyio.open_process(argv, env=env, stderr=errlog, start_new_session=True)
    try:
        connection = QuickConnection(process, who)
        await connection.handshake()
        yield connection
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process, stop_grace_s)


async def _stop(process: anyio.abc.Process, grace_s: float) -> None:
    """Close stdin and wait (reading what the server still writes, so a server blocked writing can exit); then
    SIGTERM and, still alive, SIGKILL to the whole group (nothing the server started outlives it)."""
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    for signum in (None, signal.SIGTERM, signal.SIGKILL):
        if signum is not None:
            with suppress(OSError):
                os.killpg(process.pid, signum)
        with anyio.move_on_after(grace_s):
            while process.returncode is None:
                await _drain(process, 0.005)
        if process.returncode is not None:
            break
    else:
        logger.warning("server process %d survived the kill; abandoning it", process.pid)
    with suppress(OSError):  # the leader is gone; anything it left in its group goes too
        os.killpg(process.pid, signal.SIGTERM)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdout is not None:
            await process.stdout.aclose()


async def _drain(process: anyio.abc.Process, wait_s: float) -> None:
    """Discard what the server writes for up to `wait_s` (or just wait, once its output has ended)."""
    with anyio.move_on_after(wait_s):
        try:
            assert process.stdout is not None
            while await process.stdout.receive(_READ_BYTES):
                pass
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await anyio.sleep(wait_s)
