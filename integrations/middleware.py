"""Server middleware for the `mcp` SDK: a server runs the chain around its own traffic.

An incoming request is received (validate, then mutate; payload `{method, params}`); the outgoing
result is sent (mutate, then validate; payload = the result object). initialize, ping, discovery,
notifications and the interceptor methods themselves are never intercepted.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import methods as spec_methods
from pydantic import BaseModel, ValidationError

from interceptors import (
    INTERNAL_ERROR,
    Direction,
    InterceptorRpcError,
    InvocationContext,
    Phase,
    is_context_operation,
)
from interceptors_chain import Chain, ExecutionResult, Plan, abort_to_error

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
        self._plans: dict[str, tuple[int, Plan, Plan]] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if ctx.request_id is None or not is_context_operation(method):
            return await call_next(ctx)
        chain = self.chain
        plans = self._plans.get(method)
        if plans is None or plans[0] != chain.generation:
            if len(self._plans) > 1024:  # method names come from clients: keep the cache bounded
                self._plans.clear()
            plans = self._plans[method] = (
                chain.generation,
                chain.plan(method, Phase.REQUEST, Direction.RECEIVING),
                chain.plan(method, Phase.RESPONSE, Direction.SENDING),
            )
        _, request_plan, response_plan = plans
        if request_plan.empty and response_plan.empty:
            return await call_next(ctx)
        context = self.context_provider(ctx)
        if not request_plan.empty:
            payload = {"method": method, "params": dict(ctx.params) if ctx.params is not None else None}
            outcome = await chain.execute(
                method, Phase.REQUEST, payload, direction=Direction.RECEIVING, context=context
            )
            if outcome.blocked:
                return self._blocked(method, outcome)
            if outcome.modified:
                ctx = dataclasses.replace(ctx, params=_mutated_params(method, outcome.final_payload))
        result = await call_next(ctx)
        if response_plan.empty:
            return result
        wire = _as_dict(result)
        outcome = await chain.execute(method, Phase.RESPONSE, wire, direction=Direction.SENDING, context=context)
        if outcome.blocked:
            return self._blocked(method, outcome)
        if not outcome.modified:
            return result
        checked: dict[str, Any] = _checked_result(method, ctx.protocol_version, outcome.final_payload)
        return checked

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


def _mutated_params(method: str, payload: Any) -> Mapping[str, Any] | None:
    """A request mutator may change params, never the method or the payload's shape."""
    if not isinstance(payload, Mapping) or payload.get("method") != method:
        raise _failure("a request mutator changed the method or the payload shape")
    params = payload.get("params")
    if params is not None and not isinstance(params, Mapping):
        raise _failure("a request mutator produced params that are not an object")
    return params


def _checked_result(method: str, version: str, payload: Any) -> dict[str, Any]:
    """Middleware results bypass the SDK's sieve, so a mutated spec result is validated here."""
    if not isinstance(payload, dict):
        raise _failure("a response mutator produced a result that is not an object")
    try:
        spec_methods.validate_server_result(method, version, payload)
    except (KeyError, ValueError) as exc:
        if isinstance(exc, ValidationError):
            raise _failure(f"a response mutator produced an invalid {method} result") from None
    return payload


def _failure(reason: str) -> MCPError:
    logger.warning("blocking: %s", reason)
    error = InterceptorRpcError(INTERNAL_ERROR, "interceptor chain failed", {"reason": reason})
    return MCPError(error.code, error.message, error.data)
