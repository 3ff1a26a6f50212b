"""Chain execution rules (SEP-2624 §2 / error table §1.9), asserted through real MCP connections.

Every test runs interceptors behind an MCP server (LocalChain over the in-memory transport, or a
hand-made low-level server) so the whole request path is exercised; nothing is mocked.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import mcp
import pytest

from interceptors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Hook,
    Invocation,
    InvocationContext,
    Mode,
    Mutation,
    Phase,
    Principal,
    Registry,
    ValidationMessage,
    Verdict,
)
from interceptors_chain import (
    AbortKind,
    Chain,
    HandlerOutcome,
    InterceptorOverride,
    InvokeCall,
    NextInvoke,
    Status,
    abort_to_error,
)
from interceptors_server import LocalChain
from tests.chain_helpers import (
    EVENT,
    RawServer,
    appender,
    crash,
    descriptor,
    first_abort,
    mutation_result,
    order,
    placed,
    raw_chain,
    validation_result,
)

pytestmark = pytest.mark.anyio

TRAIL: dict[str, Any] = {"trail": []}


def deny(inv: Invocation) -> Verdict:
    return Verdict.deny("not allowed")


def allow(inv: Invocation) -> Verdict:
    return Verdict.allow()


# Ordering -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["request", "response"])
@pytest.mark.parametrize(
    ("direction", "validator_saw", "expected_order"),
    [
        ("sending", "MUTATED", ["upper", "check"]),
        ("receiving", "original", ["check", "upper"]),
    ],
)
async def test_direction_not_phase_decides_order(
    phase: str, direction: str, validator_saw: str, expected_order: list[str]
) -> None:
    reg = Registry()
    seen: list[str] = []

    @reg.mutator("upper", events=EVENT, phase="both")
    def upper(inv: Invocation) -> dict[str, Any]:
        return {**inv.payload, "text": "MUTATED"}

    @reg.validator("check", events=EVENT, phase="both")
    def check(inv: Invocation) -> None:
        seen.append(inv.payload["text"])

    async with LocalChain(reg) as chain:
        result = await chain.execute(EVENT, phase, {"text": "original"}, direction=direction)
        assert chain.plan(EVENT, phase, direction).mutate_first is (direction == "sending")

    assert seen == [validator_saw]
    assert order(result) == expected_order
    assert not result.blocked
    assert result.modified and result.final_payload == {"text": "MUTATED"}


async def test_receiving_rejection_gates_the_mutation_pass() -> None:
    reg = Registry()
    mutated: list[str] = []

    @reg.mutator("m", events=EVENT)
    def m(inv: Invocation) -> dict[str, Any]:
        mutated.append(inv.interceptor)
        return {"changed": True}

    reg.validator("no", events=EVENT)(deny)
    async with LocalChain(reg) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert result.blocked and result.status is Status.VALIDATION_FAILED
    assert mutated == []
    assert order(result) == ["no"]


async def test_validators_run_concurrently_all_complete_and_report_in_plan_order() -> None:
    reg = Registry()
    slow_started, rejecter_started = anyio.Event(), anyio.Event()
    finished: list[str] = []

    @reg.validator("slow", events=EVENT)
    async def slow(inv: Invocation) -> Verdict:
        slow_started.set()
        with anyio.fail_after(10):  # only returns if the other validator runs at the same time
            await rejecter_started.wait()
        await anyio.sleep(0.1)
        finished.append("slow")
        return Verdict.warn("slowly")

    @reg.validator("rejecter", events=EVENT)
    async def rejecter(inv: Invocation) -> Verdict:
        rejecter_started.set()
        with anyio.fail_after(10):
            await slow_started.wait()
        finished.append("rejecter")
        return Verdict.deny("no")

    async with LocalChain(reg) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")

    assert finished == ["rejecter", "slow"]  # the rejection did not cut the other validator short
    assert order(result) == ["slow", "rejecter"]  # plan order, not completion order
    assert all(record.error is None and record.result is not None for record in result.results)
    assert first_abort(result) == ("rejecter", "rejected")
    assert len(result.aborted_at) == 1
    assert result.validation_summary.errors == 1
    assert result.validation_summary.warnings == 1


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        # priority 1 ties: code-point order "B" < "a" < "b" < "same" < "ä", then configured server order.
        ("request", ["x:B", "y:a", "x:b", "x:same", "y:same", "x:ä", "y:late"]),
        ("response", ["y:late", "x:B", "y:a", "x:b", "x:same", "y:same", "x:ä"]),
    ],
)
async def test_mutators_sort_by_phase_priority_then_code_points_then_server_order(
    phase: str, expected: list[str]
) -> None:
    first, second = Registry(), Registry()
    # Registered out of order on purpose, so discovery order is not the expected order.
    for tag in ("ä", "same", "b", "B"):
        first.register(appender(f"x:{tag}"), name=tag, type="mutation", events=EVENT, phase="both", priority=1)
    second.register(
        appender("y:late"), name="late", type="mutation", events=EVENT, phase="both",
        priority={"request": 10, "response": -10},
    )  # fmt: skip
    for tag in ("same", "a"):
        second.register(appender(f"y:{tag}"), name=tag, type="mutation", events=EVENT, phase="both", priority=1)

    async with LocalChain(first, second) as chain:
        result = await chain.execute(EVENT, phase, TRAIL, direction="sending")

    assert result.final_payload == {"trail": expected}
    servers = {"x": "local-0", "y": "local-1"}
    assert placed(result) == [(servers[tag[0]], tag[2:]) for tag in expected]


# Atomicity and blocking -----------------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["sending", "receiving"])
async def test_failing_mutator_in_the_middle_releases_nothing(direction: str) -> None:
    reg = Registry()
    validator_calls: list[Any] = []
    reg.register(appender("first"), name="first", type="mutation", events=EVENT, priority=0)
    reg.register(crash, name="middle", type="mutation", events=EVENT, priority=1)
    reg.register(appender("last"), name="last", type="mutation", events=EVENT, priority=2)

    @reg.validator("watcher", events=EVENT)
    def watcher(inv: Invocation) -> None:
        validator_calls.append(inv.payload)

    async with LocalChain(reg) as chain:
        result = await chain.execute(EVENT, "request", TRAIL, direction=direction)

    assert result.blocked
    assert result.status is Status.MUTATION_FAILED
    assert result.final_payload is None and result.modified is False
    assert first_abort(result) == ("middle", "failed")
    assert "last" not in order(result)  # the pass stopped at the failure
    if direction == "sending":
        assert validator_calls == []  # sending-side gating: nothing validated, nothing released
        assert order(result) == ["first", "middle"]
    else:
        assert validator_calls == [TRAIL]
        assert order(result) == ["watcher", "first", "middle"]


BLOCKING_CASES: list[tuple[str, str, Any, dict[str, Any], str | None]] = [
    # (id, type, handler, registration options, expected abort kind or None)
    ("deny-error", "validation", deny, {}, "rejected"),
    ("deny-unknown-severity", "validation", lambda inv: Verdict.deny("x", severity="critical"), {}, "rejected"),
    ("return-false", "validation", lambda inv: False, {}, "rejected"),
    ("warn", "validation", lambda inv: Verdict.warn("careful"), {}, None),
    ("info", "validation", lambda inv: Verdict.deny("fyi", severity="info"), {}, None),
    ("allow", "validation", allow, {}, None),
    ("return-none", "validation", lambda inv: None, {}, None),
    (
        "valid-with-error-message",
        "validation",
        lambda inv: Verdict(True, messages=(ValidationMessage("ignored", "error"),)),
        {},
        None,
    ),
    ("audit-deny", "validation", deny, {"mode": "audit"}, None),
    ("audit-crash", "validation", crash, {"mode": "audit"}, None),
    ("audit-fail-open-crash", "validation", crash, {"mode": "audit", "fail_open": True}, None),
    ("active-crash", "validation", crash, {}, "failed"),
    ("fail-open-crash", "validation", crash, {"fail_open": True}, None),
    ("fail-open-deny", "validation", deny, {"fail_open": True}, "rejected"),
    ("malformed-verdict", "validation", lambda inv: "not a verdict", {}, "failed"),
    ("fail-open-malformed-verdict", "validation", lambda inv: 42, {"fail_open": True}, None),
    ("mutator-crash", "mutation", crash, {}, "failed"),
    ("mutator-audit-crash", "mutation", crash, {"mode": "audit"}, None),
    ("mutator-fail-open-crash", "mutation", crash, {"fail_open": True}, None),
    ("mutator-lies-about-modified", "mutation", lambda inv: Mutation({"x": 1}, modified=False), {}, "failed"),
]


@pytest.mark.parametrize(
    ("kind", "handler", "options", "expected"),
    [case[1:] for case in BLOCKING_CASES],
    ids=[case[0] for case in BLOCKING_CASES],
)
async def test_blocking_rules(kind: str, handler: Any, options: dict[str, Any], expected: str | None) -> None:
    reg = Registry()
    reg.register(handler, name="it", type=kind, events=EVENT, **options)
    async with LocalChain(reg) as chain:
        result = await chain.execute(EVENT, "request", {"a": 1}, direction="receiving")
    assert result.blocked is (expected is not None)
    assert len(result.results) == 1
    if expected is None:
        assert result.status is Status.SUCCESS
    else:
        assert first_abort(result) == ("it", expected)
        assert result.status is (Status.VALIDATION_FAILED if kind == "validation" else Status.MUTATION_FAILED)


async def test_audit_mutation_is_recorded_but_never_applied() -> None:
    reg = Registry()
    seen: list[Any] = []
    reg.register(appender("shadow"), name="shadow", type="mutation", events=EVENT, mode="audit", priority=0)

    @reg.mutator("after", events=EVENT, priority=1)
    def after(inv: Invocation) -> Mutation:
        seen.append(inv.payload)
        return Mutation.unchanged()

    async with LocalChain(reg) as chain:
        result = await chain.execute(EVENT, "request", TRAIL, direction="sending")

    assert not result.blocked
    assert result.modified is False and result.final_payload is None
    assert seen == [TRAIL]  # the next mutator got the unshadowed payload
    shadow = result.results[0]
    assert shadow.mode is Mode.AUDIT and shadow.applied is False
    assert shadow.result is not None and shadow.result["payload"] == {"trail": ["shadow"]}


# Malformed results (M1) and wire-level blocking ------------------------------------------------------


def _other_name(params: dict[str, Any]) -> dict[str, Any]:
    return {**mutation_result(params, {"evil": True}), "interceptor": "someone-else"}


def _wrong_phase(params: dict[str, Any]) -> dict[str, Any]:
    return {**mutation_result(params, {"evil": True}), "phase": "response"}


def _wrong_type(params: dict[str, Any]) -> dict[str, Any]:
    return validation_result(params, valid=True)


def _modified_false_but_changed(params: dict[str, Any]) -> dict[str, Any]:
    return mutation_result(params, {"evil": True}, modified=False)


def _validator_other_name(params: dict[str, Any]) -> dict[str, Any]:
    return {**validation_result(params), "interceptor": "someone-else"}


def _validator_wrong_phase(params: dict[str, Any]) -> dict[str, Any]:
    return {**validation_result(params), "phase": "response"}


def _validator_wrong_type(params: dict[str, Any]) -> dict[str, Any]:
    return mutation_result(params, params["payload"], modified=False)


def _validator_valid_not_bool(params: dict[str, Any]) -> dict[str, Any]:
    return {**validation_result(params), "valid": "yes"}


MALFORMED = [
    ("mutation", _other_name),
    ("mutation", _wrong_phase),
    ("mutation", _wrong_type),
    ("mutation", _modified_false_but_changed),
    ("validation", _validator_other_name),
    ("validation", _validator_wrong_phase),
    ("validation", _validator_wrong_type),
    ("validation", _validator_valid_not_bool),
]


@pytest.mark.parametrize("fail_open", [False, True], ids=["strict", "fail-open"])
@pytest.mark.parametrize(("kind", "respond"), MALFORMED, ids=[r.__name__.strip("_") for _, r in MALFORMED])
async def test_malformed_results_are_invocation_failures(kind: str, respond: Any, fail_open: bool) -> None:
    raw = RawServer([descriptor("x", kind, failOpen=fail_open)], respond)
    async with raw_chain(raw) as chain:
        result = await chain.execute(EVENT, "request", {"safe": True}, direction="sending")
    assert raw.invoked_names == ["x"]
    record = result.results[0]
    assert record.error is not None and record.error.startswith("malformed result")
    assert record.error_kind is AbortKind.FAILED
    assert record.applied is False
    assert result.final_payload is None and result.modified is False  # its payload is never applied
    if fail_open:
        assert not result.blocked and result.status is Status.SUCCESS
    else:
        assert first_abort(result) == ("x", "failed")


@pytest.mark.parametrize(
    ("extra", "blocks"),
    [
        ({}, True),  # valid:false with no severity counts as error
        ({"severity": "error"}, True),
        ({"severity": "bogus"}, True),  # an unknown severity counts as error
        ({"severity": "warn", "messages": [{"message": "m", "severity": "warn"}]}, False),
        ({"severity": "info"}, False),
    ],
)
async def test_wire_severity_rules(extra: dict[str, Any], blocks: bool) -> None:
    raw = RawServer([descriptor("v")], lambda params: validation_result(params, valid=False, **extra))
    async with raw_chain(raw) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert result.blocked is blocks


# Deadlines -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_per_invoke_timeout_override(flavour: str) -> None:
    reg = Registry()
    release = threading.Event()
    if flavour == "async":

        async def slow(inv: Invocation) -> Verdict:
            await anyio.sleep(30)
            return Verdict.allow()

    else:

        def slow(inv: Invocation) -> Verdict:
            release.wait(30)
            return Verdict.allow()

    reg.validator("slow", events=EVENT)(slow)
    try:
        async with LocalChain(reg, overrides={"slow": InterceptorOverride.build(timeout_ms=50)}) as chain:
            started = time.perf_counter()
            result = await chain.execute(EVENT, "request", {}, direction="receiving")
            elapsed = time.perf_counter() - started
    finally:
        release.set()
    assert elapsed < 10  # the handler takes 30 s: a wide bound proves the timeout without ever flaking
    assert first_abort(result) == ("slow", "timeout")
    assert result.status is Status.TIMEOUT
    assert abort_to_error(result).code == INTERNAL_ERROR


async def test_per_invoke_timeout_is_enforced_by_the_invoker_itself() -> None:
    """A host that ignores timeoutMs cannot hold the chain past the invoker's own timer."""

    async def stubborn(params: dict[str, Any]) -> dict[str, Any]:
        await anyio.sleep(30)
        return validation_result(params)

    raw = RawServer([descriptor("slow")], stubborn)
    async with raw_chain(raw) as chain:
        chain.set_override("raw:slow", InterceptorOverride.build(timeout_ms=50))
        started = time.perf_counter()
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
        elapsed = time.perf_counter() - started
    assert raw.invocations[0]["timeoutMs"] == 50
    assert elapsed < 10  # the handler takes 30 s: a wide bound proves the timeout without ever flaking
    assert first_abort(result) == ("slow", "timeout")
    assert result.status is Status.TIMEOUT


