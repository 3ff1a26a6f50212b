"""Validators start eagerly on the caller's task (`interceptors_chain.concurrency.gather`).

A validator whose invoke completes without suspending costs no task; one that suspends keeps running
concurrently with the others. These tests pin that nothing else changed: the same `ExecutionResult`s as the
previous engine (a task for every validator but the first) for random mixes of sync, async, suspending,
raising, rejecting and timing-out validators; real concurrency; timeouts; cancellation; context isolation.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import interceptors_chain.chain as chain_module
from interceptors import Invocation, Registry, Verdict
from interceptors_chain import ExecutionResult
from interceptors_chain.concurrency import gather
from interceptors_server import LocalChain
from tests.chain_helpers import EVENT

T = TypeVar("T")
PAYLOAD = {"method": EVENT, "params": {"name": "echo", "arguments": {"text": "hi"}}}
KINDS = ("sync", "sync-deny", "sync-raise", "async", "async-deny", "async-raise", "suspend", "suspend-deny",
         "suspend-raise", "thread")  # fmt: skip


async def _previous_gather(factories: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """The engine's gather before eager starts: the first in the calling task, every other in a task."""
    if len(factories) == 1:
        return [await factories[0]()]
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


def _handler(kind: str, index: int) -> tuple[Any, bool]:
    """A validator of `kind` and whether it registers inline (sync kinds that never block)."""
    deny = Verdict.deny(f"no from {index}", path="params")

    def sync(inv: Invocation) -> Verdict:
        if kind.endswith("raise"):
            raise RuntimeError("broken validator")
        return deny if kind.endswith("deny") else Verdict.allow({"index": index})

    async def asynchronous(inv: Invocation) -> Verdict:
        if kind.startswith("suspend"):
            await anyio.sleep(0)
        return sync(inv)

    if kind == "thread":  # a sync handler that is not inline: a worker thread, so its invoke suspends
        return sync, False
    return (sync, True) if kind.startswith("sync") else (asynchronous, False)


def _registry(kinds: Sequence[str], audit: Sequence[bool]) -> Registry:
    registry = Registry()
    for index, (kind, in_audit) in enumerate(zip(kinds, audit, strict=True)):
        handler, inline = _handler(kind, index)
        registry.register(handler, name=f"v{index}-{kind}", type="validation", events=EVENT, inline=inline,
                          mode="audit" if in_audit else "active")  # fmt: skip
    return registry


def _comparable(result: ExecutionResult) -> Any:
    """Everything but durations."""
    records = []
    for record in result.results:
        wire = dict(record.result or {})
        wire.pop("durationMs", None)
        records.append((record.interceptor, record.server, record.type, record.mode, wire, record.error,
                        record.error_kind, record.applied))  # fmt: skip
    summary = result.validation_summary
    return (result.status, result.final_payload, result.modified, records, result.aborted_at,
            (summary.errors, summary.warnings, summary.infos))  # fmt: skip


async def _both(registry: Registry, monkeypatch: pytest.MonkeyPatch, **options: Any) -> tuple[Any, Any]:
    async with LocalChain(registry, **options) as chain:
        eager = await chain.execute(EVENT, "request", PAYLOAD, direction="receiving")
        with monkeypatch.context() as patch:
            patch.setattr(chain_module, "gather", _previous_gather)
            previous = await chain.execute(EVENT, "request", PAYLOAD, direction="receiving")
    return _comparable(eager), _comparable(previous)


@settings(max_examples=60)
@given(
    mix=st.lists(st.tuples(st.sampled_from(KINDS), st.booleans()), min_size=1, max_size=6),
    transport=st.sampled_from(("inprocess", "mcp")),
)
def test_eager_validators_give_the_previous_results(mix: list[tuple[str, bool]], transport: str) -> None:
    registry = _registry([kind for kind, _ in mix], [audit for _, audit in mix])

    async def run() -> tuple[Any, Any]:
        with pytest.MonkeyPatch.context() as patch:
            return await _both(registry, patch, transport=transport)

    eager, previous = anyio.run(run)
    assert eager == previous


