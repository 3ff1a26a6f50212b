"""A real upstream MCP server for the gateway tests (stdio), written with the low-level SDK `Server`.

Run as `python -m tests.servers.upstream_server` from the checkout root. Every feature the gateway
forwards has something here: tools (echo, progress + logs, an error, sleep, a crash, list_changed),
resources and a template (with subscribe/updated), prompts, completions and logging/setLevel.
`MARKER` appears in progress messages, log messages, error messages/data and the greeting resource so
tests can see a redacting mutator reach every output channel.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import ConfigDict

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging/setLevel and logs are 2025-era features

MARKER = "SECRET-MARKER-7"
FAIL_CODE = -32050
GREETING_URI = "memo://greeting"
NOTE_TEMPLATE = "memo://notes/{name}"
NAMES = ("alice", "albert", "bob")
CUSTOM_METHOD = "x-upstream/echo"
EXPERIMENT = "x-upstream"


class _State:
    """Per-process state the tools report back (cancellations seen, subscriptions, extra tool)."""

    def __init__(self) -> None:
        self.cancelled = 0
        self.bonus = False
        self.subscribed: set[str] = set()
        self.level = "debug"


STATE = _State()


def _tool(name: str, description: str, properties: dict[str, Any] | None = None) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    return types.Tool(name=name, description=description, input_schema=schema)


def _tools() -> list[types.Tool]:
    text = {"text": {"type": "string"}}
    tools = [
        _tool("echo", "echo the text back", text),
        _tool(
            "progress",
            "report progress (every `interval` seconds) and log, then answer",
            {**text, "steps": {"type": "integer"}, "interval": {"type": "number"}},
        ),
        _tool("fail", "raise a JSON-RPC error carrying the text", text),
        _tool("sleep", "sleep for `seconds`", {"seconds": {"type": "number"}}),
        _tool("crash", "exit the process in the middle of the call"),
        _tool("stats", "how many sleeps were cancelled, which URIs are subscribed"),
        _tool("add_tool", "add a tool and announce every list as changed"),
        _tool("touch", "announce that a resource was updated", {"uri": {"type": "string"}}),
        _tool("later", "answer now, log the text a moment later (outside any request)", text),
    ]
    if STATE.bonus:
        tools.append(_tool("bonus", "the tool add_tool adds"))
    return tools


def _text(value: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=value)]


async def _log(ctx: ServerRequestContext[Any], data: Any) -> None:
    await ctx.session.send_log_message("info", data, logger="upstream", related_request_id=ctx.request_id)


async def _log_later(session: ServerSession, text: str) -> None:
    await anyio.sleep(0.05)
    await session.send_log_message("info", f"late: {text}", logger="upstream")


@asynccontextmanager
async def lifespan(server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
    """A task group for work that outlives a request (the late log)."""
    async with anyio.create_task_group() as tasks:
        yield {"tasks": tasks}
        tasks.cancel_scope.cancel()


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_tools())


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    text = str(args.get("text", ""))
    name = params.name
    if name == "echo":
        return types.CallToolResult(content=_text(text), structured_content={"text": text})
    if name == "progress":
        steps = int(args.get("steps", 2))
        for step in range(1, steps + 1):
            if step > 1 and args.get("interval"):
                await anyio.sleep(float(args["interval"]))
            await ctx.session.report_progress(step, steps, f"step {step}: {text}")
        await _log(ctx, f"log line: {text}")
        await _log(ctx, {"note": text})
        return types.CallToolResult(content=_text(f"done: {text}"))
    if name == "fail":
        raise MCPError(FAIL_CODE, f"failed with {text}", {"detail": text})
    if name == "sleep":
        try:
            await anyio.sleep(float(args.get("seconds", 1)))
        except anyio.get_cancelled_exc_class():
            STATE.cancelled += 1
            raise
        return types.CallToolResult(content=_text("slept"))
    if name == "crash":
        os._exit(1)
    if name == "stats":
        stats = {"cancelled": STATE.cancelled, "subscribed": sorted(STATE.subscribed), "level": STATE.level}
        return types.CallToolResult(content=_text(str(stats)), structured_content=stats)
    if name == "add_tool":
        STATE.bonus = True
        await ctx.session.send_tool_list_changed()
        await ctx.session.send_prompt_list_changed()
        await ctx.session.send_resource_list_changed()
        return types.CallToolResult(content=_text("added"))
    if name == "touch":
        await ctx.session.send_resource_updated(str(args.get("uri", GREETING_URI)))
        return types.CallToolResult(content=_text("touched"))
    if name == "later":
        ctx.lifespan_context["tasks"].start_soon(_log_later, ctx.session, text)
        return types.CallToolResult(content=_text("later"))
    if name == "bonus":
        return types.CallToolResult(content=_text("bonus"))
    raise MCPError(types.INVALID_PARAMS, f"unknown tool {name}")


async def list_resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    resource = types.Resource(uri=GREETING_URI, name="greeting", mime_type="text/plain")
    return types.ListResourcesResult(resources=[resource])


async def list_templates(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(uri_template=NOTE_TEMPLATE, name="note", mime_type="text/plain")
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == GREETING_URI:
        text = f"hello {MARKER}"
    elif uri.startswith("memo://notes/"):
        text = f"note {uri.rsplit('/', 1)[-1]}"
    else:
        raise MCPError(types.INVALID_PARAMS, f"no resource {uri}")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type="text/plain")])


async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
    STATE.subscribed.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    STATE.subscribed.discard(str(params.uri))
    return types.EmptyResult()


async def list_prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    argument = types.PromptArgument(name="name", required=True)
    return types.ListPromptsResult(prompts=[types.Prompt(name="greet", description="a greeting", arguments=[argument])])


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
    if params.name != "greet":
        raise MCPError(types.INVALID_PARAMS, f"no prompt {params.name}")
    name = (params.arguments or {}).get("name", "you")
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"Hello {name}"))
    return types.GetPromptResult(description="a greeting", messages=[message])


async def complete(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> types.CompleteResult:
    prefix = params.argument.value
    values = [name for name in NAMES if name.startswith(prefix)] if params.argument.name == "name" else []
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
    STATE.level = params.level
    return types.EmptyResult()


class _OpenParams(types.RequestParams):
    model_config = ConfigDict(extra="allow")


async def custom_echo(ctx: ServerRequestContext[Any], params: _OpenParams) -> dict[str, Any]:
    """A vendor method outside the spec, advertised under `experimental`: the gateway forwards it as is."""
    return {"echo": params.model_extra or {}, "note": MARKER}


def build_server() -> Server[Any]:
    server = Server(
        "upstream-test",
        version="3.1.4",
        title="Upstream for gateway tests",
        instructions=f"use echo first ({MARKER} stays here)",
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_level,
    )
    server.add_request_handler(CUSTOM_METHOD, _OpenParams, custom_echo)
    return server


async def serve() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    options = server.create_initialization_options(
        NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
        experimental_capabilities={EXPERIMENT: {"version": 1}},
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def main() -> None:
    anyio.run(serve)


if __name__ == "__main__":
    main()
