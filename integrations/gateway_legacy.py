"""`mcp-interceptors proxy`: put the interceptor chain in front of any MCP server, without touching it.

The gateway starts the upstream server as a subprocess (stdio), mirrors it as a low-level `Server` (name,
version, instructions and only the capabilities the upstream has), and serves that mirror to the downstream
client over stdio or Streamable HTTP. Every request is forwarded with its params as received; the chain
runs around each context operation through `InterceptorMiddleware` (the gateway receives the request and
sends the result). Errors, progress and log messages of an operation pass its response-phase chain as
result-shaped payloads (see `gateway_channels`). Notifications the upstream sends on its own (list_changed,
resources/updated) are relayed to each downstream client in its protocol era.

Log messages carry no request id on stdio, so a log is attributed to the operations in flight when it
arrives: it passes the response chain of each of them and rides the oldest one's stream. A log arriving
with nothing in flight reaches 2025-era clients untouched when the chain has no response-phase
interceptor, and is dropped otherwise (there is no operation whose chain could judge it). With several
HTTP clients sharing one upstream, such attribution can pick another client's operation.
"""

from __future__ import annotations

import contextvars
import logging
import signal
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, cast

import anyio
import anyio.abc
import uvicorn
from mcp import StdioServerParameters, types
from mcp.server.caching import CACHEABLE_METHODS, CacheableMethod, CacheHint
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types import CONNECTION_CLOSED
from mcp_types.methods import SPEC_CLIENT_METHODS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from interceptors import INTERNAL_ERROR, InvocationContext, Phase, Registry
from interceptors.transforms.stream import StreamHoldBack
from interceptors_chain import Chain
from interceptors_chain.stdio_pipe import DEFAULT_MAX_LINE_BYTES
from interceptors_server import install
from interceptors_server.express import ExpressLane, WriteBytes, express_enabled, idle_middleware
from interceptors_server.install import OpenParams
from interceptors_server.stdio import serve_streams

from .gateway_channels import filter_error, filter_log_message, filter_progress, has_work
from .gateway_cli import add_proxy_command
from .gateway_express import EXPRESS_METHODS, GatewayRoute
from .gateway_tools import Authorize, LocalTool, LocalToolCalls, with_local_tools
from .gateway_upstream import UPSTREAM_CLOSED_MESSAGE, Upstream, UpstreamError
from .middleware import ContextProvider, InterceptorMiddleware, default_context

logger = logging.getLogger("interceptors.gateway")

UPSTREAM_RESTARTING_MESSAGE = "the upstream server is restarting: try again shortly"
DRAIN_TIMEOUT_S = 1.5
"""When stopping (the upstream died, or a signal): how long in-flight calls get to answer first."""


class ListenError(RuntimeError):
    """The HTTP address cannot be bound (taken, or not this machine's)."""


_CONTEXT: contextvars.ContextVar[InvocationContext | None] = contextvars.ContextVar(
    "mcp_interceptors_gateway_context", default=None
)


def _connection_of(session: ServerSession) -> Connection:
    # Private attribute: mcp 2.3's ServerSession has no public handle on its per-client Connection, which
    # the gateway needs as the identity of a downstream client and for its exit stack (to forget the client
    # when it leaves). The only private access in the gateway.
    connection: Connection = session._connection
    return connection


# A proxy cannot know how long the upstream's results stay fresh: immediately stale, never shared.
_NO_CACHING: dict[CacheableMethod, CacheHint] = {
    cast(CacheableMethod, method): CacheHint(ttl_ms=0, scope="private") for method in CACHEABLE_METHODS
}


class _MirrorServer(Server[Any]):
    """A low-level server whose capabilities are the upstream's, plus what the gateway itself adds."""

    def __init__(
        self, upstream: types.ServerCapabilities, info: types.Implementation, instructions: str | None
    ) -> None:
        super().__init__(
            info.name,
            cache_hints=_NO_CACHING,
            version=info.version,
            title=info.title,
            description=info.description,
            instructions=instructions,
            website_url=info.website_url,
            icons=info.icons,
        )
        self.upstream_capabilities = upstream

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        # Mirrored in both eras: at 2026-07-28 list_changed and subscribe travel on subscriptions/listen,
        # which the gateway serves exactly when the upstream has any of them. Experimental entries stay true
        # because unknown methods are forwarded; the gateway's own (the interceptors capability) win.
        up = self.upstream_capabilities
        experimental = {**(up.experimental or {}), **(experimental_capabilities or {})}
        merged_extensions = extensions if extensions is not None else self.extensions
        return types.ServerCapabilities(
            tools=up.tools,
            resources=up.resources,
            prompts=up.prompts,
            logging=up.logging,
            completions=up.completions,
            experimental=experimental or None,
            extensions=merged_extensions or None,
        )


