"""The in-process transport: the invoker's `Connection` straight to an `InterceptorHost` in the same process.

An in-process invoke costs a function call, not an MCP round trip, and keeps what the wire guarantees: the
host copies the payload, config and context before any handler runs (so a handler never sees or changes the
caller's objects), refuses oversized payloads, enforces `timeoutMs` and answers its SEP-2624 error table;
the reply is copied back the way a decoded JSON reply would be fresh; errors reach the invoker as the same
`MCPError`s an SDK client raises; and the invoker's own result checks (M1, `modified: false`) run unchanged.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError

from interceptors import INTERNAL_ERROR, INVOKE_METHOD, LIST_METHOD, METHOD_NOT_FOUND, InterceptorRpcError
from interceptors.codec import dumps, loads

from .host import InterceptorHost
from .install import internal_error, to_mcp_error


class HostConnection:
    """A `Connection` to an in-process `InterceptorHost` (what `LocalChain` uses by default)."""

    __slots__ = ("host", "runs_inline", "start_local")

    def __init__(self, host: InterceptorHost) -> None:
        self.host = host
        self.start_local = host.start_local
        """The typed path the invoker takes (`interceptors_chain.connection.LocalStart`): no wire dicts, and a
        function call for handlers that never suspend."""
        self.runs_inline = host.runs_inline
        """Which interceptors never suspend (sync handlers registered `inline`, below the payload threshold)."""

    async def request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
        """One request, answered as the host's MCP binding would answer it (the invoker enforces `timeout_s`)."""
        try:
            if method == INVOKE_METHOD:
                result = await self.host.invoke(params)
            elif method == LIST_METHOD:
                result = self.host.list(params)
            else:
                raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data={"method": method})
        except InterceptorRpcError as exc:
            raise to_mcp_error(exc) from None
        except MCPError:
            raise
        except Exception as exc:  # a host bug: the same error the MCP binding sends, never the exception text
            raise internal_error(exc) from None
        return _fresh(result, params)


def _fresh(result: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The reply as a JSON round trip gives it: nothing in it is shared with the handler that built it."""
    try:
        copied: dict[str, Any] = loads(dumps(result))
    except TypeError:  # a handler returned something JSON cannot carry: no wire could deliver it either
        name = params.get("name")
        raise MCPError(
            code=INTERNAL_ERROR,
            message=f"interceptor {name!r} returned a malformed result",
            data={"interceptor": name, "reason": "malformed result: not representable as JSON"},
        ) from None
    return copied
