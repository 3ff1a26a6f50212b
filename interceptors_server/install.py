"""Bind an InterceptorHost onto an `mcp` 2.x server: the two methods and the capability, in both eras."""

from __future__ import annotations

import logging
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

from interceptors import CAPABILITY, INTERNAL_ERROR, INVOKE_METHOD, LIST_METHOD, InterceptorRpcError, Registry
from interceptors_chain import _sdk
from interceptors_chain import tracing as _tracing

from .host import InterceptorHost, log_traceback

_HOST_ATTRIBUTE = "_mcp_interceptors_host"
logger = logging.getLogger("interceptors.host")


class OpenParams(types.RequestParams):
    """Accept any params: the host validates them itself so errors can name the bad field."""

    model_config = ConfigDict(extra="allow")


def _params_dict(params: OpenParams) -> dict[str, Any]:
    return params.model_extra or {}


def _traceparent(params: OpenParams) -> str | None:
    """The caller's W3C traceparent (`_meta`, a declared field the SDK keeps out of the params)."""
    meta = getattr(params, "meta", None)
    value = meta.get("traceparent") if isinstance(meta, dict) else getattr(meta, "traceparent", None)
    return value if isinstance(value, str) else None


def internal_error(exc: Exception) -> MCPError:
    """-32603 for a host bug: the exception's type in `data`, never its text (it may quote the payload)."""
    logger.error("interceptor host error: %s", type(exc).__name__)
    log_traceback(logger, exc)
    return MCPError(code=INTERNAL_ERROR, message="interceptor host error", data={"reason": type(exc).__name__})


def lowlevel_server(server: Server[Any] | MCPServer) -> Server[Any]:
    """The low-level server under `server` (read where the SDK's private attributes are, `_sdk`)."""
    return _sdk.lowlevel_server(server)


def to_mcp_error(error: InterceptorRpcError) -> MCPError:
    return MCPError(code=error.code, message=error.message, data=error.data)


def install(
    server: Server[Any] | MCPServer,
    *registries: Registry,
    host: InterceptorHost | None = None,
) -> InterceptorHost:
    """Serve `interceptors/list` and `interceptor/invoke` on `server` next to its tools, resources, prompts.

    Installing twice on one server adds the registries to the host already there.
    """
    low = lowlevel_server(server)
    existing: InterceptorHost | None = getattr(low, _HOST_ATTRIBUTE, None)
    if existing is not None:
        for registry in registries:
            existing.add_registry(registry)
        return existing
    host = host or InterceptorHost()
    for registry in registries:
        host.add_registry(registry)

    async def on_list(ctx: ServerRequestContext[Any], params: OpenParams) -> dict[str, Any]:
        try:
            return host.list(_params_dict(params))
        except InterceptorRpcError as exc:
            raise to_mcp_error(exc) from None
        except Exception as exc:  # never a non-standard error code or raw exception text on the wire
            raise internal_error(exc) from None

    async def on_invoke(ctx: ServerRequestContext[Any], params: OpenParams) -> dict[str, Any]:
        try:
            if _tracing.TRACER is not None:  # the host's span under the caller's (its `_meta.traceparent`)
                return await _tracing.serve_invoke(host.invoke, _params_dict(params), _traceparent(params))
            return await host.invoke(_params_dict(params))
        except InterceptorRpcError as exc:
            raise to_mcp_error(exc) from None
        except Exception as exc:
            raise internal_error(exc) from None

    low.add_request_handler(LIST_METHOD, OpenParams, on_list)
    low.add_request_handler(INVOKE_METHOD, OpenParams, on_invoke)
    _advertise(low, host)
    setattr(low, _HOST_ATTRIBUTE, host)
    return host


def _advertise(low: Server[Any], host: InterceptorHost) -> None:
    """Advertise under `extensions` (2026 era, SEP-correct) and mirror under `experimental` (2025 era).

    The override wraps the instance's `get_capabilities`, which both `initialize` and `server/discover`
    consult, and computes the capability at call time so later registrations are seen.
    """
    original = low.get_capabilities

    def get_capabilities(
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capability = host.capability()
        experimental = {**(experimental_capabilities or {}), CAPABILITY: capability}
        merged_extensions = {
            **(extensions if extensions is not None else low.extensions),
            CAPABILITY: capability,
        }
        return original(notification_options, experimental, merged_extensions, protocol_version=protocol_version)

    low.get_capabilities = get_capabilities  # type: ignore[method-assign]
    low.middleware.append(LegacyExtensions(host))


class LegacyExtensions:
    """Also advertise the capability under `capabilities.extensions` in a 2025-era `initialize` result.

    SEP-2624 names `extensions`, and the working group's SDK reads only there in both eras; the SDK drops
    `extensions` from 2025-era results (its schema has none), so it is added back after the SDK shaped the
    result. Readers that look under `experimental` find it there too."""

    def __init__(self, host: InterceptorHost) -> None:
        self.host = host

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "initialize" or not isinstance(result, dict):
            return result
        capabilities = result.get("capabilities")
        if isinstance(capabilities, dict):
            extensions = capabilities.get("extensions")
            if not isinstance(extensions, dict) or CAPABILITY not in extensions:
                extensions = dict(extensions) if isinstance(extensions, dict) else {}
                extensions[CAPABILITY] = self.host.capability()
                result = {**result, "capabilities": {**capabilities, "extensions": extensions}}
        return result


def host_of(server: Server[Any] | MCPServer) -> InterceptorHost | None:
    """The host installed on `server`, if any."""
    found: InterceptorHost | None = getattr(lowlevel_server(server), _HOST_ATTRIBUTE, None)
    return found


def interceptor_server(
    *registries: Registry, name: str = "mcp-interceptors", version: str = "", tracing: bool = False
) -> Server[Any]:
    """A fresh low-level server that only hosts interceptors.

    The SDK's default OpenTelemetry middleware is left out unless `tracing` is set: it costs a span per
    invoke, and an interceptor server answers many small requests.
    """
    server: Server[Any] = Server(name, version=version)
    if not tracing:
        server.middleware.clear()
    install(server, *registries)
    return server
