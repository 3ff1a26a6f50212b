"""The in-process bench statistic: every scenario gets its calls, in blocks that take turns, and the turns rotate
so each scenario follows every other equally often."""

from __future__ import annotations

import anyio

from bench.runner import Call, Measurement, measure_blocks


def test_blocks_take_rotating_turns_and_report_every_scenario() -> None:
    order: list[str] = []

    def scenario(name: str) -> Call:
        async def call() -> None:
            order.append(name)

        return call

    names = ["a", "b", "c"]

    async def main() -> dict[str, Measurement]:
        return await measure_blocks({name: scenario(name) for name in names}, 300, block=100)

    results = anyio.run(main)
    assert set(results) == set(names) and all(m.per_call_us >= 0 for m in results.values())
    timed = order[3 * 20 :]  # after each scenario's warm-up of 20 calls
    assert [timed.count(name) for name in names] == [300, 300, 300]
    blocks = [timed[index] for index in range(0, len(timed), 100)]
    assert blocks == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
