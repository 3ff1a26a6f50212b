"""The MCP host side: serve interceptors next to tools, advertise the capability, run LocalChains.

The express lane, the SDK adapters and the payload bounds are machinery: import them from their modules."""

from .host import DEFAULT_MAX_PAYLOAD_BYTES, InterceptorHost
from .inprocess import HostConnection
from .install import host_of, install, interceptor_server, to_mcp_error
from .local import LocalChain

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "HostConnection",
    "InterceptorHost",
    "LocalChain",
    "host_of",
    "install",
    "interceptor_server",
    "to_mcp_error",
]
