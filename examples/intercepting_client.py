"""The chain on the client's side: every request it sends and every result it gets pass the interceptors,
whatever server it talks to. Run: python examples/intercepting_client.py"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from integrations import InterceptingClient
from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_server import LocalChain

registry = Registry()


@registry.validator("client/no-shell", events="tools/call", phase="request")
async def no_shell(invocation: Invocation) -> Verdict:
    return (
        Verdict.deny("no shell from this client")
        if invocation.payload["params"]["name"] == "shell"
        else Verdict.allow()
    )


@registry.mutator("client/trim", events="tools/call", phase="response")
async def trim(invocation: Invocation) -> Mutation:
    result = invocation.payload
    content = [{**b, "text": b["text"].strip()} if b.get("type") == "text" else b for b in result["content"]]
    return Mutation({**result, "content": content})


server = MCPServer("anything")  # any server: in-process here, or StdioServerParameters / a URL


@server.tool()
def echo(text: str) -> str:
    return f"   {text}   "


@server.tool()
def shell(command: str) -> str:
    return "ran it"


async def main() -> None:
    async with LocalChain(registry) as chain, InterceptingClient.wrap(server, chain) as client:
        echoed = await client.call_tool("echo", {"text": "hello"})
        print("echo:", repr(echoed.content[0].text))  # type: ignore[union-attr]
        try:
            await client.call_tool("shell", {"command": "rm -rf /"})
        except MCPError as exc:
            print("shell: refused before it left the client", exc.error.code)


if __name__ == "__main__":
    anyio.run(main)