_Item = tuple[str, Any]


class _Call:
    """One forwarded request: its progress and log messages queue here and go out in order, before the result."""

    __slots__ = ("_lock", "_queue", "context", "ctx", "gateway", "last_log", "last_progress", "method", "streams")

    def __init__(self, gateway: Gateway, method: str, ctx: ServerRequestContext[Any, Any]) -> None:
        self.gateway = gateway
        self.method = method
        self.ctx = ctx
        # Read in the request's task: progress and logs are delivered from the upstream's tasks.
        self.context = _CONTEXT.get()
        self._queue: deque[_Item] = deque()
        self._lock: anyio.Lock | None = None
        # A secret split across two progress (or log) messages: held back until it is whole (transforms.stream).
        self.streams: dict[str, StreamHoldBack] = {}
        self.last_progress: tuple[float, float | None] | None = None
        self.last_log: tuple[Any, Any] | None = None

    def stream(self, channel: str) -> StreamHoldBack:
        if channel not in self.streams:
            self.streams[channel] = StreamHoldBack()
        return self.streams[channel]

    async def finish(self) -> None:
        """The request is over: what the streams still hold goes out (through the chain) before the result."""
        for channel, stream in self.streams.items():
            held = stream.flush()
            if not held:
                continue
            if channel == "progress" and self.last_progress is not None:
                self.push(("progress_final", (*self.last_progress, held)))
            elif channel == "log" and self.last_log is not None:
                params, events = self.last_log
                self.push(("log_final", (params.model_copy(update={"data": held}), events)))
        await self.flush()

    def push(self, item: _Item) -> None:
        self._queue.append(item)

    async def flush(self) -> None:
        """Deliver everything queued; waits for a delivery in progress elsewhere, so nothing is overtaken."""
        if self._lock is None:
            if not self._queue:
                return
            self._lock = anyio.Lock()
        async with self._lock:
            while self._queue:
                await self.gateway._deliver(self, self._queue.popleft())

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.push(("progress", (progress, total, message)))
        await self.flush()