async def _sleepy(inv: Invocation) -> Any:
    await anyio.sleep(30)
    return None


def _deadline_registry(*, slow_fail_open: bool, with_active_tail: bool) -> Registry:
    reg = Registry()
    reg.register(_sleepy, name="a_slow", type="mutation", events=EVENT, priority=0, fail_open=slow_fail_open)
    reg.register(appender("b"), name="b_audit", type="mutation", events=EVENT, priority=1, mode="audit")
    reg.register(appender("c"), name="c_open", type="mutation", events=EVENT, priority=2, fail_open=True)
    if with_active_tail:
        reg.register(appender("d"), name="d_active", type="mutation", events=EVENT, priority=3)
    return reg


@pytest.mark.parametrize(
    ("slow_fail_open", "with_active_tail", "expected_abort"),
    [
        (True, False, None),  # everything after the deadline is audit or failOpen: nothing blocks
        (True, True, ("d_active", "timeout")),  # an active interceptor after the deadline blocks
        (False, False, ("a_slow", "timeout")),  # the slow active one itself blocks
    ],
)
async def test_aggregate_deadline_resolves_each_interceptor_by_its_own_mode(
    slow_fail_open: bool, with_active_tail: bool, expected_abort: tuple[str, str] | None
) -> None:
    reg = _deadline_registry(slow_fail_open=slow_fail_open, with_active_tail=with_active_tail)
    async with LocalChain(reg) as chain:
        started = time.perf_counter()
        result = await chain.execute(EVENT, "request", TRAIL, direction="sending", deadline_ms=300)
        elapsed = time.perf_counter() - started
    assert 0.25 < elapsed < 10
    assert result.final_payload is None and result.modified is False
    if expected_abort is None:
        assert not result.blocked and result.status is Status.SUCCESS
        assert order(result) == ["a_slow", "b_audit", "c_open"]
        assert all(record.error_kind is AbortKind.TIMEOUT for record in result.results)
    else:
        assert first_abort(result) == expected_abort
        assert result.status is Status.TIMEOUT
        assert order(result)[-1] == expected_abort[0]


