"""Which method names are context operations, and how hook event patterns match them."""

from __future__ import annotations

from collections.abc import Iterable

from .protocol.methods import METHODS, SERVER_INFO_EVENT
from .wire import Hook

WILDCARD = "*"

# Lifecycle and extension plumbing (the table's rows that are no context operation, and the reserved prefixes
# for methods it does not know): no hook, not even "*", matches them.
_NOT_CONTEXT_OPERATIONS = frozenset(METHODS.names(lambda row: not row.hookable))
_RESERVED_PREFIXES = ("notifications/", "interceptors/", "interceptor/")

__all__ = ["SERVER_INFO_EVENT", "WILDCARD", "hooks_match", "is_context_operation", "is_pattern", "pattern_matches"]


def is_context_operation(event: str) -> bool:
    """True for every method an interceptor may hook: not initialize, ping, discovery or notifications."""
    return bool(event) and event not in _NOT_CONTEXT_OPERATIONS and not event.startswith(_RESERVED_PREFIXES)


def is_pattern(event: str) -> bool:
    """A wildcard or namespace pattern rather than one concrete event name."""
    return "*" in event


def pattern_matches(pattern: str, event: str) -> bool:
    """Exact names, `*` for every context operation, and `namespace/*` for one namespace."""
    if pattern == event:
        return is_context_operation(event)
    if pattern == WILDCARD:
        return is_context_operation(event)
    if pattern.endswith("/*"):
        return event.startswith(pattern[:-1]) and is_context_operation(event)
    return False


def hooks_match(hooks: Iterable[Hook], event: str, phase: str | None = None) -> bool:
    """Whether any hook covers `event` (in `phase`, when one is given)."""
    return any(
        (phase is None or hook.phase == phase) and any(pattern_matches(p, event) for p in hook.events) for hook in hooks
    )
