"""JSON-RPC error codes and the transport-free error every layer raises."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
OLD_SEP_TIMEOUT = -32000
"""What the Go implementation and the working group's SDKs answer for a `timeoutMs` expiry (SEP-2624 now says
-32603 with `data.reason: "timeout"`); a timeout answer whatever the code, never a lost connection."""


def integral(value: object) -> int | None:
    """`value` as an int when it is a JSON number with an integral value (200 and 200.0 alike: JSON has one
    number type), else None (booleans, 200.5, non-finite floats, anything else)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


class InterceptorsError(Exception):
    """The root of every exception this project raises, as httpx's `HTTPError` is for httpx: `except
    InterceptorsError` catches any of them. Each keeps its builtin base (`ValueError`, `RuntimeError`,
    `OSError`, `TypeError`, `AssertionError`, the SDK's `MCPError`) where callers catch that (doc/DESIGN.md,
    "Exceptions")."""


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error object (`data` omitted when None): the one builder every layer answers with."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups (a task group wraps what its body raises)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class WireError(InterceptorsError, ValueError):
    """A value that does not have the SEP-2624 wire shape; `path` names the offending field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


class InterceptorRpcError(InterceptorsError):
    """A JSON-RPC error to put on the wire: hosts raise it, adapters translate it to their SDK's error type.

    Messages and data are written by this project and never carry payload content.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        return error_object(self.code, self.message, self.data)


class RequesterError(InterceptorRpcError):
    """An in-process handler's failure that chose what the requester sees: a chain answers the requester with
    exactly this error (its message and data are written for the requester, e.g. a shared store that is
    unavailable), instead of the generic "interceptor failed". Over the wire it is an ordinary host error."""
