"""The gateway (`mcp-interceptors proxy`), built on the message router: transports that only frame, one task
that pumps, the chain adapter, the command line. See doc/ROUTER.md.
"""
