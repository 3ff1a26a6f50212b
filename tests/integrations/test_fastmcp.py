"""The fastmcp 4 adapter: a FastMCP server intercepts its own traffic and can host interceptors."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from integrations.fastmcp import fastmcp_lowlevel, install_fastmcp, intercept_fastmcp
from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_chain import SessionConnection
from interceptors_server import LocalChain

fastmcp = pytest.importorskip("fastmcp", reason="the fastmcp extra is not installed")
pytestmark = pytest.mark.anyio


def make_server() -> Any:
    server = fastmcp.FastMCP("fast")

    @server.tool()
    def echo(text: str) -> str:
        return f"echo:{text}"

    return server


def registry() -> Registry:
    reg = Registry()

    @reg.validator("no-bombs", events="tools/call", phase="request")
    async def no_bombs(inv: Invocation) -> Verdict:
        return Verdict.deny("no") if "bomb" in str(inv.payload["params"].get("arguments")) else Verdict.allow()

    @reg.mutator("shout", events="tools/call", phase="response")
    async def shout(inv: Invocation) -> Mutation:
        content = [{**block, "text": block["text"].upper()} for block in inv.payload["content"]]
        return Mutation({**inv.payload, "content": content})

    return reg


async def test_fastmcp_server_runs_the_chain_around_its_tools() -> None:
    server = make_server()
    async with LocalChain(registry()) as chain:
        intercept_fastmcp(server, chain)
        async with Client(fastmcp_lowlevel(server)) as client:
            result = await client.call_tool("echo", {"text": "hi"})
            assert isinstance(result.content[0], types.TextContent)
            assert result.content[0].text == "ECHO:HI"
            with pytest.raises(MCPError) as caught:
                await client.call_tool("echo", {"text": "bomb"})
            assert caught.value.error.code == -32602


async def test_fastmcp_server_hosts_interceptors_next_to_its_tools() -> None:
    server = make_server()
    install_fastmcp(server, registry())
    async with Client(fastmcp_lowlevel(server)) as client:
        listed = await SessionConnection(client.session).request("interceptors/list", {}, None)
        assert [i["name"] for i in listed["interceptors"]] == ["no-bombs", "shout"]
        result = await client.call_tool("echo", {"text": "hi"})
        assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "echo:hi"


def test_a_plain_object_is_refused() -> None:
    with pytest.raises(TypeError):
        fastmcp_lowlevel(object())