async def test_chain_level_deadline_applies_between_stages() -> None:
    """The constructor's deadline_ms: a validator reached after the budget is spent blocks (active)."""
    reg = Registry()
    reg.register(_sleepy, name="slow", type="mutation", events=EVENT, fail_open=True)
    reg.validator("v", events=EVENT)(allow)
    async with LocalChain(reg, deadline_ms=200) as chain:
        started = time.perf_counter()
        result = await chain.execute(EVENT, "request", {}, direction="sending")
        elapsed = time.perf_counter() - started
    assert elapsed < 10
    assert first_abort(result) == ("v", "timeout")
    assert result.status is Status.TIMEOUT


# Phases and events ---------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["both", "", "REQUEST", "req"])
async def test_unknown_phase_raises(phase: str) -> None:
    reg = Registry()
    reg.validator("v", events="*", phase="both")(allow)
    async with LocalChain(reg) as chain:
        with pytest.raises(ValueError):
            await chain.execute(EVENT, phase, {}, direction="sending")
        with pytest.raises(ValueError):
            chain.plan(EVENT, phase, "sending")


async def test_unknown_direction_raises() -> None:
    reg = Registry()
    reg.validator("v", events=EVENT)(allow)
    async with LocalChain(reg) as chain:
        with pytest.raises(ValueError):
            await chain.execute(EVENT, "request", {}, direction="inbound")


