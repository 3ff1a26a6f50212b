"""The express lane: `interceptor/invoke` answered straight from the stdio line reader, off the SDK's dispatch.

Why: for a small request the SDK's dispatch (a request model, a task, a runner and a connection per
request, the result sieve) costs about three times the work of an interceptor invoke, and a remote
interceptor server answers little else. The lane hands each invoke it takes to the host's one invoke core
(`InterceptorHost.start`, as the SDK-registered handler does), taking only what the SDK would answer the
same way:

- no middleware would be skipped (none, or only the SDK's tracing with no tracer configured), and no
  cache hint applies to `interceptor/invoke`;
- on a 2026-era connection (its first request carries the envelope; the SDK decides the era from that
  request, and the lane leaves the opening request to it): requests with a complete envelope at a
  version the SDK serves (`interceptors.protocol.eras`), `_meta` as the SDK's model accepts it;
- on a 2025-era connection: requests after a valid `initialize` and `notifications/initialized`,
  without the 2026 envelope, served at the version the SDK negotiated; a second `initialize` turns
  the lane off for the connection.

Everything else goes to the SDK unchanged. Replies have the SDK's shape: on 2026-era connections
`resultType` and the `serverInfo` stamp merged into `_meta`; errors as the host raised them. A
`notifications/cancelled` for a lane request cancels it unanswered; at shutdown (`aclose`) unanswered
requests get CONNECTION_CLOSED, as the SDK does for its own. `MCP_INTERCEPTORS_EXPRESS=off` turns
every lane off.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, cast

import anyio
import orjson
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, InitializeRequestParams, RequestParams
from pydantic import ValidationError

from interceptors import INTERNAL_ERROR, INVOKE_METHOD, InterceptorRpcError
from interceptors.codec import dumps_exact, may_round_numbers, written_size_bound
from interceptors.protocol.eras import MODERN_VERSIONS, Era, negotiate
from interceptors.protocol.messages import (
    CLIENT_CAPABILITIES_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    error_line,
)
from interceptors_chain import tracing as _tracing
from interceptors_chain._sdk import otel_middleware_type

from .host import InterceptorHost
from .install import LegacyExtensions, host_of

logger = logging.getLogger("interceptors.host")

WriteBytes = Callable[[bytes], Awaitable[None]]
PutBytes = Callable[[bytes], None]
"""Queues a reply for the writer without waiting: the lane answers inline requests from `take`, a plain function."""
_SHUTDOWN_S = 2.0
_MODERN = Era.MODERN  # (read once: an enum member read from its class costs a Python-level `__getattr__` on 3.11)
_Answer = Coroutine[Any, Any, dict[str, Any]]


def express_enabled() -> bool:
    """Lanes are on unless `MCP_INTERCEPTORS_EXPRESS=off` (every request then takes the SDK path)."""
    return os.environ.get("MCP_INTERCEPTORS_EXPRESS", "").strip().lower() not in ("off", "0", "false", "no")


def idle_middleware(middleware: object) -> bool:
    """Middleware a lane may skip because it would do nothing: the SDK's tracing, with no tracer configured, and
    our own `initialize` capability mirror (the lane hands every `initialize` to the SDK).

    Checked when the lane is built: a tracer provider installed later is not seen by the lanes.
    """
    if isinstance(middleware, LegacyExtensions):
        return True
    otel_middleware = otel_middleware_type()  # the SDK's private module, read in `_sdk`: if it moves, lanes stay off
    if otel_middleware is None:
        return False
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    provider = trace.get_tracer_provider()
    return isinstance(middleware, otel_middleware) and isinstance(
        provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


def express_lane_for(server: Server[Any], write: WriteBytes, put: PutBytes | None = None) -> ExpressLane | None:
    """The invoke lane for `server`, or None when taking requests off the SDK would skip something."""
    host = host_of(server)
    if not express_enabled() or host is None or INVOKE_METHOD in server.cache_hints:
        return None
    if not all(idle_middleware(middleware) for middleware in server.middleware):
        return None
    return ExpressLane(host, server.server_info_stamp, write, put)


class ExpressLane:
    """Takes `interceptor/invoke` requests off the reader and answers them through the host's one invoke core
    (`InterceptorHost.start`): inline handlers at once, from `take` (their replies handed to `put`, which the
    reader flushes together with the others of its read), the rest in tasks of its own.

    The era is the protocol core's (`interceptors.protocol.eras`): the lane only remembers which one the
    connection is in, as the SDK decides it. Plain asyncio tasks, not an anyio task group: the lane only runs on
    the asyncio pipe transport, and a task group's bookkeeping would cost more than the host's work for a small
    invoke.
    """

    def __init__(
        self, host: InterceptorHost, server_info: dict[str, Any], write: WriteBytes, put: PutBytes | None = None
    ) -> None:
        self._host = host
        self._server_info = server_info
        self._write = write
        self._put: PutBytes = self._write_soon if put is None else put
        self._era: Era | None = None  # once the opening request is seen
        self._off = False  # `initialize` on a 2026 connection, or a second or invalid one: the SDK's alone
        self._negotiated: str | None = None  # handshake era: the version `initialize` settled on
        self._initialized = False  # handshake era: the client has sent `notifications/initialized`
        self._in_flight: dict[int | str, asyncio.Task[None]] = {}
        self._cancelled_by_peer: set[int | str] = set()
        self._accepted_meta: dict[str, Any] | None = None  # clients send one envelope over and over
        self._open = True

    async def aclose(self) -> None:
        """Stop: requests still in flight are answered CONNECTION_CLOSED, as the SDK answers its own."""
        self._open = False
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        if tasks:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_SHUTDOWN_S):
                await asyncio.gather(*tasks, return_exceptions=True)

    def take(self, message: Mapping[str, Any], line: bytes | None = None) -> bool:
        """True when the lane handles `message` (a well-formed JSON-RPC message); the SDK must not see it.

        Every message comes here, so the lane follows the era as the SDK does. `line`: the message's own line,
        when the reader has it: if it may hold numbers the lane cannot carry exactly (`may_round_numbers`), a
        request is left to the SDK all the same (read only for a request the lane would otherwise take).
        """
        request_id = message.get("id")
        if request_id is None:  # a notification (the SDK reads `"id": null` as one)
            return self._notification(message)
        method = message.get("method")
        if method == INVOKE_METHOD and self._era is not None:
            params = message.get("params")
            if (
                type(params) is dict
                and self._open
                and request_id not in self._in_flight  # (a duplicate id in flight: the SDK judges it)
                and self._serves(params)
                and (line is None or not may_round_numbers(line))
            ):
                self._invoke(request_id, params, None if line is None else written_size_bound(line))
                return True
            return False  # (the SDK names what is wrong with a request the lane cannot take)
        if method is not None and (self._era is None or method == "initialize"):
            self._opening(method, message.get("params"))  # the opening request and `initialize` are the SDK's
        return False

    def _notification(self, message: Mapping[str, Any]) -> bool:
        method = message.get("method")
        if method == "notifications/initialized" and self._negotiated is not None:
            self._initialized = True
        if method == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            task = self._in_flight.get(request_id) if isinstance(request_id, int | str) else None
            if task is not None:
                self._cancelled_by_peer.add(request_id)  # type: ignore[arg-type]
                task.cancel()
                return True
        return False

    def _invoke(self, request_id: int | str, params: dict[str, Any], payload_bound: int | None) -> None:
        """Answer one invoke: at once when its handler runs inline, else in a task awaiting the host.
        `payload_bound`: what its line says of the payload's size (`InterceptorHost.start`)."""
        answer: dict[str, Any] | _Answer
        if _tracing.TRACER is None:
            try:  # the params are this line's: nobody else's
                answer = self._host.start(params, fresh=True, payload_bound=payload_bound)
            except Exception as exc:
                self._put(_failure(request_id, exc))
                return
            if type(answer) is dict:
                self._put(self._success(request_id, answer))
                return
        else:  # the host's span under the caller's (its `_meta.traceparent`)
            meta = params.get("_meta")
            traceparent = meta.get("traceparent") if isinstance(meta, dict) else None
            bare = {key: value for key, value in params.items() if key != "_meta"}
            answer = _tracing.serve_invoke(self._host.invoke, bare, traceparent)
        task = asyncio.get_running_loop().create_task(self._answer(request_id, cast(_Answer, answer)))
        self._in_flight[request_id] = task

    def _write_soon(self, line: bytes) -> None:
        """`put` for a lane built without one: the line is written from a task of its own."""
        asyncio.get_running_loop().create_task(self._write_later(line)).add_done_callback(_ignore)

    async def _write_later(self, line: bytes) -> None:
        await self._write(line)

    def _opening(self, method: str, params: Any) -> None:
        """Follow the era as the SDK decides it, from the opening request; a handshake-era `initialize` settles
        the version the SDK negotiates (`eras.negotiate`), or leaves the lane off for good."""
        if self._era is None:
            modern = method != "initialize" and isinstance(params, dict) and _has_version_key(params)
            self._era = Era.MODERN if modern else Era.HANDSHAKE
        if method != "initialize":
            return
        if self._era is not Era.HANDSHAKE or self._negotiated is not None:
            self._off = True
            return
        try:  # as the SDK reads it (once per connection): a malformed `initialize` is the SDK's to refuse
            requested = InitializeRequestParams.model_validate(params or {}, by_name=False).protocol_version
        except ValidationError:
            self._off = True
            return
        self._negotiated = negotiate(requested)

    def _serves(self, params: dict[str, Any]) -> bool:
        """Whether the lane may take a request at its version; False leaves it to the SDK."""
        if self._off:
            return False
        meta = params.get("_meta")
        if self._era is _MODERN:  # a complete envelope (the SDK's model judges its values) at a served version
            return (
                isinstance(meta, dict)
                and CLIENT_CAPABILITIES_META_KEY in meta
                and meta.get(PROTOCOL_VERSION_META_KEY) in MODERN_VERSIONS
                and self._acceptable_meta(meta)
            )
        if meta is None:
            return self._initialized
        if not self._initialized or (isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta):
            return False  # (the 2026 envelope on a handshake connection: the SDK's to judge)
        return self._acceptable_meta(meta)

    def _acceptable_meta(self, meta: Any) -> bool:
        """`_meta` as the SDK's own model accepts it (cached: clients send one envelope over and over)."""
        if meta == self._accepted_meta:
            return True
        try:  # as the SDK validates it: a params model field, wire aliases (`progressToken`) and all
            RequestParams.model_validate({"_meta": meta}, by_name=False)
        except ValidationError:
            return False
        self._accepted_meta = meta
        return True

    async def _answer(self, request_id: int | str, answer: _Answer) -> None:
        try:
            try:
                result = await answer
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                reply = _failure(request_id, exc)
            else:
                reply = self._success(request_id, result)
        except asyncio.CancelledError:
            answer.close()  # (cancelled before it started: never awaited)
            if request_id not in self._cancelled_by_peer:  # shutdown: the peer is told, never left waiting
                await self._write(error_line(request_id, CONNECTION_CLOSED, "Connection closed", None))
            raise
        finally:
            self._in_flight.pop(request_id, None)
            self._cancelled_by_peer.discard(request_id)
        await self._write(reply)

    def _success(self, request_id: int | str, result: dict[str, Any]) -> bytes:
        if self._era is not _MODERN:
            reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
            try:  # (`_line_of`, without a call: the common reply)
                return orjson.dumps(reply, option=orjson.OPT_APPEND_NEWLINE)
            except TypeError:
                return _line_of(reply)
        # As the SDK shapes a 2026-era result: resultType required, the serverInfo stamp merged into `_meta`.
        if result.get("resultType") is None:
            result["resultType"] = "complete"
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self._server_info}
        return _line_of({"jsonrpc": "2.0", "id": request_id, "result": result})


