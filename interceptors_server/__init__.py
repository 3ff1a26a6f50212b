"""The MCP host side: serve interceptors next to tools, advertise the capability, run LocalChains."""

from .express import ExpressLane, ExpressRoute, InvokeRoute, express_enabled, express_lane_for
from .host import DEFAULT_MAX_PAYLOAD_BYTES, INLINE_MAX_PAYLOAD_BYTES, InterceptorHost
from .inprocess import HostConnection
from .install import host_of, install, interceptor_server, lowlevel_server, to_mcp_error
from .local import LocalChain

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "INLINE_MAX_PAYLOAD_BYTES",
    "ExpressLane",
    "ExpressRoute",
    "HostConnection",
    "InterceptorHost",
    "InvokeRoute",
    "LocalChain",
    "express_enabled",
    "express_lane_for",
    "host_of",
    "install",
    "interceptor_server",
    "lowlevel_server",
    "to_mcp_error",
]
