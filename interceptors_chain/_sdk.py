"""What this project takes from the MCP SDK's published constants and private modules, read in one place.

The protocol core (`interceptors.protocol`) imports no SDK, so it writes out the protocol versions and the
method table; this module, in the lowest layer allowed to import the SDK, reads what the SDK publishes, and
tests/test_protocol_core.py fails when the two differ. Code that must match what the SDK serves exactly (the
interceptor server's express lane) reads the SDK's values from here.
"""

from __future__ import annotations

from typing import Final

from mcp_types import methods as _methods
from mcp_types import version as _version

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
