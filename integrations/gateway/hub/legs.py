"""One upstream of the gateway file, supervised: its router, its runner, its chain and policy, its state.

A leg is today's single-upstream gateway minus its clients: the same `Router`, `Runner`, chain adapter,
catalog and policy stages, with `--restart-upstream` always on. Its clients are the aggregated endpoint's
sessions (ids starting `hub:`) and, over HTTP, the sessions of its own endpoint `/servers/NAME/mcp`
(an `HttpFront` on the leg's router). The runner delivers each message to whichever of them owns the session.

Supervision has two levels. Inside an incarnation, `SupervisedUpstream` restarts a dead process with backoff
while every client session stays open (requests meanwhile fail at once, saying the server is restarting).
When that gives up (or the first start fails), the leg is `down`: a new incarnation (a new process and a new
router) is tried after a backoff that doubles up to `MAX_BACKOFF_S`, forever; the aggregated endpoint
reopens its sessions on it and announces `list_changed`, so a client never has to reconnect.
"""

from __future__ import annotations

import contextvars
import logging
import os
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.abc

from ..router import Router, SendDownstream, UpstreamPhase
from ..runner import NoDownstream, Runner
from .config import GatewayFile, ServerSpec
from .metrics import LegRequests

logger = logging.getLogger("interceptors.gateway")

SERVER: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_interceptors_server", default=None)
"""The server a leg's tasks work for: its log lines say which (`ServerLogFilter`)."""
HUB_SESSION: Final = "hub:"
"""Session ids the aggregated endpoint opens in a leg's router start with this."""
FIRST_BACKOFF_S: Final = 0.5
MAX_BACKOFF_S: Final = 30.0
EVERY_CAPABILITY: Final = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
"""What an eager leg's upstream is told the clients support: the gateway relays all three (a session that did
not declare one gets the upstream's request for it answered -32601, as a client without it would)."""


@dataclass
class HubSettings:
    """What every leg shares: the HTTP clients' authentication and session bounds, the audit log, Redis."""

    listen: bool = False
    tokens: Any = None
    default_principal: Any = None
    http_settings: Any = None
    audit_log: str | None = None
    audit_sink: Any = None
    """The one audit log file every leg writes to (a `JsonlAuditFile` of `audit_log`), its entries labelled."""
    redis: str | None = None
    max_restarts: int = 5
    default_timeout: float | None = 300.0


