"""Hot reload of the router gateway: the policy file and the chain file, on SIGHUP and (`--reload`) on change.

A reload reads and validates both documents first (an invalid one is logged, by field path only, and the
running configuration stays), builds the new policy stages and the new chain completely, teaches the new
policy engine the upstream's catalog, then swaps the chain adapter's chain in one step (the generation
counter goes up, the adapter's plan cache is dropped). Sessions stay open; a call already in its chain
finishes on the old chain, the next one runs on the new. The vault, the audit sinks and the guard's taints
are carried over. Remote interceptor servers are kept when their entry in the chain file is unchanged,
started when added or changed, and stopped (once the old chain has no execution in flight) when removed
or changed. Each remote lives in a task of its own here (its task group must be left where it was entered).

The watcher polls every `interval_s` (mtime, size and a SHA-256 of the content): no dependency, and an
edit that keeps mtime and size (a coarse clock, a same-length edit) is still seen.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from interceptors import Registry
from interceptors.errors import InterceptorsError
from interceptors_chain import Chain, InterceptorOverride, RemoteServer
from interceptors_chain.failures import describe
from interceptors_server import HostConnection, InterceptorHost

logger = logging.getLogger("interceptors.gateway")

DEFAULT_INTERVAL_S = 1.0
DRAIN_LIMIT_S = 60.0
"""How long a replaced chain may keep executions in flight before its removed servers are stopped anyway."""
_LEARNED = 4096


@dataclass
class _Remote:
    spec: Any  # the chain file's ServerSpec (frozen: equal entries mean an unchanged server)
    server: RemoteServer
    stop: anyio.Event


class ReloadRejected(InterceptorsError, ValueError):
    """The new documents are invalid or their chain could not be built; the running configuration stays."""


class Reloader:
    """Owns what a reload replaces: the policy stages (mutated in place) and the chain (swapped)."""

    def __init__(
        self,
        *,
        chain_file: Any = None,
        chain_path: str | None = None,
        policy: str | None = None,
        policy_from_chain: bool = False,
        audit_log: str | None = None,
        redis: str | None = None,
        multi_principal: bool = False,
        stages: Any = None,
        registries: Sequence[Registry] = (),
        watch: bool = False,
        interval_s: float = DEFAULT_INTERVAL_S,
        max_payload_bytes: int | None = None,
    ) -> None:
        """`policy`: the `--policy` given (None: the chain file's, else standard), reloaded only when known.
        `registries`: the in-process registries after the policy stages (`--registry`)."""
        self.chain_file = chain_file
        self.chain_path = chain_path
        self.policy = policy
        self.policy_from_chain = policy_from_chain
        self.audit_log = audit_log
        self.redis = redis
        self.multi_principal = multi_principal
        self.stages = stages
        self.user_registries = list(registries)
        self.watch = watch
        self.interval_s = interval_s
        self.max_payload_bytes = max_payload_bytes  # in-process hosts take whatever a line may carry
        self.adapter: Any = None
        self.metrics: Any = None
        self.generation = 1
        self.accepted = 0
        self.rejected = 0
        self._remotes: dict[str, _Remote] = {}
        self._current: Chain | None = None  # its executions in flight are drained before its servers stop
        self._learned: deque[tuple[str, Any]] = deque(maxlen=_LEARNED)
        self._requested = anyio.Event()
        self._lock = anyio.Lock()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._signatures: dict[str, tuple[int, int, str] | None] = {}

    # Lifetime --------------------------------------------------------------------------------------
    async def __aenter__(self) -> Reloader:
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        tasks, self._tasks = self._tasks, None
        if tasks is not None:
            for remote in self._remotes.values():
                remote.stop.set()
            tasks.cancel_scope.cancel()
            await tasks.__aexit__(None, None, None)

    async def open(self, registries: Sequence[Registry]) -> Chain:
        """The first chain: the chain file's servers, then `registries` (policy stages first, as given)."""
        chain, _ = await self._build(self.chain_file, registries)
        self._current = chain
        self._signatures = {path: _signature(path) for path in self.watched()}
        assert self._tasks is not None
        self._tasks.start_soon(self._serve)
        return chain

    def instrument(self, metrics: Any, stack: Any) -> None:
        """The generation and (with `--redis`) the shared Redis's reachability in `/metrics` and `/healthz`."""
        metrics.generation = lambda: self.generation
        if self.redis:
            probe = RedisProbe(self.redis, fail_open=self._fail_open).start()
            stack.callback(probe.close)
            metrics.redis = probe

    def _fail_open(self) -> bool:
        engine = getattr(self.stages, "engine", None)
        document = engine.policy.document if engine is not None else {}
        return bool((document.get("shared_state") or {}).get("fail_open", False))

    def learn(self, method: str, result: Any) -> None:
        """The catalog's `learn`: kept (bounded) to teach a reloaded engine, and passed to the current one."""
        self._learned.append((method, result))
        engine = getattr(self.stages, "engine", None)
        if engine is not None:
            engine.learn(method, result)

    def request(self) -> None:
        """SIGHUP: reload as soon as the reloader is free (several signals in a row make one reload)."""
        self._requested.set()

    def watched(self) -> list[str]:
        """The files a change of which triggers a reload: the chain file, and the policy when it is a file."""
        paths = [self.chain_path] if self.chain_path else []
        source = self._policy_source(self.chain_file)
        if source is not None and source.lower() != "none" and Path(source).is_file():
            paths.append(source)
        return paths

    # Reloading -------------------------------------------------------------------------------------
    async def _serve(self) -> None:
        while True:
            with anyio.move_on_after(self.interval_s if self.watch else None):
                await self._requested.wait()
            if self._requested.is_set():
                self._requested = anyio.Event()
                await self.reload("signal")
                continue
            fresh = {path: _signature(path) for path in self.watched()}
            if fresh != self._signatures:
                self._signatures = fresh
                await self.reload("file change")

    async def reload(self, reason: str = "request") -> bool:
        """Validate, build, swap; True when the new configuration is in use. Never raises for bad input."""
        async with self._lock:
            self._signatures = {path: _signature(path) for path in self.watched()}
            try:
                await self._reload()
            except ReloadRejected as exc:
                self.rejected += 1
                logger.error("reload (%s) rejected, the running configuration stays: %s", reason, exc)
                if self.metrics is not None:
                    self.metrics.note_reload(False)
                return False
            self.accepted += 1
            logger.warning("reload (%s) done: configuration generation %d", reason, self.generation)
            if self.metrics is not None:
                self.metrics.note_reload(True)
            return True

    async def _reload(self) -> None:
        from ..chain_file import load_chain_file
        from .stages import build_stages

        try:
            chain_file = load_chain_file(self.chain_path) if self.chain_path else self.chain_file
            source = self._policy_source(chain_file)
            stages = self.stages
            if source is not None and stages is not None:
                stages = build_stages(
                    source, self.audit_log, self.redis, multi_principal=self.multi_principal, previous=self.stages
                )
                for method, result in self._learned:  # the upstream's catalog, as the running engine knows it
                    if stages.engine is not None:
                        stages.engine.learn(method, result)
        except (ValueError, OSError) as exc:  # chain-file and policy errors name fields, never values
            raise ReloadRejected(str(exc)) from None
        except Exception as exc:
            raise ReloadRejected(describe(exc)) from None
        registries = [*(stages.registries if stages is not None else ()), *self.user_registries]
        chain, stale = await self._build(chain_file, registries)
        old = self._current
        # The swap: nothing awaits from here to the adapter's new chain, so no call sees half of it.
        self._current = chain
        if self.metrics is not None:
            from ..metrics import observe_chain

            observe_chain(self.metrics, chain)
        if self.stages is not None and stages is not None and stages is not self.stages:
            self.stages.engine, self.stages.registries = stages.engine, stages.registries
            self.stages.guard = stages.guard
        if self.adapter is not None:
            self.adapter.use_chain(chain)
        self.chain_file = chain_file
        self.generation += 1
        if old is not None and stale and self._tasks is not None:
            self._tasks.start_soon(self._retire, old, stale)

    async def _retire(self, old: Chain, stale: list[_Remote]) -> None:
        with anyio.move_on_after(DRAIN_LIMIT_S):
            await old.wait_idle()
        for remote in stale:
            remote.stop.set()

    def _policy_source(self, chain_file: Any) -> str | None:
        if self.policy is not None:
            return self.policy
        if not self.policy_from_chain:
            return None
        return (getattr(chain_file, "policy", None) if chain_file is not None else None) or "standard"

    # Building a chain ------------------------------------------------------------------------------
    async def _build(self, spec: Any, registries: Sequence[Registry]) -> tuple[Chain, list[_Remote]]:
        """A complete chain for `spec`; returns it and the remotes it no longer uses (to stop once drained).
        On failure every server started for it is stopped again and `ReloadRejected` raised."""
        overrides: dict[str, InterceptorOverride] = {}
        if spec is not None:
            overrides = {name: override.build() for name, override in spec.overrides.items()}
        chain = Chain(
            overrides=overrides,
            deadline_ms=getattr(spec, "deadline_ms", None),
            default_timeout_ms=getattr(spec, "default_timeout_ms", None),
        )
        started: dict[str, _Remote] = {}
        kept: dict[str, _Remote] = {}
        try:
            for server in spec.servers if spec is not None else ():
                if server.registry is not None:
                    from interceptors_server.serving import load_registry

                    registry = load_registry(server.registry)
                    await chain.add_connection(
                        HostConnection(self._host(registry)), server.name, timeout_ms=server.timeout_ms
                    )
                    continue
                remote = self._remotes.get(server.name)
                if remote is not None and remote.spec == server:
                    kept[server.name] = remote
                else:
                    remote = started[server.name] = await self._start_remote(server)
                await chain.add_remote(remote.server, timeout_ms=server.timeout_ms)
            for index, registry in enumerate(registries):
                await chain.add_connection(HostConnection(self._host(registry)), f"local-{index}")
        except Exception as exc:
            for remote in started.values():
                remote.stop.set()
            raise ReloadRejected(describe(exc) if not isinstance(exc, ValueError) else str(exc)) from None
        stale = [remote for name, remote in self._remotes.items() if kept.get(name) is not remote]
        self._remotes = {**kept, **started}
        return chain, stale

    def _host(self, registry: Registry) -> InterceptorHost:
        if self.max_payload_bytes is None:
            return InterceptorHost(registry)
        return InterceptorHost(registry, max_payload_bytes=self.max_payload_bytes)

    async def _start_remote(self, server: Any) -> _Remote:
        remote = server.remote()
        stop = anyio.Event()

        async def host(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with remote:  # entered and left in this task
                task_status.started()
                await stop.wait()

        assert self._tasks is not None
        await self._tasks.start(host)
        return _Remote(server, remote, stop)


def reloader_for(options: Any, max_payload_bytes: int | None = None) -> Reloader:
    """The reloader of `proxy --router` (its options in `RouterOptions.extra`, set by `cli.py`)."""
    extra = options.extra
    stages = options.stages
    own = [id(registry) for registry in getattr(stages, "registries", ())]
    return Reloader(
        chain_file=options.chain_file,
        chain_path=extra.get("chain_path"),
        policy=extra.get("policy"),
        policy_from_chain="policy" in extra,
        audit_log=extra.get("audit_log"),
        redis=extra.get("redis"),
        multi_principal=bool(extra.get("multi_principal")),
        stages=stages,
        registries=[registry for registry in options.registries if id(registry) not in own],
        watch=bool(extra.get("reload")),
        max_payload_bytes=max_payload_bytes,
    )


def _signature(path: str) -> tuple[int, int, str] | None:
    """(mtime ns, size, SHA-256) of a file, None when it cannot be read (a rename in progress)."""
    try:
        stat = os.stat(path)
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, digest


class RedisProbe:
    """Whether the shared Redis answers: a daemon thread pings it every `interval_s` (never the event loop)."""

    def __init__(self, url: str, *, fail_open: Callable[[], bool], interval_s: float = 1.0) -> None:
        import redis

        self._client = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self._fail_open = fail_open
        self.interval_s = interval_s
        self.up = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="redis-probe", daemon=True)

    @property
    def fail_open(self) -> bool:
        return self._fail_open()

    def start(self) -> RedisProbe:
        self.up = self._ping()
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()

    def _ping(self) -> bool:
        try:
            return bool(self._client.ping())
        except Exception:
            return False

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            up = self._ping()
            if up != self.up:
                (logger.warning if up else logger.error)("shared Redis %s", "reachable again" if up else "unreachable")
            self.up = up