class _ClientTracker:
    """Remembers each 2025-era downstream client (at `notifications/initialized`) for connection-level relays."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "notifications/initialized" and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.gateway._track(ctx.session)
        return await call_next(ctx)


class _ForwardUnknown:
    """Requests the mirror has no handler for (extension or experimental methods) go upstream as they are.

    Innermost middleware, so the chain has already run on them like on any other context operation.
    """

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if ctx.request_id is None or method in SPEC_CLIENT_METHODS or self.gateway.server.get_request_handler(method):
            return await call_next(ctx)
        return await self.gateway._forward_result(ctx, method)


class Gateway:
    """`async with Gateway(upstream_params, chain) as gateway:` — the upstream running, `gateway.server` ready.

    Serve `gateway.server` yourself (e.g. `Client(gateway.server)` in tests), or call `serve_stdio()` /
    `serve_http()`. `expose` registries are installed on the mirror, so it also answers `interceptors/list`
    and `interceptor/invoke` for them. Progress is relayed for requests carrying a progress token, which
    every wire transport does; the SDK's in-process direct path (`Client(server)` in auto mode) passes its
    progress callback out of band, so there the gateway cannot ask the upstream for progress.
    """

    def __init__(
        self,
        upstream: StdioServerParameters,
        chain: Chain,
        *,
        expose: Sequence[Registry] | None = None,
        context_provider: ContextProvider = default_context,
        http_guard: Callable[[Any], Any] | None = None,
        local_tools: Sequence[LocalTool] = (),
        authorize_local: Authorize | None = None,
        restart_upstream: bool = False,
        restart_backoff_s: tuple[float, float] = (0.2, 10.0),
        restart_wait_s: float = 10.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.upstream_params = upstream
        self.restart_upstream = restart_upstream
        self.restart_backoff_s = restart_backoff_s
        self.restart_wait_s = restart_wait_s
        self.max_line_bytes = max_line_bytes
        self.upstream_restarts = 0
        self.on_upstream_restart: Callable[[Upstream], Awaitable[None]] | None = None
        self.chain = chain
        self.expose = expose
        self.context_provider = context_provider
        self.http_guard = http_guard
        self.local_tools = {tool.name: tool for tool in local_tools}
        self.authorize_local = authorize_local
        self.upstream = self._new_upstream()
        self._first_upstream = self.upstream
        self._server: _MirrorServer | None = None
        self._calls: dict[int, _Call] = {}
        self._clients: dict[Connection, ServerSession] = {}
        self._holders: dict[str, set[object]] = {}
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus)
        self._tool_schemas: dict[str, Any] = {}
        self._stop_serving: Callable[[], None] | None = None

    async def __aenter__(self) -> Gateway:
        await self.upstream.__aenter__()
        try:
            self._server = self._build_server()
        except BaseException:
            await self.upstream.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._listen.close()
        await self._first_upstream.__aexit__(exc_type, exc, tb)  # restarted ones are closed where they started

    def _new_upstream(self) -> Upstream:
        return Upstream(
            self.upstream_params,
            on_log=self._on_upstream_log,
            on_notification=self._on_upstream_notification,
            max_line_bytes=self.max_line_bytes,
        )

    async def _live_upstream(self) -> Upstream:
        """The upstream to send a new call to: while it is being restarted, wait for it (bounded)."""
        upstream = self.upstream
        if upstream.closed.is_set() and self.restart_upstream:
            with anyio.move_on_after(self.restart_wait_s):
                while self.upstream.closed.is_set():
                    await anyio.sleep(0.05)
            upstream = self.upstream
            if upstream.closed.is_set():
                raise MCPError(INTERNAL_ERROR, UPSTREAM_RESTARTING_MESSAGE)
        return upstream

    async def _supervise_upstream(self) -> None:
        """Restart the upstream whenever it goes away, with capped exponential backoff; runs until cancelled.

        Each restarted upstream is entered and left here, in the task that runs `run`."""
        low, high = self.restart_backoff_s
        while True:
            await self.upstream.closed.wait()
            logger.warning("the upstream server exited; restarting it")
            delay = low
            while True:
                await anyio.sleep(delay)
                fresh = self._new_upstream()
                try:
                    await fresh.__aenter__()
                except UpstreamError as exc:
                    logger.warning("the upstream server failed to restart: %s", exc)
                    delay = min(delay * 2, high)
                    continue
                break
            try:
                self.upstream = fresh
                self.upstream_restarts += 1
                logger.warning("the upstream server restarted (restart %d)", self.upstream_restarts)
                if self.on_upstream_restart is not None:
                    await self.on_upstream_restart(fresh)
                await fresh.closed.wait()
            finally:  # not under a new (shielding) scope: the upstream's own scopes must be the innermost ones;
                await fresh.__aexit__(None, None, None)  # its process cleanup shields itself

    @property
    def server(self) -> Server[Any]:
        if self._server is None:
            raise RuntimeError("the gateway is not started: use `async with Gateway(...)`")
        return self._server

    # The mirror ---------------------------------------------------------------------------------
    def _build_server(self) -> _MirrorServer:
        info = self.upstream.server_info
        caps = self.upstream.capabilities
        server = _MirrorServer(caps, info, self.upstream.instructions)
        server.get_tool_input_schema = self._tool_schemas.get
        methods: list[str] = []
        if caps.tools is not None:
            methods += ["tools/list", "tools/call"]
        if caps.resources is not None:
            methods += ["resources/list", "resources/templates/list", "resources/read"]
        if caps.prompts is not None:
            methods += ["prompts/list", "prompts/get"]
        if caps.completions is not None:
            methods.append("completion/complete")
        if caps.logging is not None:
            methods.append("logging/setLevel")
        for method in methods:
            server.add_request_handler(method, OpenParams, self._forwarder(method))
        if caps.resources is not None and caps.resources.subscribe:
            server.add_request_handler("resources/subscribe", OpenParams, self._subscribe)
            server.add_request_handler("resources/unsubscribe", OpenParams, self._unsubscribe)
        if self._relays_changes(caps):
            server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, self._on_listen)
        if self.local_tools and caps.tools is not None:
            server.middleware.append(LocalToolCalls(self.local_tools, self.context_provider, self.authorize_local))
        server.middleware.append(_ClientTracker(self))
        server.middleware.append(InterceptorMiddleware(self.chain, context_provider=self._provide_context))
        server.middleware.append(_ForwardUnknown(self))
        if self.expose is not None:
            install(server, *self.expose)
        return server

    @staticmethod
    def _relays_changes(caps: types.ServerCapabilities) -> bool:
        return bool(
            (caps.tools is not None and caps.tools.list_changed)
            or (caps.prompts is not None and caps.prompts.list_changed)
            or (caps.resources is not None and (caps.resources.list_changed or caps.resources.subscribe))
        )

    # Forwarding ---------------------------------------------------------------------------------
    def _forwarder(self, method: str) -> Callable[[ServerRequestContext[Any, Any], OpenParams], Any]:
        async def forward(ctx: ServerRequestContext[Any, Any], params: OpenParams) -> dict[str, Any]:
            return await self._forward_result(ctx, method)

        return forward

    async def _forward_result(self, ctx: ServerRequestContext[Any, Any], method: str) -> dict[str, Any]:
        result = await self._forward(ctx, method)
        if method == "tools/list":
            first_page = not (ctx.params or {}).get("cursor")
            result = with_local_tools(result, self.local_tools, first_page)
            self._remember_schemas(result)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and "resultType" not in result:
            result["resultType"] = "complete"  # required at 2026-07-28; a 2025-era upstream never sends it
        return result

    async def _forward(self, ctx: ServerRequestContext[Any, Any], method: str) -> dict[str, Any]:
        """One upstream round trip with the downstream's params; errors and notifications pass the chain."""
        call = _Call(self, method, ctx)
        key = id(call)
        self._calls[key] = call
        try:
            progress = call.on_progress if progress_token_from_params(ctx.params) is not None else None
            upstream = await self._live_upstream()
            try:
                result = await upstream.request(method, ctx.params, progress)
            except MCPError as exc:
                await call.flush()
                if exc.error.code == CONNECTION_CLOSED and upstream.closed.is_set():
                    raise MCPError(INTERNAL_ERROR, UPSTREAM_CLOSED_MESSAGE) from None
                raise await filter_error(self.chain, method, exc, call.context) from None
            except ValidationError:
                logger.warning("the upstream returned an invalid %s result", method)
                raise MCPError(INTERNAL_ERROR, "the upstream server returned an invalid result") from None
            await call.flush()
            await call.finish()
            return result
        finally:
            del self._calls[key]

    def _remember_schemas(self, result: Mapping[str, Any]) -> None:
        """Input schemas for the 2026 HTTP header check, so it never lists tools upstream per call."""
        for tool in result.get("tools") or ():
            if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
                self._tool_schemas[tool["name"]] = tool.get("inputSchema")

    async def _deliver(self, call: _Call, item: _Item) -> None:
        kind, value = item
        if kind in ("progress", "progress_final"):
            progress, total, message = value
            if kind == "progress" and isinstance(message, str) and has_work(self.chain, (call.method,)):
                call.last_progress = (progress, total)
                message = call.stream("progress").feed(message) or None
            deliver, message = await filter_progress(self.chain, call.method, message, call.context)
            if deliver:
                await call.ctx.session.report_progress(progress, total, message)
            return
        params, events = value
        if not _log_wanted(call.ctx, params.level):
            return
        if kind == "log" and isinstance(params.data, str) and has_work(self.chain, events):
            call.last_log = (params, events)
            emitted = call.stream("log").feed(params.data)
            if not emitted:
                return  # all of it is held: it goes out with the next log message or before the result
            params = params.model_copy(update={"data": emitted})
        deliver, data, name = await filter_log_message(self.chain, events, params.data, params.logger, call.context)
        if deliver:
            update = {"data": data, "logger": name}
            notification = types.LoggingMessageNotification(params=params.model_copy(update=update))
            await call.ctx.session.send_notification(notification, related_request_id=call.ctx.request_id)

    # Subscriptions ------------------------------------------------------------------------------
    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: OpenParams) -> dict[str, Any]:
        result = await self._forward(ctx, "resources/subscribe")
        uri = (ctx.params or {}).get("uri")
        if isinstance(uri, str):
            self._holders.setdefault(uri, set()).add(_connection_of(ctx.session))
        return result

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: OpenParams) -> dict[str, Any]:
        uri = (ctx.params or {}).get("uri")
        holders = self._holders.get(uri, set()) if isinstance(uri, str) else set()
        holders.discard(_connection_of(ctx.session))
        if holders:
            return {}  # another client still wants updates: the upstream keeps the subscription
        if isinstance(uri, str):
            self._holders.pop(uri, None)
        return await self._forward(ctx, "resources/unsubscribe")

    async def _on_listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026 listen stream; its resource URIs are subscribed upstream while it is open."""
        resources = self.upstream.capabilities.resources
        uris = list(params.notifications.resource_subscriptions or ()) if resources and resources.subscribe else []
        token = object()
        try:
            for uri in uris:
                await self._hold(token, uri)
            return await self._listen(ctx, params)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(DRAIN_TIMEOUT_S):
                for uri in uris:
                    await self._release(token, uri)

    async def _hold(self, holder: object, uri: str) -> None:
        holders = self._holders.setdefault(uri, set())
        first = not holders
        holders.add(holder)
        if first:
            try:
                await self.upstream.request("resources/subscribe", {"uri": uri})
            except MCPError:  # honored all the same: like a subscription to a resource that never changes
                logger.info("the upstream refused a resource subscription of a listen stream")

    async def _release(self, holder: object, uri: str) -> None:
        holders = self._holders.get(uri)
        if holders is None or holder not in holders:
            return
        holders.discard(holder)
        if not holders:
            del self._holders[uri]
            if not self.upstream.closed.is_set():
                try:
                    await self.upstream.request("resources/unsubscribe", {"uri": uri})
                except MCPError:
                    logger.info("the upstream refused to unsubscribe a resource")

    # Downstream clients -------------------------------------------------------------------------
    def _track(self, session: ServerSession) -> None:
        connection = _connection_of(session)
        if connection in self._clients:
            return
        self._clients[connection] = session
        connection.exit_stack.callback(self._forget, connection)

    def _forget(self, connection: Connection) -> None:
        self._clients.pop(connection, None)
        for uri in list(self._holders):
            self._holders[uri].discard(connection)

    # Upstream notifications ---------------------------------------------------------------------
    async def _on_upstream_log(self, params: types.LoggingMessageNotificationParams) -> None:
        # Attribution happens before the first await, so a log always sees the calls in flight when it arrived.
        calls = list(self._calls.values())
        if calls:
            owner = calls[0]
            events = tuple(dict.fromkeys(call.method for call in calls))
            owner.push(("log", (params, events)))
            await owner.flush()
            return
        if self._has_response_hooks():
            logger.info("dropped a log message outside any operation: the chain has response-phase interceptors")
            return
        notification = types.LoggingMessageNotification(params=params)
        for session in list(self._clients.values()):
            await session.send_notification(notification)

    def _has_response_hooks(self) -> bool:
        return any(hook.phase is Phase.RESPONSE for _, info in self.chain.interceptors() for hook in info.hooks)

    async def _on_upstream_notification(self, message: types.ServerNotification) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            await self._broadcast(ToolsListChanged(), ServerSession.send_tool_list_changed)
        elif isinstance(message, types.PromptListChangedNotification):
            await self._broadcast(PromptsListChanged(), ServerSession.send_prompt_list_changed)
        elif isinstance(message, types.ResourceListChangedNotification):
            await self._broadcast(ResourcesListChanged(), ServerSession.send_resource_list_changed)
        elif isinstance(message, types.ResourceUpdatedNotification):
            uri = str(message.params.uri)
            holders = self._holders.get(uri, set())
            for connection, session in list(self._clients.items()):
                if connection in holders:
                    await session.send_resource_updated(uri)
            await self._bus.publish(ResourceUpdated(uri=uri))
        else:
            logger.debug("not relayed: %s", type(message).__name__)

    async def _broadcast(self, event: Any, send: Callable[[ServerSession], Any]) -> None:
        for session in list(self._clients.values()):
            await send(session)
        await self._bus.publish(event)

    # Serving ------------------------------------------------------------------------------------
    def _provide_context(self, ctx: ServerRequestContext[Any, Any]) -> InvocationContext | None:
        return _remember(self.context_provider(ctx))

    async def serve_stdio(self) -> None:
        """Serve the mirror on this process's stdin/stdout until the client closes stdin."""
        async with serve_streams(self._express_lane, max_line_bytes=self.max_line_bytes) as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    def _express_lane(self, write: WriteBytes) -> ExpressLane | None:
        """Operations nothing hooks skip both SDK sessions on stdio, unless that would skip something else."""
        server = self.server
        own = (LocalToolCalls, _ClientTracker, InterceptorMiddleware, _ForwardUnknown)
        if not express_enabled() or not self.upstream.raw_requests:
            return None
        if not all(isinstance(middleware, own) or idle_middleware(middleware) for middleware in server.middleware):
            return None
        methods = frozenset(
            method
            for method in EXPRESS_METHODS
            if server.get_request_handler(method) is not None and method not in server.cache_hints
        )
        return ExpressLane(GatewayRoute(self, methods), server.server_info_stamp, write)

    async def serve_http(self, host: str, port: int, on_listening: Callable[[str, int], None] | None = None) -> None:
        """Serve Streamable HTTP at http://HOST:PORT/mcp (port 0 picks a free one, reported to `on_listening`)."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
                sock.listen(128)
                sock.setblocking(False)
            except OSError as exc:
                raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
            app = self.server.streamable_http_app(streamable_http_path="/mcp", host=host)
            if self.http_guard is not None:
                app = self.http_guard(app)
            http = _HttpServer(app)

            def stop() -> None:
                http.should_exit = True

            self._stop_serving = stop
            if on_listening is not None:
                on_listening(host, sock.getsockname()[1])
            await http.serve(sockets=[sock])
        finally:
            sock.close()

    async def run(
        self,
        listen: tuple[str, int] | None = None,
        on_listening: Callable[[str, int], None] | None = None,
        *,
        handle_signals: bool = False,
    ) -> int:
        """Serve until the client leaves or a signal stops it (0), or the upstream goes away (1).

        Either way in-flight calls get their answers first (bounded), then serving stops. `handle_signals`
        (main thread only) turns SIGINT and SIGTERM into that graceful stop. With `restart_upstream` the
        upstream going away is not the end: calls in flight get -32603, it is restarted with capped
        backoff, and new calls wait for it (up to `restart_wait_s`, then -32603 saying it is restarting).
        """
        upstream_gone = False
        async with anyio.create_task_group() as tg:

            async def serve() -> None:
                try:
                    if listen is None:
                        await self.serve_stdio()
                    else:
                        await self.serve_http(listen[0], listen[1], on_listening)
                finally:
                    tg.cancel_scope.cancel()

            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for received in signals:
                        logger.info("stopping on signal %d", received)
                        await self._stop_after_answers(tg)

            tg.start_soon(serve)
            if handle_signals:
                tg.start_soon(on_signal)
            if self.restart_upstream:
                await self._supervise_upstream()  # until serving stops
            await self.upstream.closed.wait()
            upstream_gone = True
            await self._stop_after_answers(tg)
        return 1 if upstream_gone else 0

    async def _stop_after_answers(self, tg: anyio.abc.TaskGroup) -> None:
        """Let the calls in flight answer (when the upstream died, they all have their error already)."""
        with anyio.move_on_after(DRAIN_TIMEOUT_S):
            while self._calls:
                await anyio.sleep(0.01)
        if self._stop_serving is not None:
            self._stop_serving()
            await anyio.sleep(DRAIN_TIMEOUT_S)  # HTTP shuts down gracefully; serve() ending cancels this wait
        else:
            await anyio.sleep(0.1)  # the answers are on their way to stdout
        tg.cancel_scope.cancel()


class _HttpServer(uvicorn.Server):
    """uvicorn without its signal handling: the gateway owns SIGINT/SIGTERM (uvicorn would re-raise them)."""

    def __init__(self, app: Any) -> None:
        super().__init__(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _remember(context: InvocationContext | None) -> InvocationContext | None:
    """The middleware's per-request context, kept for the error, progress and log channels of the same call."""
    if context is not None:
        _CONTEXT.set(context)
    return context


def _log_wanted(ctx: ServerRequestContext[Any, Any], level: types.LoggingLevel) -> bool:
    """At 2026-07-28 a log goes out only on a request that opted in at that level (spec MUST); always before."""
    meta = (ctx.params or {}).get("_meta")
    return level in allowed_log_levels(ctx.protocol_version, meta if isinstance(meta, Mapping) else None)


async def run_gateway(
    upstream: StdioServerParameters,
    chain: Chain,
    *,
    listen: tuple[str, int] | None = None,
    expose: Sequence[Registry] | None = None,
    on_listening: Callable[[str, int], None] | None = None,
    handle_signals: bool = False,
) -> int:
    """Start the upstream, serve its mirror (stdio, or HTTP when `listen`), return the exit code."""
    async with Gateway(upstream, chain, expose=expose) as gateway:
        code = await gateway.run(listen, on_listening, handle_signals=handle_signals)
    if code:
        logger.error("the upstream server closed the connection")
    return code


__all__ = ["UPSTREAM_CLOSED_MESSAGE", "Gateway", "ListenError", "add_proxy_command", "run_gateway"]