@pytest.mark.parametrize("event", ["resources/read", "initialize", "notifications/cancelled", "ping"])
async def test_event_nothing_hooks_is_an_empty_success(event: str) -> None:
    reg = Registry()
    reg.validator("tools-only", events="tools/*", phase="both")(deny)
    reg.validator("everything", events="*", phase="response")(deny)  # '*' never matches plumbing
    async with LocalChain(reg) as chain:
        result = await chain.execute(event, "request", {"x": 1}, direction="receiving")
        assert (await chain.execute(EVENT, "request", {}, direction="receiving")).blocked  # sanity
    assert result.status is Status.SUCCESS
    assert result.results == [] and not result.blocked
    assert result.modified is False and result.final_payload is None


# Overrides -------------------------------------------------------------------------------------------


async def test_override_mode_audit_stops_blocking() -> None:
    reg = Registry()
    reg.validator("no", events=EVENT)(deny)
    async with LocalChain(reg, overrides={"no": InterceptorOverride.build(mode="audit")}) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert not result.blocked
    assert result.results[0].mode is Mode.AUDIT
    assert result.validation_summary.errors == 1


async def test_override_fail_open_forgives_a_crash_only() -> None:
    reg = Registry()
    reg.validator("boom", events=EVENT)(crash)
    reg.validator("no", events=EVENT)(deny)
    async with LocalChain(reg) as chain:
        assert first_abort(await chain.execute(EVENT, "request", {}, direction="receiving")) == (
            "boom",
            "failed",
        )
        chain.set_override("boom", InterceptorOverride.build(fail_open=True))
        chain.set_override("no", InterceptorOverride.build(fail_open=True))
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert [(abort.interceptor, abort.kind) for abort in result.aborted_at] == [("no", AbortKind.REJECTED)]


