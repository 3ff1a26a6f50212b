"""An `MCPServer` over stdio whose interceptors are enforced, and a real client that meets them.

Run: python examples/mcpserver_stdio.py  (it starts itself with `serve` as the stdio server and calls it)

`install()` only *advertises*: it answers `interceptors/list` and `interceptor/invoke`, so a client or a
gateway can run the interceptors. To *enforce* them on the server's own traffic, run a chain around it:
`InterceptorMiddleware(LocalChain(registry))` on the server's middleware, as `serve()` does below.
"""

from __future__ import annotations

import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from integrations import InterceptorMiddleware
from interceptors import Invocation, Registry, Verdict
from interceptors_server import LocalChain, install

registry = Registry()


@registry.validator("example/no-deletes", events="tools/call", phase="request")
async def no_deletes(invocation: Invocation) -> Verdict:
    name = invocation.payload["params"]["name"]
    return Verdict.deny(f"{name} is destructive") if name.startswith("delete_") else Verdict.allow()


server = MCPServer("files")


@server.tool()
def read_file(path: str) -> str:
    return f"contents of {path}"


@server.tool()
def delete_file(path: str) -> str:
    return f"deleted {path}"  # never reached: the chain refuses the call first


async def serve() -> None:
    install(server, registry)  # advertise: interceptors/list and interceptor/invoke for clients and gateways
    async with LocalChain(registry) as chain:
        server.middleware.append(InterceptorMiddleware(chain))  # enforce: the chain runs around every call
        await server.run_stdio_async()


async def client() -> None:
    command = StdioServerParameters(command=sys.executable, args=[__file__, "serve"])
    async with Client(command) as session:
        read = await session.call_tool("read_file", {"path": "notes.txt"})
        print("read_file:", read.content[0].text)  # type: ignore[union-attr]
        try:
            await session.call_tool("delete_file", {"path": "notes.txt"})
            print("delete_file: went through (it must not)")
        except MCPError as exc:
            print("delete_file: refused", exc.error.code, exc.error.message)


if __name__ == "__main__":
    anyio.run(serve if sys.argv[1:] == ["serve"] else client)
