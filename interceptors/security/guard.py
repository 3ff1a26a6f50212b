"""The cross-boundary guard: a secret read from one server may not be sent to a different one."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from ..codec import dumps_str
from ..enums import Phase
from ..errors import INTERNAL_ERROR
from ..outcomes import Verdict
from ..registry import Invocation
from ..store_breaker import UNAVAILABLE_RETRY_S
from .secrets import find_secrets
from .server_of import DEFAULT_ROSTER, server_of
from .taint import MemoryTaintStore, Taint, TaintStore, TaintStoreUnavailable

UNAVAILABLE_MESSAGE = "Cross-boundary guard state unavailable; retry in 1s"
"""What the requester gets when the taint store (Redis) fails or stalls: -32603 with `UNAVAILABLE_DATA`."""
UNAVAILABLE_DATA = {"reason": "guard_store_unavailable", "retry_after": UNAVAILABLE_RETRY_S}


def _unavailable(why: str) -> Verdict:
    """Fail closed with the documented error (no secret, no server name in it); `why` stays in the audit reason."""
    return Verdict.refuse(UNAVAILABLE_MESSAGE, code=INTERNAL_ERROR, data=UNAVAILABLE_DATA, info={"why": why})


class CrossBoundaryGuard:
    """Validator on both phases: responses taint secrets with their origin, requests may not move them.

    State is per session (context.sessionId, else traceId, else "default"). Taints live in `store`
    (in memory by default, bounded to `max_sessions` least-recently-used sessions; `RedisTaintStore` to
    share them between gateway processes). A store that cannot be reached (or does not answer within its
    deadline) refuses every request that carries a secret (fail closed), and a response with a secret it cannot
    record too, unless `fail_open`: -32603 `UNAVAILABLE_MESSAGE` with `data = UNAVAILABLE_DATA`.
    """

    def __init__(
        self,
        roster: Mapping[str, str] = DEFAULT_ROSTER,
        max_sessions: int = 10_000,
        *,
        store: TaintStore | None = None,
        fail_open: bool = False,
    ) -> None:
        self._roster = roster
        self._max_sessions = max_sessions
        self._store: TaintStore = store if store is not None else MemoryTaintStore(max_sessions)
        self._fail_open = fail_open
        self._in_flight: OrderedDict[str, str] = OrderedDict()  # session -> server of its last request

    @staticmethod
    def _session(invocation: Invocation) -> str:
        context = invocation.context
        if context is None:
            return "default"
        return context.session_id or context.trace_id or "default"

    def _remember_target(self, session: str, target: str) -> None:
        self._in_flight[session] = target
        self._in_flight.move_to_end(session)
        if len(self._in_flight) > self._max_sessions:
            self._in_flight.popitem(last=False)

    def __call__(self, invocation: Invocation) -> Verdict:
        return self.judge(invocation, self._session(invocation))

    def judge(self, invocation: Invocation, session: str, origin: str | None = None) -> Verdict:
        """The verdict on one pass in `session`; `origin`: for a response, the server its request went to (else
        the last request's target in that session)."""
        text = "" if invocation.payload is None else dumps_str(invocation.payload)
        hits = find_secrets(text)
        if invocation.phase == Phase.REQUEST:
            target = server_of(invocation.event, invocation.payload, self._roster)
            try:
                origins = self._store.origins(session, (secret for _, secret in hits))
            except TaintStoreUnavailable as exc:
                if not self._fail_open:
                    return _unavailable(f"refused (fail closed): {exc.why}")
                origins = {}
            for format_id, secret in hits:
                taint = origins.get(secret)
                if taint is not None and taint[1] != target:
                    return Verdict.deny(
                        f"cross-boundary secret flow: {format_id} read from '{taint[1]}' may not be sent to '{target}'"
                    )
            self._remember_target(session, target)
            return Verdict.allow({"target": target, "tainted": len(origins)})
        origin_server = origin or self._in_flight.get(session)
        if origin_server is None:
            origin_server = server_of(invocation.event, invocation.payload, self._roster)
        if not hits:
            return Verdict.allow({"origin": origin_server, "ingested": 0})
        fresh: dict[str, Taint] = {}
        for format_id, secret in hits:
            fresh.setdefault(secret, (format_id, origin_server))
        try:
            before = self._store.origins(session, fresh)
            new = {secret: taint for secret, taint in fresh.items() if secret not in before}
            tainted = self._store.record(session, new)
        except TaintStoreUnavailable as exc:
            if not self._fail_open:  # a secret it cannot remember is not released
                return _unavailable(f"a secret could not be recorded: {exc.why}")
            return Verdict.allow({"origin": origin_server, "ingested": 0, "storeUnavailable": True})
        return Verdict.allow({"origin": origin_server, "ingested": len(new), "tainted": tainted})
