"""The gateway's one connection to its upstream MCP server: a subprocess over stdio, 2025-11-25 handshake.

The handshake era is used upstream because it is the one every server speaks and the one whose
server-to-client notifications (list_changed, resources/updated, log messages, progress) flow on the
connection without per-request opt-ins; the gateway translates to whatever era each downstream client
speaks. Requests go through `ClientSession.send_request` with raw dict params and a raw dict result, so
the gateway forwards what it received, field for field.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any, Protocol

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client import IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import SessionMessage
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)
from pydantic import RootModel

from interceptors_chain.stdio_pipe import DEFAULT_MAX_LINE_BYTES, StdioPipe, express_capable, open_stdio_pipe

logger = logging.getLogger("interceptors.gateway")

HANDSHAKE_TIMEOUT_S = 30.0
UPSTREAM_CLOSED_MESSAGE = "upstream server closed the connection"

# Downstream `_meta` keys that belong to the downstream hop: the 2026 envelope (a handshake-era upstream
# refuses requests carrying it) and the progress token (the gateway asks upstream for progress itself).
_HOP_META_KEYS = frozenset(
    {
        PROTOCOL_VERSION_META_KEY,
        CLIENT_INFO_META_KEY,
        CLIENT_CAPABILITIES_META_KEY,
        LOG_LEVEL_META_KEY,
        "progressToken",
    }
)


_Request = types.Request[dict[str, Any] | None, str]
"""Any request, params as a dict (parametrized once: building the generic alias per call is not free)."""


class _RawResult(RootModel[dict[str, Any]]):
    """Any result object, kept as the dict it arrived as (the session still validates spec results)."""


LogSink = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]
NotificationSink = Callable[[types.ServerNotification], Awaitable[None]]


class UpstreamError(RuntimeError):
    """The upstream server could not be started or did not complete the handshake."""


def upstream_params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Downstream params as the upstream should see them: the hop-specific `_meta` keys removed."""
    if params is None:
        return None
    meta = params.get("_meta")
    if not isinstance(meta, Mapping) or _HOP_META_KEYS.isdisjoint(meta):
        return dict(params)
    out = dict(params)
    kept = {key: value for key, value in meta.items() if key not in _HOP_META_KEYS}
    if kept:
        out["_meta"] = kept
    else:
        del out["_meta"]
    return out


class _Receiver(Protocol):
    async def receive(self) -> SessionMessage | Exception: ...
    async def aclose(self) -> None: ...


class _SignalOnEof:
    """A read stream that sets `closed` when the upstream's stdout ends (the SDK signals nothing else)."""

    def __init__(self, inner: _Receiver, closed: anyio.Event) -> None:
        self._inner = inner
        self._closed = closed

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._closed.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _SignalOnEof:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _SignalOnEof:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched_stdio(
    params: StdioServerParameters, closed: anyio.Event, max_line_bytes: int
) -> AsyncIterator[tuple[Any, Any, StdioPipe | None]]:
    """(read, write, the pipe when ours): our stdio pipe on POSIX, the SDK's transport elsewhere."""
    try:
        if sys.platform == "win32":
            async with stdio_client(params) as (read, write):
                yield _SignalOnEof(read, closed), write, None
        else:
            async with open_stdio_pipe(
                params, sys.stderr, closed.set, who="the upstream server", max_line_bytes=max_line_bytes
            ) as pipe:
                yield pipe.read_stream, pipe.write_stream, pipe
    finally:
        closed.set()


