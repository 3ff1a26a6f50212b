"""The gateway built on the message router: transports that only frame, one task that pumps, the chain adapter.

Selected with `mcp-interceptors proxy --router` (or `MCP_INTERCEPTORS_ROUTER=1`); see doc/ROUTER.md.
"""
