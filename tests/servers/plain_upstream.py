"""A small upstream MCP server WITHOUT the logging capability, for the gateway's express-lane tests (stdio).

Run as `python -m tests.servers.plain_upstream` from the checkout root. Without `logging/setLevel` the
upstream cannot send logs, so the gateway's express lane serves 2025-era clients too. Tools:

- `whoami`: the JSON-RPC request id the upstream received (`ctx.request_id`), as text and as
  structuredContent `{"id": ...}`: a string `x<n>` when the gateway forwarded on its express path, an int
  when it went through the SDK's client session;
- `echo`: the text back, with structuredContent; `fail`: an MCP error with data; `soft`: an isError result;
- `progress`: progress notifications, then the answer; `crash`: exits in the middle of the call;
- `sleep`: sleeps `seconds`; `stats`: `{"running": sleeps in progress, "cancelled": sleeps cancelled}`;
- `invalid`: a result whose `content` is not a list (rewritten on the way out, since the SDK checks what a
  handler returns); `nonobject`: a result that is a JSON string, not an object.

Plus one prompt (`greet`) and completions for its `name` argument. With `PLAIN_UPSTREAM_LOGGING=1` in
its environment it has the logging capability after all (it never logs): the gateway then keeps 2025-era
clients on the SDK path.
"""

from __future__ import annotations

import os
import warnings
from types import TracebackType
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import SessionMessage

from tests.servers.upstream_server import complete, get_prompt, list_prompts  # the same prompt and completions

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging/setLevel is a 2025-era feature

FAIL_CODE = -32051
INVALID_MARK = "__rewrite-as-invalid__"
NONOBJECT_MARK = "__rewrite-as-nonobject__"
STATE = {"running": 0, "cancelled": 0}


def _tool(name: str, properties: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=name, input_schema={"type": "object", "properties": properties or {}})


def _text(value: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=value)]


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    text = {"text": {"type": "string"}}
    names = ("whoami", "echo", "fail", "soft", "progress", "crash", "sleep", "stats", "invalid", "nonobject")
    return types.ListToolsResult(tools=[_tool(name, text) for name in names])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    text = str(args.get("text", ""))
    name = params.name
    if name == "whoami":
        return types.CallToolResult(content=_text(repr(ctx.request_id)), structured_content={"id": ctx.request_id})
    if name == "echo":
        return types.CallToolResult(content=_text(text), structured_content={"text": text})
    if name == "fail":
        raise MCPError(FAIL_CODE, f"failed with {text}", {"detail": text, "list": [1, 2]})
    if name == "soft":
        return types.CallToolResult(content=_text(f"soft failure: {text}"), is_error=True)
    if name == "progress":
        for step in (1, 2, 3):
            await ctx.session.report_progress(step, 3, f"step {step}")
        return types.CallToolResult(content=_text(f"done: {text}"))
    if name == "crash":
        os._exit(1)
    if name == "sleep":
        STATE["running"] += 1
        try:
            await anyio.sleep(float(args.get("seconds", 1)))
        except anyio.get_cancelled_exc_class():
            STATE["cancelled"] += 1
            raise
        finally:
            STATE["running"] -= 1
        return types.CallToolResult(content=_text("slept"))
    if name == "stats":
        return types.CallToolResult(content=_text(str(STATE)), structured_content=dict(STATE))
    if name == "invalid":
        return types.CallToolResult(content=_text(INVALID_MARK))
    if name == "nonobject":
        return types.CallToolResult(content=_text(NONOBJECT_MARK))
    raise MCPError(types.INVALID_PARAMS, f"unknown tool {name}")


class _Rewriting:
    """The server's write stream, turning the marked results into what no handler may return."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCResponse):
            content = message.result.get("content")
            text = content[0].get("text") if isinstance(content, list) and content else None
            if text == INVALID_MARK:
                message = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result={"content": "not a list"})
            elif text == NONOBJECT_MARK:
                message = types.JSONRPCResponse.model_construct(jsonrpc="2.0", id=message.id, result="a string")
            item = SessionMessage(message, metadata=item.metadata)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Rewriting:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def build_server() -> Server[Any]:
    logging = os.environ.get("PLAIN_UPSTREAM_LOGGING") == "1"
    return Server(
        "plain-upstream",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_level if logging else None,
    )


async def serve() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, _Rewriting(write), server.create_initialization_options())


def main() -> None:
    anyio.run(serve)


if __name__ == "__main__":
    main()