class Upstream:
    """`async with Upstream(params, on_log=..., on_notification=...) as upstream:` spawns and handshakes.

    `on_log` gets every upstream log message and must do its bookkeeping before its first await (the
    gateway attributes a log to the operations in flight when it arrives). `on_notification` gets the
    other notifications: list_changed and resources/updated. `closed` is set when the upstream goes away.
    """

    def __init__(
        self,
        params: StdioServerParameters,
        *,
        on_log: LogSink | None = None,
        on_notification: NotificationSink | None = None,
        handshake_timeout: float = HANDSHAKE_TIMEOUT_S,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.params = params
        self.max_line_bytes = max_line_bytes
        self.closed = anyio.Event()
        self._on_log = on_log
        self._on_notification = on_notification
        self._handshake_timeout = handshake_timeout
        self._stack: AsyncExitStack | None = None
        self._session: ClientSession | None = None
        self._handshake: types.InitializeResult | None = None
        self._pipe: StdioPipe | None = None

    async def __aenter__(self) -> Upstream:
        stack = AsyncExitStack()
        try:
            read, write, pipe = await stack.enter_async_context(
                _watched_stdio(self.params, self.closed, self.max_line_bytes)
            )
            session = ClientSession(
                read,
                write,
                logging_callback=self._log,
                message_handler=self._message,
                client_info=types.Implementation(name="mcp-interceptors-gateway", version=_version()),
            )
            await stack.enter_async_context(session)
            with anyio.fail_after(self._handshake_timeout):
                self._handshake = await session.initialize()
        except BaseException as exc:
            await stack.aclose()
            leaf = _leaf(exc)
            if isinstance(leaf, TimeoutError):
                raise UpstreamError(
                    f"the upstream server did not answer the handshake in {self._handshake_timeout:g} s"
                ) from None
            if isinstance(leaf, OSError):
                reason = leaf.strerror or type(leaf).__name__
                raise UpstreamError(f"cannot start the upstream server {self.params.command!r}: {reason}") from None
            if isinstance(leaf, Exception):
                raise UpstreamError(f"the upstream server failed the handshake ({_describe(leaf)})") from None
            raise
        self._session = session
        self._stack = stack
        self._pipe = pipe if pipe is not None and express_capable(session) else None
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack, self._session, self._pipe = self._stack, None, None, None
        if stack is not None:
            await stack.aclose()

    @property
    def session(self) -> ClientSession:
        if self._session is None:
            raise RuntimeError("the upstream is not connected")
        return self._session

    @property
    def handshake(self) -> types.InitializeResult:
        if self._handshake is None:
            raise RuntimeError("the upstream is not connected")
        return self._handshake

    @property
    def server_info(self) -> types.Implementation:
        return self.handshake.server_info

    @property
    def capabilities(self) -> types.ServerCapabilities:
        return self.handshake.capabilities

    @property
    def instructions(self) -> str | None:
        return self.handshake.instructions

    async def request(
        self, method: str, params: Mapping[str, Any] | None, progress: ProgressFnT | None = None
    ) -> dict[str, Any]:
        """Send one request with the downstream's params (hop keys removed); the raw result dict back."""
        request = _Request(method=method, params=upstream_params(params))
        result = await self.session.send_request(request, _RawResult, progress_callback=progress)
        return result.root

    @property
    def raw_requests(self) -> bool:
        """Whether `raw_request` skips the session (our stdio pipe is in use)."""
        return self._pipe is not None

    async def raw_request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """`request` without progress, off the session's per-message machinery when the pipe allows.

        The result is the upstream's JSON as it arrived (not validated here: the caller sieves it).
        """
        if self._pipe is None:
            return await self.request(method, params)
        return await self._pipe.request(self.session, method, upstream_params(params) or {}, None)

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self._on_log is not None:
            await self._on_log(params)

    async def _message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            logger.warning("the upstream sent something unreadable: %s", type(message).__name__)
            return
        if isinstance(message, types.LoggingMessageNotification | types.ProgressNotification):
            return  # routed through the logging and progress callbacks
        if self._on_notification is not None:
            await self._on_notification(message)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: Exception) -> str:
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return f"error {exc.error.code}: {exc.error.message}"
    return type(exc).__name__


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mcp-interceptors")
    except Exception:
        return "0"
