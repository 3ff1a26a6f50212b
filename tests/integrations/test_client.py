"""The intercepting client: the SEP order on the client side, and swapped roles for server requests."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types
from mcp.client.context import ClientRequestContext
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from integrations.client import InterceptingClient
from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_server import LocalChain

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]


def tool_server(seen: list[Any]) -> Server[Any]:
    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        seen.append(dict(params.arguments or {}))
        if params.name == "ask_model":
            reply = await ctx.session.create_message(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))],
                max_tokens=10,
            )
            text = reply.content.text if isinstance(reply.content, types.TextContent) else "?"
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"model said {text}")])
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"echo:{text}")])

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])

    return Server("tools", on_call_tool=call_tool, on_list_tools=list_tools)


def client_registry(observed: list[tuple[str, Any]]) -> Registry:
    registry = Registry()

    @registry.mutator("tag-outgoing", events="tools/call", phase="request")
    async def tag(inv: Invocation) -> Any:
        params = dict(inv.payload["params"])
        params["arguments"] = {**params["arguments"], "text": "[C]" + params["arguments"]["text"]}
        return {**inv.payload, "params": params}

    @registry.validator("see-outgoing", events="tools/call", phase="request")
    async def see_out(inv: Invocation) -> Verdict:
        text = inv.payload["params"]["arguments"]["text"]
        observed.append(("request", text))
        return Verdict.deny("no secrets") if "secret" in text else Verdict.allow()

    @registry.validator("see-incoming", events="tools/call", phase="response")
    async def see_in(inv: Invocation) -> Verdict:
        observed.append(("response", inv.payload["content"][0]["text"]))
        return Verdict.allow()

    @registry.mutator("tag-incoming", events="tools/call", phase="response")
    async def tag_in(inv: Invocation) -> Any:
        content = [{**inv.payload["content"][0], "text": inv.payload["content"][0]["text"] + "[R]"}]
        return {**inv.payload, "content": content}

    return registry


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_client_sends_mutate_then_validate_and_receives_validate_then_mutate(mode: str) -> None:
    observed: list[tuple[str, Any]] = []
    seen: list[Any] = []
    async with (
        LocalChain(client_registry(observed)) as chain,
        InterceptingClient.wrap(tool_server(seen), chain, mode=mode) as client,
    ):
        result = await client.call_tool("echo", {"text": "hi"})
        assert isinstance(result.content[0], types.TextContent)
        assert result.content[0].text == "echo:[C]hi[R]"
        with pytest.raises(MCPError) as caught:
            await client.call_tool("echo", {"text": "my secret"})
        assert caught.value.error.code == -32602
        assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
    # Sending: the validator saw the mutated request. Receiving: the validator saw the unmutated result.
    assert ("request", "[C]hi") in observed
    assert ("response", "echo:[C]hi") in observed
    # The blocked request never reached the server.
    assert seen == [{"text": "[C]hi"}]


async def test_server_initiated_sampling_gets_the_swapped_roles() -> None:
    registry = Registry()
    observed: list[str] = []

    @registry.validator("check-sampling", events="sampling/createMessage", phase="request")
    async def check(inv: Invocation) -> Verdict:
        observed.append("validated request")
        return Verdict.allow()

    @registry.mutator("rewrite-answer", events="sampling/createMessage", phase="response")
    async def rewrite(inv: Invocation) -> Mutation:
        observed.append("mutated answer")
        return Mutation({**inv.payload, "content": {"type": "text", "text": "REDACTED"}})

    @registry.validator("check-answer", events="sampling/createMessage", phase="response")
    async def check_answer(inv: Invocation) -> Verdict:
        observed.append(f"validated answer {inv.payload['content']['text']}")
        return Verdict.allow()

    async def sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="the real answer"), model="m"
        )

    async with (
        LocalChain(registry) as chain,
        InterceptingClient.wrap(tool_server([]), chain, mode="legacy", sampling_callback=sampling) as client,
    ):
        result = await client.call_tool("ask_model", {})
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "model said REDACTED"
    # The client's answer is sent: mutate first, then the validator sees the mutated answer.
    assert observed == ["validated request", "mutated answer", "validated answer REDACTED"]
