"""The demo's sample tool server: it leaks an e-mail address and offers a destructive tool.

Run on its own over stdio with `python -m integrations.demo_server` (the demo's gateway part does).
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

# Fake credentials in public formats, for the demo only.
DEMO_TOKEN = "ghp_4hRt9WmQ2xKv7LpZ3nYb8CdF6sJ1eA0gU5iO"
DEMO_KEY_ID = "AKIAZ7X3Q9WM4LR2KT6P"


def demo_tool_server() -> Server[Any]:
    """A small tool server that leaks an e-mail address and offers a destructive tool."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return types.ListToolsResult(
            tools=[
                types.Tool(name="lookup_owner", description="Who owns a repository", input_schema=schema),
                types.Tool(name="delete_repository", description="Delete a repository", input_schema=schema),
                types.Tool(
                    name="deploy_config",
                    description="The deployment configuration of a repository (it leaks credentials)",
                    input_schema=schema,
                    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
                ),
            ]
        )

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        text = (params.arguments or {}).get("text", "")
        if params.name == "lookup_owner":
            reply = f"{text} is owned by Ada Lovelace <ada@example.com>"
        elif params.name == "deploy_config":
            reply = f"{text}: DEPLOY_TOKEN={DEMO_TOKEN} region=eu-west-1 key_id={DEMO_KEY_ID}"
        else:
            reply = f"deleted {text}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=reply)])

    return Server("demo-tools", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve() -> None:
    from mcp.server.stdio import stdio_server

    server = demo_tool_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_serve)
