"""`Slots`, the invoker's per-server concurrency limit: never more holders than slots, whatever happens."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interceptors_chain import Slots


@settings(max_examples=40, deadline=None)
@given(
    total=st.integers(1, 5),
    jobs=st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=25),
)
def test_holders_never_exceed_the_slots_and_every_slot_comes_back(total: int, jobs: list[tuple[int, bool]]) -> None:
    """Random hold times (in scheduler turns) and random cancellations, waiting or holding."""

    async def main() -> None:
        slots = Slots(total)
        holding = 0
        peak = 0
        finished = 0

        async def job(turns: int) -> None:
            nonlocal holding, peak, finished
            async with slots:
                holding += 1
                peak = max(peak, holding)
                try:
                    for _ in range(turns):
                        await anyio.sleep(0)
                finally:
                    holding -= 1
            finished += 1

        async with anyio.create_task_group() as group:
            scopes = []
            for turns, cancel in jobs:
                scope = anyio.CancelScope()
                scopes.append((scope, cancel))

                async def run(scope: anyio.CancelScope = scope, turns: int = turns) -> None:
                    with scope:
                        await job(turns)

                group.start_soon(run)
            await anyio.sleep(0)
            for scope, cancel in scopes:
                if cancel:
                    scope.cancel()
        assert peak <= total and holding == 0
        # Every slot is free again: `total` holders get in at once without waiting.
        entered = 0
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                for _ in range(total):

                    async def take() -> None:
                        nonlocal entered
                        async with slots:
                            entered += 1
                            await anyio.sleep(0.01)

                    group.start_soon(take)
        assert entered == total

    anyio.run(main)


def test_waiters_are_served_first_come_first_served() -> None:
    async def main() -> list[int]:
        slots = Slots(1)
        order: list[int] = []

        async def job(number: int) -> None:
            async with slots:
                order.append(number)
                await anyio.sleep(0.001)

        async with anyio.create_task_group() as group:
            for number in range(6):
                group.start_soon(job, number)
                await anyio.sleep(0)
        return order

    assert anyio.run(main) == list(range(6))


def test_at_least_one_slot() -> None:
    with pytest.raises(ValueError):
        Slots(0)
