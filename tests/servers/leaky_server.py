"""A real upstream that leaks credentials on every channel, with a small tool catalog for the policy tests.

python -m tests.servers.leaky_server
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

AWS_KEY = "AKIAQ3EGUJZN5XKW7P2L"
GITHUB_TOKEN = "ghp_9fK2mQ7rT4vX8zL1nB6cD3hJ5wY0aS2eR4tU"
SECRETS = (AWS_KEY, GITHUB_TOKEN)
OWNER_EMAIL = "grace.hopper@navy-example.org"
CALLED: list[str] = []


def _tool(name: str, **annotations: bool) -> types.Tool:
    meta = {"io.mcp-interceptors/capabilities": ["reveal"]} if name == "reveal_token" else None
    return types.Tool(
        name=name,
        input_schema={"type": "object", "properties": {"value": {"type": "string"}}},
        annotations=types.ToolAnnotations(**annotations) if annotations else None,
        _meta=meta,
    )


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            _tool("get_config", readOnlyHint=True, openWorldHint=False),
            _tool("progress_report", readOnlyHint=True, openWorldHint=False),
            _tool("fail_loudly", readOnlyHint=True, openWorldHint=False),
            _tool("delete_everything", readOnlyHint=False, destructiveHint=True, openWorldHint=False),
            _tool("reveal_token", readOnlyHint=True, openWorldHint=False),
            _tool("echo_value", readOnlyHint=True, openWorldHint=False),
            _tool("whoami", readOnlyHint=True, openWorldHint=False),
        ]
    )


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    leak = f"aws={AWS_KEY} github={GITHUB_TOKEN}"
    if params.name == "get_config":
        return types.CallToolResult.model_validate(
            {
                "content": [
                    {"type": "text", "text": f"config loaded: {leak}"},
                    {"type": "resource_link", "uri": "file:///config.env", "name": "config",
                     "description": f"the file with {GITHUB_TOKEN}"},
                    {"type": "resource", "resource": {"uri": "file:///secrets.env", "text": f"TOKEN={GITHUB_TOKEN}"}},
                ],
                "structuredContent": {"aws_access_key_id": AWS_KEY, "notes": f"token {GITHUB_TOKEN}"},
                "_meta": {"debug": f"loaded with {GITHUB_TOKEN}"},
            }
        )  # fmt: skip
    if params.name == "progress_report":
        token = (params.meta or {}).get("progressToken") if params.meta else None
        if token is not None:
            await ctx.session.send_progress_notification(token, 0.5, 1.0, message=f"halfway: {leak}")
        await ctx.session.send_log_message(level="warning", data=f"log line: {leak}", logger="leaky")
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])
    if params.name == "fail_loudly":
        raise MCPError(-32050, f"could not connect with {leak}", {"detail": leak})
    if params.name == "echo_value":
        value = str((params.arguments or {}).get("value"))
        if (params.arguments or {}).get("encoded"):  # the credentials again, in spellings the payload marks
            return _encoded_leak(leak)
        if (params.arguments or {}).get("split"):  # each credential cut in two across messages and blocks
            return await _split_leak(ctx, params)
        if (params.arguments or {}).get("channels"):  # echo the value on every other channel too
            token = params.meta.get("progressToken") if params.meta else None
            if token is not None:
                await ctx.session.send_progress_notification(token, 0.5, 1.0, message=f"working on {value}")
            await ctx.session.send_log_message(level="warning", data=f"saw {value}", logger="leaky")
            raise MCPError(-32050, f"cannot handle {value}", {"value": value})
        # The tool echoes what it got, and says whether that was the real address: the proof for the tests.
        real = "yes" if value == OWNER_EMAIL else "no"
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"got {value} real={real}")])
    if params.name == "whoami":
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"owner: {OWNER_EMAIL}")])
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} done")])


async def _split_leak(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    """Every credential cut in two: across two progress notifications, two log messages (one of them with the
    token in its logger name) and two adjacent text blocks."""
    step = 0.0
    for secret in SECRETS:
        cut = len(secret) // 2
        step += 0.1
        await ctx.session.report_progress(step, 1.0, f"reading {secret[:cut]}")
        step += 0.1
        await ctx.session.report_progress(step, 1.0, f"{secret[cut:]} read")
        await ctx.session.send_log_message(level="warning", data=f"key {secret[:cut]}", logger="leaky")
        await ctx.session.send_log_message(level="warning", data=f"{secret[cut:]} end", logger="leaky")
    await ctx.session.send_log_message(level="warning", data="named", logger=f"svc {GITHUB_TOKEN}")
    cut = len(GITHUB_TOKEN) // 2
    return types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": f"token {GITHUB_TOKEN[:cut]}"},
                     {"type": "text", "text": f"{GITHUB_TOKEN[cut:]} ok"}]}
    )  # fmt: skip


def _encoded_leak(leak: str) -> types.CallToolResult:
    import base64
    from urllib.parse import quote

    b64 = base64.b64encode(leak.encode()).decode()
    manifest = f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ndata:\n  config: {b64}\n"
    url = f"https://api.example.com/callback?state={quote(leak, safe='')}&page=2"
    return types.CallToolResult.model_validate(
        {
            "content": [
                {"type": "text", "text": f"attachment: data:text/plain;base64,{b64}"},
                {"type": "text", "text": manifest},
                {"type": "text", "text": url},
            ],
            "structuredContent": {
                "file": {"path": "app.env", "encoding": "base64", "content": b64},
                "dump": {"encoding": "hex", "data": leak.encode().hex()},
            },
        }
    )


async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri="file:///app.env", name="app.env")])


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=str(params.uri), text=f"GITHUB_TOKEN={GITHUB_TOKEN}")]
    )


async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="deploy")])


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
    text = f"Deploy with the token {GITHUB_TOKEN}"
    return types.GetPromptResult(
        messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))]
    )


async def complete(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[GITHUB_TOKEN, "plain"]))


def build_server() -> Server[Any]:
    async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        return types.EmptyResult()

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Server("leaky", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                      on_set_logging_level=set_level, on_list_resources=list_resources,
                      on_read_resource=read_resource, on_list_prompts=list_prompts, on_get_prompt=get_prompt,
                      on_completion=complete)  # fmt: skip


async def serve() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
