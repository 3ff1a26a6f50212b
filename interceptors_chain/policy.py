"""Invoker policy: per-interceptor overrides and the execution-handler wrapper around every invoke."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interceptors import Hook, InterceptorInfo, Mode, Priority


@dataclass(frozen=True, slots=True)
class InterceptorOverride:
    """What the invoker changes about one interceptor. Hooks may only be narrowed, never widened."""

    mode: Mode | None = None
    fail_open: bool | None = None
    priority: Priority | None = None
    timeout_ms: int | None = None
    config: Mapping[str, Any] | None = None
    hooks: tuple[Hook, ...] | None = None
    enabled: bool = True

    @classmethod
    def build(
        cls,
        *,
        mode: Mode | str | None = None,
        fail_open: bool | None = None,
        priority: int | Priority | Mapping[str, int] | None = None,
        timeout_ms: int | None = None,
        config: Mapping[str, Any] | None = None,
        hooks: Sequence[Hook] | None = None,
        enabled: bool = True,
    ) -> InterceptorOverride:
        if timeout_ms is not None and (isinstance(timeout_ms, bool) or timeout_ms <= 0):
            raise ValueError("timeout_ms must be a positive integer")
        return cls(
            mode=None if mode is None else Mode.parse(mode),
            fail_open=fail_open,
            priority=None if priority is None else Priority.of(priority),
            timeout_ms=timeout_ms,
            config=config,
            hooks=None if hooks is None else tuple(hooks),
            enabled=enabled,
        )

    def check_narrows(self, info: InterceptorInfo) -> None:
        """Refuse hooks that reach any (event, phase) the interceptor did not advertise."""
        if self.hooks is None:
            return
        for hook in self.hooks:
            for event in hook.events:
                if not any(
                    advertised.phase == hook.phase and any(_covers(pattern, event) for pattern in advertised.events)
                    for advertised in info.hooks
                ):
                    raise ValueError(
                        f"override for {info.name!r} widens its hooks: {event} on {hook.phase} is not advertised"
                    )


def _covers(advertised: str, narrowed: str) -> bool:
    """Whether an advertised event pattern covers a narrowed one (itself a name or a pattern)."""
    if advertised in (narrowed, "*"):
        return True
    return advertised.endswith("/*") and narrowed.startswith(advertised[:-1])


@dataclass(slots=True)
class InvokeCall:
    """One invocation as the execution handler sees it; `params` are the wire params and may be rewritten."""

    server: str
    info: InterceptorInfo
    mode: Mode
    fail_open: bool
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class HandlerOutcome:
    """An execution handler's answer: the result dict and, optionally, the effective mode to apply."""

    result: dict[str, Any]
    mode: Mode | None = None


NextInvoke = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
ExecutionHandler = Callable[[InvokeCall, NextInvoke], Awaitable["dict[str, Any] | HandlerOutcome"]]
