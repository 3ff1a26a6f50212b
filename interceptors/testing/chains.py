"""Interceptor plans for chain properties: random validators and mutators, and a reference model.

A plan is one or two registries of interceptors with random names (colliding on purpose: `a`, `B`, `b`,
`ä` sort differently by code point than by eye), types, modes (active, audit), failOpen, priorities
(one integer or per phase), hooks (request, response, both; exact events, `*` and `namespace/*`) and
behaviours, including injected faults: a crash, a malformed answer, an in-place edit that claims no
change, and a timeout.

`expected_outcome` is a small model written from SEP-2624 §2 (ordering by direction, concurrent validators
that all complete, mutators sorted by the phase's priority then code points then server order, an atomic
mutation pass, the audit x failOpen matrix); it shares no code with the engine. `integrations.testing.run_plan`
executes a plan through a real `LocalChain` (this package never imports the layers above it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hypothesis import strategies as st

from ..events import pattern_matches
from ..outcomes import Mutation, Verdict
from ..registry import Invocation, Registry

NAMES = ("a", "B", "b", "ä")
EVENTS = ("tools/call", "resources/read")
EVENT_PATTERNS = ("tools/call", "resources/read", "*", "tools/*")
VALIDATOR_BEHAVIOURS = ("pass", "reject_error", "reject_warn", "crash", "malformed", "slow")
MUTATOR_BEHAVIOURS = ("pass", "append", "crash", "malformed", "inplace", "slow")
"""`inplace` edits the payload it was handed and claims no change, which the invoker must catch."""
FAULTS = frozenset({"crash", "malformed", "inplace", "slow"})
SLOW_TIMEOUT_MS = 150
"""The timeout given to `slow` interceptors (they sleep far longer)."""


@dataclass(frozen=True, slots=True)
class InterceptorSpec:
    registry: int
    name: str
    kind: str  # "validation" | "mutation"
    mode: str  # "active" | "audit"
    fail_open: bool
    priority: tuple[int, int]  # (request, response)
    hooked: Literal["request", "response", "both"]
    behaviour: str
    is_async: bool
    events: tuple[str, ...] = ("tools/call",)
    inline: bool = False
    """A sync handler registered `inline` (run on the caller's stack, see `InterceptorHost.start_local`)."""

    @property
    def server(self) -> str:
        return f"local-{self.registry}"

    @property
    def label(self) -> str:
        return f"{self.server}:{self.name}"


@dataclass(frozen=True, slots=True)
class ChainPlan:
    registries: int
    specs: tuple[InterceptorSpec, ...]

    def __repr__(self) -> str:
        parts = [
            f"{s.label}({s.kind[0]},{s.mode},{'open' if s.fail_open else 'closed'},p={s.priority},{s.hooked},"
            f"{'|'.join(s.events)},{s.behaviour}{',async' if s.is_async else ''}{',inline' if s.inline else ''})"
            for s in self.specs
        ]
        return f"ChainPlan({self.registries} registries: {', '.join(parts)})"


def chain_plans(
    *,
    names: Sequence[str] = NAMES,
    max_interceptors: int = 6,
    max_registries: int = 2,
    faults: bool = True,
    timeouts: bool = True,
    event_patterns: Sequence[str] = EVENT_PATTERNS,
) -> st.SearchStrategy[ChainPlan]:
    """Random plans. `faults=False` leaves out crashes, malformed answers and in-place edits;
    `timeouts=False` leaves out the slow interceptors (each costs `SLOW_TIMEOUT_MS` of wall time)."""
    excluded = set() if faults else set(FAULTS)
    if not timeouts:
        excluded.add("slow")
    validators = tuple(b for b in VALIDATOR_BEHAVIOURS if b not in excluded)
    mutators = tuple(b for b in MUTATOR_BEHAVIOURS if b not in excluded)

    @st.composite
    def build(draw: st.DrawFn) -> ChainPlan:
        registries = draw(st.integers(1, max_registries))
        keys = draw(
            st.lists(
                st.tuples(st.integers(0, registries - 1), st.sampled_from(list(names))),
                min_size=1,
                max_size=max_interceptors,
                unique=True,
            )
        )
        specs = []
        for registry, name in keys:
            kind = draw(st.sampled_from(("validation", "mutation")))
            behaviour = draw(st.sampled_from(validators if kind == "validation" else mutators))
            priority = draw(
                st.one_of(st.integers(-1, 1).map(lambda p: (p, p)), st.tuples(st.integers(-1, 1), st.integers(-1, 1)))
            )
            events = tuple(draw(st.lists(st.sampled_from(list(event_patterns)), min_size=1, max_size=2, unique=True)))
            is_async = behaviour == "slow" or draw(st.booleans())
            specs.append(
                InterceptorSpec(
                    registry=registry,
                    name=name,
                    kind=kind,
                    mode=draw(st.sampled_from(("active", "audit"))),
                    fail_open=draw(st.booleans()),
                    priority=priority,
                    hooked=draw(st.sampled_from(("request", "response", "both"))),
                    behaviour=behaviour,
                    is_async=is_async,
                    events=events,
                    inline=not is_async and draw(st.booleans()),
                )
            )
        return ChainPlan(registries, tuple(specs))

    return build()


# --- the reference model ----------------------------------------------------------------------------------


@dataclass
class Expected:
    blocked: bool = False
    aborts: list[tuple[str, str]] = field(default_factory=list)
    """(label, kind) in order; kind is rejected, failed or timeout."""
    final_trail: list[str] | None = None
    invoked: list[str] = field(default_factory=list)
    """Labels in the order the result records them."""
    mutator_calls: list[str] = field(default_factory=list)
    validator_saw: dict[str, tuple[str, ...]] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)
    status: str = "success"


