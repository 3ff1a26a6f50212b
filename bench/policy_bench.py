"""The policy stage's in-process cost per operation, with a warm decision cache (no transport).

`python -m bench.policy_bench [--quick]` prints microseconds per call. Rounds are interleaved and the
median round is reported, as in `bench.runner`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from interceptors import Invocation, InvocationContext, Phase, Principal
from interceptors.policy import PolicyEngine, load_policy, policy_registry

TARGET_US = 50.0
"""The budget for the policy validator per tools/call."""


def _tools(count: int) -> list[dict[str, Any]]:
    hints = [
        {"readOnlyHint": True, "openWorldHint": False},
        {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
        {"readOnlyHint": True, "openWorldHint": True},
        {"readOnlyHint": False},
    ]
    return [
        {
            "name": f"tool_{index}",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"},
            "annotations": hints[index % len(hints)],
        }
        for index in range(count)
    ]


def _engine(doc: Any, tools: list[dict[str, Any]]) -> PolicyEngine:
    engine = PolicyEngine(load_policy(doc))
    engine.learn("tools/list", {"tools": tools})
    return engine


def _per_call_us(call: Callable[[], Any], iterations: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(iterations):
        call()
    return (time.perf_counter_ns() - started) / iterations / 1000


def policy_benchmarks(quick: bool) -> dict[str, float]:
    """Microseconds per call of the engine and of the registered handlers, called directly."""
    iterations, rounds = (2_000, 3) if quick else (20_000, 7)
    tools = _tools(50)
    unlimited = {"extends": "standard", "rate_limits": [{"rate": 1e9, "per": "second", "scope": "principal"}]}
    standard = _engine("standard", tools)
    limited = _engine(unlimited, tools)
    audited = _engine({**unlimited, "audit": True, "audit_size": 1000}, tools)
    strict = _engine("strict", tools)
    alice = Principal("user", "alice", {"roles": ["analyst"]})
    context = InvocationContext(principal=alice)
    params = {"name": "tool_0", "arguments": {"id": "db-17", "depth": 2}}
    payload = {"method": "tools/call", "params": params}
    call = Invocation("policy", "tools/call", Phase.REQUEST, payload, None, context)
    listing = Invocation("policy-lists", "tools/list", Phase.RESPONSE, {"tools": tools}, None, context)

    def handler(engine: PolicyEngine, name: str) -> Callable[[Invocation], Any]:
        entry = policy_registry(engine).get(name)
        assert entry is not None
        return entry.handler

    check_limited, check_audited = handler(limited, "policy"), handler(audited, "policy")
    filter_strict = handler(strict, "policy-lists")
    hidden_params = {"name": "tool_2", "arguments": {"id": "x"}}  # open world: hidden under strict

    scenarios: dict[str, Callable[[], Any]] = {
        "engine_check_call_us": lambda: standard.check_call(alice, "tools/call", params),
        "engine_check_call_rate_limited_policy_us": lambda: limited.check_call(alice, "tools/call", params),
        "validator_handler_us": lambda: check_limited(call),
        "validator_handler_audit_true_us": lambda: check_audited(call),
        "validator_hidden_tool_audited_us": lambda: strict.check_call(alice, "tools/call", hidden_params),
        "list_filter_50_tools_us": lambda: filter_strict(listing),
    }
    for run in scenarios.values():  # warm the decision caches
        run()
    samples: dict[str, list[float]] = {name: [] for name in scenarios}
    for _ in range(rounds):
        for name, run in scenarios.items():
            samples[name].append(_per_call_us(run, iterations if "list" not in name else iterations // 10))
    return {name: round(statistics.median(values), 2) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.policy_bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    results = policy_benchmarks(args.quick)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, value in results.items():
        flag = "" if "list" in name or value <= TARGET_US else f"  (over the {TARGET_US:g} µs budget)"
        print(f"{name:45s} {value:8.2f} µs{flag}")


if __name__ == "__main__":
    main()
