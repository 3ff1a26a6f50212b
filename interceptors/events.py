"""Which method names are context operations, and how hook event patterns match them."""

from __future__ import annotations

from collections.abc import Iterable

from .wire import Hook

WILDCARD = "*"

# Lifecycle and extension plumbing: never a context operation, so no hook (not even "*") matches them.
_NOT_CONTEXT_OPERATIONS = frozenset({"initialize", "ping", "server/discover"})
_RESERVED_PREFIXES = ("notifications/", "interceptors/", "interceptor/")

SERVER_INFO_EVENT = "gateway/initialize"
"""The event a gateway runs the initialize (or discover) result it relays under: SEP-2624 gives `initialize` no
event, yet its `instructions` and `serverInfo` are text a model reads, written by the server behind the gateway."""

# The operations SEP-2624 names; any other `namespace/operation` is allowed as well.
KNOWN_EVENTS = (
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "llm/completion",
)


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
