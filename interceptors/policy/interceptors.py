"""The policy stage as SEP-2624 interceptors: one request validator, one list mutator.

Access, rate limits and audit are one validator on purpose: a chain runs validators concurrently, so
a separate rate-limit or audit validator could not know the access decision (a denied call must spend
no tokens, and each decision is recorded once with its final outcome). `mode="audit"` registers both
interceptors in SEP-2624 audit mode: every decision is still made and recorded, nothing is blocked or
filtered (a dry run of a new policy).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ..enums import Mode
from ..outcomes import Mutation, Verdict
from ..registry import Invocation, Registry
from .audit import AuditSink, JsonlAuditFile
from .document import DocumentSource
from .engine import CALL_METHODS, LIST_METHODS, Decision, PolicyEngine
from .policy import Policy

_ALLOW = Verdict.allow()
_UNCHANGED = Mutation.unchanged()


def policy_registry(
    policy: PolicyEngine | Policy | DocumentSource = None,
    *,
    audit_sink: AuditSink | str | os.PathLike[str] | None = None,
    audit_key: bytes | None = None,
    mode: Mode | str = Mode.ACTIVE,
    name: str = "policy",
) -> Registry:
    """A registry with `<name>` (validator: access, hiding, rate limits, audit) and `<name>-lists` (mutator).

    `policy` is a PolicyEngine (to keep a handle on its audit trail and counters), a Policy, or anything
    `load_policy` reads. `audit_sink` is a JSONL file path or a callable receiving each entry.

    A refusal is `Verdict.deny(message, info={"outcome", "code", "message", "data"?, "result"?})`: `code` is
    -31001 (denied), -31029 (rate limited) or -32602 (unknown or hidden). A chain reports any validator
    block as -32602, so a gateway that must answer with the exact code reads `info` (or calls
    `PolicyEngine.check_call` itself).
    """
    if isinstance(policy, PolicyEngine):
        if audit_key is not None:
            raise ValueError("audit_key is set when the PolicyEngine is built, not here")
        engine = policy
        if audit_sink is not None:
            sink = JsonlAuditFile(audit_sink) if isinstance(audit_sink, str | os.PathLike) else audit_sink
            engine.audit.sinks.append(sink)
    else:
        engine = PolicyEngine(policy, audit_sinks=() if audit_sink is None else (audit_sink,), audit_key=audit_key)
    registry = Registry()
    if engine.permits_everything:
        return registry  # `open`: no decision can refuse anything, so no interceptor costs anything

    rules = engine.policy.arguments
    shared = bool(getattr(engine.limiter, "shared", False))  # rate limits in Redis: decided off the loop
    calls = _Calls()

    def check(invocation: Invocation) -> Verdict:
        """Request phase of calls: the full decision, with the exact error in `info`."""
        payload = invocation.payload
        params = payload.get("params") if isinstance(payload, Mapping) else None
        context = invocation.context
        decision = engine.check_call(None if context is None else context.principal, invocation.event, params)
        if decision.allowed:
            if not rules or invocation.event != "tools/call" or not isinstance(params, Mapping):
                return _ALLOW
            refused = remember(invocation, params)
            if refused is None:
                return _ALLOW
            decision = refused
        return Verdict.deny(decision.message, info=decision.info())

    def remember(invocation: Invocation, params: Mapping[str, Any]) -> Decision | None:
        """An allowed call whose result a rule filters: remembered for its response pass, or refused when it could
        not be (no trace context to find it by, or every slot held by a recent call): never forwarded unguarded."""
        name = params.get("name")
        if not isinstance(name, str) or not rules.filters_results(name):
            return None
        arguments = params.get("arguments")
        key = _call_key(invocation)
        if key is None:
            return engine.refuse_call(invocation.context, name, arguments, "its result cannot be filtered here")
        if not calls.put(key, (name, rules.bases(name, arguments), arguments)):
            return engine.refuse_call(invocation.context, name, arguments, "too many calls await their results")
        return None

    async def check_off_loop(invocation: Invocation) -> Verdict:
        """With path rules that resolve symlinks, a call they judge is decided in a worker thread (file system
        reads never block the event loop), and so is every call when the rate limits live in a shared store
        (a network call that may hang); every other call is decided here, as inline."""
        if shared:
            shared_verdict: Verdict = await _off_loop(check, invocation)
            return shared_verdict
        payload = invocation.payload
        params = payload.get("params") if isinstance(payload, Mapping) else None
        name = params.get("name") if isinstance(params, Mapping) else None
        if invocation.event == "tools/call" and isinstance(name, str) and rules.touches_filesystem(name):
            verdict: Verdict = await _off_loop(check, invocation)
            return verdict
        return check(invocation)

    def filter_results_sync(invocation: Invocation) -> Mutation:
        key = _call_key(invocation)
        remembered = calls.pop(key) if key is not None else None
        if remembered is None:
            return _UNCHANGED  # not a call an argument rule lists results for (or refused before it ran)
        name, bases, arguments = remembered
        result, withheld, how = rules.filter_result(name, bases, invocation.payload)
        if not withheld:
            return _UNCHANGED
        context = invocation.context
        principal = None if context is None else context.principal
        engine.record_withheld(principal, name, arguments, withheld)
        if how == "refuse":
            text = "Access denied: the result lists protected paths"
            return Mutation({"content": [{"type": "text", "text": text}], "isError": True}, True)
        return Mutation(result, True)

    async def filter_results(invocation: Invocation) -> Mutation:
        """Response phase of calls whose rule says `results: filter|refuse`: listed paths judged like arguments."""
        mutation: Mutation = await _off_loop(filter_results_sync, invocation)
        return mutation

    def filter_lists(invocation: Invocation) -> Mutation:
        """Response phase of lists: drop hidden primitives, withhold output schemas that transforms would break."""
        context = invocation.context
        principal = None if context is None else context.principal
        result, changed = engine.filter_list(principal, invocation.event, invocation.payload)
        return Mutation(result, True) if changed else _UNCHANGED

    registry.register(
        check_off_loop if shared or (rules and rules.resolve and any(r.kind == "path" for r in rules.rules)) else check,
        name=name,
        type="validation",
        events=CALL_METHODS,
        phase="request",
        mode=mode,
        description=f"policy '{engine.policy.name}': access, hiding, rate limits and audit",
        inline=True,  # a cached decision and a bucket update: cheaper than a worker thread
        borrows=True,  # edits nothing it is given (tests/interceptors/test_borrowing_stages.py)
    )
    registry.register(
        filter_lists,
        name=f"{name}-lists",
        type="mutation",
        events=LIST_METHODS,
        phase="response",
        mode=mode,
        description=f"policy '{engine.policy.name}': hide denied primitives from list results",
        inline=True,
        borrows=True,
    )
    if rules and any(rule.results != "none" for rule in rules.rules):
        registry.register(
            filter_results,
            name=f"{name}-results",
            type="mutation",
            events=("tools/call",),
            phase="response",
            mode=mode,
            priority=-2000,  # first: it reads the server's own listing formats, before any transform rewrites them
            description=f"policy '{engine.policy.name}': withhold protected paths that listings and searches return",
        )
    return registry


_CallKey = tuple[str, str, str]


async def _off_loop(function: Any, invocation: Invocation) -> Any:
    """Run a blocking step in the default executor of a running asyncio loop (the core has no anyio); under
    another event loop it runs in place."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover - not asyncio (trio): no executor of ours to use
        return function(invocation)
    return await loop.run_in_executor(None, function, invocation)


