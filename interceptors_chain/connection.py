"""How the chain reaches an interceptor server: one request/response call over an MCP client session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

from mcp import types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import TypeAdapter

from interceptors import InvocationContext, Phase
from interceptors.errors import OLD_SEP_TIMEOUT
from interceptors.wire import InvokeResult

from . import _sdk
from .failures import ConnectionLost, InvokerFailure

_ENVELOPE_KEYS = ("resultType", "_meta")
_ANY_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class Connection(Protocol):
    """Anything that can send one JSON-RPC request to an interceptor host and return the result dict.

    Errors are raised as `mcp.shared.exceptions.MCPError` (JSON-RPC errors, timeouts, closed
    connections) or any other exception for transport failures.
    """

    async def request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> dict[str, Any]: ...


LocalReply = tuple[InvokeResult, dict[str, Any]]
"""An in-process host's reply: the result and its (fresh) wire form."""


class PassMemo:
    """One execution's record for the in-process hosts it invokes (`LocalStart`'s `memo`): the last payload and
    its JSON, the context and what its copies are decoded from. A host encodes once per payload and context and
    decodes a private copy per interceptor from that. Keyed by identity and made per execution: while one runs,
    neither its payload nor its context changes (handlers get copies; a mutator's output is a new object)."""

    __slots__ = ("context", "encoded", "payload", "sent")

    def __init__(self) -> None:
        self.payload: Any = None
        self.encoded: bytes | None = None
        self.context: InvocationContext | None = None
        self.sent: tuple[bool, bytes] | None = None


class LocalStart(Protocol):
    """A connection's optional typed path to a host in this process (`HostConnection.start_local`).

    Same contract as `interceptor/invoke` over `request`, without building and reading wire dicts: raises
    `InterceptorRpcError` where a host answers an error, and returns the reply at once when the handler ran on
    the caller's stack (a sync handler registered `inline`), else a coroutine to await for it (having run no
    handler yet). The invoker enforces the timeout itself, so none is passed.
    """

    def __call__(
        self,
        name: str,
        event: str,
        phase: Phase,
        payload: Any,
        config: Mapping[str, Any] | None,
        context: InvocationContext | None,
        memo: PassMemo | None = None,
        /,
    ) -> LocalReply | Coroutine[Any, Any, LocalReply]: ...


ExpressRequest = Callable[[ClientSession, str, dict[str, Any], float | None], Awaitable[dict[str, Any]]]
"""A transport's own path for the session's requests (see `stdio_pipe.StdioPipe.request`)."""


class _CustomRequest(types.Request[dict[str, Any], str]):
    """A request for an extension method, sent through the session so the era envelope is stamped."""


class SessionConnection:
    """A Connection over an initialised `mcp.ClientSession` (in-memory, stdio or Streamable HTTP).

    Concurrent requests are multiplexed on the one session.
    """

    __slots__ = ("_closed", "_express", "_fast", "session", "who")

    def __init__(
        self,
        session: ClientSession,
        express: ExpressRequest | None = None,
        *,
        closed: Callable[[], bool] | None = None,
        who: str = "the server",
    ) -> None:
        self.session = session
        self._fast = _sdk.has_raw_path(session)
        self._express = express
        self._closed = closed
        self.who = who

    async def request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
        try:
            if self._express is not None:
                return strip_envelope(await self._express(self.session, method, params, timeout_s))
            if self._fast:
                return strip_envelope(await _send_raw(self.session, method, params, timeout_s))
            # A dict TypeAdapter skips building a model per result (the SDK TypeVar bound is too strict).
            result = await self.session.send_request(
                _CustomRequest(method=method, params=params),
                _ANY_RESULT,  # type: ignore[type-var]
                request_read_timeout_seconds=timeout_s,
            )
        except MCPError as exc:
            # The SDK reports a closed transport with the code a server may also answer (-32000, which peers
            # use for a timeout): where the error came from decides, never its code.
            if exc.error.code == CONNECTION_CLOSED and not isinstance(exc, InvokerFailure) and self._lost(exc):
                raise ConnectionLost(self.who) from None
            raise
        return strip_envelope(result)

    def _lost(self, exc: MCPError) -> bool:
        """Whether the transport gave up on the request: the owner's word where it knows its transport (the
        stdio pipe does), else the session's state or the SDK's own wording for an abandoned request."""
        if self._closed is not None:
            return self._closed()
        return _sdk.session_closed(self.session) or (exc.error.message in _TRANSPORT_TEXTS and exc.error.data is None)


async def _send_raw(session: ClientSession, method: str, params: dict[str, Any], timeout_s: float | None) -> Any:
    result = await _sdk.send_raw(session, method, params, timeout_s)
    if not isinstance(result, dict):
        raise TypeError("the result of an extension method must be an object")
    return result


def strip_envelope(result: dict[str, Any]) -> dict[str, Any]:
    """Drop the transport envelope (2026-era `resultType`, `_meta`): not part of SEP-2624 results."""
    if "resultType" in result or "_meta" in result:
        return {key: value for key, value in result.items() if key not in _ENVELOPE_KEYS}
    return result


# What the SDK's transports answer in place of a reply that can never come (not a server's own words).
_TRANSPORT_TEXTS = frozenset({"Connection closed", "SSE stream ended without a response"})


def is_timeout_answer(code: int, data: Any) -> bool:
    """A host's answer that its interceptor timed out: SEP-2624's `data.reason`, the SDK's request timeout, or
    the -32000 that Go and the working group's SDKs send."""
    return code in (REQUEST_TIMEOUT, OLD_SEP_TIMEOUT) or (isinstance(data, dict) and data.get("reason") == "timeout")