async def test_override_priority_reorders_and_plan_cache_is_invalidated() -> None:
    reg = Registry()
    reg.register(appender("a"), name="a", type="mutation", events=EVENT, priority=1)
    reg.register(appender("b"), name="b", type="mutation", events=EVENT, priority=2)
    async with LocalChain(reg) as chain:
        assert [e.name for e in chain.plan(EVENT, "request", "sending").mutators] == ["a", "b"]
        before = await chain.execute(EVENT, "request", TRAIL, direction="sending")
        chain.set_override("a", InterceptorOverride.build(priority={"request": 5, "response": 0}))
        assert [e.name for e in chain.plan(EVENT, "request", "sending").mutators] == ["b", "a"]
        after = await chain.execute(EVENT, "request", TRAIL, direction="sending")
        chain.set_override("a", None)  # removing the override recompiles too
        again = await chain.execute(EVENT, "request", TRAIL, direction="sending")
    assert before.final_payload == {"trail": ["a", "b"]}
    assert after.final_payload == {"trail": ["b", "a"]}
    assert again.final_payload == {"trail": ["a", "b"]}


async def test_override_config_reaches_the_handler_and_is_checked_against_the_schema() -> None:
    reg = Registry()
    configs: list[Any] = []

    @reg.validator(
        "cfg", events=EVENT,
        config_schema={"type": "object", "properties": {"limit": {"type": "integer"}}},
    )  # fmt: skip
    def cfg(inv: Invocation) -> None:
        configs.append(inv.config)

    async with LocalChain(reg) as chain:
        await chain.execute(EVENT, "request", {}, direction="receiving")
        chain.set_override("cfg", InterceptorOverride.build(config={"limit": 3}))
        await chain.execute(EVENT, "request", {}, direction="receiving")
        chain.set_override("cfg", InterceptorOverride.build(config={"limit": "lots"}))
        bad = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert configs == [None, {"limit": 3}]
    assert first_abort(bad) == ("cfg", "failed")  # the host refused the config: an invocation failure


