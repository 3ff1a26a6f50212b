"""Server middleware: a server runs the chain around its own traffic, in the SEP order for each side."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from integrations import InterceptorMiddleware
from interceptors import Invocation, InvocationContext, Mutation, Principal, Registry, Verdict
from interceptors_server import LocalChain

pytestmark = pytest.mark.anyio
MODES = pytest.mark.parametrize("mode", ["auto", "legacy"])


def echo_server(seen: list[dict[str, Any]]) -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        seen.append(dict(params.arguments or {}))
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"echo:{text}")])

    return Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)


def ordering_registry(observed: list[tuple[str, str]]) -> Registry:
    """Request and response mutators that tag the text; validators record what they saw."""
    registry = Registry()

    @registry.mutator("tag-request", events="tools/call", phase="request")
    async def tag_request(inv: Invocation) -> Any:
        params = dict(inv.payload["params"])
        params["arguments"] = {**params["arguments"], "text": "[M]" + params["arguments"]["text"]}
        return {**inv.payload, "params": params}

    @registry.validator("see-request", events="tools/call", phase="request")
    async def see_request(inv: Invocation) -> Verdict:
        observed.append(("request", inv.payload["params"]["arguments"]["text"]))
        return Verdict.allow()

    @registry.mutator("tag-response", events="tools/call", phase="response")
    async def tag_response(inv: Invocation) -> Any:
        content = [{**inv.payload["content"][0], "text": "[R]" + inv.payload["content"][0]["text"]}]
        return {**inv.payload, "content": content}

    @registry.validator("see-response", events="tools/call", phase="response")
    async def see_response(inv: Invocation) -> Verdict:
        observed.append(("response", inv.payload["content"][0]["text"]))
        return Verdict.allow()

    return registry


@MODES
async def test_server_order_receiving_request_and_sending_response(mode: str) -> None:
    observed: list[tuple[str, str]] = []
    seen: list[dict[str, Any]] = []
    server = echo_server(seen)
    async with LocalChain(ordering_registry(observed)) as chain:
        server.middleware.append(InterceptorMiddleware(chain))
        async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
            result = await client.call_tool("echo", {"text": "hi"})
    # Receiving a request: the validator saw the original, the tool got the mutated arguments.
    assert ("request", "hi") in observed
    assert seen == [{"text": "[M]hi"}]
    # Sending a response: mutate first, so the validator saw the mutated result, and so does the client.
    assert ("response", "[R]echo:[M]hi") in observed
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "[R]echo:[M]hi"


@MODES
async def test_block_becomes_an_error_or_an_is_error_result(mode: str) -> None:
    registry = Registry()

    @registry.validator("deny", events="tools/call", phase="request")
    async def deny(inv: Invocation) -> Verdict:
        return Verdict.deny("secret reason that must not cross the boundary")

    seen: list[dict[str, Any]] = []
    server = echo_server(seen)
    async with LocalChain(registry) as chain:
        middleware = InterceptorMiddleware(chain)
        server.middleware.append(middleware)
        async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
            with pytest.raises(MCPError) as caught:
                await client.call_tool("echo", {"text": "hi"})
            assert caught.value.error.code == -32602
            assert caught.value.error.data == {"interceptor": "deny", "reason": "rejected by validator"}
            assert "secret reason" not in str(caught.value.error)
            middleware.tool_errors_as_results = True
            result = await client.call_tool("echo", {"text": "hi"})
            assert result.is_error
            # Lists are not hooked: they pass untouched.
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
    assert seen == []


async def test_context_provider_reaches_validators() -> None:
    registry = Registry()
    principals: list[str | None] = []

    @registry.validator("who", events="tools/call", phase="request")
    async def who(inv: Invocation) -> Verdict:
        principal = inv.context.principal if inv.context else None
        principals.append(principal.id if principal else None)
        return Verdict.allow()

    def provider(ctx: ServerRequestContext[Any, Any]) -> InvocationContext:
        return InvocationContext(principal=Principal("user", "test-user"), trace_id="t-1")

    server = echo_server([])
    async with LocalChain(registry) as chain:
        server.middleware.append(InterceptorMiddleware(chain, context_provider=provider))
        async with Client(server) as client:
            await client.call_tool("echo", {"text": "hi"})
    assert principals == ["test-user"]


async def test_invalid_mutated_result_is_refused() -> None:
    registry = Registry()

    @registry.mutator("break-result", events="tools/call", phase="response")
    async def break_result(inv: Invocation) -> Mutation:
        return Mutation({"content": "not a list"})

    server = echo_server([])
    async with LocalChain(registry) as chain:
        server.middleware.append(InterceptorMiddleware(chain))
        async with Client(server) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("echo", {"text": "hi"})
    assert caught.value.error.code == -32603


@MODES
async def test_the_servers_instructions_get_the_standard_output_stage_as_in_the_gateway(mode: str) -> None:
    """The handshake's result runs its response chain under `gateway/initialize`, as the gateway runs it, so
    the standard stages scrub a credential a server put in its own instructions (either era's handshake)."""
    from integrations.gateway.stages import build_stages
    from tests.servers.leaky_server import AWS_KEY

    server = echo_server([])
    server.instructions = f"deploy with {AWS_KEY}"
    async with LocalChain(*build_stages("standard", None).registries) as chain:
        server.middleware.append(InterceptorMiddleware(chain))
        async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
            instructions = client.instructions
            listed = await client.list_tools()
    assert instructions is not None and "deploy with" in instructions
    assert AWS_KEY not in instructions
    assert [tool.name for tool in listed.tools] == ["echo"]


async def test_ping_and_the_interceptor_methods_run_no_chain_and_every_operation_does() -> None:
    """What reaches the chain is the gateway's classification (`request_event` / `response_event`)."""
    from integrations.gateway.router.channels import request_event, response_event

    events: list[tuple[str, str]] = []
    registry = Registry()

    @registry.validator("every-request", events="*", phase="request")
    async def every_request(inv: Invocation) -> Verdict:
        events.append(("request", inv.event))
        return Verdict.allow()

    @registry.validator("every-response", events=["*", "gateway/initialize"], phase="response")
    async def every_response(inv: Invocation) -> Verdict:
        events.append(("response", inv.event))
        return Verdict.allow()

    server = echo_server([])
    async with LocalChain(registry) as chain:
        server.middleware.append(InterceptorMiddleware(chain))
        async with Client(server, mode="legacy") as client:  # type: ignore[arg-type]
            await client.send_ping()
            await client.list_tools()
            await client.call_tool("echo", {"text": "hi"})
    expected: list[tuple[str, str]] = [("response", "gateway/initialize")]
    for method in ("ping", "tools/list", "tools/call"):
        if (event := request_event(method)) is not None:
            expected.append(("request", event))
        if (event := response_event(method)) is not None:
            expected.append(("response", event))
    assert events == expected
    assert expected[1:] == [
        ("request", "tools/list"),
        ("response", "tools/list"),
        ("request", "tools/call"),
        ("response", "tools/call"),
    ]
