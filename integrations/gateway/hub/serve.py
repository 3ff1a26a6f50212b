"""`proxy --config FILE`: the legs started and supervised, the aggregated endpoint served on stdio or on
Streamable HTTP, where each server also has its own endpoint `/servers/NAME/mcp` and `/healthz` reports each.

Over HTTP, paths: `/mcp` (the aggregate), `/servers/NAME/mcp` (server NAME alone: today's gateway for it, its
policy, on the same process the aggregate uses), `/healthz` (JSON, each server's state and restarts),
`/readyz` (503 until every eager server is ready), `/metrics` (Prometheus text: `mcp_interceptors_upstream_up`
and `mcp_interceptors_upstream_restarts_total`, labelled by `server`).
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any, Final

import anyio
import anyio.abc
import orjson

from interceptors import InvocationContext
from interceptors.protocol.messages import INTERNAL_ERROR, INVALID_REQUEST, Kind, error_message, parse, recover_id

from ..router import SendDownstream
from .aggregate import Aggregate
from .config import GatewayFile
from .legs import Leg

logger = logging.getLogger("interceptors.gateway")

SERVERS_PATH: Final = "/servers/"
OPENING: Final = frozenset({"initialize", "server/discover"})
"""A client's first request in either era: the first one waits for the eager servers (`upstream_for`)."""


class Hub:
    """The gateway file's servers behind one process."""

    def __init__(self, gateway: GatewayFile, settings: Any, *, leg: type[Leg] = Leg) -> None:
        self.gateway = gateway
        self.settings = settings
        if settings.audit_log and settings.audit_sink is None:
            from interceptors.policy import JsonlAuditFile

            settings.audit_sink = JsonlAuditFile(settings.audit_log)
        self.legs = [leg(spec, gateway, settings) for spec in gateway.servers]
        self.by_name = {leg.name: leg for leg in self.legs}
        self.aggregate = Aggregate(self.legs, list_timeout=gateway.list_timeout)

    def _start(self, tasks: anyio.abc.TaskGroup) -> None:
        from .legs import ServerLogFilter

        if not any(isinstance(f, ServerLogFilter) for f in logger.filters):
            logger.addFilter(ServerLogFilter())
        self.aggregate.tasks = tasks
        for leg in self.legs:
            leg.attach(tasks)
            if leg.spec.eager:
                leg.ensure_started()

    async def _close(self) -> None:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as closing:  # every server stopped at once
                for leg in self.legs:
                    closing.start_soon(leg.aclose)
        if self.settings.audit_sink is not None:
            self.settings.audit_sink.close()

    def reload(self) -> None:
        """SIGHUP: every server's policy and chain files read again (the gateway file itself is not)."""
        for leg in self.legs:
            leg.reload()

    def health(self) -> dict[str, Any]:
        servers = {leg.name: leg.health() for leg in self.legs}
        ready = all(s["state"] in ("ready", "idle") for s in servers.values())
        return {"status": "ok" if ready else "degraded", "servers": servers}

    def metrics_text(self) -> bytes:
        from .metrics import exposition

        return exposition(self.legs)

    # stdio -----------------------------------------------------------------------------------------
    async def run_stdio(self, principal: Any) -> int:
        from interceptors.protocol.framing import Oversized

        from ..downstream_stdio import StdioDownstream

        aggregate = self.aggregate
        try:
            async with anyio.create_task_group() as tasks:
                self._start(tasks)
                downstream = await StdioDownstream.open()
                aggregate.serve_one(downstream.send)
                context = InvocationContext(principal=principal, session_id="stdio")
                aggregate.open_session("stdio", context=context, principal=principal.id)

                tasks.start_soon(self._signals, tasks.cancel_scope.cancel)
                async for line in downstream.lines():
                    if isinstance(line, Oversized):
                        reason = {"reason": "too large"}
                        downstream.send(
                            error_message(recover_id(line.head), INVALID_REQUEST, "Invalid Request", reason)
                        )
                        continue
                    message = parse(line)
                    if message.kind is Kind.REQUEST and message.method in OPENING:
                        await aggregate.upstream_for({})
                    try:
                        aggregate.receive_downstream_message("stdio", message)
                    except Exception as exc:  # a defect: logged, the request answered, the session goes on
                        logger.error("the aggregate failed on a client message: %s", type(exc).__name__)
                        if message.kind is Kind.REQUEST:
                            downstream.send(error_message(message.id, INTERNAL_ERROR, "Internal error"))
                    await aggregate.drain()
                    await downstream.drain()
                aggregate.close_session("stdio")
                await aggregate.drain()
                await downstream.drain()
                tasks.cancel_scope.cancel()
        finally:
            await self._close()
        return 0

    # HTTP ------------------------------------------------------------------------------------------
    async def run_http(self, sock: socket.socket, on_listening: Any = None) -> int:
        from ..downstream_http import HttpServer
        from ..http_front import HttpFront

        settings = self.settings
        aggregate = self.aggregate

        def perform(actions: list[Any]) -> None:
            for action in actions:
                if isinstance(action, SendDownstream):
                    front.deliver(action)

        front = HttpFront(
            aggregate,  # type: ignore[arg-type]  # router-shaped: the methods the front calls
            perform, aggregate.drain, tokens=settings.tokens, default_principal=settings.default_principal,
            settings=settings.http_settings, upstream_for=aggregate.upstream_for,
        )  # fmt: skip
        aggregate.deliver = front.deliver
        front.side_apps.update(
            {"/healthz": self._health_app, "/readyz": self._health_app, "/metrics": self._metrics_app}
        )
        app = _HubApp(self, front)
        http = HttpServer(app, header_timeout_s=front.settings.header_timeout_s)
        try:
            async with anyio.create_task_group() as tasks:
                self._start(tasks)

                async def serve() -> None:
                    try:
                        await http.serve(sockets=[sock])
                    finally:
                        tasks.cancel_scope.cancel()

                def stop() -> None:
                    http.should_exit = True

                tasks.start_soon(serve)
                tasks.start_soon(self._signals, stop)
                tasks.start_soon(front.sweep)
                if on_listening is not None:
                    host, port = sock.getsockname()[:2]
                    on_listening(host, port)
        finally:
            front.shutdown()
            await self._close()
        return 0

    async def _signals(self, stop: Callable[[], None]) -> None:
        """SIGHUP reloads every server's policy and chain; SIGTERM or SIGINT stops serving."""
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as received:
            async for signum in received:
                if signum == signal.SIGHUP:
                    self.reload()
                    continue
                stop()
                return

    async def _health_app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        health = self.health()
        status = 200
        if scope.get("path", "").rstrip("/") == "/readyz":
            eager = [leg for leg in self.legs if leg.spec.eager]
            status = 200 if all(leg.ready for leg in eager) else 503
        await _send(send, status, b"application/json", orjson.dumps(health))

    async def _metrics_app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await _send(send, 200, b"text/plain; version=0.0.4", self.metrics_text())