async def test_override_hooks_narrowing_enabled_and_server_scoping() -> None:
    first, second = Registry(), Registry()
    first.validator("v", events=EVENT, phase="both")(deny)
    second.validator("v", events=EVENT, phase="both")(deny)
    async with LocalChain(first, second) as chain:
        assert len(chain.plan(EVENT, "response", "sending").validators) == 2
        chain.set_override("v", InterceptorOverride.build(hooks=[Hook((EVENT,), Phase.REQUEST)]))
        assert len(chain.plan(EVENT, "response", "sending").validators) == 0
        assert len(chain.plan(EVENT, "request", "sending").validators) == 2
        response = await chain.execute(EVENT, "response", {}, direction="sending")
        chain.set_override("local-1:v", InterceptorOverride.build(enabled=False))  # server-scoped wins
        request = await chain.execute(EVENT, "request", {}, direction="receiving")
        chain.set_override("v", InterceptorOverride.build(enabled=False))
        disabled = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert response.results == [] and not response.blocked
    assert placed(request) == [("local-0", "v")]
    assert disabled.results == [] and not disabled.blocked


@pytest.mark.parametrize(
    "hooks",
    [
        [Hook((EVENT,), Phase.RESPONSE)],  # a phase it never advertised
        [Hook(("resources/read",), Phase.REQUEST)],  # an event it never advertised
        [Hook(("tools/*",), Phase.REQUEST)],  # a pattern wider than its one event
    ],
    ids=["phase", "event", "pattern"],
)
async def test_override_hooks_widening_raises(hooks: list[Hook]) -> None:
    reg = Registry()
    reg.validator("v", events=EVENT, phase="request")(deny)
    widening = InterceptorOverride.build(hooks=hooks)
    with pytest.raises(ValueError, match="widens"):
        async with LocalChain(reg, overrides={"v": widening}):
            pass  # pragma: no cover
    async with LocalChain(reg) as chain:
        with pytest.raises(ValueError, match="widens"):
            chain.set_override("v", widening)


async def test_rejected_widening_override_is_not_left_installed() -> None:
    """A refused override is never installed (regression: it used to stay in effect)."""
    reg = Registry()
    reg.validator("v", events=EVENT, phase="request")(deny)
    async with LocalChain(reg) as chain:
        with pytest.raises(ValueError, match="widens"):
            chain.set_override("v", InterceptorOverride.build(hooks=[Hook((EVENT,), Phase.RESPONSE)]))
        planned = [entry.name for entry in chain.plan(EVENT, "response", "sending").validators]
        result = await chain.execute(EVENT, "response", {}, direction="sending")
        try:
            chain.set_override("v", InterceptorOverride.build(mode="audit"))  # a valid, narrowing-free one
            later_override_refused = False
        except ValueError:
            later_override_refused = True
    assert planned == []
    assert result.results == [] and not result.blocked
    assert not later_override_refused


