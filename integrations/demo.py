"""`mcp-interceptors demo`: a tool server whose calls pass through a validator and a mutator."""

from __future__ import annotations

import re
from typing import Any, TextIO

from mcp import Client, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_server import LocalChain

from .middleware import InterceptorMiddleware

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def demo_registry() -> Registry:
    """Two example interceptors: a request validator and a response mutator."""
    registry = Registry()

    @registry.validator("demo/no-destructive-tools", events="tools/call", phase="request",
                        description="Refuses tools whose name says they delete things.")  # fmt: skip
    async def no_destructive(invocation: Invocation) -> Verdict:
        name = (invocation.payload.get("params") or {}).get("name", "")
        if str(name).startswith("delete_"):
            return Verdict.deny(f"tool {name} is destructive", path="params.name")
        return Verdict.allow()

    @registry.mutator("demo/redact-emails", events="tools/call", phase="response",
                      description="Replaces e-mail addresses in text content.")  # fmt: skip
    async def redact_emails(invocation: Invocation) -> Mutation:
        result = invocation.payload
        content = result.get("content") or []
        changed = [
            {**block, "text": _EMAIL.sub("[email]", block["text"])} if block.get("type") == "text" else block
            for block in content
        ]
        if changed == content:
            return Mutation.unchanged()
        return Mutation({**result, "content": changed})

    return registry


def demo_tool_server() -> Server[Any]:
    """A small tool server that leaks an e-mail address and offers a destructive tool."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return types.ListToolsResult(
            tools=[
                types.Tool(name="lookup_owner", description="Who owns a repository", input_schema=schema),
                types.Tool(name="delete_repository", description="Delete a repository", input_schema=schema),
            ]
        )

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        text = (params.arguments or {}).get("text", "")
        if params.name == "lookup_owner":
            reply = f"{text} is owned by Ada Lovelace <ada@example.com>"
        else:
            reply = f"deleted {text}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=reply)])

    return Server("demo-tools", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def run_demo(out: TextIO) -> int:
    tools = demo_tool_server()
    async with LocalChain(demo_registry()) as chain:
        tools.middleware.append(InterceptorMiddleware(chain))
        print("interceptors:", file=out)
        for server, info in chain.interceptors():
            hooks = ", ".join(f"{'/'.join(h.events)}@{h.phase}" for h in info.hooks)
            print(f"  {info.name} ({info.type}) on {hooks} [server {server}]", file=out)
        async with Client(tools) as client:
            result = await client.call_tool("lookup_owner", {"text": "acme/widgets"})
            text = result.content[0].text if isinstance(result.content[0], types.TextContent) else ""
            print(f"call lookup_owner -> {text}", file=out)
            try:
                await client.call_tool("delete_repository", {"text": "acme/widgets"})
                print("call delete_repository -> NOT BLOCKED (unexpected)", file=out)
                return 1
            except MCPError as exc:
                print(f"call delete_repository -> blocked: error {exc.error.code} {exc.error.message}", file=out)
    return 0
