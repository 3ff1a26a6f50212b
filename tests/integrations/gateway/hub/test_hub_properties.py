"""Properties of the aggregated endpoint (issue 35), in process: the real legs (router, runner, chain adapter)
in front of two in-memory echo servers (`bench.gateway_cpu`'s), driven by raw JSON-RPC lines.

Whatever a client sends — names with or without a prefix, prefixes of servers that exist or not, separators
anywhere, cursors of any shape, ids of either type — every request gets exactly one answer, with its own
id; a name routed to a server reaches it with the server's own name; nothing raises.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any

import anyio
import orjson
from hypothesis import given
from hypothesis import strategies as st

from bench.gateway_cpu import _Client
from bench.hub_cpu import _MemoryUpstream
from integrations.gateway.hub.config import parse_gateway
from integrations.gateway.hub.legs import HubSettings, Leg
from integrations.gateway.hub.serve import Hub
from interceptors import InvocationContext
from interceptors.policy import principal_for_stdio

SEEN: list[dict[str, Any]] = []


class _Recording(_MemoryUpstream):
    def send(self, data: bytes, request_id: int | None = None) -> None:
        SEEN.append(orjson.loads(data))
        super().send(data, request_id)


class _MemoryLeg(Leg):
    async def _start_upstream(self, router: Any) -> Any:
        return _Recording()


NAMES = st.one_of(
    st.sampled_from(["a__echo", "b__echo", "c__echo", "a_echo", "__echo", "a__", "a____x", "echo", "A__echo"]),
    st.text(alphabet="ab_+:/x", max_size=8),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.none(),
)
URIS = st.one_of(st.sampled_from(["a+memo://x", "b+file:///y", "c+z", "memo://x", "+x", "a+"]), st.text(max_size=6))
REQUESTS = st.one_of(
    st.builds(lambda n: ("tools/call", {"name": n, "arguments": {}}), NAMES),
    st.builds(lambda n: ("prompts/get", {"name": n}), NAMES),
    st.builds(lambda u: ("resources/read", {"uri": u}), URIS),
    st.builds(lambda n: ("tasks/get", {"taskId": n}), NAMES),
    st.builds(lambda r: ("completion/complete", {"ref": r, "argument": {"name": "x", "value": ""}}),
              st.one_of(st.fixed_dictionaries({"type": st.just("ref/prompt"), "name": NAMES}), st.text(max_size=3))),
    st.builds(lambda c: ("tools/list", {} if c is None else {"cursor": c}),
              st.one_of(st.none(), st.text(max_size=6), st.integers(0, 2**63))),
    st.just(("ping", {})),
    st.just(("no/such", {})),
)  # fmt: skip


async def _run(requests: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    gateway = parse_gateway({"policy": "none", "servers": {"a": {"command": "x"}, "b": {"command": "y"}}})
    hub = Hub(gateway, HubSettings(), leg=_MemoryLeg)
    client = _Client()
    aggregate = hub.aggregate
    answers: list[dict[str, Any]] = []

    def deliver(action: Any) -> None:
        answers.append(orjson.loads(action.data))
        client.send(action.data)

    aggregate.deliver = deliver
    async with AsyncExitStack() as stack:
        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)
        hub._start(tasks)
        context = InvocationContext(principal=principal_for_stdio([]), session_id="stdio")
        aggregate.open_session("s", context=context, principal="me")
        await aggregate.upstream_for({})
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        aggregate.receive_downstream("s", orjson.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                                                          "params": init}))  # fmt: skip
        for index, (method, params) in enumerate(requests):
            request_id: int | str = index if index % 2 else f"r{index}"
            line = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            aggregate.receive_downstream("s", orjson.dumps(line))
            await aggregate.drain()
        with anyio.fail_after(10):
            while len([a for a in answers if "id" in a and "method" not in a]) < len(requests) + 1:
                await asyncio.sleep(0.005)
        aggregate.close_session("s")
        await hub._close()
    return answers


@given(st.lists(REQUESTS, max_size=8))
def test_every_request_through_the_aggregate_gets_exactly_one_answer_with_its_own_id(
    requests: list[tuple[str, dict[str, Any]]],
) -> None:
    SEEN.clear()
    answers = asyncio.run(_run(requests))
    replies = [a for a in answers if "id" in a and "method" not in a]
    ids = [reply["id"] for reply in replies]
    wanted = ["init", *[index if index % 2 else f"r{index}" for index in range(len(requests))]]
    assert sorted(map(str, ids)) == sorted(map(str, wanted)) and len(ids) == len(set(map(str, ids)))
    by_id = {str(reply["id"]): reply for reply in replies}
    for index, (method, params) in enumerate(requests):
        reply = by_id[str(index if index % 2 else f"r{index}")]
        name = params.get("name")
        if method == "tools/call" and isinstance(name, str) and name[:3] in ("a__", "b__"):
            assert "result" in reply  # routed: the echo server answers any name
            assert {"name": name[3:], "arguments": {}} in [m.get("params") for m in SEEN if m.get("method") == method]
        elif method == "tools/call":
            assert reply["error"]["code"] == -32602 and reply["error"]["message"] == f"Unknown tool: {name}"