def expected_outcome(plan: ChainPlan, event: str, phase: str, direction: str) -> Expected:
    """What SEP-2624 says executing `plan` on a `{"trail": []}` payload must produce."""
    out = Expected()
    specs = plan.specs
    selected = [
        s for s in specs if s.hooked in (phase, "both") and any(pattern_matches(p, event) for p in s.events)
    ]  # fmt: skip
    validators = [s for r in range(plan.registries) for s in selected if s.registry == r and s.kind == "validation"]
    mutators = sorted(
        (s for s in selected if s.kind == "mutation"),
        key=lambda s: (s.priority[0] if phase == "request" else s.priority[1], [ord(c) for c in s.name], s.registry),
    )

    def failure(s: InterceptorSpec) -> str | None:
        if s.behaviour not in FAULTS or s.mode != "active" or s.fail_open:
            return None
        return "timeout" if s.behaviour == "slow" else "failed"

    def mutate(trail: list[str]) -> tuple[list[str], bool]:
        for s in mutators:
            out.invoked.append(s.label)
            out.mutator_calls.append(s.label)
            if s.behaviour == "append" and s.mode == "active":
                trail = [*trail, s.label]
                out.applied.append(s.label)
            kind = failure(s)
            if kind is not None:
                out.aborts.append((s.label, kind))
                return trail, True
        return trail, False

    def validate(trail: list[str]) -> bool:
        blocked = False
        for s in validators:
            out.invoked.append(s.label)
            out.validator_saw[s.label] = tuple(trail)
            kind = "rejected" if s.behaviour == "reject_error" and s.mode == "active" else failure(s)
            if kind is not None:
                out.aborts.append((s.label, kind))
                blocked = True
        return blocked

    trail: list[str] = []
    if direction == "sending":
        trail, out.blocked = mutate(trail)
        if not out.blocked:
            out.blocked = validate(trail)
    else:
        out.blocked = validate(trail)
        if not out.blocked:
            trail, out.blocked = mutate(trail)
    if out.blocked:
        first, kind = out.aborts[0]
        spec = next(s for s in specs if s.label == first)
        if kind == "timeout":
            out.status = "timeout"
        else:
            out.status = "validation_failed" if spec.kind == "validation" else "mutation_failed"
    elif out.applied:
        out.final_trail = trail
    return out


# --- the real chain -----------------------------------------------------------------------------------------


