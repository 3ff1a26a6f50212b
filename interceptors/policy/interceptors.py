"""The policy stage as SEP-2624 interceptors: one request validator, one list mutator.

Access, rate limits and audit are one validator on purpose: a chain runs validators concurrently, so
a separate rate-limit or audit validator could not know the access decision (a denied call must spend
no tokens, and each decision is recorded once with its final outcome). `mode="audit"` registers both
interceptors in SEP-2624 audit mode: every decision is still made and recorded, nothing is blocked or
filtered (a dry run of a new policy).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..enums import Mode
from ..outcomes import Mutation, Verdict
from ..registry import Invocation, Registry
from .audit import AuditSink, JsonlAuditFile
from .document import DocumentSource
from .engine import CALL_METHODS, LIST_METHODS, PolicyEngine
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

    def check(invocation: Invocation) -> Verdict:
        """Request phase of calls: the full decision, with the exact error in `info`."""
        payload = invocation.payload
        params = payload.get("params") if isinstance(payload, Mapping) else None
        context = invocation.context
        decision = engine.check_call(None if context is None else context.principal, invocation.event, params)
        if decision.allowed:
            return _ALLOW
        return Verdict.deny(decision.message, info=decision.info())

    def filter_lists(invocation: Invocation) -> Mutation:
        """Response phase of lists: drop hidden primitives, withhold output schemas that transforms would break."""
        context = invocation.context
        principal = None if context is None else context.principal
        result, changed = engine.filter_list(principal, invocation.event, invocation.payload)
        return Mutation(result, True) if changed else _UNCHANGED

    registry.register(
        check,
        name=name,
        type="validation",
        events=CALL_METHODS,
        phase="request",
        mode=mode,
        description=f"policy '{engine.policy.name}': access, hiding, rate limits and audit",
        inline=True,  # a cached decision and a bucket update: cheaper than a worker thread
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
    )
    return registry
