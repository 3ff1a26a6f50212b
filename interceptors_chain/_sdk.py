"""What this project takes from the MCP SDK's published constants and private API, read in one place.

The protocol core (`interceptors.protocol`) imports no SDK, so it writes out the protocol versions and the
method table; this module, in the lowest layer allowed to import the SDK, reads what the SDK publishes, and
tests/interceptors/protocol/test_protocol_core.py fails when the two differ. Code that must match what the SDK serves
exactly (the
interceptor server's express lane) reads the SDK's values from here. The SDK's private attributes are read
here too, each behind a check that falls back to the public API (or leaves a fast path off) when the SDK moves
them; tests/interceptors/protocol/test_protocol_core.py fails loudly when one is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from mcp_types import methods as _methods
from mcp_types import version as _version

if TYPE_CHECKING:
    from mcp.client.session import ClientSession
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer

HANDSHAKE_VERSIONS: Final[tuple[str, ...]] = tuple(_version.HANDSHAKE_PROTOCOL_VERSIONS)
LATEST_HANDSHAKE: Final[str] = _version.LATEST_HANDSHAKE_VERSION
MODERN_VERSIONS: Final[tuple[str, ...]] = tuple(_version.MODERN_PROTOCOL_VERSIONS)
LATEST_MODERN: Final[str] = _version.LATEST_MODERN_VERSION
CACHEABLE_METHODS: Final[frozenset[str]] = frozenset(_methods.CACHEABLE_METHODS)


def otel_middleware_type() -> type | None:
    """The SDK's tracing middleware class (a private module), or None when it moved or OpenTelemetry is absent:
    callers then treat every middleware as active (fail closed)."""
    try:
        from mcp.server._otel import OpenTelemetryMiddleware
    except ImportError:
        return None
    return OpenTelemetryMiddleware


def lowlevel_server(server: Server[Any] | MCPServer) -> Server[Any]:
    """The low-level server under an `MCPServer` (its private attribute), or `server` itself."""
    from mcp.server.mcpserver import MCPServer

    if isinstance(server, MCPServer):
        return server._lowlevel_server
    return server


# The session's raw request path. `send_request` builds a pydantic request model, dumps it (walking the whole
# payload) and validates the result against spec tables that never cover extension methods: a sixth of an
# in-memory round trip. We stamp the era envelope and send the raw request instead; if the SDK ever moves these
# attributes, `has_raw_path` says so and callers use `send_request` again.
def has_raw_path(session: ClientSession) -> bool:
    """The session exposes the stamp, read timeout and raw sender `send_raw` relies on."""
    dispatcher = getattr(session, "_dispatcher", None)
    return can_stamp(session) and callable(getattr(dispatcher, "send_raw_request", None))


def can_stamp(session: ClientSession) -> bool:
    """The session exposes the era stamp and read timeout (`stamp`, `read_timeout`)."""
    return callable(getattr(session, "_stamp", None)) and hasattr(session, "_session_read_timeout_seconds")


def stamp(session: ClientSession, data: dict[str, Any], options: dict[str, Any]) -> None:
    """The era envelope added to `data["params"]`, as the session stamps its own requests."""
    private: Any = session
    private._stamp(data, options)


def read_timeout(session: ClientSession) -> float | None:
    """The session's own read timeout, in seconds (None: none)."""
    timeout: float | None = getattr(session, "_session_read_timeout_seconds", None)
    return timeout


async def send_raw(session: ClientSession, method: str, params: dict[str, Any], timeout_s: float | None) -> Any:
    """One request through the session's dispatcher, the era envelope stamped; its result as decoded."""
    data: dict[str, Any] = {"method": method, "params": dict(params)}  # the stamp adds `_meta` to params
    options: dict[str, Any] = {}
    stamp(session, data, options)
    timeout = timeout_s if timeout_s is not None else read_timeout(session)
    if timeout is not None:
        options["timeout"] = timeout
    private: Any = session
    return await private._dispatcher.send_raw_request(method, data["params"], options)


def session_closed(session: ClientSession) -> bool:
    """Whether the session's dispatcher saw its transport end (the SDK's private state)."""
    return getattr(getattr(session, "_dispatcher", None), "_closed", None) is True


def wrap_dispatcher(session: ClientSession, wrap: Callable[[Any], Any]) -> None:
    """Swap the session's dispatcher for `wrap(dispatcher)` before the session starts: the SDK has no public seam
    for seeing every message a client sends and receives (the intercepting client's one use of it)."""
    private: Any = session
    private._dispatcher = wrap(private._dispatcher)
