"""The client stdio pipe (`interceptors_chain/stdio_pipe.py`) against a misbehaving hand-written server.

`tests/servers/raw_host.py` speaks raw JSON lines without the SDK, so each fault is exactly what is on
the wire. Every fault must be an invocation failure (fail-closed, within a time bound), never a hang or a
crossed reply, and no process may outlive its RemoteServer.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from interceptors import Direction
from interceptors_chain import Chain, InterceptorOverride, RemoteServer, ServerUnavailable
from interceptors_chain.failures import MalformedReply
from tests.conftest import ROOT
from tests.interceptors_chain.test_remote import no_children_left
from tests.processes import children

pytestmark = pytest.mark.anyio

REQUEST_TIMEOUT = -32001
BASE_PARAMS = {"name": "raw/check", "event": "tools/call", "phase": "request"}


def raw(fault: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "tests.servers.raw_host", fault, *args]


def remote_for(fault: str, *args: str, **options: Any) -> RemoteServer:
    return RemoteServer(f"raw-{fault}", command=raw(fault, *args), cwd=str(ROOT), **options)


def invoke_params(payload: Any) -> dict[str, Any]:
    return {**BASE_PARAMS, "payload": payload}


async def invoke(remote: RemoteServer, payload: Any, timeout_s: float | None = 5) -> dict[str, Any]:
    return await remote.request("interceptor/invoke", invoke_params(payload), timeout_s)


async def run_chain(chain: Chain, payload: Any = None) -> Any:
    return await chain.execute("tools/call", "request", payload or {"name": "t"}, direction=Direction.SENDING)


async def stderr_has(remote: RemoteServer, text: str, within_s: float = 20) -> bool:
    """The child's stderr reaches us through a thread: poll for a line for a moment."""
    with anyio.move_on_after(within_s):
        while not any(text in line for line in remote.recent_stderr):
            await anyio.sleep(0.02)
        return True
    return False


# (fault, extra argv, whether the failure is a timeout)
FAULTS = [
    ("garbage", (), True),  # the first invoke is never answered: only lines that are not JSON-RPC replies
    ("not-object", (), False),
    ("bad-error", (), False),
    ("late", ("3",), True),
    ("echo-cancel", (), True),
    ("exit", (), False),
]


@pytest.mark.parametrize(("fault", "args", "times_out"), FAULTS, ids=[fault for fault, _, _ in FAULTS])
async def test_every_fault_is_a_fail_closed_invocation_failure(
    fault: str, args: tuple[str, ...], times_out: bool
) -> None:
    before = children()
    async with remote_for(fault, *args, backoff_s=(5.0, 5.0)) as remote:
        # A fault that times out gets 400 ms; any other gets 20 s, so "at once" is told from "at the timeout" by a
        # margin no load can close.
        timeout_ms = 400 if times_out else 20_000
        chain = Chain(default_timeout_ms=timeout_ms)
        await chain.add_remote(remote)
        started = time.monotonic()
        result = await run_chain(chain)
        elapsed = time.monotonic() - started
        assert result.blocked, f"{fault}: a failed invocation must block (fail-closed)"
        assert result.results[0].error is not None
        assert result.aborted_at and result.aborted_at[0].interceptor == "raw/check"
        if times_out:
            assert result.status == "timeout" and 0.35 < elapsed < 15
        else:
            assert elapsed < 10, f"{fault}: a broken answer fails at once, not at the timeout ({elapsed:.2f}s)"
        if fault in ("not-object", "bad-error"):  # these fail every time: fail-open lets the same failure pass
            chain.set_override("raw/check", InterceptorOverride.build(timeout_ms=timeout_ms, fail_open=True))
            passed = await run_chain(chain)
            assert not passed.blocked and passed.results[0].error is not None
        elif fault != "exit":  # only the first invoke misbehaves: the next one works on the same process
            assert not (await run_chain(chain)).blocked
            assert remote.restarts == 0
    no_children_left(before)


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ("not-object", "its result is a number, not an object"),
        ("bad-error", "its error has no integer code and string message"),
    ],
)
async def test_malformed_replies_fail_in_words_and_keep_the_connection(fault: str, problem: str) -> None:
    async with remote_for(fault) as remote:
        for _ in range(2):
            with pytest.raises(MalformedReply) as caught:
                await invoke(remote, {"n": 1})
            assert str(caught.value) == f"interceptor server 'raw-{fault}' sent a malformed reply: {problem}"
        assert remote.connected and remote.restarts == 0


