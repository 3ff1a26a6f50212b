"""Answer `interceptor/invoke` straight from the stdio line reader on a 2026-era connection.

Why: for a small invoke the SDK's dispatch (a request model, a task, a runner and a connection per
request, the result sieve) costs about three times the host's own work, and a remote interceptor
server answers little else. The lane only takes what the SDK would answer the same way:

- the server runs no middleware (nothing the SDK would run around the handler is skipped) and has
  no cache hint for the method;
- the connection's first request opened the 2026 era (the SDK decides the era from that request,
  and the lane leaves the opening request to it);
- the request carries a complete envelope at a version the SDK serves.

Everything else (other methods, legacy connections, bad envelopes) goes to the SDK unchanged. Replies
have the SDK's shape: `resultType: "complete"` and the `serverInfo` stamp on results, the host's
JSON-RPC errors as they are. A `notifications/cancelled` for a lane request cancels it unanswered;
at shutdown (`aclose`) unanswered requests get CONNECTION_CLOSED, as the SDK does for its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import anyio
import orjson
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CONNECTION_CLOSED,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    RequestParamsMeta,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from interceptors import INTERNAL_ERROR, INVOKE_METHOD, InterceptorRpcError

from .host import InterceptorHost
from .install import host_of

logger = logging.getLogger("interceptors.host")

WriteBytes = Callable[[bytes], Awaitable[None]]
_SHUTDOWN_S = 2.0
_ENVELOPE = TypeAdapter(RequestParamsMeta)  # what the SDK validates `_meta` against


class ExpressRoute(Protocol):
    """What a lane takes, and how it answers: a result dict, or an error raised as MCPError or
    InterceptorRpcError. `params` are the request's, `_meta` included; `version` is the request's era."""

    def accepts(self, method: str, params: dict[str, Any]) -> bool: ...

    async def answer(self, method: str, params: dict[str, Any], version: str) -> dict[str, Any]: ...


class InvokeRoute:
    """`interceptor/invoke`, answered by the host as the SDK-registered handler would."""

    def __init__(self, host: InterceptorHost) -> None:
        self._host = host

    def accepts(self, method: str, params: dict[str, Any]) -> bool:
        return method == INVOKE_METHOD

    async def answer(self, method: str, params: dict[str, Any], version: str) -> dict[str, Any]:
        # The SDK hands the host its params without `_meta` (a declared field of its params model).
        return await self._host.invoke({key: value for key, value in params.items() if key != "_meta"})


def express_enabled() -> bool:
    """Lanes are on unless `MCP_INTERCEPTORS_EXPRESS=off` (every request then takes the SDK path)."""
    return os.environ.get("MCP_INTERCEPTORS_EXPRESS", "").strip().lower() not in ("off", "0", "false", "no")


def idle_middleware(middleware: object) -> bool:
    """Middleware a lane may skip because it would do nothing: the SDK's tracing, with no tracer configured.

    Checked when the lane is built: a tracer provider installed later is not seen by the lanes.
    """
    from mcp.server._otel import OpenTelemetryMiddleware
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    return isinstance(middleware, OpenTelemetryMiddleware) and isinstance(
        provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


def express_lane_for(server: Server[Any], write: WriteBytes) -> ExpressLane | None:
    """The invoke lane for `server`, or None when taking requests off the SDK would skip something."""
    host = host_of(server)
    if not express_enabled() or host is None or INVOKE_METHOD in server.cache_hints:
        return None
    if not all(idle_middleware(middleware) for middleware in server.middleware):
        return None
    return ExpressLane(InvokeRoute(host), server.server_info_stamp, write)


class ExpressLane:
    """Takes eligible messages off the reader and answers them in tasks of its own.

    Plain asyncio tasks, not an anyio task group: the lane only runs on the asyncio pipe transport, and
    a task group's bookkeeping would cost more than the host's work for a small invoke.
    """

    def __init__(self, route: ExpressRoute, server_info: dict[str, Any], write: WriteBytes) -> None:
        self._route = route
        self._server_info = server_info
        self._write = write
        self._era: str | None = None  # "modern" or "legacy", once the opening request is seen
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

    def take(self, message: Mapping[str, Any]) -> bool:
        """True when the lane handles `message` (a well-formed JSON-RPC message); the SDK must not see it."""
        method = message.get("method")
        if "id" in message:  # a request (responses have no method and never get here with one)
            if method is None:
                return False
            params = message.get("params")
            if self._era is None:  # the opening request is the SDK's; note the era it opens
                modern = method != "initialize" and isinstance(params, dict) and _has_version_key(params)
                self._era = "modern" if modern else "legacy"
                return False
            if self._era != "modern" or not self._open or not isinstance(params, dict):
                return False
            if not self._acceptable_envelope(params.get("_meta")):
                return False  # the SDK names what is wrong
            request_id = message["id"]
            if request_id in self._in_flight or not self._route.accepts(method, params):
                return False  # (a duplicate id in flight: the SDK judges it)
            answer = self._answer(request_id, method, params)
            self._in_flight[request_id] = asyncio.get_running_loop().create_task(answer)
            return True
        if method == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            task = self._in_flight.get(request_id) if isinstance(request_id, int | str) else None
            if task is not None:
                self._cancelled_by_peer.add(request_id)  # type: ignore[arg-type]
                task.cancel()
                return True
        return False

    def _acceptable_envelope(self, meta: Any) -> bool:
        """A complete envelope at a served version that the SDK's own `_meta` model accepts."""
        if meta is not None and meta == self._accepted_meta:
            return True
        if not (
            isinstance(meta, dict)
            and CLIENT_CAPABILITIES_META_KEY in meta
            and isinstance(version := meta.get(PROTOCOL_VERSION_META_KEY), str)
            and version in MODERN_PROTOCOL_VERSIONS
        ):
            return False
        try:
            _ENVELOPE.validate_python(meta)
        except ValidationError:
            return False
        self._accepted_meta = meta
        return True

    async def _answer(self, request_id: int | str, method: str, params: dict[str, Any]) -> None:
        try:
            reply = await self._reply(request_id, method, params)
        except asyncio.CancelledError:
            if request_id not in self._cancelled_by_peer:  # shutdown: the peer is told, never left waiting
                await self._write(_error(request_id, CONNECTION_CLOSED, "Connection closed", None))
            raise
        finally:
            self._in_flight.pop(request_id, None)
            self._cancelled_by_peer.discard(request_id)
        await self._write(reply)

    async def _reply(self, request_id: int | str, method: str, params: dict[str, Any]) -> bytes:
        try:
            result = await self._route.answer(method, params, params["_meta"][PROTOCOL_VERSION_META_KEY])
        except InterceptorRpcError as exc:
            return _error(request_id, exc.code, exc.message, exc.data)
        except MCPError as exc:
            return _error(request_id, exc.error.code, exc.error.message, exc.error.data)
        except Exception as exc:  # never raw exception text on the wire (it may quote the payload)
            logger.error("express lane error: %s", type(exc).__name__)
            return _error(request_id, INTERNAL_ERROR, "interceptor host error", {"reason": type(exc).__name__})
        # As the SDK shapes a 2026-era result: resultType required, the serverInfo stamp merged into `_meta`.
        if result.get("resultType") is None:
            result["resultType"] = "complete"
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self._server_info}
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n"


def _has_version_key(params: dict[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def _error(request_id: int | str, code: int, message: str, data: Any) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}) + b"\n"
