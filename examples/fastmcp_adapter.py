"""A fastmcp 4 server intercepting its own traffic (`intercept_fastmcp`) and hosting interceptors for others
(`install_fastmcp`). Needs fastmcp installed. Run: python examples/fastmcp_adapter.py"""

from __future__ import annotations

import anyio
from fastmcp import FastMCP
from mcp import Client
from mcp.shared.exceptions import MCPError

from integrations.fastmcp import fastmcp_lowlevel, install_fastmcp, intercept_fastmcp
from interceptors import Invocation, Registry, Verdict
from interceptors_server import LocalChain

registry = Registry()


@registry.validator("fast/no-bombs", events="tools/call", phase="request")
async def no_bombs(invocation: Invocation) -> Verdict:
    arguments = str(invocation.payload["params"].get("arguments"))
    return Verdict.deny("no bombs") if "bomb" in arguments else Verdict.allow()


server = FastMCP("fast")


@server.tool()
def echo(text: str) -> str:
    return f"echo: {text}"


async def main() -> None:
    install_fastmcp(server, registry)  # advertise (interceptors/list, interceptor/invoke)
    async with LocalChain(registry) as chain:
        intercept_fastmcp(server, chain)  # enforce on the server's own tools
        async with Client(fastmcp_lowlevel(server)) as client:
            print((await client.call_tool("echo", {"text": "hi"})).content[0].text)  # type: ignore[union-attr]
            try:
                await client.call_tool("echo", {"text": "a bomb"})
            except MCPError as exc:
                print("refused:", exc.error.code)


if __name__ == "__main__":
    anyio.run(main)