async def test_garbage_lines_do_not_break_later_replies() -> None:
    before = children()
    async with remote_for("garbage") as remote:
        with pytest.raises(MalformedReply) as caught:  # garbage, including a torn line with its id
            await invoke(remote, {"first": True}, timeout_s=30)
        assert "not valid JSON" in str(caught.value)
        assert remote.junk_lines >= 5
        for n in range(5):  # garbage before every reply, a stray reply to an id never sent, a torn line
            result = await invoke(remote, {"n": n})
            assert result["info"]["payload"] == {"n": n}
        assert remote.connected and remote.restarts == 0
    no_children_left(before)


async def test_a_timeout_sends_cancelled_for_the_timed_out_id() -> None:
    async with remote_for("echo-cancel") as remote:
        started = time.monotonic()
        with pytest.raises(MCPError) as caught:
            await invoke(remote, {"hang": True}, timeout_s=0.3)  # x1: never answered
        assert caught.value.error.code == REQUEST_TIMEOUT
        assert time.monotonic() - started < 10
        assert await stderr_has(remote, "cancelled x1")
        result = await invoke(remote, {"next": True})
        assert result["info"] == {"payload": {"next": True}, "cancelled": ["x1"]}


async def test_a_caller_cancelling_sends_cancelled() -> None:
    async with remote_for("ok") as remote:
        with anyio.move_on_after(0.2) as scope:
            await invoke(remote, {"sleep": 5})  # x1
        assert scope.cancelled_caught
        assert await stderr_has(remote, "cancelled x1")
        result = await invoke(remote, {"next": True})
        assert result["info"]["cancelled"] == ["x1"]


async def test_a_late_reply_after_a_timeout_is_dropped_and_the_next_request_works() -> None:
    before = children()
    async with remote_for("late", "3") as remote:
        with pytest.raises(MCPError) as caught:
            await invoke(remote, {"late": True}, timeout_s=0.2)  # x1, answered at 3 s
        assert caught.value.error.code == REQUEST_TIMEOUT
        # x2 is still pending when the late reply to x1 arrives: it must get its own reply, not x1's.
        result = await invoke(remote, {"sleep": 5, "mine": True}, timeout_s=30)
        assert result["info"]["payload"] == {"sleep": 5, "mine": True}
        assert result["info"]["cancelled"] == ["x1"]
        assert (await invoke(remote, {"again": 1}))["info"]["payload"] == {"again": 1}
        assert remote.connected and remote.restarts == 0
    no_children_left(before)


async def test_exit_fails_every_pending_request_at_once_and_the_server_restarts() -> None:
    before = children()
    remote = await remote_for("exit", backoff_s=(0.05, 0.5)).__aenter__()
    try:
        outcomes: list[BaseException | dict[str, Any]] = []

        async def one(payload: dict[str, Any]) -> None:
            try:
                outcomes.append(await invoke(remote, payload, timeout_s=20))
            except Exception as exc:
                outcomes.append(exc)

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for n in range(4):
                group.start_soon(one, {"stay": True, "sleep": 60, "n": n})  # pending
            await anyio.sleep(0.2)
            group.start_soon(one, {"exit": True})
        assert time.monotonic() - started < 10, "pending requests fail when the process dies, not at their timeout"
        assert len(outcomes) == 5 and all(isinstance(outcome, ServerUnavailable) for outcome in outcomes)
        with anyio.fail_after(10):
            while remote.restarts < 1 or not remote.connected:
                await anyio.sleep(0.02)
        assert (await invoke(remote, {"stay": True}))["info"]["payload"] == {"stay": True}
        assert sum("starting" in line for line in remote.recent_stderr) >= 2
    finally:
        await remote.aclose()
    no_children_left(before)


