"""A real upstream (stdio, low-level SDK `Server`) whose tool routes on an argument: `route` mirrors its
`region` argument into an `Mcp-Param-Region` header (`x-mcp-header`), and its `shard` into `Mcp-Param-Shard`.

Run as `python -m tests.servers.header_server` from the checkout root.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

ROUTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "shard": {"type": "integer", "x-mcp-header": "Shard"},
        "note": {"type": "string"},
    },
    "required": ["region"],
}


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[types.Tool(name="route", description="answer with the region routed to", input_schema=ROUTE_SCHEMA)]
    )


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    region = str((params.arguments or {}).get("region", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"routed to {region}")])


async def serve() -> None:
    from mcp.server.stdio import stdio_server

    server = Server("header-test", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
