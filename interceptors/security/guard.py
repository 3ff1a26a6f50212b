"""The cross-boundary guard: a secret read from one server may not be sent to a different one."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..codec import dumps_str
from ..enums import Phase
from ..outcomes import Verdict
from ..registry import Invocation
from .secrets import find_secrets
from .server_of import DEFAULT_ROSTER, server_of


@dataclass
class _SessionState:
    taint: dict[str, tuple[str, str]] = field(default_factory=dict)  # secret -> (format_id, origin server)
    in_flight_server: str | None = None


class CrossBoundaryGuard:
    """Validator on both phases: responses taint secrets with their origin, requests may not move them.

    State is per session (context.sessionId, else traceId, else "default"), bounded to `max_sessions`
    least-recently-used sessions so a stream of new sessions cannot exhaust memory.
    """

    def __init__(self, roster: Mapping[str, str] = DEFAULT_ROSTER, max_sessions: int = 10_000) -> None:
        self._roster = roster
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[str, _SessionState] = OrderedDict()

    def _state(self, invocation: Invocation) -> _SessionState:
        context = invocation.context
        key = "default"
        if context is not None:
            key = context.session_id or context.trace_id or "default"
        state = self._sessions.get(key)
        if state is None:
            state = self._sessions[key] = _SessionState()
            if len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        return state

    def __call__(self, invocation: Invocation) -> Verdict:
        state = self._state(invocation)
        text = "" if invocation.payload is None else dumps_str(invocation.payload)
        hits = find_secrets(text)
        if invocation.phase == Phase.REQUEST:
            target = server_of(invocation.event, invocation.payload, self._roster)
            for format_id, secret in hits:
                origin = state.taint.get(secret)
                if origin is not None and origin[1] != target:
                    return Verdict.deny(
                        f"cross-boundary secret flow: {format_id} read from '{origin[1]}' may not be sent to '{target}'"
                    )
            state.in_flight_server = target
            return Verdict.allow({"target": target, "tainted": len(state.taint)})
        origin_server = state.in_flight_server or server_of(invocation.event, invocation.payload, self._roster)
        ingested = 0
        for format_id, secret in hits:
            if secret not in state.taint:
                state.taint[secret] = (format_id, origin_server)
                ingested += 1
        return Verdict.allow({"origin": origin_server, "ingested": ingested, "tainted": len(state.taint)})