class LegRunner(Runner):
    """A `Runner` whose clients are the leg's (aggregate sessions and its own HTTP endpoint's)."""

    def __init__(self, leg: Leg, *args: Any, **kwargs: Any) -> None:
        router, adapter, upstream = args
        super().__init__(router, adapter, upstream, NoDownstream(), **kwargs)
        self.leg = leg

    finished = False
    """Set once the runner ends (its upstream gone for good): a plain attribute, read on every call."""

    def send_downstream(self, action: SendDownstream) -> None:
        leg = self.leg
        if leg.aggregate_deliver is not None and action.session.startswith(HUB_SESSION):
            leg.aggregate_deliver(leg, action)
        elif leg.front is not None:
            leg.front.deliver(action)

    def _finish(self, code: int) -> None:
        self.finished = True
        super()._finish(code)

    @property
    def finished_event(self) -> anyio.Event:
        return self._done

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The upstream pump and clocks until the upstream is gone for good (or `stop`)."""
        async with anyio.create_task_group() as tasks:
            self._start_tasks(tasks)
            task_status.started()
            await self._done.wait()
            for run in self._chain_runs:
                run.cancel()
            tasks.cancel_scope.cancel()

    def stop(self) -> None:
        self._finish(0)


class Leg:
    """One server of the gateway file: started (eagerly, or by its first use), supervised, reported."""

    def __init__(self, spec: ServerSpec, gateway: GatewayFile, settings: HubSettings) -> None:
        self.spec = spec
        self.name = spec.name
        self.prefix = spec.prefix
        self.gateway = gateway
        self.settings = settings
        self.router: Router | None = None
        self.runner: LegRunner | None = None
        self.upstream: Any = None
        self.front: Any = None
        """The HTTP front of `/servers/NAME/mcp` for the current incarnation (with `--listen`)."""
        self.generation = 0
        self.incarnations = 0
        self.last_error: str | None = None
        """Why it is down, in words a client may read (no path, no URL: the log has those)."""
        self.on_new_generation: Callable[[Leg], None] | None = None
        self.aggregate_deliver: Callable[[Leg, SendDownstream], None] | None = None
        self.requests = LegRequests()
        """Its requests by method and outcome, for `/metrics` (`metrics.py`)."""
        self._started = False
        self._ready = anyio.Event()
        self._capabilities: dict[str, Any] = dict(EVERY_CAPABILITY)
        self._tasks: anyio.abc.TaskGroup | None = None
        self._stopping = False
        self._adapter: Any = None
        self._stages: Any = None
        self._local: Any = None
        self._learn: Any = None
        self._hold_back = True
        self._reloader: Any = None

    # State ----------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        router = self.router
        return router is not None and router.upstream.phase is UpstreamPhase.READY and not self._finished()

    def _finished(self) -> bool:
        return self.runner is None or self.runner.finished

    @property
    def state(self) -> str:
        """`idle` (on-first-use, not used yet), `starting`, `ready`, `restarting`, `down`."""
        if not self._started:
            return "idle"
        if self.ready:
            return "ready"
        router = self.router
        if router is not None and not self._finished() and router.upstream.restarting:
            return "restarting"
        if self.runner is None or self._finished():
            return "down" if self.incarnations else "starting"
        return "starting"

    def health(self) -> dict[str, Any]:
        upstream = self.upstream
        restarts = getattr(upstream, "restarts", 0) + max(0, self.incarnations - 1)
        out: dict[str, Any] = {"state": self.state, "restarts": restarts, "prefix": self.prefix}
        if self.state in ("down", "restarting") and self.last_error:
            out["reason"] = self.last_error
        return out

    def unavailable_reason(self) -> str:
        state = self.state
        if state == "restarting":
            return "the server is restarting"
        if state == "down":
            return f"the server is down ({self.last_error or 'it exited'}); it is started again after a pause"
        return "the server is starting"

    # Starting -------------------------------------------------------------------------------------
    def attach(self, tasks: anyio.abc.TaskGroup) -> None:
        self._tasks = tasks

    def ensure_started(self, capabilities: dict[str, Any] | None = None) -> None:
        """Start the supervision (once); an on-first-use leg's upstream is told the first user's capabilities."""
        if self._started or self._tasks is None:
            return
        self._started = True
        if capabilities is not None:
            self._capabilities = capabilities
        self._tasks.start_soon(self._supervise)

    async def wait_ready(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while not self.ready:
                await self._ready.wait()
                if not self.ready:
                    await anyio.sleep(0.05)
        return self.ready

    def reload(self) -> None:
        """SIGHUP: read this server's policy and chain files again (as `proxy` does on SIGHUP)."""
        if self._reloader is not None:
            self._reloader.request()

    async def aclose(self) -> None:
        self._stopping = True
        if self.runner is not None:
            self.runner.stop()
        with anyio.CancelScope(shield=True):
            if self.upstream is not None:
                await self.upstream.aclose()

    async def _chain(self, stack: AsyncExitStack) -> None:
        """The leg's chain and policy stages, once (they outlive incarnations, as they outlive a restart)."""
        from ...chain_file import load_chain_file
        from ..catalog import Catalog  # noqa: F401  (imported for its side effect: loaded before the router)
        from ..chain_adapter import ChainAdapter
        from ..command import RouterOptions
        from ..local import LocalAnswers
        from ..reload import reloader_for
        from ..stages import build_stages

        spec, settings = self.spec, self.settings
        policy = spec.policy or self.gateway.policy or "standard"
        chain_file = load_chain_file(spec.chain) if spec.chain is not None else None
        multi = settings.tokens is not None
        stages = build_stages(policy, None, settings.redis, multi_principal=multi)
        options = RouterOptions(
            list(spec.command), None, chain_file, list(stages.registries), stages,
            extra={"policy": spec.policy or self.gateway.policy, "chain_path": spec.chain,
                   "audit_log": None, "redis": settings.redis, "multi_principal": multi},
        )  # fmt: skip
        engine = getattr(stages, "engine", None)
        if engine is not None:  # one audit log for every server: each entry says which
            shared = [settings.audit_sink] if settings.audit_sink is not None else []
            engine.audit.sinks = [_Labelled(sink, spec.name) for sink in [*engine.audit.sinks, *shared]]
        stack.callback(stages.close)
        reloader = await stack.enter_async_context(reloader_for(options))
        chain = await reloader.open(options.registries)
        self._adapter = reloader.adapter = ChainAdapter(chain, on_refusal=getattr(stages, "refused", None))
        self.requests.observe(self._adapter)
        self._stages = stages
        self._hold_back = bool(options.registries) or chain_file is not None  # as `proxy` decides it
        self._learn = reloader.learn
        self._reloader = reloader
        self._local = LocalAnswers(None, getattr(stages, "local_tools", ()), getattr(stages, "authorize", None))

    async def _start_upstream(self, router: Router) -> Any:
        from interceptors.protocol.framing import MAX_LINE_BYTES

        from ..upstream_http import HttpUpstream
        from ..upstream_stdio import StdioUpstream

        spec = self.spec
        if spec.url is not None:
            return await HttpUpstream.start(
                spec.url,
                list(spec.headers),
                protocol_version=lambda: router.upstream.version,
                max_message=MAX_LINE_BYTES,
            )
        env = {**os.environ, **(spec.env or {})}
        return await StdioUpstream.start(list(spec.command), env, cwd=spec.cwd)

    async def _supervise(self) -> None:
        SERVER.set(self.name)  # every task this one starts (the runner's pumps, the chain's) inherits it
        async with AsyncExitStack() as stack:  # the chain's servers and tasks live in this task
            try:
                await self._chain(stack)
            except Exception as exc:  # a policy or chain that cannot be loaded: this server stays down
                self.last_error = "its policy or chain could not be loaded"
                self.incarnations = 1
                logger.error("its policy or chain could not be loaded: %s", exc)  # (the log filter names the server)
                return
            await self._incarnations()

    async def _incarnations(self) -> None:
        from ..catalog import Catalog
        from ..command import router_for
        from ..recovery import RestartPolicy, SupervisedUpstream
        from ..upstream_http import UpstreamUrlError
        from ..upstream_stdio import UpstreamStartError

        delay = FIRST_BACKOFF_S
        while not self._stopping:
            router = router_for(self._adapter, self._local, hold_back=self._hold_back)
            try:
                first = await self._start_upstream(router)
            except (UpstreamStartError, UpstreamUrlError, OSError) as exc:
                self.incarnations += 1
                self.last_error = "it could not be started"
                logger.warning("could not be started: %s (again in %g s)", exc, delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)
                continue

            async def again(router: Router = router) -> Any:
                return await self._start_upstream(router)

            upstream = SupervisedUpstream(first, again, RestartPolicy(max_restarts=self.settings.max_restarts))
            engine = getattr(self._stages, "engine", None)
            catalog = Catalog(router, self._learn) if engine is not None or self.settings.listen else None
            timeout = self.spec.timeout or self.settings.default_timeout
            runner = LegRunner(
                self, router, self._adapter, upstream, catalog=catalog, timeout=timeout, local=self._local
            )
            runner.enable_renewal()
            self.router, self.runner, self.upstream = router, runner, upstream
            self.incarnations += 1
            self.generation += 1
            if self.settings.listen:
                self.front = self._front(router, runner, upstream, catalog)
            async with anyio.create_task_group() as tasks:
                await tasks.start(runner.serve)
                ok = await runner.upstream_for(self._capabilities)
                if ok:
                    delay = FIRST_BACKOFF_S
                    self.last_error = None
                    logger.info("ready")
                    self._ready.set()
                    self._ready = anyio.Event()
                    if self.generation > 1 and self.on_new_generation is not None:
                        self.on_new_generation(self)
                await runner.finished_event.wait()
            self.last_error = self.last_error or "it exited"
            if not ok:
                self.last_error = "it closed before its handshake completed"
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
            if self._stopping:
                return
            logger.warning("down: starting it again in %g s", delay)
            await anyio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)

    def _front(self, router: Router, runner: LegRunner, upstream: Any, catalog: Any) -> Any:
        from ..http_front import HttpFront

        settings = self.settings
        return HttpFront(
            router,
            runner.perform,
            upstream.drain,
            tokens=settings.tokens,
            default_principal=settings.default_principal,
            settings=settings.http_settings,
            tool_schema=catalog.tool_schema if catalog is not None else None,
            upstream_for=runner.upstream_for,
        )

    # Delivery -------------------------------------------------------------------------------------
    def perform(self, actions: list[Any]) -> None:
        if self.runner is not None:
            self.runner.perform(actions)

    async def drain(self) -> None:
        if self.upstream is not None:
            await self.upstream.drain()


class _Labelled:
    """An audit sink that adds the server's name to each entry (`server`), so one log serves every server."""

    def __init__(self, sink: Callable[[Any], None], server: str) -> None:
        self.sink = sink
        self.server = server

    def __call__(self, entry: Any) -> None:
        self.sink({**entry, "server": self.server})


class ServerLogFilter(logging.Filter):
    """Prefixes the gateway's log lines written for a leg with `server NAME: ` (the runner's own lines do not
    know which server they are about)."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = SERVER.get()
        if name is not None and not getattr(record, "mcp_interceptors_server", None):
            record.mcp_interceptors_server = name
            record.msg = f"server {name.replace('%', '%%')}: {record.msg}"
        return True