def _line_of(reply: dict[str, Any]) -> bytes:
    """A reply's line: `dumps_exact` (integers beyond 64 bits written exactly), its newline appended by orjson. A
    result no JSON writer takes (nested deeper than orjson writes, a payload passed back whole inside the reply's
    envelope) is answered with an error, never left to break the lane."""
    try:
        return orjson.dumps(reply, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        pass
    try:
        return dumps_exact(reply) + b"\n"
    except (TypeError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if "ecursion" in str(exc) else "not JSON"
        return error_line(
            reply.get("id"), INTERNAL_ERROR, "The interceptor's result cannot be written as JSON", {"reason": reason}
        )


def _ignore(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


def _failure(request_id: int | str, exc: Exception) -> bytes:
    """The error line for what the host raised: its own code and data, or a bare INTERNAL_ERROR."""
    if isinstance(exc, InterceptorRpcError):
        return error_line(request_id, exc.code, exc.message, exc.data)
    if isinstance(exc, MCPError):
        return error_line(request_id, exc.error.code, exc.error.message, exc.error.data)
    # never raw exception text on the wire (it may quote the payload)
    logger.error("express lane error: %s", type(exc).__name__)
    return error_line(request_id, INTERNAL_ERROR, "interceptor host error", {"reason": type(exc).__name__})


def _has_version_key(params: dict[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
