"""The in-process gateway bench drives the real router, chain and stages: `--policy standard` redacts and annotates
through it, and its opcode count is the same on every run (what makes it a fair A/B between two trees)."""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio

from bench.gateway_cpu import _calls, _gateway, gateway_cpu, opcodes_per_call


def test_the_bench_gateway_runs_the_standard_stages_on_its_calls() -> None:
    async def main() -> dict[str, object]:
        async with AsyncExitStack() as stack:
            client = await _gateway(stack, "standard")
            await _calls(client, 3)
            return await client.request("tools/call", {"name": "echo", "arguments": {"text": "hello"}})

    reply = anyio.run(main)
    result: dict[str, object] = reply["result"]  # type: ignore[assignment]
    assert "io.mcp-interceptors/transforms" in result["_meta"]  # type: ignore[operator]


def test_cpu_and_opcodes_per_call_are_measured_for_both_policies() -> None:
    results, ratios = anyio.run(gateway_cpu, 20, 1)
    assert len(results) == 2 and all(m.per_call_us > 0 for m in results.values())
    assert ratios["--policy standard (x --policy none, CPU per call)"] > 1
    # A loaded machine adds event-loop turns (a thread's answer not ready yet), never removes the work of a call:
    # the least of three runs is the call's own count, and that one repeats.
    first = min((anyio.run(opcodes_per_call, 5) for _ in range(3)), key=lambda counts: counts["standard"])
    second = min((anyio.run(opcodes_per_call, 5) for _ in range(3)), key=lambda counts: counts["standard"])
    assert first["standard"] > first["none"] > 0
    assert abs(first["standard"] - second["standard"]) <= 0.02 * first["standard"]