class _HubApp:
    """Paths: `/servers/NAME/mcp` to that server's own front, everything else to the aggregate's front. A
    server with `roles` is served alone only to principals with one of them (others get 404, as for an
    unknown server), as the aggregate shows it only to them."""

    def __init__(self, hub: Hub, front: Any) -> None:
        self.hub = hub
        self.front = front

    async def _may_see(self, leg: Leg, scope: dict[str, Any]) -> bool:
        roles = await _principal_roles(self.front, scope)
        return roles is None or leg.spec.visible_to(roles)  # None: a refused token, answered 401 by the leg

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope.get("type") == "http" else ""
        if not path.startswith(SERVERS_PATH):
            await self.front(scope, receive, send)
            return
        name, _, rest = path[len(SERVERS_PATH) :].partition("/")
        leg = self.hub.by_name.get(name)
        if leg is None or rest.rstrip("/") != "mcp":
            await self.front(scope, receive, send)  # its 404, after the Host and Origin checks
            return
        if leg.spec.roles is not None and not await self._may_see(leg, scope):
            await self.front({**scope, "path": "/servers/"}, receive, send)  # as unknown: its 404, after the checks
            return
        if leg.front is None or leg.runner is None or leg.runner.finished:
            leg.ensure_started()
            await leg.wait_ready(self.hub.gateway.list_timeout)
        if leg.front is None or leg.runner is None or leg.runner.finished:
            message = f"server {leg.name!r} is unavailable: {leg.unavailable_reason()}"
            body = error_message(None, INTERNAL_ERROR, message, {"server": leg.name, "retry": True})
            await _send(send, 503, b"application/json", body)
            return
        await leg.front({**scope, "path": "/mcp", "raw_path": b"/mcp"}, receive, send)


async def _principal_roles(front: Any, scope: dict[str, Any]) -> list[str] | None:
    """The roles of the request's principal (its bearer token's; none without tokens); None when the token is
    refused (the server's own front then answers 401 with its challenge)."""
    from interceptors import Principal

    if front.auth is None:
        principal = front.default_principal
    else:
        header = next((v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"), None)
        principal = await front.auth.admit(header.decode("latin-1") if header is not None else None)
        if not isinstance(principal, Principal):
            return None
    claims = getattr(principal, "claims", None) or {}
    roles = claims.get("roles") if isinstance(claims, dict) else None
    return [r for r in roles if isinstance(r, str)] if isinstance(roles, list | tuple) else []


async def _send(send: Any, status: int, content_type: bytes, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]})
    await send({"type": "http.response.body", "body": body})


def announce(host: str, port: int, auth: Any, legs: list[Leg]) -> None:
    shown = f"[{host}]" if ":" in host else host
    who = "no authentication: loopback clients only" if auth is None else "bearer tokens"
    print(f"mcp-interceptors proxy: listening on http://{shown}:{port}/mcp ({who})", file=sys.stderr, flush=True)
    for leg in legs:
        print(f"  server {leg.name}: http://{shown}:{port}/servers/{leg.name}/mcp", file=sys.stderr, flush=True)
