"""PolicyEngine: one decision per operation (hidden, denied, rate limited or allowed), recorded once.

Access, rate limits and audit run together in `check_call`, in that order, so a denied call never
spends tokens and every decision is written exactly once with its final outcome. Gateways call it
directly to answer with the exact JSON-RPC codes; the interceptors in `interceptors.py` wrap it.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._fastinit import fast_init
from ..errors import INVALID_PARAMS
from ..outcomes import REQUESTER_ERROR_KEY, SUBSTITUTE_RESULT_KEY
from ..protocol.methods import METHODS, Stage
from ..wire import Principal
from .access import CompiledRule, decide
from .arguments import Refusal
from .audit import AuditSink, AuditTrail, JsonlAuditFile
from .document import DocumentSource
from .errors import ACCESS_DENIED, NOT_FOUND, RATE_LIMITED, PolicyRefusal
from .metadata import LIST_KEYS, MetadataStore, PrimitiveSpec, Resolved
from .policy import Policy, load_policy
from .principal import principal_id, roles_of
from .ratelimit import Clock, RateLimit, RateLimiter
from .uris import UriRefused, uri_idents

CALL_METHODS = METHODS.names(Stage.POLICY)
LIST_METHODS = METHODS.names(Stage.POLICY_LISTS)
EMPTY_COMPLETION: Mapping[str, Any] = {"completion": {"values": [], "total": 0, "hasMore": False}}
DECISION_CACHE_SIZE = 8192
AUDIT_REDACT_MEMO = 4096
REFUSAL_REASON_LIMIT = 300


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of `check_call`. Refusals carry the exact JSON-RPC error to answer with.

    `result` is set for a completion whose reference is unknown or hidden: answer with it (empty values)
    instead of an error, exactly as for a nonexistent reference.
    """

    outcome: str
    """`allowed`, `denied`, `rate_limited` or `not_found`."""
    kind: str = ""
    name: str = ""
    code: int | None = None
    message: str = ""
    data: Mapping[str, Any] | None = None
    reason: str = ""
    result: Mapping[str, Any] | None = None

    @property
    def allowed(self) -> bool:
        return self.outcome == "allowed"

    def info(self) -> dict[str, Any]:
        """The structured form a validator's `Verdict.deny(info=...)` carries: `{code, message, data?, result?}`."""
        out: dict[str, Any] = {"outcome": self.outcome, "code": self.code, "message": self.message}
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = dict(self.data)
            error["data"] = dict(self.data)
        out[REQUESTER_ERROR_KEY] = error  # invokers of this project answer with exactly this error
        if self.result is not None:
            out["result"] = dict(self.result)
            out[SUBSTITUTE_RESULT_KEY] = dict(self.result)
        return out

    def error(self) -> PolicyRefusal:
        if self.allowed or self.code is None:
            raise ValueError("an allowed decision has no error")
        return PolicyRefusal(self.code, self.message, None if self.data is None else dict(self.data))


def refusal_from_info(info: Mapping[str, Any]) -> PolicyRefusal | Mapping[str, Any]:
    """A gateway's answer from the `info` of a blocked `policy` validator: the error to raise, or, for a
    completion whose reference is unknown or hidden, the result to return instead.
    """
    result = info.get("result")
    if isinstance(result, Mapping):
        return result
    code, message = info.get("code"), info.get("message")
    if not isinstance(code, int) or not isinstance(message, str):
        raise ValueError("not a policy refusal")
    data = info.get("data")
    return PolicyRefusal(code, message, dict(data) if isinstance(data, Mapping) else None)


PASS = Decision("allowed")
"""For methods the policy does not judge."""


@dataclass(frozen=True, slots=True)
class _Access:
    """A cached access decision for (spec, roles[, principal], idents, call kind)."""

    allowed: bool
    reason: str
    rules: tuple[CompiledRule, ...]
    limits: tuple[RateLimit, ...]
    decision: Decision  # the allowed Decision, shared by every hit


