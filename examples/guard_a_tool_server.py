"""Put two interceptors in front of a tool server you own, in-process. Run: python examples/guard_a_tool_server.py"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from integrations import InterceptorMiddleware
from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_server import LocalChain

registry = Registry()


@registry.validator("example/max-length", events="tools/call", phase="request")
async def max_length(invocation: Invocation) -> Verdict:
    text = str((invocation.payload["params"].get("arguments") or {}).get("text", ""))
    return Verdict.deny("text is too long", path="params.arguments.text") if len(text) > 20 else Verdict.allow()


@registry.mutator("example/signature", events="tools/call", phase="response")
async def signature(invocation: Invocation) -> Mutation:
    result = invocation.payload
    return Mutation({**result, "content": [*result["content"], {"type": "text", "text": "-- checked"}]})


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"echo: {params.arguments}")])


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])


async def main() -> None:
    tools: Server[Any] = Server("example-tools", on_call_tool=call_tool, on_list_tools=list_tools)
    async with LocalChain(registry) as chain:
        tools.middleware.append(InterceptorMiddleware(chain))
        async with Client(tools) as client:
            result = await client.call_tool("echo", {"text": "short"})
            print([block.text for block in result.content if isinstance(block, types.TextContent)])
            try:
                await client.call_tool("echo", {"text": "x" * 50})
            except MCPError as exc:
                print("blocked:", exc.error.code, exc.error.data)


if __name__ == "__main__":
    anyio.run(main)
