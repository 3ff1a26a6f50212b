"""Property tests: random chains run through LocalChain must agree with a small reference model.

The model below is written from SEP-2624 §2 (ordering by direction, concurrent validators that all
complete, mutators sorted by phase priority / code points / server order, atomic mutation pass, the
audit x failOpen matrix) and shares no code with the engine.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_server import LocalChain
from tests.chain_helpers import EVENT

NAMES = ("a", "B", "b", "ä")
VALIDATOR_BEHAVIOURS = ("pass", "reject_error", "reject_warn", "crash", "malformed")
# "inplace": edits the payload it was handed and claims no change, which the invoker must catch.
MUTATOR_BEHAVIOURS = ("pass", "append", "crash", "malformed", "inplace")
FAILING = frozenset({"crash", "malformed", "inplace"})


@dataclass(frozen=True)
class Spec:
    registry: int
    name: str
    kind: str  # "validation" | "mutation"
    mode: str  # "active" | "audit"
    fail_open: bool
    priority: tuple[int, int]  # (request, response)
    hooked: str  # "request" | "response" | "both"
    behaviour: str
    is_async: bool

    @property
    def server(self) -> str:
        return f"local-{self.registry}"

    @property
    def label(self) -> str:
        return f"{self.server}:{self.name}"


@st.composite
def chains(draw: st.DrawFn) -> tuple[int, list[Spec]]:
    registries = draw(st.integers(1, 2))
    keys = draw(
        st.lists(
            st.tuples(st.integers(0, registries - 1), st.sampled_from(NAMES)),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    specs = []
    for registry, name in keys:
        kind = draw(st.sampled_from(("validation", "mutation")))
        behaviours = VALIDATOR_BEHAVIOURS if kind == "validation" else MUTATOR_BEHAVIOURS
        priority = draw(
            st.one_of(
                st.integers(-1, 1).map(lambda p: (p, p)),
                st.tuples(st.integers(-1, 1), st.integers(-1, 1)),
            )
        )
        specs.append(
            Spec(
                registry=registry,
                name=name,
                kind=kind,
                mode=draw(st.sampled_from(("active", "audit"))),
                fail_open=draw(st.booleans()),
                priority=priority,
                hooked=draw(st.sampled_from(("request", "response", "both"))),
                behaviour=draw(st.sampled_from(behaviours)),
                is_async=draw(st.booleans()),
            )
        )
    return registries, specs


# The reference model ---------------------------------------------------------------------------------


@dataclass
class Expected:
    blocked: bool = False
    aborts: list[tuple[str, str]] = field(default_factory=list)  # (label, kind) in order
    final_trail: list[str] | None = None
    invoked: list[str] = field(default_factory=list)  # labels in record order
    mutator_calls: list[str] = field(default_factory=list)
    validator_saw: dict[str, tuple[str, ...]] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)
    status: str = "success"


def model(registries: int, specs: list[Spec], phase: str, direction: str) -> Expected:
    out = Expected()
    selected = [s for s in specs if s.hooked in (phase, "both")]
    validators = [s for r in range(registries) for s in selected if s.registry == r and s.kind == "validation"]
    mutators = sorted(
        (s for s in selected if s.kind == "mutation"),
        key=lambda s: (s.priority[0] if phase == "request" else s.priority[1], [ord(c) for c in s.name], s.registry),
    )

    def failure_blocks(s: Spec) -> bool:
        return s.behaviour in FAILING and s.mode == "active" and not s.fail_open

    def mutate(trail: list[str]) -> tuple[list[str], bool]:
        for s in mutators:
            out.invoked.append(s.label)
            out.mutator_calls.append(s.label)
            if s.behaviour == "append" and s.mode == "active":
                trail = [*trail, s.label]
                out.applied.append(s.label)
            if failure_blocks(s):
                out.aborts.append((s.label, "failed"))
                return trail, True
        return trail, False

    def validate(trail: list[str]) -> bool:
        blocked = False
        for s in validators:
            out.invoked.append(s.label)
            out.validator_saw[s.label] = tuple(trail)
            if s.behaviour == "reject_error" and s.mode == "active":
                out.aborts.append((s.label, "rejected"))
                blocked = True
            elif failure_blocks(s):
                out.aborts.append((s.label, "failed"))
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
        first = out.aborts[0][0]
        kind = next(s.kind for s in specs if s.label == first)
        out.status = "validation_failed" if kind == "validation" else "mutation_failed"
    elif out.applied:
        out.final_trail = trail
    return out


# Building the real chain ---------------------------------------------------------------------------


@dataclass
class Log:
    mutator_calls: list[str] = field(default_factory=list)
    validator_saw: dict[str, tuple[str, ...]] = field(default_factory=dict)


def make_handler(spec: Spec, log: Log) -> Any:
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
        return Mutation.unchanged()

    sync = validator if spec.kind == "validation" else mutator
    if not spec.is_async:
        return sync

    async def wrapped(inv: Invocation) -> Any:
        return sync(inv)

    return wrapped


def build(registries: int, specs: list[Spec], log: Log) -> list[Registry]:
    regs = [Registry() for _ in range(registries)]
    for spec in specs:
        request, response = spec.priority
        regs[spec.registry].register(
            make_handler(spec, log),
            name=spec.name,
            type=spec.kind,
            events=EVENT,
            phase=spec.hooked,
            priority=request if request == response else {"request": request, "response": response},
            mode=spec.mode,
            fail_open=spec.fail_open,
        )
    return regs


@settings(max_examples=40)
@given(
    chain=chains(),
    phase=st.sampled_from(("request", "response")),
    direction=st.sampled_from(("sending", "receiving")),
)
def test_chain_agrees_with_the_reference_model(chain: tuple[int, list[Spec]], phase: str, direction: str) -> None:
    registries, specs = chain
    log = Log()
    payload = {"trail": [], "nested": {"keep": [1, 2, {"deep": "value"}]}}
    snapshot = copy.deepcopy(payload)

    async def run() -> Any:
        async with LocalChain(*build(registries, specs, log)) as engine:
            return await engine.execute(EVENT, phase, payload, direction=direction)

    result = anyio.run(run)
    expected = model(registries, specs, phase, direction)

    assert payload == snapshot, "execute mutated the caller's payload"
    assert result.blocked is expected.blocked
    assert result.status.value == expected.status
    assert [(f"{a.server}:{a.interceptor}", a.kind.value) for a in result.aborted_at] == expected.aborts
    assert [f"{r.server}:{r.interceptor}" for r in result.results] == expected.invoked
    assert log.mutator_calls == expected.mutator_calls
    assert log.validator_saw == expected.validator_saw
    assert [f"{r.server}:{r.interceptor}" for r in result.results if r.applied] == expected.applied
    if expected.final_trail is None:
        assert result.modified is False and result.final_payload is None
    else:
        assert result.modified is True
        assert result.final_payload == {**snapshot, "trail": expected.final_trail}
        assert result.payload_or(payload) is result.final_payload


@settings(max_examples=25)
@given(
    payload=st.recursive(
        st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=8,
    ),
    direction=st.sampled_from(("sending", "receiving")),
)
def test_execute_never_mutates_the_input_payload(payload: Any, direction: str) -> None:
    """Mutators that rewrite, wrap or edit in place never change the caller's object."""
    reg = Registry()

    @reg.mutator("wrap", events=EVENT, priority=0)
    def wrap(inv: Invocation) -> Any:
        return {"wrapped": inv.payload}

    @reg.mutator("vandal", events=EVENT, priority=1, mode="audit")
    def vandal(inv: Invocation) -> Any:
        inv.payload["wrapped"] = "vandalised"  # in place, in audit: must not leak anywhere
        return Mutation.unchanged()

    @reg.validator("look", events=EVENT)
    def look(inv: Invocation) -> None:
        return None

    snapshot = copy.deepcopy(payload)

    async def run() -> Any:
        async with LocalChain(reg) as engine:
            return await engine.execute(EVENT, "request", payload, direction=direction)

    result = anyio.run(run)
    assert payload == snapshot
    assert not result.blocked
    assert result.final_payload == {"wrapped": snapshot}
