"""Token buckets: refill, scopes, all-or-nothing, kinds, denied calls spend nothing; hypothesis bounds."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from interceptors.policy import RATE_LIMITED, PolicyEngine, RateLimit, RateLimiter, load_policy
from tests.interceptors.policy.test_policy_catalog import primed, principal


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def engine_with(limits: list[dict[str, Any]], **extra: Any) -> tuple[PolicyEngine, FakeClock]:
    clock = FakeClock()
    return primed({"name": "L", "rate_limits": limits, **extra}, clock=clock), clock


def call(engine: PolicyEngine, name: str, who: str = "alice", *roles: str) -> Any:
    return engine.check_call(principal(who, *roles), "tools/call", {"name": name, "arguments": {}})


def test_bucket_refills_lazily() -> None:
    engine, clock = engine_with([{"rate": 2, "per": "second", "burst": 2}])
    assert call(engine, "get_asset").allowed and call(engine, "get_asset").allowed
    refused = call(engine, "get_asset")
    assert refused.outcome == "rate_limited" and refused.code == RATE_LIMITED
    assert refused.data == {"retry_after": 0.5, "limit": "2/second", "scope": "principal_tool"}
    assert refused.message == "Rate limit exceeded for tool 'get_asset' (2/second); retry in 0.5s"
    clock.now += 0.25
    assert call(engine, "get_asset").outcome == "rate_limited"
    clock.now += 0.25
    assert call(engine, "get_asset").allowed


def test_default_burst_and_period() -> None:
    limit = RateLimit.from_document({"rate": 2.5})
    assert (limit.burst, limit.per, limit.period, limit.scope, limit.label) == (
        3,
        "minute",
        60.0,
        "principal_tool",
        "2.5/minute",
    )


def test_scopes() -> None:
    for scope, (same_principal_other_tool, other_principal_same_tool) in {
        "principal": (False, True),
        "tool": (True, False),
        "principal_tool": (True, True),
        "global": (False, False),
    }.items():
        engine, _ = engine_with([{"rate": 1, "per": "hour", "scope": scope}])
        assert call(engine, "get_asset", "alice").allowed
        assert call(engine, "list_assets", "alice").allowed is same_principal_other_tool, scope
        assert call(engine, "get_asset", "bob").allowed is other_principal_same_tool, scope


def test_tool_globs_and_role_limits() -> None:
    engine, _ = engine_with(
        [{"rate": 1, "per": "hour", "tools": ["export_*"]}],
        roles={"intern": {"rate_limits": [{"rate": 1, "per": "hour", "burst": 2, "scope": "principal"}]}},
    )
    assert call(engine, "export_csv").allowed and not call(engine, "export_csv").allowed
    assert call(engine, "get_asset").allowed and call(engine, "get_asset").allowed  # not limited
    assert call(engine, "get_asset", "ian", "intern").allowed
    assert call(engine, "list_assets", "ian", "intern").allowed
    assert call(engine, "get_asset", "ian", "intern").outcome == "rate_limited"


def test_a_refusal_charges_no_other_bucket() -> None:
    engine, _ = engine_with(
        [
            {"rate": 10, "per": "minute", "scope": "principal"},
            {"rate": 1, "per": "minute", "tools": ["export_csv"]},
        ]
    )
    assert call(engine, "export_csv").allowed  # principal bucket 10 -> 9
    for _ in range(5):
        assert call(engine, "export_csv").outcome == "rate_limited"  # never spends the principal bucket
    for _ in range(9):
        assert call(engine, "get_asset").allowed
    assert call(engine, "get_asset").outcome == "rate_limited"


def test_denied_calls_spend_no_tokens() -> None:
    engine, _ = engine_with([{"rate": 1, "per": "hour", "scope": "principal"}], deny_tools=["export_*"])
    for _ in range(3):
        assert call(engine, "export_csv").outcome == "not_found"
    assert call(engine, "get_asset").allowed


def test_completion_kind() -> None:
    engine, _ = engine_with([{"rate": 1, "per": "hour", "kinds": ["tool"], "scope": "principal"}])
    ref = {"ref": {"type": "ref/prompt", "name": "triage"}}
    for _ in range(3):
        assert engine.check_call(principal(), "completion/complete", ref).allowed  # kinds: [tool] only
    engine, _ = engine_with([{"rate": 1, "per": "hour", "kinds": ["completion"]}])
    assert engine.check_call(principal(), "completion/complete", ref).allowed
    refused = engine.check_call(principal(), "completion/complete", ref)
    assert refused.outcome == "rate_limited" and refused.message.startswith(
        "Rate limit exceeded for completion 'triage'"
    )
    assert call(engine, "get_asset").allowed
    engine, _ = engine_with([{"rate": 1, "per": "hour", "scope": "principal"}])  # no kinds: completions count
    assert engine.check_call(principal(), "completion/complete", ref).allowed
    assert not call(engine, "get_asset").allowed


def test_resource_kind_covers_templates() -> None:
    engine, _ = engine_with([{"rate": 1, "per": "hour", "kinds": ["resource"], "scope": "principal"}])
    assert engine.check_call(principal(), "resources/read", {"uri": "cg://assets/a"}).allowed
    assert engine.check_call(principal(), "resources/read", {"uri": "cg://metrics"}).outcome == "rate_limited"


def test_profile_limits() -> None:
    clock = FakeClock()
    engine = primed(load_policy("standard"), clock=clock)
    admin = principal("root", "admin")
    decisions = [engine.check_call(admin, "tools/call", {"name": "reveal_token"}) for _ in range(31)]
    assert all(d.allowed for d in decisions[:30]) and decisions[30].data == {
        "retry_after": 2.0,
        "limit": "30/minute",
        "scope": "principal",
    }
    engine.reset_rate_limits()
    assert engine.check_call(admin, "tools/call", {"name": "reveal_token"}).allowed


def test_bucket_store_is_bounded_and_drops_full_buckets_first() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock, max_buckets=10)
    limit = RateLimit.from_document({"rate": 1, "per": "second", "burst": 1})
    for index in range(10):
        assert limiter.acquire([limit], f"p{index}", "t") is None
    clock.now += 5  # every bucket refilled: all equivalent to new ones
    assert limiter.acquire([limit], "new", "t") is None
    assert len(limiter) == 1


@given(
    rate=st.integers(1, 20),
    burst=st.integers(1, 10),
    gaps=st.lists(st.floats(0, 3, allow_nan=False), min_size=1, max_size=120),
)
def test_never_more_than_burst_plus_rate_times_t(rate: int, burst: int, gaps: list[float]) -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock)
    limit = RateLimit.from_document({"rate": rate, "per": "second", "burst": burst})
    admitted: list[float] = []
    for gap in gaps:
        clock.now += gap
        if limiter.acquire([limit], "p", "t") is None:
            admitted.append(clock.now)
    for i, start in enumerate(admitted):
        for j in range(i, len(admitted)):
            window = admitted[j] - start
            assert j - i + 1 <= math.floor(burst + rate * window + 1e-6)


@given(
    caps=st.lists(st.integers(1, 4), min_size=2, max_size=4),
    picks=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True), min_size=1, max_size=60),
)
def test_a_refusal_never_spends_any_bucket(caps: list[int], picks: list[list[int]]) -> None:
    clock = FakeClock()  # time stands still: only admissions change the buckets
    limiter = RateLimiter(clock)
    limits = [RateLimit.from_document({"rate": 1, "per": "day", "burst": cap, "scope": "global"}) for cap in caps]
    spent = [0] * len(limits)
    for pick in picks:
        chosen = [i for i in pick if i < len(limits)]
        if not chosen:
            continue
        refusal = limiter.acquire([limits[i] for i in chosen], "p", "t")
        if refusal is None:
            for i in chosen:
                spent[i] += 1
        else:
            assert any(spent[i] >= caps[i] for i in chosen)
        assert all(spent[i] <= caps[i] for i in range(len(limits)))
    # Every bucket holds exactly burst - admissions: refusals took nothing.
    for i, limit in enumerate(limits):
        tokens = limiter._buckets.get(limiter._key(limit, "p", "t"))
        assert tokens is None or tokens[0] == caps[i] - spent[i]
