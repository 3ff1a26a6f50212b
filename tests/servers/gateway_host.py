"""The gateway registry (`gateway_registry.build`) served over stdio, as a remote interceptor server.

Run as `python -m tests.servers.gateway_host` from the checkout root, or by path.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio


def build_server() -> Any:
    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from interceptors_server import interceptor_server
    from tests.servers.gateway_registry import build

    return interceptor_server(build(), name="gateway-host", version="1.0")


async def serve() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    anyio.run(serve)


if __name__ == "__main__":
    main()