@fast_init
@dataclass(frozen=True, slots=True)
class _Target:
    call_kind: str
    name: str
    resolved: Resolved | None
    arguments: Any
    missing: str  # the "Unknown ..." message
    missing_data: Mapping[str, Any] | None = None
    result: Mapping[str, Any] | None = None
    uri: str | None = None
    refused: str = ""
    """Why the requested URI cannot be judged (ambiguous or invalid): such a request is denied."""


def _pipeline(base: Sequence[Any], rules: Sequence[CompiledRule]) -> list[Any]:
    """Output transform specs: the policy's, then each matching rule's by `transforms_mode`."""
    specs = list(base)
    for rule in rules:
        extra = list(rule.body.get("transforms") or ())
        mode = rule.body.get("transforms_mode", "append")
        specs = extra if mode == "replace" else extra + specs if mode == "prepend" else specs + extra
    return specs


def audit_redactor(policy: Policy) -> Callable[[str], str] | None:
    """What every audit string goes through: the transforms' redactor masking secrets and credentials (with the
    policy's own detectors), as the output channel does. None when the transforms package is not there."""
    try:
        from ..transforms.base import TransformContext
        from ..transforms.redactor import Redactor
    except ImportError:  # pragma: no cover - the transforms package ships with the policy
        return None
    document = policy.document
    lock = threading.Lock()
    redactor = Redactor(
        {
            "strategies": {"secret": "redact", "credential": "redact"},
            "tags": False,
            "name_mentions": False,
            "custom_detectors": list(document.get("detectors") or ()),
            "disabled_detectors": list(document.get("disabled_detectors") or ()),
        },
        "audit(redactor)",
    )

    memo: OrderedDict[str, str] = OrderedDict()  # names, ids, roles and reasons repeat: redact each once

    def redact(text: str) -> str:
        hit = memo.get(text)
        if hit is not None:
            return hit
        out = redactor.apply(text, TransformContext(direction="output"))
        clean = out if isinstance(out, str) else "[REDACTED]"
        with lock:
            memo[text] = clean
            if len(memo) > AUDIT_REDACT_MEMO:
                memo.popitem(last=False)
        return clean

    return redact


def _sink(sink: AuditSink | str | os.PathLike[str]) -> AuditSink:
    return JsonlAuditFile(sink) if isinstance(sink, str | os.PathLike) else sink


