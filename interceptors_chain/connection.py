"""How the chain reaches an interceptor server: one request/response call over an MCP client session."""

from __future__ import annotations

from typing import Any, Protocol

from mcp import types
from mcp.client.session import ClientSession
from mcp_types import REQUEST_TIMEOUT
from pydantic import TypeAdapter

_ENVELOPE_KEYS = ("resultType", "_meta")
_ANY_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class Connection(Protocol):
    """Anything that can send one JSON-RPC request to an interceptor host and return the result dict.

    Errors are raised as `mcp.shared.exceptions.MCPError` (JSON-RPC errors, timeouts, closed
    connections) or any other exception for transport failures.
    """

    async def request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> dict[str, Any]: ...


class _CustomRequest(types.Request[dict[str, Any], str]):
    """A request for an extension method, sent through the session so the era envelope is stamped."""


class SessionConnection:
    """A Connection over an initialised `mcp.ClientSession` (in-memory, stdio or Streamable HTTP).

    Concurrent requests are multiplexed on the one session.
    """

    __slots__ = ("session",)

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
        # A dict TypeAdapter skips building a model per result (the SDK TypeVar bound is too strict).
        result = await self.session.send_request(
            _CustomRequest(method=method, params=params),
            _ANY_RESULT,  # type: ignore[type-var]
            request_read_timeout_seconds=timeout_s,
        )
        return strip_envelope(result)


def strip_envelope(result: dict[str, Any]) -> dict[str, Any]:
    """Drop the transport envelope (2026-era `resultType`, `_meta`): not part of SEP-2624 results."""
    if "resultType" in result or "_meta" in result:
        return {key: value for key, value in result.items() if key not in _ENVELOPE_KEYS}
    return result


def is_timeout_code(code: int) -> bool:
    return code == REQUEST_TIMEOUT
