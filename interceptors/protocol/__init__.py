"""The protocol core under every edge: MCP's methods, and (as they move down) framing, messages and eras.

Pure: no I/O, no MCP SDK. The router, the interceptor server's stdio lane, the chain's stdio pipe and the
HTTP front all read the facts here rather than keeping copies.
"""

from __future__ import annotations

from .methods import METHODS, SERVER_INFO_EVENT, Channel, Method, MethodTable, Sender, Stage

__all__ = ["METHODS", "SERVER_INFO_EVENT", "Channel", "Method", "MethodTable", "Sender", "Stage"]