def _call_key(invocation: Invocation) -> _CallKey | None:
    """One call's key across its request and response passes: principal, session, trace (and span)."""
    context = invocation.context
    if context is None or context.trace_id is None:
        return None
    trace = context.trace_id if context.span_id is None else f"{context.trace_id}/{context.span_id}"
    principal = (context.principal.id or "") if context.principal is not None else ""
    return (principal, context.session_id or "", trace)


_Remembered = tuple[str, tuple[str, ...], Any]


class _Calls:
    """Calls waiting for their response pass, bounded. A full memo drops only calls older than `max_age` (a call
    refused after the policy allowed it never answers); if none is, the new call is refused rather than an older
    one forgotten, since a forgotten call's listing would pass unfiltered."""

    def __init__(
        self, size: int = 4096, max_age: float = 900.0, clock: Any = time.monotonic, per_principal: int = 256
    ) -> None:
        self.size = size
        self.per_principal = per_principal
        """One principal's calls never hold more than this many slots: a flood refuses only its own calls."""
        self.max_age = max_age
        self.clock = clock
        self.items: OrderedDict[_CallKey, tuple[float, _Remembered]] = OrderedDict()
        self.held: dict[str, int] = {}
        self.lock = threading.Lock()

    def put(self, key: _CallKey, value: _Remembered) -> bool:
        now = self.clock()
        with self.lock:
            if key not in self.items:
                if len(self.items) >= self.size or self.held.get(key[0], 0) >= self.per_principal:
                    while self.items and next(iter(self.items.values()))[0] < now - self.max_age:
                        self._forget(next(iter(self.items)))
                if len(self.items) >= self.size or self.held.get(key[0], 0) >= self.per_principal:
                    return False
                self.held[key[0]] = self.held.get(key[0], 0) + 1
            self.items[key] = (now, value)
            self.items.move_to_end(key)
            return True

    def _forget(self, key: _CallKey) -> tuple[float, _Remembered] | None:
        found = self.items.pop(key, None)
        if found is not None:
            left = self.held[key[0]] - 1
            if left:
                self.held[key[0]] = left
            else:
                del self.held[key[0]]
        return found

    def pop(self, key: _CallKey) -> _Remembered | None:
        with self.lock:
            found = self._forget(key)
            return None if found is None else found[1]
