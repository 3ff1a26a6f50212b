"""What the router gateway answers itself (`AnswerLocally`): the exposed interceptor methods and the
gateway-local tools (the vault's `reveal_token`).

`--expose-interceptors` serves `interceptors/list` and `interceptor/invoke` of the in-process registries
(an `InterceptorHost`), advertised under `experimental` and `extensions`. A local tool is listed with the
upstream's tools (the router adds it to the first page before the response chain, so the policy hides it
from principals who may not use it); its calls come here outside the chain: the policy decides them
explicitly (`authorize`, audited), and no transform touches the answer, which would defeat its purpose.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from mcp.shared.exceptions import MCPError

from interceptors import (
    CAPABILITY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVOKE_METHOD,
    LIST_METHOD,
    InterceptorRpcError,
    InvocationContext,
    Principal,
    Registry,
)
from interceptors.errors import error_object as _error

from .router import AnswerLocally

logger = logging.getLogger("interceptors.gateway")

Answer = tuple[dict[str, Any] | None, dict[str, Any] | None]
"""(result, error): exactly one is set."""
Authorize = Callable[[Principal | None, Mapping[str, Any]], None]
"""Raise MCPError to refuse a local tool call (the policy's decision); return to allow it."""


@dataclass(frozen=True)
class LocalTool:
    """A tool of the gateway's own: `run(arguments, principal)` returns its structured answer."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], Principal | None], Mapping[str, Any]]
    meta: Mapping[str, Any] | None = None
    read_only: bool = True

    def descriptor(self) -> dict[str, Any]:
        """Its `tools/list` entry."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
            "annotations": {"readOnlyHint": self.read_only, "openWorldHint": False},
        }
        if self.meta:
            out["_meta"] = dict(self.meta)
        return out


class LocalAnswers:
    """`methods` and `tool_descriptors` for `RouterConfig`; `await answer(action, context)` for each AnswerLocally."""

    def __init__(
        self,
        exposed: Sequence[Registry] | None = None,
        tools: Sequence[LocalTool] = (),
        authorize: Authorize | None = None,
    ) -> None:
        self.host = None
        if exposed is not None:
            from interceptors_server.host import InterceptorHost

            self.host = InterceptorHost(*exposed)
        self.tools = {tool.name: tool for tool in tools}
        self.authorize = authorize

    @property
    def methods(self) -> frozenset[str]:
        return frozenset({LIST_METHOD, INVOKE_METHOD}) if self.host is not None else frozenset()

    @property
    def tool_descriptors(self) -> tuple[dict[str, Any], ...]:
        return tuple(tool.descriptor() for tool in self.tools.values())

    def capabilities(self) -> dict[str, Any]:
        """The interceptors capability to merge into what the gateway mirrors (none unless exposed)."""
        if self.host is None:
            return {}
        capability = self.host.capability()
        return {"experimental": {CAPABILITY: capability}, "extensions": {CAPABILITY: capability}}

    async def answer(self, action: AnswerLocally, context: Any) -> Answer:
        try:
            if action.method == LIST_METHOD and self.host is not None:
                return self.host.list(action.params or {}), None
            if action.method == INVOKE_METHOD and self.host is not None:
                return await self.host.invoke(_with_session_context(action.params, context)), None
            if action.method == "tools/call":  # in a worker thread: the policy's check and the tool may wait on Redis
                call = self._call_tool
                return await anyio.to_thread.run_sync(call, action.params or {}, context, abandon_on_cancel=True), None
        except InterceptorRpcError as exc:
            return None, _error(exc.code, exc.message, exc.data)
        except MCPError as exc:  # the policy's refusal, exactly as it words it
            return None, _error(exc.error.code, exc.error.message, exc.error.data)
        except Exception as exc:  # never raw exception text on the wire
            logger.error("a gateway-local answer failed: %s", type(exc).__name__)
            return None, _error(INTERNAL_ERROR, "gateway error", {"reason": type(exc).__name__})
        return None, _error(-32601, "Method not found", action.method)

    def _call_tool(self, params: Mapping[str, Any], context: Any) -> dict[str, Any]:
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        principal = context.principal if isinstance(context, InvocationContext) else None
        if self.authorize is not None:
            self.authorize(principal, params)  # raises the policy's own error when refused
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise MCPError(INVALID_PARAMS, "arguments must be an object")
        try:
            answer = tool.run(arguments, principal)
        except ValueError as exc:  # the tool's own argument errors never quote the argument
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        return {"content": [{"type": "text", "text": json.dumps(answer)}], "structuredContent": dict(answer)}


def _with_session_context(params: Mapping[str, Any] | None, context: Any) -> dict[str, Any]:
    """An exposed invoke runs as the session that sent it: the `context` a client writes (a principal it
    claims, a session id it names) is replaced by the one the gateway established for that session."""
    out = {key: value for key, value in (params or {}).items() if key != "context"}
    if isinstance(context, InvocationContext):
        out["context"] = context.to_wire()
    return out
