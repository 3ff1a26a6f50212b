"""Failures of the invoker's own making, in words: what went wrong with which server, never a class name.

A user reading `server 'dlp' failed: TypeError` learns nothing; `interceptor server 'dlp' sent a reply
that is not valid JSON` tells them where to look. These texts never quote payload content.
"""

from __future__ import annotations

import errno

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

from interceptors.errors import InterceptorsError
from interceptors.errors import leaf as leaf


class InvokerFailure(InterceptorsError, MCPError):
    """An error the invoker raises itself; its message is safe to show and already names the server."""


class MalformedReply(InvokerFailure):
    """A reply that carried a pending request's id but could not be used (not JSON, wrong shape, too big)."""

    def __init__(self, who: str, problem: str) -> None:
        super().__init__(INTERNAL_ERROR, f"{who} sent a malformed reply: {problem}")


class ConnectionLost(InvokerFailure):
    """The transport to the server closed (a dead process, a closed pipe, a broken stream): never an answer the
    server sent, whatever that answer's code."""

    def __init__(self, who: str) -> None:
        super().__init__(CONNECTION_CLOSED, f"{who}: the connection closed")


def describe(exc: BaseException) -> str:
    """A short sentence for any failure, for logs and error messages (no payload content, no class names)."""
    exc = leaf(exc)
    if isinstance(exc, InvokerFailure):
        return exc.error.message
    if isinstance(exc, MCPError):
        if exc.error.code == CONNECTION_CLOSED and exc.error.message == "Connection closed":  # the SDK's words
            return "the connection closed"
        if exc.error.code == REQUEST_TIMEOUT:
            return "the request timed out"
        return exc.error.message
    if isinstance(exc, TimeoutError):
        return "it timed out"
    if isinstance(exc, FileNotFoundError):
        name = f" {exc.filename!r}" if exc.filename else ""
        return f"the program{name} was not found"
    if isinstance(exc, PermissionError):
        name = f" {exc.filename!r}" if exc.filename else ""
        return f"permission denied running{name}"
    if isinstance(exc, OSError):
        code = errno.errorcode.get(exc.errno, "") if exc.errno else ""
        reason = exc.strerror or code or "an operating system error"
        return f"{reason}{f' ({exc.filename!r})' if exc.filename else ''}"
    if isinstance(exc, UnicodeDecodeError):
        return "it sent bytes that are not valid UTF-8"
    http = _http_failure(exc)
    if http is not None:
        return http
    return "an unexpected internal error (run with -v for details)"


_HTTP_LIBRARIES = frozenset({"httpx", "httpx2", "httpcore"})


def _http_failure(exc: BaseException) -> str | None:
    """An HTTP client's failure (connection refused, a bad status, a dropped stream), with the URL it was for:
    scheme, host, port and path only (user info and query can hold credentials). None for anything else."""
    if type(exc).__module__.split(".", 1)[0] not in _HTTP_LIBRARIES:
        return None
    try:
        url = exc.request.url  # type: ignore[attr-defined]  # httpx raises RuntimeError when there is none
    except (AttributeError, RuntimeError):
        url = None
    where = ""
    if url is not None:
        host = getattr(url, "host", "") or ""
        port = getattr(url, "port", None)
        netloc = f"[{host}]" if ":" in host else host
        where = f" {getattr(url, 'scheme', 'http')}://{netloc}{f':{port}' if port else ''}{getattr(url, 'path', '')}"
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return f"the server at{where or ' its URL'} answered HTTP {status}"
    reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "the connection failed"
    return f"could not reach{where or ' the server'}: {reason}"
