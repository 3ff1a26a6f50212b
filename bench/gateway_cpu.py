"""The stdio gateway's own CPU per call, in one process: the CPU that `gateway_bench --router` can only see
through three processes and a scheduler.

`proxy`'s pieces as `proxy` assembles them (the policy stages, the reloader's chain, the chain adapter, the
router with its spec check and hold-back, the catalog, the runner), with in-memory shells instead of pipes: a
client that sends a 2025-11-25 `tools/call` and waits for its reply, and an upstream that answers at once as
the bench's echo server does (it declares `logging`). Each call is timed in this process's CPU time, so the
numbers hold on a busy machine; the ratios are against `--policy none` measured in the same run.

`python -m bench.gateway_cpu [--quick] [--profile POLICY | --opcodes | --loops]` prints the table (`--profile`
prints a cProfile of that policy's calls instead, `--opcodes` the Python opcodes each call executes: a count the
machine's load does not move; `--loops` the same table on asyncio's event loop and on uvloop's, alternating in
one run, as `proxy --loop asyncio|uvloop` would run it).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

import anyio
import orjson

from .runner import Measurement, print_table

TOOL_RESULT = {"content": [{"type": "text", "text": "ok"}], "isError": False}
ARGUMENTS = {"text": "hello", "count": 3}
_UPSTREAM_ANSWERS: dict[str, Any] = {
    "initialize": {
        "capabilities": {"logging": {}, "tools": {"listChanged": False}},
        "protocolVersion": "2025-11-25",
        "serverInfo": {"name": "bench-upstream", "version": ""},
    },
    "tools/list": {"tools": [{"inputSchema": {"type": "object"}, "name": "echo"}]},
    "tools/call": TOOL_RESULT,
}


class _Upstream:
    """The echo upstream, answering each request as it is sent (an unknown method: -32601)."""

    def __init__(self) -> None:
        self._replies: asyncio.Queue[bytes] = asyncio.Queue()

    def send(self, data: bytes, request_id: int | None = None) -> None:
        message = orjson.loads(data)
        if "id" not in message or "method" not in message:
            return
        answer = _UPSTREAM_ANSWERS.get(message["method"], {})
        if message["method"] in ("resources/list", "prompts/list", "resources/templates/list"):
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "nf"}}
        else:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
        self._replies.put_nowait(orjson.dumps(reply))

    async def drain(self) -> None:
        return None

    async def lines(self) -> AsyncIterator[bytes]:
        while True:
            yield await self._replies.get()


class _Client:
    """The downstream stdio client: `call()` writes one request line and waits for its reply."""

    def __init__(self) -> None:
        self._lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0

    def send(self, data: bytes) -> None:
        message = orjson.loads(data)
        waiter = self._waiting.pop(message.get("id"), None) if isinstance(message.get("id"), int) else None
        if waiter is not None:
            waiter.set_result(message)

    async def drain(self) -> None:
        return None

    async def lines(self) -> AsyncIterator[bytes]:
        while (line := await self._lines.get()) is not None:
            yield line

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = waiter
        self._lines.put_nowait(orjson.dumps({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}))
        return await waiter

    def notify(self, method: str) -> None:
        self._lines.put_nowait(orjson.dumps({"jsonrpc": "2.0", "method": method}))

    def close(self) -> None:
        self._lines.put_nowait(None)


async def _gateway(stack: AsyncExitStack, policy: str) -> _Client:
    """`proxy --policy POLICY` on in-memory shells, its client initialized."""
    from integrations.gateway.catalog import Catalog
    from integrations.gateway.chain_adapter import ChainAdapter
    from integrations.gateway.command import RouterOptions, router_for
    from integrations.gateway.local import LocalAnswers
    from integrations.gateway.reload import reloader_for
    from integrations.gateway.runner import Runner
    from integrations.gateway.stages import build_stages
    from interceptors import InvocationContext
    from interceptors.policy import principal_for_stdio
    from interceptors.protocol.framing import MAX_LINE_BYTES

    stages = build_stages(policy, None)
    options = RouterOptions(command=[], registries=list(stages.registries), stages=stages, extra={"policy": policy})
    reloader = await stack.enter_async_context(reloader_for(options, MAX_LINE_BYTES))
    chain = await reloader.open(options.registries)
    adapter = reloader.adapter = ChainAdapter(chain)
    local = LocalAnswers(None, stages.local_tools, stages.authorize)
    router = router_for(adapter, local, hold_back=False)
    catalog = Catalog(router, reloader.learn) if stages.engine is not None else None
    client = _Client()
    principal = principal_for_stdio([])
    runner = Runner(
        router,
        adapter,
        _Upstream(),
        client,
        context=InvocationContext(principal=principal, session_id="stdio"),
        principal=principal.id,
        catalog=catalog,
        timeout=300.0,  # proxy's default --upstream-timeout
        local=local,
    )
    tasks = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(client.close)
    tasks.start_soon(runner.run)
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    reply = await client.request("initialize", init)
    assert "result" in reply, reply
    client.notify("notifications/initialized")
    return client


async def _calls(client: _Client, count: int) -> None:
    for _ in range(count):
        reply = await client.request("tools/call", {"name": "echo", "arguments": ARGUMENTS})
        assert "result" in reply, reply


async def gateway_cpu(
    iterations: int, rounds: int, policies: tuple[str, ...] = ("none", "standard")
) -> tuple[dict[str, Measurement], dict[str, float]]:
    """CPU per `tools/call` through the in-process stdio gateway, per policy, interleaved rounds (the best round of
    each, as `runner.measure` reports)."""
    async with AsyncExitStack() as stack:
        clients = {policy: await _gateway(stack, policy) for policy in policies}
        for client in clients.values():
            await _calls(client, max(50, iterations // 10))
        samples: dict[str, list[float]] = {policy: [] for policy in policies}
        for _ in range(rounds):
            for policy, client in clients.items():
                started = time.process_time()
                await _calls(client, iterations)
                samples[policy].append((time.process_time() - started) / iterations)
    results = {
        policy: Measurement(
            f"tools/call through the gateway in process, --policy {policy}",
            round(min(values) * 1e6, 1),
            round(1 / min(values), 1),
        )
        for policy, values in samples.items()
    }
    ratios: dict[str, float] = {}
    if "none" in results:
        for policy in policies:
            if policy != "none":
                ratios[f"--policy {policy} (x --policy none, CPU per call)"] = round(
                    results[policy].per_call_us / results["none"].per_call_us, 3
                )
                ratios[f"--policy {policy}: us CPU added per call"] = round(
                    results[policy].per_call_us - results["none"].per_call_us, 1
                )
    return {m.name: m for m in results.values()}, ratios


@contextmanager
def counting_opcodes() -> Iterator[list[int]]:
    """Python bytecodes executed while inside (`sys.settrace` opcode events), in the yielded list's one item: a
    count that does not move with the machine's load. Frames already running when tracing starts (the pumps'
    loops) are not counted; C code (orjson, pydantic) neither."""
    counted = [0]

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            counted[0] += 1
        return tracer

    sys.settrace(tracer)
    try:
        yield counted
    finally:
        sys.settrace(None)


async def opcodes_per_call(calls: int = 20, policies: tuple[str, ...] = ("none", "standard")) -> dict[str, float]:
    """Python bytecodes executed per `tools/call`, per policy (`counting_opcodes`), to compare two trees where CPU
    time cannot tell a few per cent apart."""
    out: dict[str, float] = {}
    async with AsyncExitStack() as stack:
        for policy in policies:
            client = await _gateway(stack, policy)
            await _calls(client, 50)
            with counting_opcodes() as counted:
                await _calls(client, calls)
            out[policy] = round(counted[0] / calls, 1)
    return out


async def _profile(policy: str, iterations: int) -> None:
    import cProfile
    import pstats

    async with AsyncExitStack() as stack:
        client = await _gateway(stack, policy)
        await _calls(client, 200)
        profiler = cProfile.Profile()
        profiler.enable()
        await _calls(client, iterations)
        profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(45)


def compare_loops(
    iterations: int, rounds: int, policies: tuple[str, ...] = ("none", "standard")
) -> tuple[dict[str, Measurement], dict[str, float]]:
    """`gateway_cpu` on each event loop `proxy --loop` offers, the loops alternating `rounds` times (a fresh
    gateway each time, so neither loop gets the warmer caches), the best of each; ratios uvloop / asyncio."""
    from interceptors.loops import run_on_loop, uvloop_available

    loops = ("asyncio", "uvloop") if uvloop_available() else ("asyncio",)
    best: dict[tuple[str, str], Measurement] = {}
    for _ in range(rounds):
        for loop in loops:
            results, _ = run_on_loop(gateway_cpu, iterations, 2, policies, loop=loop)
            for policy in policies:
                measured = results[f"tools/call through the gateway in process, --policy {policy}"]
                kept = best.get((policy, loop))
                if kept is None or measured.per_call_us < kept.per_call_us:
                    best[policy, loop] = measured
    table = {
        f"{policy} {loop}": Measurement(
            f"tools/call through the gateway in process, --policy {policy}, --loop {loop}",
            measured.per_call_us,
            measured.calls_per_s,
        )
        for (policy, loop), measured in best.items()
    }
    ratios: dict[str, float] = {}
    if "uvloop" in loops:
        for policy in policies:
            ratios[f"--policy {policy}: uvloop (x asyncio, CPU per call)"] = round(
                best[policy, "uvloop"].per_call_us / best[policy, "asyncio"].per_call_us, 3
            )
    return {m.name: m for m in table.values()}, ratios


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    iterations, rounds = (300, 3) if quick else (2000, 5)
    if "--loops" in argv:
        print_table(*compare_loops(iterations, rounds))
        return 0
    if "--opcodes" in argv:
        for policy, count in asyncio.run(opcodes_per_call()).items():
            print(f"--policy {policy}: {count:.0f} Python opcodes per tools/call")
        return 0
    if "--profile" in argv:
        policy = argv[argv.index("--profile") + 1]
        asyncio.run(_profile(policy, iterations))
        return 0
    results, ratios = anyio.run(gateway_cpu, iterations, rounds)
    print_table(results, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
