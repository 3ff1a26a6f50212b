"""Execution plans: which interceptors run for one (event, phase, direction), in which order."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interceptors import Direction, InterceptorInfo, InterceptorType, Mode, Phase, hooks_match

from .connection import Connection, LocalStart
from .policy import InterceptorOverride


@dataclass(slots=True)
class ServerEntry:
    """One interceptor server: its connection, configured order and discovered descriptors."""

    name: str
    order: int
    connection: Connection
    interceptors: tuple[InterceptorInfo, ...] = ()
    timeout_ms: int | None = None
    local: LocalStart | None = None
    """The connection's typed in-process path, when it has one (see `LocalStart`)."""
    runs_inline: Callable[[str], bool] | None = None
    """With `local`: which interceptors never suspend (sync handlers registered `inline`)."""

    def __post_init__(self) -> None:
        if self.local is None:
            self.local = getattr(self.connection, "start_local", None)
        if self.local is not None and self.runs_inline is None:
            self.runs_inline = getattr(self.connection, "runs_inline", None)


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """An interceptor with every invoker decision already resolved."""

    server: ServerEntry
    info: InterceptorInfo
    mode: Mode
    fail_open: bool
    priority: int
    timeout_ms: int | None
    config: Mapping[str, Any] | None

    @property
    def name(self) -> str:
        return self.info.name


@dataclass(frozen=True, slots=True)
class Plan:
    validators: tuple[PlanEntry, ...]
    mutators: tuple[PlanEntry, ...]
    mutate_first: bool

    @property
    def empty(self) -> bool:
        return not self.validators and not self.mutators


def _override_for(overrides: Mapping[str, InterceptorOverride], server: str, name: str) -> InterceptorOverride | None:
    return overrides.get(f"{server}:{name}") or overrides.get(name)


def compile_plan(
    servers: Sequence[ServerEntry],
    overrides: Mapping[str, InterceptorOverride],
    event: str,
    phase: Phase,
    direction: Direction,
    protocol_version: str | None = None,
) -> Plan:
    """Select by hooks (after narrowing) and compat; validators keep discovery order, mutators sort by
    (priority for the phase, name in code-point order, configured server order)."""
    validators: list[PlanEntry] = []
    mutators: list[PlanEntry] = []
    for server in sorted(servers, key=lambda s: s.order):
        for info in server.interceptors:
            override = _override_for(overrides, server.name, info.name)
            if override is not None and not override.enabled:
                continue
            hooks = override.hooks if override is not None and override.hooks is not None else info.hooks
            if not hooks_match(hooks, event, phase):
                continue
            if info.compat is not None and not info.compat.admits(protocol_version):
                continue
            entry = PlanEntry(
                server=server,
                info=info,
                mode=override.mode if override is not None and override.mode is not None else info.mode,
                fail_open=(
                    override.fail_open if override is not None and override.fail_open is not None else info.fail_open
                ),
                priority=(
                    override.priority if override is not None and override.priority is not None else info.priority_hint
                ).resolve(phase),
                timeout_ms=override.timeout_ms if override is not None and override.timeout_ms else server.timeout_ms,
                config=override.config if override is not None else None,
            )
            (validators if info.type is InterceptorType.VALIDATION else mutators).append(entry)
    mutators.sort(key=lambda e: (e.priority, e.info.name, e.server.order))
    return Plan(tuple(validators), tuple(mutators), direction is Direction.SENDING)
