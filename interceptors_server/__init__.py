"""The MCP host side: serve interceptors next to tools, advertise the capability, run LocalChains."""

from .host import DEFAULT_MAX_PAYLOAD_BYTES, InterceptorHost
from .install import host_of, install, interceptor_server, lowlevel_server, to_mcp_error
from .local import LocalChain

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "InterceptorHost",
    "LocalChain",
    "host_of",
    "install",
    "interceptor_server",
    "lowlevel_server",
    "to_mcp_error",
]
