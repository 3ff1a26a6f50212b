"""Express lanes: requests answered straight from the stdio line reader, off the SDK's dispatch.

Why: for a small request the SDK's dispatch (a request model, a task, a runner and a connection per
request, the result sieve) costs about three times the work of an interceptor invoke, and a remote
interceptor server answers little else. A lane takes, for its route (`InvokeRoute`: `interceptor/invoke`
on a `serve_stdio` server), only what the SDK would answer the same way:

- no middleware would be skipped (none, or only the SDK's tracing with no tracer configured), and no
  cache hint applies to the method;
- a spec method's params valid at the request's version as the SDK's runner checks them (the 2026
  envelope's clientInfo and clientCapabilities included), so the SDK names what is wrong with the rest;
- on a 2026-era connection (its first request carries the envelope; the SDK decides the era from that
  request, and the lane leaves the opening request to it): requests with a complete envelope at a
  version the SDK serves, `_meta` as the SDK's model accepts it;
- on a 2025-era connection: requests after a valid `initialize` and `notifications/initialized`,
  without the 2026 envelope, served at the version the SDK negotiated; a second `initialize` turns
  the lane off for the connection.

Everything else goes to the SDK unchanged. Replies have the SDK's shape: on 2026-era connections
`resultType` and the `serverInfo` stamp merged into `_meta`; errors as the route raised them. A
`notifications/cancelled` for a lane request cancels it unanswered; at shutdown (`aclose`) unanswered
requests get CONNECTION_CLOSED, as the SDK does for its own. `MCP_INTERCEPTORS_EXPRESS=off` turns
every lane off.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, cast

import anyio
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CONNECTION_CLOSED,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    InitializeRequestParams,
    RequestParams,
)
from mcp_types import methods as spec_methods
from pydantic import ValidationError

from interceptors import INTERNAL_ERROR, INVOKE_METHOD, InterceptorRpcError
from interceptors.codec import dumps_exact
from interceptors.protocol.messages import error_line
from interceptors_chain import tracing as _tracing
from interceptors_chain._sdk import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE, MODERN_VERSIONS, otel_middleware_type

from .host import InterceptorHost
from .install import LegacyExtensions, host_of

logger = logging.getLogger("interceptors.host")

WriteBytes = Callable[[bytes], Awaitable[None]]
PutBytes = Callable[[bytes], None]
"""Queues a reply for the writer without waiting: the lane answers inline requests from `take`, a plain function."""
_SHUTDOWN_S = 2.0


class ExpressRoute(Protocol):
    """What a lane takes, and how it answers: a result dict, or an error raised as MCPError or
    InterceptorRpcError. `params` are the request's, `_meta` included; `version` is the request's era."""

    def accepts(self, method: str, params: dict[str, Any], version: str) -> bool: ...

    async def answer(self, method: str, params: dict[str, Any], version: str) -> dict[str, Any]: ...

    def answer_now(self, method: str, params: dict[str, Any], version: str) -> dict[str, Any] | None:
        """`answer` on the caller's stack, or None (having run nothing) when it must be awaited."""
        ...


class InvokeRoute:
    """`interceptor/invoke`, answered by the host as the SDK-registered handler would."""

    def __init__(self, host: InterceptorHost) -> None:
        self._host = host

    def accepts(self, method: str, params: dict[str, Any], version: str) -> bool:
        return method == INVOKE_METHOD

    async def answer(self, method: str, params: dict[str, Any], version: str) -> dict[str, Any]:
        # The SDK hands the host its params without `_meta` (a declared field of its params model).
        bare = {key: value for key, value in params.items() if key != "_meta"}
        if _tracing.TRACER is not None:  # the host's span under the caller's (its `_meta.traceparent`)
            meta = params.get("_meta")
            traceparent = meta.get("traceparent") if isinstance(meta, dict) else None
            return await _tracing.serve_invoke(self._host.invoke, bare, traceparent)
        return await self._host.invoke(bare)

    def answer_now(self, method: str, params: dict[str, Any], version: str) -> dict[str, Any] | None:
        # An inline handler, untraced: answered as the lane reads it (no task, no scheduled write).
        if _tracing.TRACER is not None:
            return None
        return self._host.invoke_now({key: value for key, value in params.items() if key != "_meta"})


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
    otel_middleware = otel_middleware_type()  # the SDK's private module: if it moves, the lanes stay off
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
    return ExpressLane(InvokeRoute(host), server.server_info_stamp, write, put)


