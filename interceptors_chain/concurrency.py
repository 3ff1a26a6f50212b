"""Run never-raising coroutines concurrently with the least overhead the event loop allows."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio

T = TypeVar("T")


async def gather(factories: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Results in input order. The first runs in the calling task; the rest in their own tasks.

    On asyncio, plain tasks cost a fraction of an anyio task group; if the caller is cancelled, every
    task is cancelled and awaited before the cancellation propagates, so nothing outlives the call.
    The callables must not raise (they report failures as values).
    """
    if len(factories) == 1:
        return [await factories[0]()]
    if not _on_asyncio():
        return await _gather_anyio(factories)
    tasks = [asyncio.ensure_future(factory()) for factory in factories[1:]]
    try:
        first = await factories[0]()
        rest = [await task for task in tasks]
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [first, *rest]


def _on_asyncio() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no asyncio loop: another anyio backend (trio)
        return False


async def _gather_anyio(factories: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    results: list[T | None] = [None] * len(factories)

    async def run(index: int) -> None:
        results[index] = await factories[index]()

    async with anyio.create_task_group() as group:
        for index in range(1, len(factories)):
            group.start_soon(run, index)
        await run(0)
    return results  # type: ignore[return-value]


class Slots:
    """A concurrency limit that costs nothing while under it (anyio's limiter checkpoints every acquire).

    Use as `async with slots:`. A released slot passes straight to the longest waiter (first come,
    first served); a waiter cancelled after being handed one passes it on.
    """

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("total must be at least 1")
        self._free = total
        self._waiters: collections.deque[anyio.Event] = collections.deque()

    async def __aenter__(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        handed = anyio.Event()
        self._waiters.append(handed)
        try:
            await handed.wait()
        except BaseException:
            if handed.is_set():
                self._release()
            else:
                self._waiters.remove(handed)
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._waiters:
            self._waiters.popleft().set()
        else:
            self._free += 1
