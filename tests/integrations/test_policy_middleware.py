"""The policy behind a real server's middleware: the requester sees the policy's exact errors."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from integrations import InterceptorMiddleware
from interceptors import InvocationContext, Principal
from interceptors.policy import policy_registry
from interceptors_server import LocalChain
from tests.interceptors.policy.test_policy_catalog import TOOLS, primed

pytestmark = pytest.mark.anyio


def catalog_server(called: list[str]) -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": TOOLS})

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        called.append(params.name)
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    return Server("catalog", on_list_tools=list_tools, on_call_tool=call_tool)


def as_user(*roles: str) -> Any:
    def provide(ctx: ServerRequestContext[Any, Any]) -> InvocationContext:
        return InvocationContext(principal=Principal("user", "alice", {"roles": list(roles)}))

    return provide


async def test_hidden_tool_looks_missing_and_denied_tool_gets_31001() -> None:
    called: list[str] = []
    hidden = primed("standard")
    shown = primed({"extends": "standard", "hide_denied": False})
    for engine, expected_code in ((hidden, -32602), (shown, -31001)):
        server = catalog_server(called)
        async with LocalChain(policy_registry(engine)) as chain:
            server.middleware.append(InterceptorMiddleware(chain, context_provider=as_user()))
            async with Client(server) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert ("reveal_token" in names) is (engine is shown)
                with pytest.raises(MCPError) as caught:
                    await client.session.call_tool("reveal_token", {})
                error = caught.value.error
                assert error.code == expected_code
                if expected_code == -32602:
                    assert error.message == "Unknown tool: reveal_token"
                else:
                    assert set(error.data) == {"reason", "policy"}
                result = await client.session.call_tool("list_assets", {})
                assert not result.is_error
    assert called == ["list_assets", "list_assets"]


async def test_an_admin_may_reveal() -> None:
    called: list[str] = []
    server = catalog_server(called)
    async with LocalChain(policy_registry(primed("standard"))) as chain:
        server.middleware.append(InterceptorMiddleware(chain, context_provider=as_user("admin")))
        async with Client(server) as client:
            await client.session.call_tool("reveal_token", {})
    assert called == ["reveal_token"]
