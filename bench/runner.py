"""`mcp-interceptors bench`: the chain's cost, each number next to a baseline measured in the same run.

Scenarios always take turns, so every one meets the same machine. In-process chains (`chain_benchmarks`, CPU
time) take turns in short blocks of calls and report each scenario's median block (`measure_blocks`): on a
shared virtual machine the CPU time of one call moves with the neighbours (caches, clock), by 25% from one
process to the next, and a scenario's luckiest round says more about its luck than about its cost, while the
median of blocks taken side by side repeats within a few percent. Scenarios across processes (the gateways, wall
time) run in rounds and report their best (fastest) round (`measure`): there interference only adds time, and
the least disturbed round is the steadiest estimate. Ratios, not absolute numbers, are the claims.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import Client, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from pydantic import TypeAdapter

from integrations import InterceptorMiddleware
from interceptors import Invocation, InvocationContext, Mutation, Registry, Verdict
from interceptors_chain import RemoteServer
from interceptors_server import LocalChain
from interceptors_server.install import OpenParams

Call = Callable[[], Awaitable[Any]]
_DICT_RESULT: Any = TypeAdapter(dict[str, Any])  # the SDK bounds result types to models; a dict adapter works


class _BenchRequest(types.Request[dict[str, Any], str]):
    """A custom-method request sent the way any SDK user would."""


@dataclass
class Measurement:
    name: str
    per_call_us: float
    calls_per_s: float


def echo_tool_server(name: str = "bench-tools") -> Server[Any]:
    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])

    server: Server[Any] = Server(name, on_call_tool=call_tool, on_list_tools=list_tools)
    echo_method(server)
    return server


def echo_method(server: Server[Any]) -> None:
    """A bare custom method: the SDK's own round trip, the baseline for an interceptor invoke."""

    async def custom(ctx: ServerRequestContext[Any], params: OpenParams) -> dict[str, Any]:
        # Echo the payload: the same bytes each way as an interceptor invoke whose mutator changes nothing.
        return {"ok": True, "payload": (params.model_extra or {}).get("payload")}

    server.add_request_handler("bench/echo", OpenParams, custom)


def noop_registry(events: str, validators: int, mutators: int, *, inline: bool = False) -> Registry:
    """No-op validators and mutators: async handlers, or sync ones registered `inline` (as the built-in stages)."""
    registry = Registry()

    async def allow(invocation: Invocation) -> Verdict:
        return Verdict.allow()

    async def unchanged(invocation: Invocation) -> Mutation:
        return Mutation.unchanged()

    def allow_inline(invocation: Invocation) -> Verdict:
        return Verdict.allow()

    def unchanged_inline(invocation: Invocation) -> Mutation:
        return Mutation.unchanged()

    for index in range(validators):
        name = f"bench/validator-{index}"
        if inline:
            registry.register(allow_inline, name=name, type="validation", events=events, inline=True)
        else:
            registry.register(allow, name=name, type="validation", events=events)
    for index in range(mutators):
        name = f"bench/mutator-{index}"
        if inline:
            registry.register(unchanged_inline, name=name, type="mutation", events=events, inline=True)
        else:
            registry.register(unchanged, name=name, type="mutation", events=events)
    return registry


async def _time(call: Call, iterations: int, clock: Callable[[], float] = time.perf_counter) -> float:
    gc.collect()  # each block starts from a collected heap: no scenario pays for the garbage of the one before
    started = clock()
    for _ in range(iterations):
        await call()
    return (clock() - started) / iterations