@dataclass
class Observed:
    """What the handlers saw while a plan ran."""

    mutator_calls: list[str] = field(default_factory=list)
    validator_saw: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _handler(spec: InterceptorSpec, log: Observed) -> Any:
    def validator(inv: Invocation) -> Any:
        log.validator_saw[spec.label] = tuple(inv.payload["trail"])
        if spec.behaviour == "reject_error":
            return Verdict.deny("no")
        if spec.behaviour == "reject_warn":
            return Verdict.warn("hmm")
        if spec.behaviour == "crash":
            raise RuntimeError("crash")
        if spec.behaviour == "malformed":
            return "not a verdict"
        return Verdict.allow()

    def mutator(inv: Invocation) -> Any:
        log.mutator_calls.append(spec.label)
        payload = inv.payload
        if spec.behaviour == "append":
            return {**payload, "trail": [*payload["trail"], spec.label]}
        if spec.behaviour == "crash":
            raise RuntimeError("crash")
        if spec.behaviour == "malformed":
            return Mutation({**payload, "trail": [*payload["trail"], "sneaky"]}, modified=False)
        if spec.behaviour == "inplace":
            payload["trail"].append("in-place")
        return Mutation.unchanged()

    sync = validator if spec.kind == "validation" else mutator
    if spec.behaviour == "slow":
        import anyio

        async def slow(inv: Invocation) -> Any:
            sync(inv)
            await anyio.sleep(30)
            return None

        return slow
    if not spec.is_async:
        return sync

    async def wrapped(inv: Invocation) -> Any:
        return sync(inv)

    return wrapped


def build_registries(plan: ChainPlan, log: Observed) -> list[Registry]:
    """One registry per `plan.registries`, with every spec's handler registered."""
    regs = [Registry() for _ in range(plan.registries)]
    for spec in plan.specs:
        request, response = spec.priority
        regs[spec.registry].register(
            _handler(spec, log),
            name=spec.name,
            type=spec.kind,
            events=list(spec.events),
            phase=spec.hooked,
            priority=request if request == response else {"request": request, "response": response},
            mode=spec.mode,
            fail_open=spec.fail_open,
            inline=spec.inline,
        )
    return regs


def assert_matches_model(result: Any, log: Observed, expected: Expected, payload: Any, snapshot: Any) -> None:
    """Compare an `ExecutionResult` (and the handlers' log) with the model; `snapshot` is the payload before."""
    assert payload == snapshot, "execute mutated the caller's payload"
    assert result.blocked is expected.blocked, f"blocked: {result.blocked}, model: {expected.blocked}"
    assert result.status.value == expected.status, f"status: {result.status.value}, model: {expected.status}"
    aborts = [(f"{a.server}:{a.interceptor}", a.kind.value) for a in result.aborted_at]
    assert aborts == expected.aborts, f"aborts: {aborts}, model: {expected.aborts}"
    invoked = [f"{r.server}:{r.interceptor}" for r in result.results]
    assert invoked == expected.invoked, f"records: {invoked}, model: {expected.invoked}"
    assert log.mutator_calls == expected.mutator_calls, (
        f"mutators ran: {log.mutator_calls}, model: {expected.mutator_calls}"
    )
    assert log.validator_saw == expected.validator_saw, (
        f"validators saw {log.validator_saw}, model: {expected.validator_saw}"
    )
    applied = [f"{r.server}:{r.interceptor}" for r in result.results if r.applied]
    assert applied == expected.applied, f"applied: {applied}, model: {expected.applied}"
    if expected.final_trail is None:
        assert result.modified is False and result.final_payload is None, "a payload was released"
    else:
        assert result.modified is True, "no mutation was released"
        assert result.final_payload == {**snapshot, "trail": expected.final_trail}, "the released payload differs"
        assert result.payload_or(payload) is result.final_payload


def chain_cases(**plan_options: Any) -> st.SearchStrategy[tuple[ChainPlan, str, str, str]]:
    """(plan, event, phase, direction) tuples for `check_chain_model`."""
    return st.tuples(
        chain_plans(**plan_options),
        st.sampled_from(EVENTS),
        st.sampled_from(("request", "response")),
        st.sampled_from(("sending", "receiving")),
    )
