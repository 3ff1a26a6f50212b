"""fastmcp 4 adapter: the same host and middleware, on a FastMCP server's underlying SDK server.

fastmcp 4 servers are built on the `mcp` SDK's low-level `Server` (its `LowLevelServer` subclasses it),
and FastMCP's own middleware is bridged in as one entry of that server's middleware list. So our
middleware goes into the same list, inside FastMCP's, and sees the same wire dicts as on any SDK server.
Importing this module does not import fastmcp; the functions take the FastMCP server you already have.
"""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel.server import Server

from interceptors import Registry
from interceptors_chain import Chain
from interceptors_server import InterceptorHost, install

from .middleware import InterceptorMiddleware


def fastmcp_lowlevel(server: Any) -> Server[Any]:
    """The SDK server inside a FastMCP server (fastmcp keeps it as `_mcp_server`, its one seam)."""
    inner = getattr(server, "_mcp_server", None)
    if not isinstance(inner, Server):
        raise TypeError("expected a fastmcp 4 FastMCP server (built on the mcp SDK's low-level Server)")
    return inner


def intercept_fastmcp(server: Any, chain: Chain, **options: Any) -> InterceptorMiddleware:
    """Run `chain` around the FastMCP server's own traffic; options as for `InterceptorMiddleware`."""
    middleware = InterceptorMiddleware(chain, **options)
    fastmcp_lowlevel(server).middleware.append(middleware)
    return middleware


def install_fastmcp(server: Any, *registries: Registry) -> InterceptorHost:
    """Serve interceptors next to the FastMCP server's tools, resources and prompts."""
    return install(fastmcp_lowlevel(server), *registries)