@pytest.mark.anyio
async def test_a_validator_that_times_out_among_sync_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = _registry(["sync", "suspend-deny", "async"], [False, False, False])

    async def forever(inv: Invocation) -> Verdict:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    registry.register(forever, name="v3-forever", type="validation", events=EVENT)
    registry.register(_handler("sync", 4)[0], name="v4-sync", type="validation", events=EVENT, inline=True)
    eager, previous = await _both(registry, monkeypatch, default_timeout_ms=200)
    assert eager == previous
    status, _, _, records, aborted, _ = eager
    assert status.value == "validation_failed"  # the first abort in plan order decides
    assert [record[5] for record in records] == [None, None, None, "timeout", None]
    assert [(abort.interceptor, abort.kind.value) for abort in aborted] == [
        ("v1-suspend-deny", "rejected"),
        ("v3-forever", "timeout"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("order", ["waiter first", "setter first"])
async def test_suspending_validators_run_concurrently(order: str) -> None:
    """Each needs the other to have started: only concurrent runs can finish (sequential ones time out)."""
    first, second = anyio.Event(), anyio.Event()
    registry = Registry()

    async def waiter(inv: Invocation) -> Verdict:
        first.set()
        await second.wait()
        return Verdict.allow()

    async def setter(inv: Invocation) -> Verdict:
        await first.wait()
        second.set()
        return Verdict.allow()

    registry.register(_handler("sync", 0)[0], name="a-sync", type="validation", events=EVENT, inline=True)
    pair = [waiter, setter] if order == "waiter first" else [setter, waiter]
    for index, handler in enumerate(pair):
        registry.register(handler, name=f"b-{index}", type="validation", events=EVENT)
    async with LocalChain(registry, default_timeout_ms=30_000) as chain:
        result = await chain.execute(EVENT, "request", PAYLOAD, direction="receiving")
    assert result.status.value == "success", [record.error for record in result.results]


@pytest.mark.anyio
async def test_cancelling_the_caller_cancels_every_validator() -> None:
    started: list[str] = []
    cancelled: list[str] = []
    registry = Registry()

    def hang(name: str) -> Any:
        async def handler(inv: Invocation) -> Verdict:
            started.append(name)
            try:
                await anyio.sleep_forever()
            except BaseException:
                cancelled.append(name)
                raise
            raise AssertionError("unreachable")

        return handler

    registry.register(_handler("sync", 0)[0], name="a-sync", type="validation", events=EVENT, inline=True)
    for name in ("b-held", "c-task", "d-task"):
        registry.register(hang(name), name=name, type="validation", events=EVENT)
    async with LocalChain(registry) as chain:
        with anyio.move_on_after(0.2):
            await chain.execute(EVENT, "request", PAYLOAD, direction="receiving")
    assert sorted(started) == ["b-held", "c-task", "d-task"]
    assert sorted(cancelled) == ["b-held", "c-task", "d-task"]


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("test_chain_eager", default="unset")


@pytest.mark.anyio
@pytest.mark.parametrize("implementation", [gather, _previous_gather], ids=["eager", "previous"])
@pytest.mark.parametrize("suspend", [False, True], ids=["completing", "suspending"])
async def test_each_coroutine_after_the_first_runs_in_its_own_context(implementation: Any, suspend: bool) -> None:
    """As with a task each: none sees what another set, and only the first runs in the caller's context."""
    seen: list[str] = []

    def step(name: str) -> Callable[[], Awaitable[str]]:
        async def run() -> str:
            seen.append(VAR.get())
            VAR.set(name)
            if suspend:
                await asyncio.sleep(0)
            return VAR.get()

        return run

    token = VAR.set("caller")
    try:
        assert await implementation([step("a"), step("b"), step("c")]) == ["a", "b", "c"]
        assert seen == ["caller", "caller", "caller"]
        assert VAR.get() == "a"
    finally:
        VAR.reset(token)


async def _context_trail(kind: str, payload: Any) -> tuple[list[tuple[str, str]], str]:
    """What three validators and a mutator read of `VAR` (each sets its own name), and the caller's value after."""
    registry = Registry()
    trail: list[tuple[str, str]] = []

    def body(name: str) -> Any:
        def sync(inv: Invocation) -> Any:
            trail.append((name, VAR.get()))
            VAR.set(name)
            return None

        async def awaited(inv: Invocation) -> Any:
            return sync(inv)

        return sync if kind == "inline" else awaited

    for name in ("v0", "v1", "v2"):
        registry.register(body(name), name=name, type="validation", events=EVENT, inline=kind == "inline")
    registry.register(body("m0"), name="m0", type="mutation", events=EVENT, inline=kind == "inline")
    async with LocalChain(registry) as chain:
        token = VAR.set("caller")
        try:
            result = await chain.execute(EVENT, "request", payload, direction="receiving")
            assert not result.blocked
            return trail, VAR.get()
        finally:
            VAR.reset(token)


@pytest.mark.anyio
@pytest.mark.parametrize("size", [10, 100_000], ids=["inline", "declined-to-threads"])
async def test_inline_handlers_see_and_leave_context_variables_as_awaited_ones_do(size: int) -> None:
    """The chain's inline run (handlers as function calls) keeps `gather`'s contexts: the first validator in the
    caller's, each other in its own copy, mutators in the caller's; also when the host declines the inline run
    for a large payload and the handlers go to worker threads."""
    payload = {**PAYLOAD, "blob": "x" * size}
    inline = await _context_trail("inline", payload)
    awaited = await _context_trail("async", payload)
    if size < 1000:
        assert inline == awaited
        assert awaited == ([("v0", "caller"), ("v1", "caller"), ("v2", "caller"), ("m0", "v0")], "m0")
    else:  # worker threads, concurrent for validators, run in copies of the context: nothing they set comes back
        names = [name for name, _ in inline[0]]
        assert sorted(names[:3]) == ["v0", "v1", "v2"] and names[3] == "m0"
        assert all(value == "caller" for _, value in inline[0]) and inline[1] == "caller"


@pytest.mark.anyio
async def test_a_held_coroutine_gets_its_cancellation_where_it_suspended() -> None:
    """The caller's cancellation reaches a coroutine driven on the caller's task after an eager start."""
    got: list[str] = []

    async def stubborn() -> str:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            got.append("cancelled")
            raise
        return "never"

    async def quick() -> str:
        return "quick"

    with anyio.move_on_after(0.05):
        await gather([quick, stubborn, quick])
    assert got == ["cancelled"]


# --- executions that move between tasks (the gateway's chain runs) ------------------------------------------------


@pytest.mark.anyio
async def test_start_eagerly_finishes_inline_or_goes_on_in_a_task_and_keeps_the_callers_context() -> None:
    """One that never suspends costs no task; one that suspends goes on in a task; a context variable either
    sets stays in its own copy of the context, as a task's would."""
    from interceptors_chain.concurrency import start_eagerly

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="caller")
    seen: list[str] = []

    async def quick() -> None:
        marker.set("quick")
        seen.append("quick done")

    async def slow() -> None:
        marker.set("slow")
        await asyncio.sleep(0)
        seen.append(f"slow done in {marker.get()}")

    assert start_eagerly(quick()) is None
    assert seen == ["quick done"] and marker.get() == "caller"
    task = start_eagerly(slow())
    assert task is not None and seen == ["quick done"]
    await task
    assert seen == ["quick done", "slow done in slow"] and marker.get() == "caller"


def _inline_registry() -> Registry:
    registry = Registry()

    @registry.validator("cheap", events=EVENT, phase="request", inline=True)
    def cheap(inv: Invocation) -> Verdict:
        return Verdict.allow()

    @registry.mutator("tag", events=EVENT, phase="request", inline=True)
    def tag(inv: Invocation) -> Any:
        from interceptors import Mutation

        return Mutation({**inv.payload, "tagged": True}, True)

    return registry


@pytest.mark.anyio
async def test_movable_only_when_nothing_can_enter_a_cancel_scope() -> None:
    """In process, sync, inline, no timeout: movable. A timeout, a deadline, an async or a plain (threaded)
    sync handler: not."""
    async with LocalChain(_inline_registry()) as chain:
        assert chain.movable(EVENT, "request", "receiving")
        assert chain.movable("prompts/get", "request", "receiving")  # an empty plan
    async with LocalChain(_inline_registry(), default_timeout_ms=1000) as chain:
        assert not chain.movable(EVENT, "request", "receiving")
    async with LocalChain(_inline_registry(), deadline_ms=1000) as chain:
        assert not chain.movable(EVENT, "request", "receiving")
    for kind in ("async", "thread"):
        registry = _inline_registry()
        if kind == "async":

            @registry.validator("slow", events=EVENT, phase="request")
            async def slow(inv: Invocation) -> Verdict:
                return Verdict.allow()
        else:

            @registry.validator("plain", events=EVENT, phase="request")
            def plain(inv: Invocation) -> Verdict:
                return Verdict.allow()

        async with LocalChain(registry) as chain:
            assert not chain.movable(EVENT, "request", "receiving"), kind


@pytest.mark.anyio
@pytest.mark.parametrize("size", [10, 200_000])
async def test_a_movable_execution_started_eagerly_ends_in_a_task_when_a_large_payload_takes_a_thread(
    size: int,
) -> None:
    """Above the inline size an inline handler runs in a worker thread: the execution suspends there, holding
    no cancel scope, and ends correctly in the task `start_eagerly` made (the gateway's case). Small: no task."""
    from interceptors_chain.concurrency import start_eagerly

    async with LocalChain(_inline_registry()) as chain:
        assert chain.movable(EVENT, "request", "receiving")
        payload = {**PAYLOAD, "filler": "x" * size}
        out: list[ExecutionResult] = []

        async def run() -> None:
            out.append(await chain.execute(EVENT, "request", payload, direction="receiving"))

        task = start_eagerly(run())
        assert (task is None) is (size < 100_000)
        if task is not None:
            await task
        assert out[0].status.value == "success" and out[0].final_payload == {**payload, "tagged": True}
