"""An interceptor host served over stdio: the test host registry, or with `--gateway` the gateway registry
(`gateway_registry.build`), as a remote interceptor server.

Run as `python -m tests.servers.stdio_host [--gateway]` from the checkout root, or by path.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio


def build_server(gateway: bool = False) -> Any:
    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from interceptors_server import interceptor_server

    if gateway:
        from tests.servers.gateway_registry import build

        return interceptor_server(build(), name="gateway-host", version="1.0")
    from tests.servers.host_registry import build_registry

    return interceptor_server(build_registry(), name="stdio-host", version="1.0")


async def serve() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(gateway="--gateway" in sys.argv[1:])
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    anyio.run(serve)


if __name__ == "__main__":
    main()
