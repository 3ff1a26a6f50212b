"""Remote interceptor processes over stdio: faults are contained, fail closed, and leave no processes."""

from __future__ import annotations

import functools
import sys
import time
from typing import Any

import anyio
import pytest

from interceptors import Direction, Mode
from interceptors_chain import Chain, InterceptorOverride, RemoteServer, ServerUnavailable
from tests.conftest import ROOT
from tests.processes import children

pytestmark = pytest.mark.anyio

PAYLOAD = {"name": "echo", "arguments": {"text": "hi"}}


def faulty(fault: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "tests.servers.faulty_host", fault, *args]


async def start(fault: str, *args: str, **options: Any) -> RemoteServer:
    remote = RemoteServer(f"faulty-{fault}", command=faulty(fault, *args), cwd=str(ROOT), **options)
    return await remote.__aenter__()


def no_children_left(before: dict[int, str]) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        extra = {pid: state for pid, state in children().items() if pid not in before}
        if not extra:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes left behind: {extra}")


async def test_healthy_remote_runs_the_chain_and_cleans_up() -> None:
    before = children()
    async with RemoteServer("ok", command=faulty("ok"), cwd=str(ROOT)) as remote:
        chain = Chain()
        await chain.add_remote(remote)
        result = await chain.execute("tools/call", "request", PAYLOAD, direction=Direction.SENDING)
        assert not result.blocked and result.final_payload == {**PAYLOAD, "tagged": True}
    no_children_left(before)


async def test_crash_mid_invoke_fails_every_pending_invoke_at_once_and_restarts() -> None:
    before = children()
    remote = await start("crash-after", "1", backoff_s=(0.05, 0.5))
    try:
        chain = Chain(default_timeout_ms=20_000)
        await chain.add_remote(remote)
        first = await chain.execute("tools/call", "response", PAYLOAD, direction=Direction.SENDING)
        assert not first.blocked
        results: list[Any] = []

        async def one() -> None:
            results.append(await chain.execute("tools/call", "response", {"n": 1}, direction=Direction.SENDING))

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(one)
        elapsed = time.monotonic() - started
        assert elapsed < 5, "pending invokes must fail when the process dies, not at their timeout"
        assert all(r.blocked for r in results)
        assert all("faulty-crash-after" in r.aborted_at[0].reason for r in results)
        # The supervisor restarts it (with backoff) and rediscovers; the next calls work again, once.
        with anyio.fail_after(15):
            while remote.restarts < 1 or not remote.connected:
                await anyio.sleep(0.05)
        again = await chain.execute("tools/call", "response", PAYLOAD, direction=Direction.SENDING)
        assert not again.blocked
        assert any("starting" in line for line in remote.recent_stderr)
    finally:
        await remote.aclose()
    no_children_left(before)


async def test_hanging_interceptor_times_out_fail_closed_unless_fail_open() -> None:
    before = children()
    async with RemoteServer("hang", command=faulty("hang"), cwd=str(ROOT)) as remote:
        chain = Chain(overrides={"faulty/check": InterceptorOverride.build(timeout_ms=300)})
        await chain.add_remote(remote)
        started = time.monotonic()
        blocked = await chain.execute("tools/call", "response", PAYLOAD, direction=Direction.SENDING)
        assert time.monotonic() - started < 3
        assert blocked.blocked and blocked.status == "timeout"
        chain.set_override("faulty/check", InterceptorOverride.build(timeout_ms=300, fail_open=True))
        assert not (await chain.execute("tools/call", "response", PAYLOAD, direction=Direction.SENDING)).blocked
        chain.set_override("faulty/check", InterceptorOverride.build(timeout_ms=300, mode=Mode.AUDIT))
        assert not (await chain.execute("tools/call", "response", PAYLOAD, direction=Direction.SENDING)).blocked
    no_children_left(before)


async def test_garbage_on_stdout_is_an_invocation_failure() -> None:
    before = children()
    async with RemoteServer("garbage", command=faulty("garbage"), cwd=str(ROOT)) as remote:
        chain = Chain(default_timeout_ms=500)
        await chain.add_remote(remote)
        result = await chain.execute("tools/call", "response", PAYLOAD, direction=Direction.SENDING)
        assert result.blocked and result.results[0].error is not None
    no_children_left(before)


async def test_exit_during_startup_is_a_clear_error() -> None:
    before = children()
    remote = RemoteServer("dies", command=faulty("exit-at-start"), cwd=str(ROOT), startup_timeout_s=10)
    started = time.monotonic()
    with pytest.raises(ServerUnavailable) as caught:
        await remote.__aenter__()
    assert time.monotonic() - started < 10
    assert "dies" in str(caught.value)
    no_children_left(before)


async def test_slow_start_beyond_the_startup_timeout_fails_and_cleans_up() -> None:
    before = children()
    remote = RemoteServer("slow", command=faulty("slow-start", "30"), cwd=str(ROOT), startup_timeout_s=1.5)
    started = time.monotonic()
    with pytest.raises(ServerUnavailable):
        await remote.__aenter__()
    assert time.monotonic() - started < 8
    no_children_left(before)


async def test_validators_run_in_parallel_on_one_remote_session() -> None:
    """Two slow validators on one stdio server overlap: concurrent invokes are multiplexed."""
    async with RemoteServer("par", command=faulty("ok"), cwd=str(ROOT)) as remote:
        chain = Chain()
        await chain.add_remote(remote)
        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(functools.partial(chain.execute, direction=Direction.SENDING), "tools/call",
                                 "response", {"sleep": 0.5})  # fmt: skip
        assert time.monotonic() - started < 1.5, "4 x 0.5 s invokes should overlap on one session"


async def test_per_server_concurrency_limit_queues_invokes() -> None:
    async with RemoteServer("one-at-a-time", command=faulty("ok"), cwd=str(ROOT), max_concurrency=1) as remote:
        chain = Chain()
        await chain.add_remote(remote)
        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(functools.partial(chain.execute, direction=Direction.SENDING), "tools/call",
                                 "response", {"sleep": 0.3})  # fmt: skip
        assert time.monotonic() - started >= 0.85, "with a limit of 1 the three invokes must not overlap"
