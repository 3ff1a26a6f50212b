"""Tools the gateway itself offers next to the upstream's (the vault's `reveal_token`).

A local tool is listed with the upstream's tools — inside the chain, so the policy hides it from
principals who may not use it — but its calls are answered by the gateway, outside the chain: the
policy decides them explicitly (and audits them), and no transform or vault stage touches the answer,
which would defeat the tool's purpose.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from interceptors import INVALID_PARAMS, InvocationContext, Principal

Authorize = Callable[[Principal | None, Mapping[str, Any]], None]
"""Raise MCPError to refuse a local tool call (the policy's decision); return to allow it."""


@dataclass(frozen=True)
class LocalTool:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], Principal | None], Mapping[str, Any]]
    meta: Mapping[str, Any] | None = None
    read_only: bool = True

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
            "annotations": {"readOnlyHint": self.read_only, "openWorldHint": False},
        }
        if self.meta:
            out["_meta"] = dict(self.meta)
        return out


def with_local_tools(result: dict[str, Any], tools: Mapping[str, LocalTool], first_page: bool) -> dict[str, Any]:
    """The upstream's tools/list result with our tools added once (on the first page)."""
    if not tools or not first_page:
        return result
    listed = [
        tool for tool in result.get("tools") or [] if not (isinstance(tool, Mapping) and tool.get("name") in tools)
    ]
    return {**result, "tools": [*listed, *(tool.descriptor() for tool in tools.values())]}


class LocalToolCalls:
    """Outermost middleware: answers calls to local tools after the policy allowed them."""

    def __init__(
        self,
        tools: Mapping[str, LocalTool],
        context: Callable[[ServerRequestContext[Any, Any]], InvocationContext | None],
        authorize: Authorize | None,
    ) -> None:
        self.tools = tools
        self.context = context
        self.authorize = authorize

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        params = ctx.params or {}
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return await call_next(ctx)
        context = self.context(ctx)
        principal = None if context is None else context.principal
        if self.authorize is not None:
            self.authorize(principal, params)  # raises the policy's exact error when refused
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise MCPError(INVALID_PARAMS, "arguments must be an object")
        try:
            answer = tool.run(arguments, principal)
        except ValueError as exc:  # the tool's own argument errors never quote the argument
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": json.dumps(answer)}],
            "structuredContent": dict(answer),
        }
        if ctx.protocol_version >= "2026-07-28":
            result["resultType"] = "complete"
        return result
