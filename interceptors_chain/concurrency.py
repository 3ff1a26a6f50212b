"""Run never-raising coroutines concurrently with the least overhead the event loop allows."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

T = TypeVar("T")


async def gather(factories: Sequence[Callable[[], Coroutine[Any, Any, T]]]) -> list[T]:
    """Results in input order, each coroutine started in turn on the calling task (an eager start).

    On asyncio a coroutine that completes without suspending costs no task at all (Python 3.11 has no eager
    tasks; a task and the loop turns to await it cost more than a cheap validator). The first coroutine that
    suspends keeps the calling task and is driven there to the end, as if awaited; every coroutine after it
    runs in its own task, started before that first one resumes, so they still run concurrently. Each
    coroutine but the first runs in its own copy of the caller's context, as a task would. If the caller is
    cancelled, every task is cancelled and awaited before the cancellation propagates, so nothing outlives
    the call. The coroutines must not raise (they report failures as values).
    """
    if len(factories) == 1:
        return [await factories[0]()]
    if not on_asyncio():
        return await _gather_anyio(factories)
    results: list[Any] = [None] * len(factories)
    base = contextvars.copy_context()  # what a task created now would copy
    loop = asyncio.get_running_loop()
    held: _Held | None = None
    tasks: list[tuple[int, asyncio.Task[T]]] = []
    try:
        for index, factory in enumerate(factories):
            if held is not None:
                tasks.append((index, loop.create_task(factory(), context=base.copy())))
                continue
            context = None if index == 0 else base.copy()
            coro = factory()
            try:
                pending = coro.send(None) if context is None else context.run(coro.send, None)
            except StopIteration as done:
                results[index] = done.value
                continue
            held = _Held(index, coro, pending, context)
        if held is not None:
            started, held.coro = held.coro, None
            assert started is not None
            results[held.index] = await _resume(started, held.pending, held.context)
        for index, task in tasks:
            results[index] = await task
    except BaseException:
        if held is not None and held.coro is not None:
            held.coro.close()
        for _, task in tasks:
            task.cancel()
        await asyncio.gather(*(task for _, task in tasks), return_exceptions=True)
        raise
    return results


@dataclass(slots=True)
class _Held:
    """A coroutine that suspended on its first step: what it waits on, and the context it runs in."""

    index: int
    coro: Coroutine[Any, Any, Any] | None
    pending: Any
    context: contextvars.Context | None


@types.coroutine
def _resume(coro: Coroutine[Any, Any, T], pending: Any, context: contextvars.Context | None) -> Generator[Any, Any, T]:
    """Finish a coroutine already started by hand: hand what it waits on to the running task, then deliver every
    resumption (or a thrown cancellation) to it where it suspended, in its own context."""
    while True:
        try:
            value = yield pending
        except BaseException as exc:  # thrown into the task (cancellation, close): the coroutine's to handle
            step: Callable[[Any], Any] = coro.throw
            argument: Any = exc
        else:
            step, argument = coro.send, value
        try:
            pending = step(argument) if context is None else context.run(step, argument)
        except StopIteration as done:
            result: T = done.value
            return result


def start_eagerly(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run `coro` on the calling task until it first suspends, in its own copy of the caller's context (as a
    task would run it): None when it finished there, which costs no task and no turn of the loop; else a task
    that drives it on from where it stopped. Must be called on a running asyncio loop, and only for a coroutine
    that never suspends inside an anyio cancel scope (see `Chain.movable`): a scope must be left on the task
    that entered it."""
    context = contextvars.copy_context()
    try:
        pending = context.run(coro.send, None)
    except StopIteration:
        return None
    return asyncio.get_running_loop().create_task(_continued(coro, pending, context))


async def _continued(coro: Coroutine[Any, Any, None], pending: Any, context: contextvars.Context) -> None:
    await _resume(coro, pending, context)


def on_asyncio() -> bool:
    """Whether the caller runs in an asyncio task (not another anyio backend, not a loop callback)."""
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
            group.start_soon(run, index)  # a task runs in a copy of the caller's context
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
