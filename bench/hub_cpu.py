"""The aggregated endpoint's own cost per call (issue 35): CPU and Python opcodes per `tools/call` through
`proxy --config` (two servers, the call routed to one by its prefixed name) against `proxy` in front of one
server (`single`; `supervised`: with `--restart-upstream`, as every server of a gateway file is), each with
the same policy, all in this process on in-memory shells (`bench.gateway_cpu`'s client and
echo upstream). The acceptance bound is 1.1x.

`python -m bench.hub_cpu [--quick]`
"""

from __future__ import annotations

import asyncio
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
import orjson

from .gateway_cpu import ARGUMENTS, _Client, _gateway, _Upstream, counting_opcodes
from .runner import Measurement, print_table

POLICIES = ("none", "standard")


class _MemoryUpstream(_Upstream):
    async def aclose(self) -> None:
        return None


async def _hub(stack: AsyncExitStack, policy: str) -> _Client:
    """`proxy --config` with two echo servers on in-memory shells, its client initialized."""
    from integrations.gateway.hub.config import parse_gateway
    from integrations.gateway.hub.legs import HubSettings, Leg
    from integrations.gateway.hub.serve import Hub
    from interceptors import InvocationContext
    from interceptors.policy import principal_for_stdio
    from interceptors.protocol.messages import parse

    class MemoryLeg(Leg):
        async def _start_upstream(self, router: Any) -> Any:
            return _MemoryUpstream()

    gateway = parse_gateway({"policy": policy, "servers": {"a": {"command": "x"}, "b": {"command": "y"}}})
    hub = Hub(gateway, HubSettings(), leg=MemoryLeg)
    client = _Client()
    aggregate = hub.aggregate
    aggregate.serve_one(client.send)  # as `run_stdio` delivers
    tasks = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(tasks.cancel_scope.cancel)
    hub._start(tasks)
    principal = principal_for_stdio([])
    aggregate.open_session("stdio", context=InvocationContext(principal=principal, session_id="stdio"), principal="me")

    async def pump() -> None:  # as `Hub.run_stdio` serves its client
        async for line in client.lines():
            aggregate.receive_downstream_message("stdio", parse(line))
            await aggregate.drain()

    tasks.start_soon(pump)
    stack.callback(client.close)
    await aggregate.upstream_for({})
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    assert "result" in await client.request("initialize", init)
    client.notify("notifications/initialized")
    listed = await client.request("tools/list", {})
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["a__echo", "b__echo"], listed
    return client


async def _single_supervised(stack: AsyncExitStack, policy: str) -> _Client:
    """`proxy --restart-upstream` (each server of a gateway file is supervised so): the same gateway, its upstream
    behind `SupervisedUpstream`."""
    from integrations.gateway.recovery import SupervisedUpstream

    from . import gateway_cpu

    plain = gateway_cpu._Upstream

    async def again() -> Any:
        return _MemoryUpstream()

    def supervised() -> Any:
        return SupervisedUpstream(_MemoryUpstream(), again)

    gateway_cpu._Upstream = supervised  # type: ignore[assignment,misc]
    try:
        return await _gateway(stack, policy)
    finally:
        gateway_cpu._Upstream = plain  # type: ignore[misc]


async def _calls(client: _Client, name: str, count: int) -> None:
    for _ in range(count):
        reply = await client.request("tools/call", {"name": name, "arguments": ARGUMENTS})
        assert "result" in reply, orjson.dumps(reply)


async def hub_cpu(iterations: int, rounds: int) -> tuple[dict[str, Measurement], dict[str, float]]:
    async with AsyncExitStack() as stack:
        clients: dict[str, tuple[_Client, str]] = {}
        for policy in POLICIES:
            clients[f"single/{policy}"] = (await _gateway(stack, policy), "echo")
            clients[f"supervised/{policy}"] = (await _single_supervised(stack, policy), "echo")
            clients[f"aggregate/{policy}"] = (await _hub(stack, policy), "a__echo")
        for client, name in clients.values():
            await _calls(client, name, max(50, iterations // 10))
        samples: dict[str, list[float]] = {key: [] for key in clients}
        for _ in range(rounds):
            for key, (client, name) in clients.items():
                started = time.process_time()
                await _calls(client, name, iterations)
                samples[key].append((time.process_time() - started) / iterations)
    results = {
        key: Measurement(f"tools/call, {key.replace('/', ', --policy ')}", round(min(v) * 1e6, 1), round(1 / min(v), 1))
        for key, v in samples.items()
    }
    ratios = {
        f"aggregate x {single}, --policy {policy} (CPU per call)": round(
            results[f"aggregate/{policy}"].per_call_us / results[f"{single}/{policy}"].per_call_us, 3
        )
        for policy in POLICIES
        for single in ("single", "supervised")
    }
    return {m.name: m for m in results.values()}, ratios


async def opcodes(calls: int = 200) -> dict[str, float]:
    """Python opcodes per call (load-independent; C code such as orjson is not counted)."""
    out: dict[str, float] = {}
    async with AsyncExitStack() as stack:
        for policy in POLICIES:
            for kind, client, name in (
                ("single", await _gateway(stack, policy), "echo"),
                ("supervised", await _single_supervised(stack, policy), "echo"),
                ("aggregate", await _hub(stack, policy), "a__echo"),
            ):
                await _calls(client, name, 50)
                with counting_opcodes() as counted:
                    await _calls(client, name, calls)
                out[f"{kind}, --policy {policy}"] = round(counted[0] / calls, 1)
    return out


def main(argv: list[str]) -> int:
    iterations, rounds = (300, 3) if "--quick" in argv else (2000, 5)
    results, ratios = anyio.run(hub_cpu, iterations, rounds)
    print_table(results, ratios)
    for key, count in asyncio.run(opcodes()).items():
        print(f"{key}: {count:.0f} Python opcodes per tools/call")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
