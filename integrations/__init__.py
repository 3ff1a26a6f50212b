"""Adapters to the outside: server middleware for the `mcp` SDK, the demo and the command line."""

from .client import ClientContextProvider, InterceptingClient, InterceptingDispatcher
from .middleware import ContextProvider, InterceptorMiddleware, default_context

__all__ = [
    "ClientContextProvider",
    "ContextProvider",
    "InterceptingClient",
    "InterceptingDispatcher",
    "InterceptorMiddleware",
    "default_context",
]
