"""Remote interceptor processes over stdio: faults are contained, fail closed, and leave no processes."""

from __future__ import annotations

import functools
import re
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from interceptors import Direction, Mode
from interceptors_chain import Chain, InterceptorOverride, RemoteServer, ServerUnavailable
from interceptors_chain.stdio_pipe import STOP_GRACE_ENV
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
        assert elapsed < 10, "pending invokes must fail when the process dies, not at their timeout"
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
        assert time.monotonic() - started < 10  # the 300 ms timeout, not the hang
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
    remote = RemoteServer("dies", command=faulty("exit-at-start"), cwd=str(ROOT), startup_timeout_s=40)
    started = time.monotonic()
    with pytest.raises(ServerUnavailable) as caught:
        await remote.__aenter__()
    assert time.monotonic() - started < 20  # the exit, not the 40 s startup timeout
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
        met: list[bool] = []

        async def meet() -> None:
            outcome = await chain.execute("tools/call", "response", {"rendezvous": 4}, direction=Direction.SENDING)
            result = outcome.results[0].result
            met.append(result is not None and result["info"]["met"])

        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(meet)
        assert met == [True] * 4, "4 invokes that wait for each other must all be in the server at once"


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


CLASS_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:Error|Exception|Group)\b")


def readable(reason: str) -> bool:
    """An error text in words: no Python exception class name in it."""
    return CLASS_NAME.search(reason) is None


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ("truncated", "it is not valid JSON (truncated or corrupt)"),
        ("bad-utf8", "it is not valid UTF-8"),
        ("string-result", "its result is a string, not an object"),
        ("not-object", "its result is a number, not an object"),
    ],
)
async def test_a_malformed_reply_fails_its_invoke_at_once_naming_the_server_and_the_problem(
    fault: str, problem: str
) -> None:
    before = children()
    command = [sys.executable, "-m", "tests.servers.raw_host", fault]
    async with RemoteServer("garbled", command=command, cwd=str(ROOT)) as remote:
        chain = Chain(default_timeout_ms=20_000)
        await chain.add_remote(remote)
        started = time.monotonic()
        result = await chain.execute("tools/call", "request", PAYLOAD, direction=Direction.SENDING)
        elapsed = time.monotonic() - started
        assert elapsed < 10, f"a malformed reply must fail at once, not at the 20 s timeout ({elapsed:.2f} s)"
        assert result.blocked and result.status != "timeout"
        reason = result.aborted_at[0].reason
        assert reason == f"interceptor server 'garbled' sent a malformed reply: {problem}"
        assert readable(reason)
        assert remote.connected and remote.restarts == 0  # one bad reply is not a broken server
    no_children_left(before)


async def test_a_server_writing_only_lines_that_are_not_json_rpc_is_restarted() -> None:
    before = children()
    command = [sys.executable, "-m", "tests.servers.raw_host", "flood"]
    async with RemoteServer("flood", command=command, cwd=str(ROOT), backoff_s=(0.05, 0.5)) as remote:
        with pytest.raises(ServerUnavailable) as caught:
            await remote.request("interceptor/invoke", {"name": "raw/check", "event": "tools/call",
                                 "phase": "request", "payload": {}}, 20)  # fmt: skip
        assert "the connection closed" in str(caught.value) and readable(str(caught.value))
        with anyio.fail_after(20):
            while remote.restarts < 1 or not remote.connected:
                await anyio.sleep(0.05)
        assert remote.junk_lines > remote.junk_line_limit  # type: ignore[operator]
    no_children_left(before)


async def test_a_hung_server_is_restarted_after_consecutive_timeouts_and_later_calls_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It hangs every invoke and ignores SIGTERM and stdin closing: the group is killed, a fresh one answers."""
    monkeypatch.setenv(STOP_GRACE_ENV, "0.2")  # it ignores both: the default 2 s + 2 s would only be waited out
    before = children()
    marker = tmp_path / "hung-once"
    remote = await start("hang-once", str(marker), backoff_s=(0.05, 0.5), restart_after_timeouts=2)
    try:
        chain = Chain(overrides={"faulty/check": InterceptorOverride.build(timeout_ms=300)})
        await chain.add_remote(remote)
        hung_pid = int(marker.read_text())
        for _ in range(2):
            timed_out = await chain.execute("tools/call", "response", PAYLOAD, direction=Direction.SENDING)
            assert timed_out.blocked and timed_out.status == "timeout"
        with anyio.fail_after(30):
            while remote.restarts < 1 or not remote.connected:
                await anyio.sleep(0.05)
        later = await chain.execute("tools/call", "response", PAYLOAD, direction=Direction.SENDING)
        assert not later.blocked
        assert later.results[0].result is not None
        assert later.results[0].result["info"]["pid"] != hung_pid
        assert not process_alive(hung_pid), "the hung server (it ignores SIGTERM) must have been killed"
    finally:
        await remote.aclose()
    no_children_left(before)


async def test_a_timeout_while_the_server_answers_others_does_not_restart_it() -> None:
    """A slow interceptor is not a hung server: the restart needs timeouts while it sends nothing at all."""
    async with RemoteServer("slowish", command=faulty("ok"), cwd=str(ROOT), restart_after_timeouts=1) as remote:
        slow = {"name": "faulty/check", "event": "tools/call", "phase": "response", "payload": {"sleep": 60}}
        outcome: dict[str, Any] = {}

        async def slow_invoke() -> None:
            with pytest.raises(MCPError) as caught:
                await remote.request("interceptor/invoke", slow, 10)
            outcome["code"] = caught.value.error.code

        async with anyio.create_task_group() as group:
            group.start_soon(slow_invoke)
            with anyio.fail_after(10):  # the slow invoke is on the wire (the pipe's waiters are private)
                while not (remote._pipe is not None and remote._pipe._waiters):
                    await anyio.sleep(0.01)
            await remote.request("interceptors/list", {}, 10)  # answered while the slow invoke waits
        assert outcome["code"] == -32001  # it timed out
        assert remote.restarts == 0 and remote.connected


def process_alive(pid: int) -> bool:
    """Alive and not a zombie (read from /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"