async def test_chain_refusing_an_override_does_not_keep_the_server() -> None:
    """A server refused for a widening override is not kept half-registered (regression)."""
    widening = InterceptorOverride.build(hooks=[Hook((EVENT,), Phase.RESPONSE)])
    first = RawServer([descriptor("v")], validation_result, name="first")
    second = RawServer([descriptor("w")], lambda params: validation_result(params, valid=False), name="second")
    async with raw_chain(first, name="first", overrides={"w": widening}) as chain, mcp.Client(second.server) as client:
        with pytest.raises(ValueError, match="widens"):
            await chain.add_session(client.session, "second")
        servers = [server.name for server in chain.servers]
        result = await chain.execute(EVENT, "response", {}, direction="sending")
    assert servers == ["first"]
    assert result.results == []
    assert second.invocations == []


# Execution handler -----------------------------------------------------------------------------------


async def test_execution_handler_rewrites_params() -> None:
    reg = Registry()
    configs: list[Any] = []

    @reg.validator("cfg", events=EVENT)
    def cfg(inv: Invocation) -> None:
        configs.append(inv.config)

    async def handler(call: InvokeCall, next_invoke: NextInvoke) -> dict[str, Any]:
        return await next_invoke({**call.params, "config": {"injected": call.server}})

    async with LocalChain(reg, execution_handler=handler) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert not result.blocked
    assert configs == [{"injected": "local-0"}]


async def test_execution_handler_short_circuits_without_calling_the_host() -> None:
    reg = Registry()
    host_calls: list[str] = []

    @reg.mutator("m", events=EVENT)
    def m(inv: Invocation) -> dict[str, Any]:
        host_calls.append(inv.interceptor)
        return {"from": "host"}

    async def handler(call: InvokeCall, next_invoke: NextInvoke) -> dict[str, Any]:
        return mutation_result(call.params, {"from": "handler"})

    async with LocalChain(reg, execution_handler=handler) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="sending")
    assert host_calls == []
    assert result.final_payload == {"from": "handler"}


@pytest.mark.parametrize(
    ("registered_mode", "directive", "blocks"),
    [("active", Mode.AUDIT, False), ("audit", Mode.ACTIVE, True), ("audit", None, False)],
)
async def test_execution_handler_mode_directive(registered_mode: str, directive: Mode | None, blocks: bool) -> None:
    reg = Registry()
    reg.validator("no", events=EVENT, mode=registered_mode)(deny)
    modes_seen: list[Mode] = []

    async def handler(call: InvokeCall, next_invoke: NextInvoke) -> HandlerOutcome:
        modes_seen.append(call.mode)
        return HandlerOutcome(await next_invoke(call.params), mode=directive)

    async with LocalChain(reg, execution_handler=handler) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert modes_seen == [Mode(registered_mode)]
    assert result.blocked is blocks
    assert result.results[0].mode is (directive or Mode(registered_mode))


async def test_execution_handler_failure_is_an_invocation_failure() -> None:
    reg = Registry()
    reg.validator("ok", events=EVENT)(allow)

    async def handler(call: InvokeCall, next_invoke: NextInvoke) -> dict[str, Any]:
        raise RuntimeError("policy engine down")

    async with LocalChain(reg, execution_handler=handler) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert first_abort(result) == ("ok", "failed")


# Context and requester-visible errors ---------------------------------------------------------------


async def test_invocation_context_reaches_handlers() -> None:
    reg = Registry()
    contexts: list[InvocationContext | None] = []

    @reg.validator("v", events=EVENT)
    async def v(inv: Invocation) -> None:
        contexts.append(inv.context)

    @reg.mutator("m", events=EVENT)
    async def m(inv: Invocation) -> None:
        contexts.append(inv.context)

    context = InvocationContext(
        principal=Principal("user", "alice", {"role": "admin"}),
        trace_id="trace-1",
        span_id="span-1",
        session_id="session-1",
    )
    async with LocalChain(reg) as chain:
        await chain.execute(EVENT, "request", {}, direction="sending", context=context)
        await chain.execute(EVENT, "request", {}, direction="sending")
    assert contexts[:2] == [context, context]
    assert contexts[2:] == [None, None]


