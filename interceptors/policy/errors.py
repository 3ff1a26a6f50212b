"""Policy errors: invalid documents, and refusals that carry an exact JSON-RPC code (pure Python, no MCP)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import INVALID_PARAMS, InterceptorRpcError, InterceptorsError

ACCESS_DENIED = -31001
"""A policy denial (the primitive is visible, or `hide_denied` is off). Data `{reason, policy}`."""
RATE_LIMITED = -31029
"""A token bucket is empty. Data `{retry_after, limit, scope}`."""
NOT_FOUND = INVALID_PARAMS
"""Unknown or hidden primitive: -32602, exactly what a nonexistent name gets."""


class PolicyError(InterceptorsError, ValueError):
    """An invalid policy document. Lists field paths and problems only: values (a vault key) are never shown."""

    def __init__(self, source: str, problems: Sequence[str], *, kind: str = "policy") -> None:
        self.source = source
        self.problems = list(problems)
        shown = "; ".join(self.problems[:20])
        more = f" (+{len(self.problems) - 20} more)" if len(self.problems) > 20 else ""
        super().__init__(f"Invalid {kind} {source}: {shown}{more}")


class PolicyRefusal(InterceptorRpcError):
    """A refused operation as a JSON-RPC error: -31001 denied, -31029 rate limited, -32602 unknown or hidden."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
