"""The eight behaviors of the SEP-2624 conformance suite, bound to real interceptors of ours."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from interceptors import InterceptorType, Invocation, Mutation, Registry, Verdict
from interceptors.errors import InterceptorsError
from interceptors.security import CrossBoundaryGuard, SecretlessRedactor


class FixtureError(InterceptorsError, ValueError):
    """A fixture that cannot be set up (unknown behavior, wrong type, bad field)."""


def _note(invocation: Invocation) -> Any:
    payload = invocation.payload
    arguments = payload.get("arguments") if isinstance(payload, Mapping) else None
    return arguments.get("note") if isinstance(arguments, Mapping) else None


async def allow_all(invocation: Invocation) -> Verdict:
    return Verdict.allow()


async def deny_all(invocation: Invocation) -> Verdict:
    return Verdict.deny("denied by policy")


async def require_note(invocation: Invocation) -> Verdict:
    note = _note(invocation)
    return Verdict.allow() if isinstance(note, str) and note else Verdict.deny("note is required")


async def require_uppercase_note(invocation: Invocation) -> Verdict:
    note = _note(invocation)
    if isinstance(note, str) and note == note.upper():
        return Verdict.allow()
    return Verdict.deny("note must be uppercase")


async def uppercase_note(invocation: Invocation) -> Mutation:
    note = _note(invocation)
    if not isinstance(note, str):
        return Mutation.unchanged()
    payload = dict(invocation.payload)
    payload["arguments"] = {**payload["arguments"], "note": note.upper()}
    return Mutation(payload, True)


async def crash(invocation: Invocation) -> Any:
    raise RuntimeError("interceptor crashed")


_VALIDATORS: dict[str, Callable[[], Callable[[Invocation], Any]]] = {
    "allow-all": lambda: allow_all,
    "deny-all": lambda: deny_all,
    "require-note": lambda: require_note,
    "require-uppercase-note": lambda: require_uppercase_note,
    "cross-boundary-guard": CrossBoundaryGuard,  # a fresh instance (fresh session state) per fixture
    "crash": lambda: crash,
}
_MUTATORS: dict[str, Callable[[], Callable[[Invocation], Any]]] = {
    "uppercase-note": lambda: uppercase_note,
    "secretless-redactor": SecretlessRedactor,
    "crash": lambda: crash,
}

BEHAVIORS = frozenset(_VALIDATORS) | frozenset(_MUTATORS)


def build_registry(interceptors: Any) -> Registry:
    """Register a fixture's interceptors in order, each behavior bound to a fresh handler."""
    if not isinstance(interceptors, list):
        raise FixtureError("interceptors must be an array")
    registry = Registry()
    for index, spec in enumerate(interceptors):
        where = f"interceptors[{index}]"
        if not isinstance(spec, Mapping):
            raise FixtureError(f"{where} must be an object")
        try:
            kind = InterceptorType(str(spec.get("type")))
        except ValueError:
            raise FixtureError(f"{where}.type must be 'validation' or 'mutation'") from None
        table = _VALIDATORS if kind is InterceptorType.VALIDATION else _MUTATORS
        behavior = spec.get("behavior")
        if behavior not in table:
            raise FixtureError(f"{where}.behavior {behavior!r} is not a {kind.value} behavior")
        phases = spec.get("phases", spec.get("phase", "both"))
        try:
            registry.register(
                table[behavior](),
                name=spec.get("name"),  # type: ignore[arg-type]
                type=kind,
                events=spec.get("events"),  # type: ignore[arg-type]
                phase=phases,
                mode=spec.get("mode") or "active",
                fail_open=bool(spec.get("failOpen", False)),
                priority=spec.get("priorityHint"),
            )
        except (TypeError, ValueError) as exc:
            raise FixtureError(f"{where}: {exc}") from None
    return registry
