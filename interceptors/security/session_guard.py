"""The cross-boundary guard as gateway stages, with a session identity that holds across gateway processes.

"The same session" is the pair (principal, session label): the label is the request's
`_meta["io.mcp-interceptors/session"]` (in its params) (a string a client sends on every request of one task, to
whichever gateway answers it); without a label, the gateway's own session id (one process only). The
principal is always part of the key, so nobody can write into or read another principal's session by
choosing its label. A response belongs to the session of its request (same trace id in the chain).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from ..codec import dumps_str
from ..enums import Phase
from ..outcomes import Verdict
from ..registry import Invocation, Registry
from ..wire import InvocationContext
from .guard import CrossBoundaryGuard
from .server_of import DEFAULT_ROSTER, server_of
from .taint import TaintStore

SESSION_META: Final = "io.mcp-interceptors/session"
GUARDED_EVENTS: Final = ("tools/call", "resources/read", "prompts/get")
MAX_LABEL_CHARS: Final = 256
_MAX_CALLS: Final = 10_000


def session_key(invocation: Invocation) -> str:
    """`principal type:id` + the request's session label (else the gateway's session id, else the trace id)."""
    context = invocation.context
    principal = None if context is None else context.principal
    who = "anonymous" if principal is None else f"{principal.type}:{principal.id}"
    label = _label(invocation.payload)
    if label is not None:
        return dumps_str(["label", who, label])
    local = None if context is None else (context.session_id or context.trace_id)
    return dumps_str(["local", who, local or "default"])


def _label(payload: Any) -> str | None:
    if not isinstance(payload, Mapping):
        return None
    inner = payload.get("params")
    params: Mapping[str, Any] = inner if isinstance(inner, Mapping) else payload  # {method, params} or params
    meta = params.get("_meta")
    label = meta.get(SESSION_META) if isinstance(meta, Mapping) else None
    if isinstance(label, str) and 0 < len(label) <= MAX_LABEL_CHARS:
        return label
    return None


class SessionGuard:
    """`CrossBoundaryGuard` keyed by `session_key`; a response is judged in its request's session, with
    its request's target as the origin of what it carries."""

    def __init__(
        self, roster: Mapping[str, str] = DEFAULT_ROSTER, *, store: TaintStore | None = None, fail_open: bool = False
    ) -> None:
        self.roster = roster
        self.guard = CrossBoundaryGuard(roster, store=store, fail_open=fail_open)
        self._calls: OrderedDict[str, tuple[str, str]] = OrderedDict()  # trace id -> (session, target)

    def __call__(self, invocation: Invocation) -> Verdict:
        context = invocation.context
        trace = None if context is None else context.trace_id
        origin: str | None = None
        if invocation.phase == Phase.REQUEST:
            session = session_key(invocation)
            if trace is not None:
                self._calls[trace] = (session, server_of(invocation.event, invocation.payload, self.roster))
                if len(self._calls) > _MAX_CALLS:
                    self._calls.popitem(last=False)
        else:
            known = self._calls.pop(trace, None) if trace is not None else None
            if known is None:
                session = session_key(invocation)
            else:
                session, origin = known  # this call's origin, passed along (other calls may be judged meanwhile)
        keyed = (
            InvocationContext(session_id=session)
            if context is None
            else dataclasses.replace(context, session_id=session)
        )
        return self.guard.judge(dataclasses.replace(invocation, context=keyed), session, origin)

    @property
    def shared(self) -> bool:
        """Whether the taints live in a network store (Redis), whose round trips may block."""
        return bool(getattr(self.guard._store, "shared", False))


def guard_registry(guard: SessionGuard) -> Registry:
    """One validator on both phases of the calls that read or send data across a boundary: inline (a lookup in
    memory), or in a worker thread when the taints live in Redis (a round trip that may stall, up to the store's
    deadline, must never hold up the event loop)."""
    registry = Registry()
    registry.register(
        guard,
        name="cross-boundary-guard",
        type="validation",
        events=list(GUARDED_EVENTS),
        phase=["request", "response"],
        description="a secret read from one server may not be sent to another (per session)",
        inline=not guard.shared,
    )
    return registry
