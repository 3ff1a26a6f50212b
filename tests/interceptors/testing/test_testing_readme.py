"""The README's "A first interceptor" example, run exactly as written against an `MCPServer` tool.

`MCPServer` fills `structuredContent` (`{"result": ...}`) for every tool that returns a string, so a mutator
that rewrites only the text blocks lets the value out there: the example must cover both.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from integrations import InterceptorMiddleware
from interceptors import Registry
from interceptors_server import LocalChain

pytestmark = pytest.mark.anyio
README = Path(__file__).resolve().parents[3] / "README.md"
ADDRESS = "ada.lovelace@example.org"


def readme_example() -> dict[str, Any]:
    """The first Python block under "## A first interceptor", executed as a module of its own."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## A first interceptor") :]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the README's first interceptor example is missing"
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(block.group(1), str(README), "exec"), namespace)
    return namespace


def contact_server() -> MCPServer:
    server = MCPServer("contacts")

    @server.tool()
    def lookup(name: str) -> str:
        return f"{name}: {ADDRESS}, room 4"

    @server.tool()
    def delete_contact(name: str) -> str:
        return f"deleted {name}"  # never reached: the example's validator refuses it

    return server


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_in(item)]
    return []


async def test_the_readme_example_redacts_text_and_structured_content() -> None:
    example = readme_example()
    registry = example["registry"]
    assert isinstance(registry, Registry)
    server = contact_server()
    async with Client(server) as bare:  # without the chain: the address is in both places
        plain = await bare.call_tool("lookup", {"name": "Ada"})
    assert plain.structured_content is not None and ADDRESS in strings_in(plain.structured_content)[0]

    server = contact_server()
    async with LocalChain(registry) as chain:
        server.middleware.append(InterceptorMiddleware(chain))
        async with Client(server) as client:
            result = await client.call_tool("lookup", {"name": "Ada"})
            with pytest.raises(MCPError, match="no-deletes"):
                await client.call_tool("delete_contact", {"name": "Ada"})
    dumped = result.model_dump(by_alias=True, mode="json")
    assert result.structured_content is not None  # the channel exists, and it is redacted
    assert not any(ADDRESS in s for s in strings_in(dumped)), "the example let the address out"
    assert "Ada: [email], room 4" in strings_in(dumped)


async def test_a_mutator_of_the_text_blocks_alone_leaks_through_structured_content() -> None:
    """Why the example scrubs every string: the former README mutator (text blocks only) leaks."""
    example = readme_example()
    registry = Registry()
    scrub = example["scrub"]

    @registry.mutator("text-only", events="tools/call", phase="response")
    async def text_only(invocation: Any) -> Any:
        result = invocation.payload
        content = [{**b, "text": scrub(b["text"])} if b.get("type") == "text" else b for b in result["content"]]
        return example["Mutation"]({**result, "content": content})

    server = contact_server()
    async with LocalChain(registry) as chain:
        server.middleware.append(InterceptorMiddleware(chain))
        async with Client(server) as client:
            result = await client.call_tool("lookup", {"name": "Ada"})
    assert ADDRESS not in result.content[0].text  # type: ignore[union-attr]
    assert ADDRESS in strings_in(result.structured_content)[0]
