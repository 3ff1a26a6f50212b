"""Adapters to the outside: server middleware for the `mcp` SDK, the demo and the command line."""

from .middleware import ContextProvider, InterceptorMiddleware, default_context

__all__ = ["ContextProvider", "InterceptorMiddleware", "default_context"]
