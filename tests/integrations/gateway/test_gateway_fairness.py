"""Fairness between requests (issue 31): one request's progress flood never holds up another request's reply.

The runner's upstream pump queues progress per request (a "flow") and serves the flows in turn; a reply to a
request with nothing queued goes at once. Checked on the real `Runner` and `Router` with an upstream shell
that hands over a scripted output all at once (as a pipe full of a flood does), so the order of what the
clients get is fixed, not a matter of timing. The latency under a real flood is `python -m bench.flood`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
import pytest

from integrations.gateway.chain_adapter import ChainAdapter
from integrations.gateway.router import RouterConfig, SendDownstream
from integrations.gateway.runner import NoDownstream, Runner
from interceptors_chain import Chain
from tests.router_helpers import handshake_session, line, ready_router

pytestmark = pytest.mark.anyio

N = 500
TEST_S = 60.0  # a guard against hangs, never a claim


class ScriptedUpstream:
    """The upstream's output, handed over at once when released (no turn of the event loop between lines)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.script: list[bytes] = []
        self.release = anyio.Event()

    def send(self, data: bytes, request_id: int | None = None) -> None:
        self.sent.append(json.loads(data))

    async def drain(self) -> None:
        return None

    async def lines(self) -> AsyncIterator[bytes]:
        await self.release.wait()
        for item in self.script:
            yield item
        await anyio.sleep_forever()


class Recording(Runner):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delivered: list[tuple[str, dict[str, Any]]] = []
        self.replies = 0
        self.all_replied = anyio.Event()
        self.expected = 0

    def send_downstream(self, action: SendDownstream) -> None:
        message = json.loads(action.data)
        self.delivered.append((action.session, message))
        if "id" in message and "method" not in message:
            self.replies += 1
            if self.replies == self.expected:
                self.all_replied.set()


async def run_script(calls: dict[str, dict[str, Any]], script: Any) -> list[tuple[str, dict[str, Any]]]:
    """Each session in `calls` sends its tools/call; `script(ids)` is the upstream's output, given the
    upstream id of each session's call; returns what the sessions got, in order."""
    adapter = ChainAdapter(Chain())
    router = ready_router(replace(RouterConfig(), has_work=adapter.has_work))
    upstream = ScriptedUpstream()
    runner = Recording(router, adapter, upstream, NoDownstream())
    runner.expected = len(calls)
    ids: dict[str, int] = {}
    for session, params in calls.items():
        handshake_session(router, session)
        runner.perform(router.receive_downstream(session, line(id=1, method="tools/call", params=params)))
        ids[session] = upstream.sent[-1]["id"]
    upstream.script = script(ids)
    with anyio.fail_after(TEST_S):
        async with anyio.create_task_group() as tasks:
            runner._start_tasks(tasks)
            upstream.release.set()
            await runner.all_replied.wait()
            tasks.cancel_scope.cancel()
    return runner.delivered


def progress(token: int, step: int) -> bytes:
    return line(method="notifications/progress", params={"progressToken": token, "progress": step, "total": N})


def reply(upstream_id: int, text: str) -> bytes:
    return line(id=upstream_id, result={"content": [{"type": "text", "text": text}]})


def flooding(token: str | int) -> dict[str, Any]:
    return {"name": "flood", "arguments": {}, "_meta": {"progressToken": token}}


async def test_a_reply_never_waits_behind_another_requests_progress_flood() -> None:
    def script(ids: dict[str, int]) -> list[bytes]:
        flood = [progress(ids["a"], step) for step in range(1, N + 1)]
        return [*flood, reply(ids["b"], "b done"), reply(ids["a"], "a done")]

    delivered = await run_script({"a": flooding("t"), "b": {"name": "echo", "arguments": {}}}, script)
    assert delivered[0] == (
        "b",
        {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "b done"}]}},
    )
    rest = [message for session, message in delivered[1:]]
    assert all(session == "a" for session, _ in delivered[1:])
    # the flooding request's own stream keeps the upstream's order: every progress, then its reply
    assert [m["params"]["progress"] for m in rest[:-1]] == list(range(1, N + 1))
    assert all(m["params"]["progressToken"] == "t" for m in rest[:-1])
    assert rest[-1]["result"]["content"][0]["text"] == "a done"


async def test_two_floods_are_served_in_turn() -> None:
    def script(ids: dict[str, int]) -> list[bytes]:
        first = [progress(ids["a"], step) for step in range(1, N + 1)]
        second = [progress(ids["b"], step) for step in range(1, N + 1)]
        return [*first, *second, reply(ids["a"], "a done"), reply(ids["b"], "b done")]

    delivered = await run_script({"a": flooding(1), "b": flooding(2)}, script)
    sessions = [session for session, _ in delivered]
    assert sessions[: 2 * N] == ["a", "b"] * N  # one message of each flow in turn, never one flood whole first
    assert sorted(sessions[2 * N :]) == ["a", "b"]  # then each reply, after its own progress


async def test_a_log_of_a_flooding_request_stays_between_its_progress_and_its_reply() -> None:
    def script(ids: dict[str, int]) -> list[bytes]:
        flood = [progress(ids["a"], step) for step in range(1, N + 1)]
        log = line(method="notifications/message", params={"level": "info", "data": "a log"})
        return [*flood, log, reply(ids["a"], "a done")]

    delivered = await run_script({"a": flooding("t")}, script)
    methods = [message.get("method") for _, message in delivered]
    assert methods == [*["notifications/progress"] * N, "notifications/message", None]  # as the upstream wrote them