class ExpressLane:
    """Takes eligible messages off the reader and answers them: inline handlers at once, from `take` (their
    replies handed to `put`, which the reader flushes together with the others of its read), the rest in tasks
    of its own.

    Plain asyncio tasks, not an anyio task group: the lane only runs on the asyncio pipe transport, and
    a task group's bookkeeping would cost more than the host's work for a small invoke.
    """

    def __init__(
        self, route: ExpressRoute, server_info: dict[str, Any], write: WriteBytes, put: PutBytes | None = None
    ) -> None:
        self._route = route
        self._server_info = server_info
        self._write = write
        self._put = put
        self._era: str | None = None  # "modern" or "legacy" once the opening request is seen; "closed": off
        self._negotiated: str | None = None  # 2025 era: the version `initialize` settled on
        self._initialized = False  # 2025 era: the client has sent `notifications/initialized`
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

    def take(self, message: Mapping[str, Any], movable: bool = True) -> bool:
        """True when the lane handles `message` (a well-formed JSON-RPC message); the SDK must not see it.

        Every message comes here, so the lane follows the era as the SDK does; `movable=False` (the line
        may hold numbers the lane cannot carry exactly) leaves a request to the SDK all the same.
        """
        method = message.get("method")
        if message.get("id") is not None:  # a request (the SDK reads `"id": null` as a notification)
            if method is None:
                return False
            params = message.get("params")
            opening = self._era is None
            if opening:  # the opening request is the SDK's (it decides the era there too); note the era
                modern = method != "initialize" and isinstance(params, dict) and _has_version_key(params)
                self._era = "modern" if modern else "legacy"
            if method == "initialize":
                self._handshake(params)
            if opening or method == "initialize":
                return False
            version = self._version_for(params)
            if version is None or not self._open or not isinstance(params, dict):
                return False  # (the SDK names what is wrong with a request the lane cannot take)
            request_id = message["id"]
            if not movable or request_id in self._in_flight or not self._route.accepts(method, params, version):
                return False  # (a duplicate id in flight: the SDK judges it)
            if not _valid_spec_request(method, params, version):
                return False
            if self._put is not None:
                reply = self._reply_now(request_id, method, params, version)
                if reply is not None:
                    self._put(reply)
                    return True
            answer = self._answer(request_id, method, params, version)
            self._in_flight[request_id] = asyncio.get_running_loop().create_task(answer)
            return True
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

    def _handshake(self, params: Any) -> None:
        """A 2025-era `initialize`: the version the SDK negotiates, or the lane stays off for good."""
        if self._era != "legacy" or self._negotiated is not None:
            self._era = "closed"  # initialize on a 2026 connection, or a second one: the SDK's alone
            return
        try:
            requested = InitializeRequestParams.model_validate(params or {}, by_name=False).protocol_version
        except ValidationError:
            self._era = "closed"
            return
        self._negotiated = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE

    def _version_for(self, params: Any) -> str | None:
        """The protocol version a request is served at, if the lane may take it; None leaves it to the SDK."""
        if not isinstance(params, dict):
            return None
        meta = params.get("_meta")
        if self._era == "modern":
            return cast(str, params["_meta"][PROTOCOL_VERSION_META_KEY]) if self._acceptable_envelope(meta) else None
        if self._era == "legacy" and self._initialized and not _has_version_key(params):
            return self._negotiated if meta is None or self._acceptable_meta(meta) else None
        return None

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

    def _acceptable_envelope(self, meta: Any) -> bool:
        """A complete envelope at a served version that the SDK's own `_meta` model accepts."""
        return (
            isinstance(meta, dict)
            and CLIENT_CAPABILITIES_META_KEY in meta
            and isinstance(version := meta.get(PROTOCOL_VERSION_META_KEY), str)
            and version in MODERN_VERSIONS
            and self._acceptable_meta(meta)
        )

    async def _answer(self, request_id: int | str, method: str, params: dict[str, Any], version: str) -> None:
        try:
            reply = await self._reply(request_id, method, params, version)
        except asyncio.CancelledError:
            if request_id not in self._cancelled_by_peer:  # shutdown: the peer is told, never left waiting
                await self._write(error_line(request_id, CONNECTION_CLOSED, "Connection closed", None))
            raise
        finally:
            self._in_flight.pop(request_id, None)
            self._cancelled_by_peer.discard(request_id)
        await self._write(reply)

    def _reply_now(self, request_id: int | str, method: str, params: dict[str, Any], version: str) -> bytes | None:
        """The reply line of a request the route answers on this stack, or None: it must be awaited."""
        try:
            result = self._route.answer_now(method, params, version)
        except Exception as exc:
            return _failure(request_id, exc)
        return None if result is None else self._success(request_id, result)

    async def _reply(self, request_id: int | str, method: str, params: dict[str, Any], version: str) -> bytes:
        try:
            result = await self._route.answer(method, params, version)
        except Exception as exc:
            return _failure(request_id, exc)
        return self._success(request_id, result)

    def _success(self, request_id: int | str, result: dict[str, Any]) -> bytes:
        if self._era != "modern":
            return dumps_exact({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n"
        # As the SDK shapes a 2026-era result: resultType required, the serverInfo stamp merged into `_meta`.
        if result.get("resultType") is None:
            result["resultType"] = "complete"
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self._server_info}
        return dumps_exact({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n"


def _failure(request_id: int | str, exc: Exception) -> bytes:
    """The error line for what a route raised: its own code and data, or a bare INTERNAL_ERROR."""
    if isinstance(exc, InterceptorRpcError):
        return error_line(request_id, exc.code, exc.message, exc.data)
    if isinstance(exc, MCPError):
        return error_line(request_id, exc.error.code, exc.error.message, exc.error.data)
    # never raw exception text on the wire (it may quote the payload)
    logger.error("express lane error: %s", type(exc).__name__)
    return error_line(request_id, INTERNAL_ERROR, "interceptor host error", {"reason": type(exc).__name__})


def _valid_spec_request(method: str, params: dict[str, Any], version: str) -> bool:
    """A spec method's whole body valid at `version`, as the SDK's runner checks it before any handler.

    The route may forward params as they are, and the 2026 envelope never reaches an upstream: without
    this the lane would answer requests the SDK refuses as INVALID_PARAMS (e.g. a malformed clientInfo).
    """
    if method not in spec_methods.SPEC_CLIENT_METHODS:
        return True
    try:
        spec_methods.validate_client_request(method, version, params)
    except (ValidationError, KeyError, ValueError):  # KeyError, ValueError: not at this version; the SDK says so
        return False
    return True


def _has_version_key(params: dict[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