async def measure(
    scenarios: dict[str, Call], iterations: int, rounds: int, *, clock: Callable[[], float] = time.perf_counter
) -> dict[str, Measurement]:
    """Per-call time of each scenario's best round of interleaved rounds. `clock=time.process_time` counts this
    process's CPU time (worker threads included): steady on a busy machine, for scenarios that run here."""
    for call in scenarios.values():  # warm-up: plans compiled, caches filled, code paths hot
        await _time(call, max(20, iterations // 10), clock)
    samples: dict[str, list[float]] = {name: [] for name in scenarios}
    for _ in range(rounds):
        for name, call in scenarios.items():
            samples[name].append(await _time(call, iterations, clock))
    out = {}
    for name, values in samples.items():
        best = min(values)  # see the module's docstring: noise only adds
        out[name] = Measurement(name, round(best * 1e6, 1), round(1 / best, 1))
    return out


async def measure_blocks(
    scenarios: dict[str, Call], calls: int, *, block: int = 100, clock: Callable[[], float] = time.process_time
) -> dict[str, Measurement]:
    """Per-call time of each scenario's median block: `calls` calls each, in blocks of `block`, the scenarios
    taking turns block by block (see the module's docstring). Each turn starts one scenario further on, so each
    follows every other equally often: a block run just after a scenario that evicts its code from the caches
    starts cold, and the median sets those aside instead of charging one scenario for its neighbour."""
    for call in scenarios.values():  # warm-up: plans compiled, caches filled, code paths hot
        await _time(call, max(20, calls // 50), clock)
    items = list(scenarios.items())
    samples: dict[str, list[float]] = {name: [] for name in scenarios}
    gc.collect()
    for turn in range(max(1, calls // block)):
        start = turn % len(items)
        for name, call in items[start:] + items[:start]:
            started = clock()
            for _ in range(block):
                await call()
            samples[name].append((clock() - started) / block)
    out = {}
    for name, values in samples.items():
        middle = statistics.median(values)
        out[name] = Measurement(name, round(middle * 1e6, 1), round(1 / middle, 1))
    return out


async def chain_benchmarks(iterations: int, rounds: int) -> tuple[dict[str, Measurement], dict[str, float]]:
    """In-process chains, in CPU time per call (`measure_blocks`, `iterations * rounds` calls of each): a bare
    in-memory tools/call vs the same call with a non-matching chain and with 2+2 no-op interceptors; one
    matched invoke over the in-process transport and over the SDK's in-memory MCP transport vs the bare SDK
    custom-method round trip; the built-in `standard` stages on one small tools/call (request and response)."""
    arguments = {"text": "hello", "count": 3}
    invoke_like = {
        "name": "bench/validator-0",
        "event": "tools/call",
        "phase": "request",
        "payload": {"method": "tools/call", "params": {"name": "echo", "arguments": arguments}},
    }
    result_payload = {"content": [{"type": "text", "text": "ok: hello world, 3 items"}], "isError": False}
    async with AsyncExitStack() as stack:
        bare = echo_tool_server()
        idle = echo_tool_server()
        busy = echo_tool_server()
        idle_chain = await stack.enter_async_context(LocalChain(noop_registry("prompts/get", 2, 2)))
        idle.middleware.append(InterceptorMiddleware(idle_chain))
        busy_chain = await stack.enter_async_context(LocalChain(noop_registry("tools/call", 2, 2)))
        busy.middleware.append(InterceptorMiddleware(busy_chain))
        single = await stack.enter_async_context(LocalChain(noop_registry("tools/call", 0, 1)))
        single_mcp = await stack.enter_async_context(LocalChain(noop_registry("tools/call", 0, 1), transport="mcp"))
        standard = await stack.enter_async_context(LocalChain(*standard_stages()))
        request_payload = invoke_like["payload"]
        bare_client = await stack.enter_async_context(Client(bare))
        # The baseline server is configured like our interceptor servers (no OTel middleware), so the ratio
        # measures the framework, not a configuration difference.
        plain = echo_tool_server("bench-plain")
        plain.middleware.clear()
        plain_client = await stack.enter_async_context(Client(plain))
        idle_client = await stack.enter_async_context(Client(idle))
        busy_client = await stack.enter_async_context(Client(busy))
        plain_session = plain_client.session

        async def bare_custom() -> Any:
            # The SDK's public path for a custom method, result as a plain dict.
            return await plain_session.send_request(
                _BenchRequest(method="bench/echo", params=invoke_like),
                _DICT_RESULT,
            )

        context = InvocationContext(session_id="bench", trace_id="0af7651916cd43dd8448eb211c80319c")

        async def standard_call() -> Any:
            await standard.execute("tools/call", "request", request_payload, direction="receiving", context=context)
            return await standard.execute(
                "tools/call", "response", result_payload, direction="sending", context=context
            )

        scenarios: dict[str, Call] = {
            "tools/call bare (in-memory)": lambda: bare_client.session.call_tool("echo", arguments),
            "tools/call, chain with no match": lambda: idle_client.session.call_tool("echo", arguments),
            "tools/call, 2 validators + 2 mutators": lambda: busy_client.session.call_tool("echo", arguments),
            "custom method round trip (bare SDK)": bare_custom,
            "LocalChain execute, 1 no-op mutator": lambda: single.execute(
                "tools/call", "request", request_payload, direction="receiving"
            ),
            "LocalChain execute, 1 no-op mutator (MCP transport)": lambda: single_mcp.execute(
                "tools/call", "request", request_payload, direction="receiving"
            ),
            "standard stages, small tools/call (request + response)": standard_call,
        }
        results = await measure_blocks(scenarios, iterations * rounds)
    us = {name: m.per_call_us for name, m in results.items()}
    bare_us = us["tools/call bare (in-memory)"]
    custom_us = us["custom method round trip (bare SDK)"]
    ratios = {
        "no-match chain overhead (x bare tools/call)": round(us["tools/call, chain with no match"] / bare_us, 3),
        # One matched interceptor through the whole engine (plan, invoke, checks, result) vs the SDK alone
        # carrying the same bytes each way. Target <= 0.25 in process.
        "LocalChain per-invoke cost (x bare custom method)": round(
            us["LocalChain execute, 1 no-op mutator"] / custom_us, 3
        ),
        "LocalChain per-invoke cost, MCP transport (x bare custom method)": round(
            us["LocalChain execute, 1 no-op mutator (MCP transport)"] / custom_us, 3
        ),
        # End to end: a tools/call with 2 validators + 2 mutators, middleware included. Target <= 1.6.
        "2+2 chain around tools/call (x bare tools/call)": round(
            us["tools/call, 2 validators + 2 mutators"] / bare_us, 3
        ),
        # Absolute, CPU: the built-in standard stages on one small call. Target <= 150 us.
        "standard stages per small tools/call (us CPU)": us["standard stages, small tools/call (request + response)"],
        # The same against the bare call measured in this run: the absolute target was set where a bare
        # tools/call cost about 130 us (issue 13), i.e. about 1.15x; informative, machines differ 2-3x.
        "standard stages per small tools/call (x bare tools/call)": round(
            us["standard stages, small tools/call (request + response)"] / bare_us, 3
        ),
    }
    return results, ratios


def standard_stages() -> list[Registry]:
    """The policy and transform stages of the `standard` profile, as `proxy --policy standard` builds them."""
    from integrations.gateway.stages import build_stages

    return list(build_stages("standard", None).registries)


async def remote_benchmarks(total: int) -> tuple[dict[str, Measurement], dict[str, float]]:
    """Invokes/s against a stdio interceptor server, 1 and 16 in flight, next to the bare SDK round trip."""
    payload = {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hello", "count": 3}}}
    invoke = {"name": "bench/validator-0", "event": "tools/call", "phase": "request", "payload": payload}
    command = [sys.executable, "-m", "bench.stdio_server"]
    async with RemoteServer("bench-remote", command=command) as remote:

        async def throughput(in_flight: int, method: str) -> float:
            per_task = max(1, total // in_flight)
            session = remote.session
            assert session is not None

            async def worker() -> None:
                for _ in range(per_task):
                    if method == "bench/echo":  # the baseline takes the SDK's public path
                        await session.send_request(_BenchRequest(method=method, params=invoke), _DICT_RESULT)
                    else:
                        await remote.request(method, invoke, None)

            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(in_flight):
                    group.start_soon(worker)
            return per_task * in_flight / (time.perf_counter() - started)

        await throughput(4, "interceptor/invoke")  # warm-up
        samples: dict[str, list[float]] = {"bare": [], "seq": [], "par": []}
        for _ in range(3):
            samples["bare"].append(await throughput(1, "bench/echo"))
            samples["seq"].append(await throughput(1, "interceptor/invoke"))
            samples["par"].append(await throughput(16, "interceptor/invoke"))
    rates = {key: max(values) for key, values in samples.items()}  # the best round, as `measure` reports
    names = {
        "bare": "stdio custom method round trip, 1 in flight",
        "seq": "stdio interceptor/invoke, 1 in flight",
        "par": "stdio interceptor/invoke, 16 in flight",
    }
    results = {names[k]: Measurement(names[k], round(1e6 / v, 1), round(v, 1)) for k, v in rates.items()}
    ratios = {
        "stdio invoke, 16 in flight (x 1 in flight)": round(rates["par"] / rates["seq"], 3),
        "stdio invoke, 1 in flight (x bare custom method)": round(rates["seq"] / rates["bare"], 3),
    }
    return results, ratios


def print_table(results: dict[str, Measurement], ratios: dict[str, float]) -> None:
    width = max(len(name) for name in [*results, *ratios]) + 2
    print(f"{'scenario':<{width}}{'us/call':>10}{'calls/s':>12}")
    for measurement in results.values():
        print(f"{measurement.name:<{width}}{measurement.per_call_us:>10.1f}{measurement.calls_per_s:>12.0f}")
    print()
    for name, value in ratios.items():
        print(f"{name:<{width}}{value:>10.3f}")


def main(args: argparse.Namespace) -> int:
    if getattr(args, "quality", False):
        from .public_quality import format_public_report, public_report
        from .quality import format_report, quality_report
        from .vendor_quality import format_vendor_report, vendor_report

        report = quality_report(args.quick)
        vendors = vendor_report(args.quick)
        # Public corpora (built by `python -m bench.public_corpus build`): "not built" when absent; peers that are
        # not installed are skipped and named.
        public = public_report(args.quick, gateway=20 if args.quick else 40)
        if args.json:
            print(json.dumps({"kit_formats": report, "vendor_formats": vendors, "public_corpora": public},
                             indent=2, sort_keys=True))  # fmt: skip
        else:
            print(format_report(report))
            print()
            print(format_vendor_report(vendors))
            print()
            print(format_public_report(public))
        return 0
    iterations, rounds = (200, 3) if args.quick else (1000, 7)

    from .gateway_bench import gateway_benchmarks  # imports this module: loaded late
    from .gateway_cpu import gateway_cpu
    from .http_upstream_bench import upstream_benchmarks
    from .hub_cpu import hub_cpu
    from .policy_bench import policy_benchmarks
    from .transforms_bench import transforms_benchmarks
    from .vault_bench import vault_benchmarks

    async def run() -> tuple[dict[str, Measurement], dict[str, float]]:
        results, ratios = await chain_benchmarks(iterations, rounds)
        remote_results, remote_ratios = await remote_benchmarks(300 if args.quick else 2000)
        gateway_results, gateway_ratios = await gateway_benchmarks(200 if args.quick else 1000, 3 if args.quick else 5)
        cpu_results, cpu_ratios = await gateway_cpu(100 if args.quick else 1000, 3 if args.quick else 5)
        http_results, http_ratios = await upstream_benchmarks(128 if args.quick else 640, 3 if args.quick else 5)
        hub_results, hub_ratios = await hub_cpu(100 if args.quick else 1000, 3 if args.quick else 5)
        return (
            {**results, **remote_results, **gateway_results, **cpu_results, **http_results, **hub_results},
            {**ratios, **remote_ratios, **gateway_ratios, **cpu_ratios, **http_ratios, **hub_ratios},
        )

    results, ratios = anyio.run(run)
    costs = {f"policy: {name}": value for name, value in policy_benchmarks(args.quick).items()}
    throughput, transform_ratios = transforms_benchmarks(args.quick)
    vault_rates = vault_benchmarks(args.quick)
    ratios = {**ratios, **{f"transforms: {name}": value for name, value in transform_ratios.items()}}
    if args.json:
        payload = {
            "iterations": iterations,
            "rounds": rounds,
            "python": sys.version.split()[0],
            "results": {name: vars(m) for name, m in results.items()},
            "ratios": ratios,
            "costs_us": costs,
            "transforms_throughput": throughput,
            "vault_ops_per_s": vault_rates,
        }
        print(json.dumps(payload, indent=2))
    else:
        print_table(results, ratios)
        print()
        for name, value in costs.items():
            print(f"{name:<62}{value:>10.1f} us")
        print()
        for name, value in throughput.items():
            print(f"transforms: {name:<50}{value:>10.2f}")
        print()
        for name, value in vault_rates.items():
            print(f"vault: {name:<55}{value:>10.0f} /s")
    return 0