async def test_requests_after_close_fail_fast() -> None:
    before = children()
    remote = await remote_for("ok", unavailable_wait_s=0.2).__aenter__()
    await remote.aclose()
    started = time.monotonic()
    with pytest.raises(ServerUnavailable):
        await invoke(remote, {"n": 1})
    assert time.monotonic() - started < 10
    no_children_left(before)


# Concurrency: N requests in flight on one pipe, replies out of order; each gets exactly its own.
@pytest.fixture(scope="module")
def healthy() -> Iterator[tuple[anyio.from_thread.BlockingPortal, RemoteServer]]:
    before = children()
    with anyio.from_thread.start_blocking_portal() as portal:
        remote = remote_for("ok", max_concurrency=64)
        with portal.wrap_async_context_manager(remote):
            yield portal, remote
    no_children_left(before)


async def concurrent(remote: RemoteServer, payloads: list[dict[str, Any]]) -> list[Any]:
    replies: list[Any] = [None] * len(payloads)

    async def one(index: int) -> None:
        replies[index] = (await invoke(remote, payloads[index], timeout_s=20))["info"]["payload"]

    async with anyio.create_task_group() as group:
        for index in range(len(payloads)):
            group.start_soon(one, index)
    return replies


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 64 * 1024), min_size=1, max_size=40),
    delays=st.lists(st.sampled_from([0, 0, 0.001, 0.01, 0.03]), min_size=40, max_size=40),
)
def test_concurrent_requests_each_get_exactly_their_own_reply(
    healthy: tuple[anyio.from_thread.BlockingPortal, RemoteServer], sizes: list[int], delays: list[float]
) -> None:
    portal, remote = healthy
    payloads = [{"i": i, "text": chr(97 + i % 26) * size, "sleep": delays[i]} for i, size in enumerate(sizes)]
    replies = portal.call(concurrent, remote, payloads)
    assert replies == payloads
    assert remote.restarts == 0


async def test_both_express_paths_together_keep_replies_apart_and_survive_timeouts() -> None:
    """The pipe against a real `serve_stdio` server whose lane answers: concurrent invokes with timeouts
    among them (the pipe cancels, the lane drops the task) and each surviving one gets its own reply."""
    before = children()
    command = [sys.executable, "-m", "tests.servers.express_host"]
    async with RemoteServer("express", command=command, cwd=str(ROOT)) as remote:
        outcomes: dict[int, Any] = {}

        async def one(n: int) -> None:
            slow = n % 5 == 0
            params = {
                "name": "express/slow" if slow else "express/allow",
                "event": "tools/call",
                "phase": "request",
                "payload": {"n": n, "sleep": 30, "text": "y" * (n * 997)},
            }
            try:
                outcomes[n] = await remote.request("interceptor/invoke", params, 0.5 if slow else 10)
            except MCPError as exc:
                outcomes[n] = exc.error.code

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for n in range(40):
                group.start_soon(one, n)
        assert time.monotonic() - started < 15  # the timed-out ones do not wait for their 30 s
        for n, outcome in outcomes.items():
            if n % 5 == 0:
                assert outcome == REQUEST_TIMEOUT
            else:
                assert outcome["info"]["seen"]["n"] == n and len(outcome["info"]["seen"]["text"]) == n * 997
        assert len(outcomes) == 40
        again = await remote.request("interceptor/invoke", {**BASE_PARAMS, "name": "express/allow",
                                                            "payload": {"again": True}}, 5)  # fmt: skip
        assert again["info"]["seen"] == {"again": True} and remote.restarts == 0
    no_children_left(before)
