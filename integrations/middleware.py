"""Server middleware for the `mcp` SDK: a server runs the chain around its own traffic.

An incoming request is received (validate, then mutate; payload `{method, params}`); the outgoing
result is sent (mutate, then validate; payload = the result object). What a message is (which event its
chain runs under, its payload there and back, the spec check of a changed result) is decided by the
gateway's classification (`integrations/gateway/router/channels.py`, `spec_check.py`), so a server's own
middleware and the gateway in front of it cannot disagree: ping, notifications and the interceptor
methods are never intercepted, and the `initialize` / `server/discover` result (instructions, server info)
runs its response chain under `gateway/initialize` (`interceptors.SERVER_INFO_EVENT`), as in the gateway.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from interceptors import (
    INTERNAL_ERROR,
    Direction,
    InterceptorRpcError,
    InvocationContext,
    Phase,
)
from interceptors_chain import Chain, ExecutionResult, abort_to_error

from .gateway.router.channels import (
    MalformedPayload,
    params_from_request_payload,
    request_event,
    request_payload,
    response_event,
)
from .gateway.spec_check import SpecCheck

logger = logging.getLogger("interceptors.middleware")

ContextProvider = Callable[[ServerRequestContext[Any, Any]], InvocationContext | None]


def default_context(ctx: ServerRequestContext[Any, Any]) -> InvocationContext:
    """A fresh trace id per request (128 random bits as 32 hex digits, a sixth of `uuid4().hex`'s cost);
    no principal (transport-derived principals come from a provider)."""
    return InvocationContext(trace_id=os.urandom(16).hex())


class InterceptorMiddleware:
    """Append to `Server.middleware` (or pass to `MCPServer(middleware=[...])`)."""

    def __init__(
        self,
        chain: Chain,
        *,
        context_provider: ContextProvider = default_context,
        tool_errors_as_results: bool = False,
        expose_messages: bool = False,
    ) -> None:
        self.chain = chain
        self.context_provider = context_provider
        self.tool_errors_as_results = tool_errors_as_results
        self.expose_messages = expose_messages
        self._events: dict[str, tuple[int, str | None, str | None]] = {}
        self._spec_check = SpecCheck()

    def _events_for(self, method: str) -> tuple[str | None, str | None]:
        """The events a method's request and response chains run under (None: none runs, or its plan is
        empty), cached per chain generation."""
        chain = self.chain
        cached = self._events.get(method)
        if cached is None or cached[0] != chain.generation:
            if len(self._events) > 1024:  # method names come from clients: keep the cache bounded
                self._events.clear()
            request, response = request_event(method), response_event(method)
            if request is not None and chain.plan(request, Phase.REQUEST, Direction.RECEIVING).empty:
                request = None
            if response is not None and chain.plan(response, Phase.RESPONSE, Direction.SENDING).empty:
                response = None
            cached = self._events[method] = (chain.generation, request, response)
        return cached[1], cached[2]

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if ctx.request_id is None:
            return await call_next(ctx)
        on_request, on_response = self._events_for(method)
        if on_request is None and on_response is None:
            return await call_next(ctx)
        chain = self.chain
        context = self.context_provider(ctx)
        if on_request is not None:
            payload = request_payload(method, dict(ctx.params) if ctx.params is not None else None)
            outcome = await chain.execute(
                on_request, Phase.REQUEST, payload, direction=Direction.RECEIVING, context=context
            )
            if outcome.blocked:
                return self._blocked(method, outcome)
            if outcome.modified:
                try:
                    params = params_from_request_payload(method, outcome.final_payload)
                except MalformedPayload as exc:
                    raise _failure(str(exc)) from None
                ctx = dataclasses.replace(ctx, params=params)
        result = await call_next(ctx)
        if on_response is None:
            return result
        wire = _as_dict(result)
        outcome = await chain.execute(on_response, Phase.RESPONSE, wire, direction=Direction.SENDING, context=context)
        if outcome.blocked:
            return self._blocked(method, outcome)
        if not outcome.modified:
            return result
        return self._checked_result(method, ctx.protocol_version, outcome.final_payload)

    def _checked_result(self, method: str, version: str | None, payload: Any) -> dict[str, Any]:
        """Middleware results bypass the SDK's sieve, so a changed result gets the gateway's spec check."""
        if not isinstance(payload, dict):
            raise _failure("a response mutator produced a result that is not an object")
        problem = self._spec_check(method, payload, version)
        if problem is not None:
            raise _failure(f"a response mutator produced an invalid {method} result")
        return payload

    def _blocked(self, method: str, outcome: ExecutionResult) -> HandlerResult:
        substitute = outcome.aborted_at[0].substitute
        if substitute is not None:
            return dict(substitute)
        error = abort_to_error(outcome, expose_messages=self.expose_messages)
        if self.tool_errors_as_results and method == "tools/call" and outcome.aborted_at[0].requester_error:
            # An interceptor chose this error on purpose (e.g. "Unknown tool" to hide a tool): keep it one.
            raise MCPError(error.code, error.message, error.data)
        if self.tool_errors_as_results and method == "tools/call":
            return types.CallToolResult(content=[types.TextContent(type="text", text=error.message)], is_error=True)
        raise MCPError(error.code, error.message, error.data)


def _as_dict(result: HandlerResult) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return result


def _failure(reason: str) -> MCPError:
    logger.warning("blocking: %s", reason)
    error = InterceptorRpcError(INTERNAL_ERROR, "interceptor chain failed", {"reason": reason})
    return MCPError(error.code, error.message, error.data)
