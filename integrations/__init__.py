"""Adapters to the outside: server middleware for the `mcp` SDK, the intercepting client, the gateway, the
demo and the command line.

The names below load on first use (PEP 562), so that importing a submodule (the pytest entry point
`integrations.pytest_plugin`, the command line) does not import the MCP SDK before it is needed.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .client import ClientContextProvider, InterceptingClient, InterceptingDispatcher
    from .middleware import ContextProvider, InterceptorMiddleware, default_context

_HOMES = {
    "ClientContextProvider": "client",
    "InterceptingClient": "client",
    "InterceptingDispatcher": "client",
    "ContextProvider": "middleware",
    "InterceptorMiddleware": "middleware",
    "default_context": "middleware",
}

__all__ = [
    "ClientContextProvider",
    "ContextProvider",
    "InterceptingClient",
    "InterceptingDispatcher",
    "InterceptorMiddleware",
    "default_context",
]


def __getattr__(name: str) -> _typing.Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'integrations' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