class PolicyEngine:
    """Access decisions (cached), rate limits, list filtering and the audit trail for one policy."""

    def __init__(
        self,
        policy: Policy | DocumentSource = None,
        *,
        audit_sinks: Sequence[AuditSink | str | os.PathLike[str]] = (),
        audit_key: bytes | None = None,
        clock: Clock = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        cache_size: int = DECISION_CACHE_SIZE,
        unknown_as_not_found: bool = True,
        rate_limit_redis: Any = None,
        rate_limit_fail_open: bool = False,
    ) -> None:
        """`rate_limit_redis`: a Redis URL or client to share the buckets with every process of this policy."""
        self.policy = load_policy(policy)
        self.metadata = MetadataStore(self.policy.catalog, unknown_as_not_found=unknown_as_not_found)
        self.limiter: Any = RateLimiter(clock)
        if rate_limit_redis is not None:
            from .shared_limits import RedisRateLimiter, limit_names

            self.limiter = RedisRateLimiter(
                rate_limit_redis,
                names=limit_names(self.policy),
                prefix=f"mcp-interceptors:rl:{self.policy.name}",
                key=self.policy.secret_key(),
                fail_open=rate_limit_fail_open,
            )
        self.audit = AuditTrail(
            self.policy.audit_size,
            key=audit_key if audit_key is not None else self.policy.secret_key(),
            sinks=[_sink(sink) for sink in audit_sinks],
            policy=self.policy.name,
            clock=wall_clock,
            max_age=self.policy.audit_max_age,
            per_decision=self.policy.audit_per_decision,
            redact=audit_redactor(self.policy),
        )
        self._cache: OrderedDict[tuple[Any, ...], _Access] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    # Access ------------------------------------------------------------------------------------

    def _access(
        self, resolved: Resolved, roles: frozenset[str], pid: str, call_kind: str, uri: str | None = None
    ) -> _Access:
        policy = self.policy
        key = (resolved.spec, roles, pid if policy.uses_principals else None, uri, call_kind)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        spec, idents = resolved.spec, resolved.idents
        rules = tuple(rule for rule in policy.rules if rule.match.applies(spec, roles, pid, idents))
        allowed, reason = decide(policy.name, policy.lists, policy.deny_capabilities, rules, spec, idents)
        limits: list[RateLimit] = []
        if allowed:
            for limit in (*policy.rate_limits, *(limit for rule in rules for limit in rule.rate_limits)):
                if limit.applies(call_kind, idents) and limit not in limits:
                    limits.append(limit)
        entry = _Access(allowed, reason, rules, tuple(limits), Decision("allowed", call_kind, spec.name))
        with self._lock:
            self._cache[key] = entry
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return entry

    def decide(self, principal: Principal | None, spec: PrimitiveSpec, uri: str | None = None) -> tuple[bool, str]:
        """The bare access decision for a primitive (no rate limits, no audit): `(allowed, reason)`."""
        if uri is None:
            idents = spec.idents
        else:
            try:
                idents = tuple(dict.fromkeys((spec.name, *uri_idents(uri))))
            except UriRefused as exc:
                return False, f"resource URI refused: {exc}"
        entry = self._access(Resolved(spec, idents), roles_of(principal), principal_id(principal), spec.kind, uri)
        return entry.allowed, entry.reason

    def matching_rules(self, principal: Principal | None, spec: PrimitiveSpec | None) -> tuple[CompiledRule, ...]:
        """Roles and rules that apply to this caller and primitive (None: the rules that need no primitive)."""
        roles, pid = roles_of(principal), principal_id(principal)
        if spec is None:
            return tuple(rule for rule in self.policy.rules if rule.match.applies(None, roles, pid, ()))
        return self._access(Resolved(spec, spec.idents), roles, pid, spec.kind).rules

    def output_transform_specs(self, principal: Principal | None, spec: PrimitiveSpec | None) -> list[Any]:
        """The output pipeline's specs for this caller and primitive: policy `transforms`, then each matching
        rule's by its `transforms_mode`. Tool hints are not applied here (the transforms package owns them).
        """
        return _pipeline(self.policy.transforms, self.matching_rules(principal, spec))

    def spec_for(self, method: str, name: str | None) -> PrimitiveSpec | None:
        """The primitive a request names (tool or prompt name, URI, completion ref); None when unknown."""
        if not isinstance(name, str):
            return None
        store = self.metadata
        if method == "tools/call":
            resolved = store.tool(name)
        elif method == "prompts/get":
            resolved = store.prompt(name)
        elif method == "resources/read":
            try:
                resolved = store.resource(name)
            except UriRefused:
                return None
        elif method == "completion/complete":
            is_prompt = any(spec.name == name for spec in store.specs("prompts/list"))
            ref = {"type": "ref/prompt", "name": name} if is_prompt else {"type": "ref/resource", "uri": name}
            try:
                resolved = store.reference(ref)[1]
            except UriRefused:
                return None
        else:
            return None
        return None if resolved is None else resolved.spec

    # Calls -------------------------------------------------------------------------------------

    def _target(self, method: str, params: Mapping[str, Any]) -> _Target | None:
        store = self.metadata
        if method == "tools/call" or method == "prompts/get":
            name = params.get("name")
            word = "tool" if method == "tools/call" else "prompt"
            if not isinstance(name, str):
                name = ""
            resolved = store.tool(name) if word == "tool" else store.prompt(name)
            return _Target(word, name, resolved, params.get("arguments"), f"Unknown {word}: {name}")
        if method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str):
                uri = ""
            try:
                resolved = store.resource(uri)
            except UriRefused as exc:
                return _Target("resource", uri, None, None, "", None, uri=uri, refused=str(exc))
            kind = "resource" if resolved is None else resolved.spec.kind
            return _Target(
                kind, uri, resolved, resolved and resolved.variables, f"Unknown resource: {uri}", {"uri": uri}, uri=uri
            )
        if method == "completion/complete":
            ref = params.get("ref")
            arguments = {key: params[key] for key in ("argument", "context") if key in params}
            try:
                family, resolved = store.reference(ref)
            except UriRefused as exc:
                uri = ref.get("uri") if isinstance(ref, Mapping) else ""
                uri = uri if isinstance(uri, str) else ""
                return _Target("completion", uri, None, arguments, "", None, uri=uri, refused=str(exc))
            name = ref.get("name" if family == "prompt" else "uri") if isinstance(ref, Mapping) else None
            name = name if isinstance(name, str) else ""
            uri = name if family == "resource" else None
            return _Target(
                "completion", name, resolved, arguments, f"Unknown {family}: {name}", None, EMPTY_COMPLETION, uri
            )
        return None

    def check_call(self, principal: Principal | None, method: str, params: Mapping[str, Any] | None) -> Decision:
        """Decide one request (`tools/call`, `resources/read`, `prompts/get`, `completion/complete`).

        Order: lookup (unknown → not_found), access (hidden → not_found, else denied -31001), rate limits
        (-31029, all buckets or none), then the allowed decision. Every refusal is recorded; an allowed
        call is recorded when the policy has `audit: true` or the primitive can `reveal`.
        """
        target = self._target(method, params if isinstance(params, Mapping) else {})
        if target is None:
            return PASS
        roles, pid = roles_of(principal), principal_id(principal)
        if target.refused:
            return self._refused_uri(target, roles, pid)
        resolved = target.resolved
        if resolved is None:
            return self._not_found(target, roles, pid, "unknown")
        entry = self._access(resolved, roles, pid, target.call_kind, target.uri)
        label = resolved.spec.name  # a template's text, not the concrete URI: its variables are arguments
        if not entry.allowed:
            if self.policy.hide_denied:
                return self._not_found(target, roles, pid, f"hidden: {entry.reason}")
            self.audit.count("denied")
            self.audit.record("denied", target.call_kind, label, pid, roles, target.arguments, entry.reason)
            return Decision(
                "denied",
                target.call_kind,
                target.name,
                ACCESS_DENIED,
                f"Access denied: {entry.reason}",
                {"reason": entry.reason, "policy": self.policy.name},
                entry.reason,
            )
        if target.call_kind == "tool" and self.policy.arguments:
            refused = self.policy.arguments.check(target.name, target.arguments)
            if refused is not None:
                return self._refused_argument(target, label, roles, pid, refused)
        if entry.limits:
            refusal = self.limiter.acquire(entry.limits, pid, resolved.idents[0])
            if refusal is not None:
                limit = refusal.limit
                message = (
                    f"Rate limit exceeded for {target.call_kind} '{target.name}' ({limit.label}); "
                    f"retry in {refusal.retry_after:g}s"
                )
                if refusal.unavailable:  # the shared store is down: refused, fail closed
                    message = f"Rate limit state unavailable; retry in {refusal.retry_after:g}s"
                self.audit.count("rate_limited")
                self.audit.record("rate_limited", target.call_kind, label, pid, roles, target.arguments, limit.label)
                data = {"retry_after": refusal.retry_after, "limit": limit.label, "scope": limit.scope}
                if refusal.unavailable:
                    data["reason"] = "rate_limit_store_unavailable"
                return Decision("rate_limited", target.call_kind, target.name, RATE_LIMITED, message, data, limit.label)
        self.audit.count("allowed")
        reveal = "reveal" in resolved.spec.capabilities
        if reveal:
            self.audit.count("reveal")
            self.audit.reveal_warning(target.call_kind, label, pid, roles, target.arguments)
        if reveal or self.policy.audit:
            reason = "reveal" if reveal else ""
            self.audit.record("allowed", target.call_kind, label, pid, roles, target.arguments, reason)
        return entry.decision

    def _refused_argument(
        self, target: _Target, label: str, roles: frozenset[str], pid: str, refused: Refusal
    ) -> Decision:
        """An argument (a path outside the roots, a denied file) refused by an argument rule: -31001 with the
        argument's pointer and the rule, never the value; audited as `denied` with the same reason. Checked after
        access and before rate limits, so a refused call spends no token."""
        reason = refused.text()
        self.audit.count("denied")
        self.audit.record("denied", target.call_kind, label, pid, roles, target.arguments, reason)
        data: dict[str, Any] = {"reason": reason, "policy": self.policy.name}
        if refused.pointer:
            data["argument"] = refused.pointer
        return Decision(
            "denied", target.call_kind, target.name, ACCESS_DENIED, f"Access denied: {reason}", data, reason
        )

    def refuse_call(self, context: Any, name: str, arguments: Any, reason: str) -> Decision:
        """A tool call the stage cannot guard as its rules require (its result could not be filtered): refused
        -31001 and audited as `denied`, after `check_call` allowed it (that entry is amended)."""
        principal = None if context is None else context.principal
        pid, roles = principal_id(principal), roles_of(principal)
        self.audit.record_refusal("tool", name, pid, roles, arguments, reason, "")
        data = {"reason": reason, "policy": self.policy.name}
        return Decision("denied", "tool", name, ACCESS_DENIED, f"Access denied: {reason}", data, reason)

    def record_withheld(self, principal: Principal | None, name: str, arguments: Any, withheld: int) -> None:
        """A result from which refused paths were removed (`results: filter`): one `denied` entry saying how many."""
        reason = f"result filtered: {withheld} protected path{'s' if withheld != 1 else ''} withheld"
        self.audit.count("denied")
        self.audit.record("denied", "tool", name, principal_id(principal), roles_of(principal), arguments, reason)

    def _refused_uri(self, target: _Target, roles: frozenset[str], pid: str) -> Decision:
        """A URI that a server could read in more than one way is denied, whatever the policy says: no glob
        can be trusted to have judged it. The answer says why (the rule, never the URI)."""
        reason = f"resource URI refused: {target.refused}"
        self.audit.count("denied")
        shown = self.audit.hide_uri(target.name)
        self.audit.record("denied", target.call_kind, shown, pid, roles, target.arguments, reason)
        return Decision(
            "denied",
            target.call_kind,
            target.name,
            ACCESS_DENIED,
            f"Access denied: {reason}",
            {"reason": reason, "policy": self.policy.name},
            reason,
        )

    def _not_found(self, target: _Target, roles: frozenset[str], pid: str, reason: str) -> Decision:
        """Hidden and nonexistent look the same to the caller; only the audit entry's reason differs."""
        shown = self.audit.hide_uri(target.name) if target.uri is not None else target.name
        self.audit.count("hidden")
        self.audit.record("not_found", target.call_kind, shown, pid, roles, target.arguments, reason)
        return Decision(
            "not_found",
            target.call_kind,
            target.name,
            NOT_FOUND,
            target.missing,
            target.missing_data,
            reason,
            target.result,
        )

    def record_rejection(
        self, principal: Principal | None, method: str, params: Mapping[str, Any] | None, reason: str
    ) -> None:
        """An allowed call that a later stage refused (secrets in the arguments, ...): amend or add `rejected`."""
        target = self._target(method, params if isinstance(params, Mapping) else {})
        if target is None:
            return
        if target.resolved is not None:
            label = target.resolved.spec.name
        else:
            label = self.audit.hide_uri(target.name) if target.uri is not None else target.name
        self.audit.record_rejection(
            target.call_kind, label, principal_id(principal), roles_of(principal), target.arguments, reason
        )

    def record_refusal(
        self,
        principal: Principal | None,
        method: str,
        params: Mapping[str, Any] | None,
        interceptor: str,
        reason: str,
        chosen: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Another interceptor (a built-in stage or one loaded with `--registry`) refused a request: audit it as
        `denied` with that interceptor and its reason (amending the policy's own `allowed` entry of the call), and
        return the JSON-RPC error for the client. An error the interceptor chose (`Verdict.refuse`) is kept;
        otherwise -32602 `blocked by interceptor 'X': <reason>` with data `{interceptor, reason}`. The reason is
        redacted (secrets and credentials masked) and escaped before it is written or sent."""
        target = self._target(method, params if isinstance(params, Mapping) else {})
        reason = reason or "refused"
        safe = self.audit.clean(reason, REFUSAL_REASON_LIMIT)  # what the audit writes too (it cleans the same way)
        roles, pid = roles_of(principal), principal_id(principal)
        if target is None:
            self.audit.record_refusal(method, method, pid, roles, None, reason, interceptor)
        else:
            if target.resolved is not None:
                label = target.resolved.spec.name
            else:
                label = self.audit.hide_uri(target.name) if target.uri is not None else target.name
            self.audit.record_refusal(target.call_kind, label, pid, roles, target.arguments, reason, interceptor)
        if chosen is not None and isinstance(chosen.get("code"), int) and isinstance(chosen.get("message"), str):
            return dict(chosen)
        who = self.audit.clean(interceptor, 200)
        return {
            "code": INVALID_PARAMS,
            "message": f"blocked by interceptor '{who}': {safe}",
            "data": {"interceptor": who, "reason": safe},
        }

    # Lists -------------------------------------------------------------------------------------

    @property
    def permits_everything(self) -> bool:
        """Nothing to deny, hide, limit or record: the document says no more than `open` does (a name, a
        description, display flags and no transforms) and no audit sink listens. The policy stage then has no
        work and registers no interceptor (an unknown primitive is left for the upstream to refuse)."""
        document = self.policy.document
        keys = set(document) - {"name", "description", "extends", "hide_denied", "honor_hints"}
        empty = all(not document.get(key) for key in keys & {"transforms", "input_transforms"})
        return keys <= {"transforms", "input_transforms"} and empty and not self.audit.sinks

    def learn(self, method: str, result: Any) -> None:
        """Prime the metadata store with a list result (e.g. the gateway's first list of the upstream)."""
        if method in LIST_KEYS:
            self.metadata.learn(method, result)

    def visible(self, principal: Principal | None, spec: PrimitiveSpec) -> bool:
        return not self.policy.hide_denied or self.decide(principal, spec)[0]

    def filter_list(self, principal: Principal | None, method: str, result: Any) -> tuple[Any, bool]:
        """`(result, changed)`: hidden primitives removed, `outputSchema` withheld where output transforms apply.

        Computed per call and never cached across principals.
        """
        if method not in LIST_KEYS or not isinstance(result, Mapping):
            return result, False
        list_key = LIST_KEYS[method][0]
        items = result.get(list_key)
        if not isinstance(items, list):
            return result, False
        pairs = self.metadata.learn(method, result)
        roles, pid = roles_of(principal), principal_id(principal)
        kept: list[Any] = []
        changed = False
        for pair in pairs:
            if pair is None:  # a primitive without a name cannot be judged: it is not shown
                changed = True
                continue
            item, spec = pair
            entry = self._access(Resolved(spec, spec.idents), roles, pid, spec.kind)
            if self.policy.hide_denied and not entry.allowed:
                changed = True
                continue
            if spec.kind == "tool" and "outputSchema" in item and self._has_output_transforms(entry):
                item = {key: value for key, value in item.items() if key != "outputSchema"}
                changed = True
            kept.append(item)
        if not changed:
            return result, False
        return {**result, list_key: kept}, True

    def _has_output_transforms(self, entry: _Access) -> bool:
        return bool(_pipeline(self.policy.transforms, entry.rules))

    # Housekeeping ------------------------------------------------------------------------------

    def reset_rate_limits(self) -> None:
        self.limiter.reset()

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