async def test_abort_to_error_for_a_rejection() -> None:
    reg = Registry()

    @reg.validator("guard", events=EVENT)
    def guard(inv: Invocation) -> Verdict:
        return Verdict.deny("secret policy detail")

    async with LocalChain(reg) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    hidden = abort_to_error(result)
    assert hidden.code == INVALID_PARAMS
    assert set(hidden.data) == {"interceptor", "reason"}
    assert hidden.data["interceptor"] == "guard"
    assert "secret policy detail" not in repr(hidden.to_wire())
    shown = abort_to_error(result, expose_messages=True)
    assert shown.code == INVALID_PARAMS
    assert shown.data["messages"] == ["secret policy detail"]


@pytest.mark.parametrize("failure", ["crash", "timeout"])
async def test_abort_to_error_for_a_failure(failure: str) -> None:
    reg = Registry()
    reg.validator("v", events=EVENT)(crash if failure == "crash" else _sleepy)
    async with LocalChain(reg, default_timeout_ms=50) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    error = abort_to_error(result, expose_messages=True)
    assert error.code == INTERNAL_ERROR
    assert error.data["interceptor"] == "v"
    assert set(error.data) == {"interceptor", "reason"}
    assert first_abort(result) == ("v", "failed" if failure == "crash" else "timeout")


async def test_abort_to_error_refuses_an_unblocked_result() -> None:
    reg = Registry()
    reg.validator("v", events=EVENT)(allow)
    async with LocalChain(reg) as chain:
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    with pytest.raises(ValueError):
        abort_to_error(result)


# Discovery ------------------------------------------------------------------------------------------


async def test_discovery_skips_bad_descriptors_and_runs_the_good_ones() -> None:
    listing = [
        descriptor("good"),
        descriptor("strange-type", "transformation"),
        descriptor("strange-mode", mode="shadow"),
        descriptor("good", "mutation"),  # duplicate name: the first one wins
        {"name": "no-hooks", "type": "validation"},
        descriptor("legacy", mode="enforce"),  # legacy spelling of active
        "not even an object",
    ]
    raw = RawServer(listing, lambda params: validation_result(params, valid=False))
    async with raw_chain(raw) as chain:
        discovered = [(server, info.name, info.type.value) for server, info in chain.interceptors()]
        result = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert discovered == [("raw", "good", "validation"), ("raw", "legacy", "validation")]
    assert sorted(raw.invoked_names) == ["good", "legacy"]
    assert [abort.interceptor for abort in result.aborted_at] == ["good", "legacy"]


async def test_refresh_picks_up_new_interceptors() -> None:
    reg = Registry()
    reg.validator("first", events=EVENT)(allow)
    async with LocalChain(reg) as chain:
        before = await chain.execute(EVENT, "request", {}, direction="receiving")
        reg.validator("late", events=EVENT)(deny)
        stale = await chain.execute(EVENT, "request", {}, direction="receiving")
        await chain.refresh()
        after = await chain.execute(EVENT, "request", {}, direction="receiving")
    assert order(before) == order(stale) == ["first"]
    assert not stale.blocked
    assert order(after) == ["first", "late"]
    assert first_abort(after) == ("late", "rejected")


async def test_plain_chain_over_two_raw_servers_keeps_configured_order() -> None:
    def tag(label: str) -> Any:
        return lambda params: mutation_result(params, {"trail": [*params["payload"]["trail"], label]})

    one = RawServer([descriptor("m", "mutation")], tag("one"), name="one")
    two = RawServer([descriptor("m", "mutation")], tag("two"), name="two")
    chain = Chain()
    async with mcp.Client(two.server) as c2, mcp.Client(one.server) as c1:
        await chain.add_session(c2.session, "two")
        await chain.add_session(c1.session, "one")
        with pytest.raises(ValueError):
            await chain.add_session(c1.session, "one")  # server names are unique
        result = await chain.execute(EVENT, "request", TRAIL, direction="sending")
    assert result.final_payload == {"trail": ["two", "one"]}
