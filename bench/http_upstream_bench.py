"""The router gateway's HTTP upstream hop: sequential tools/call, a 2025-11-25 client, in one run.

Scenarios, interleaved in rounds (`bench.runner.measure`): the SDK client straight to an SDK echo server
over Streamable HTTP; the same client on stdio to `proxy --policy none --upstream URL` in front
of that server (SSE replies, and a second server answering plain JSON); and the gateway in front of the
same echo server on stdio, for the hop's cost. The servers bind 127.0.0.1 with TCP_NODELAY.

python -m bench.http_upstream_bench [--iterations N] [--rounds R]
`python -m bench.http_upstream_bench serve [--json]` is the upstream (prints `PORT n`).

`python -m bench.http_upstream_bench --clients 1,8,32 [--calls N] [--rounds R]` (and `upstream_benchmarks`, the
rows of `mcp-interceptors bench`): the issue-31 targets. SDK clients on Streamable HTTP (2025-11-25, a session
each), 1, 8 and 32 at once, each calling `echo` back to back: straight to the echo server, and to
`proxy --policy none --listen --upstream URL` in front of it; calls/s and the median call in the best of the
interleaved rounds, and the gateway process's CPU per call (from /proc), also against the same gateway in front
of the echo server on stdio (the "stdio path").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from .runner import Call, Measurement, echo_tool_server, measure, print_table

ROOT = Path(__file__).resolve().parent.parent
SERVE = [sys.executable, "-m", "bench.http_upstream_bench", "serve"]
GATEWAY = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "none"]


async def _serve(json_response: bool) -> None:
    import uvicorn

    app = echo_tool_server().streamable_http_app(streamable_http_path="/mcp", json_response=json_response)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await task


def _start(json_response: bool) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen([*SERVE, *(["--json"] if json_response else [])], cwd=ROOT, stdout=subprocess.PIPE)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(b"PORT "):
        process.kill()
        raise SystemExit("the bench upstream did not start")
    return process, f"http://127.0.0.1:{int(line.split()[1])}/mcp"


def _call(client: Client) -> Call:
    async def call() -> Any:
        return await client.call_tool("echo", {"text": "hello"})

    return call


async def run(iterations: int, rounds: int) -> None:
    sse, sse_url = _start(False)
    plain, json_url = _start(True)
    stdio_upstream = [sys.executable, "-c", "from bench.http_upstream_bench import serve_stdio; serve_stdio()"]
    try:
        async with AsyncExitStack() as stack:

            async def stdio_client(argv: list[str]) -> Client:
                params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
                return await stack.enter_async_context(Client(params, mode="legacy", cache=None))

            direct = await stack.enter_async_context(Client(sse_url, mode="legacy", cache=None))
            scenarios = {
                "direct, Streamable HTTP (SSE)": _call(direct),
                "router gateway, --upstream (SSE)": _call(await stdio_client([*GATEWAY, "--upstream", sse_url])),
                "router gateway, --upstream (JSON)": _call(await stdio_client([*GATEWAY, "--upstream", json_url])),
                "router gateway, stdio upstream": _call(await stdio_client([*GATEWAY, "--", *stdio_upstream])),
            }
            results = await measure(scenarios, iterations, rounds)
        direct_us = results["direct, Streamable HTTP (SSE)"].per_call_us
        ratios = {f"{name} (x direct HTTP)": direct_us / m.per_call_us for name, m in results.items()}
        print_table(results, ratios)
    finally:
        for process in (sse, plain):
            process.kill()
            process.wait()


def _cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _round(clients: list[Client], calls: int) -> tuple[float, list[float]]:
    """`calls` calls from each client at once: the wall time and every call's latency (s)."""
    latencies: list[float] = []

    async def one(client: Client) -> None:
        for _ in range(calls):
            started = time.perf_counter()
            try:
                await client.call_tool("echo", {"text": "hello"})
            except MCPError as exc:  # a failed call is a finding, not noise: say what the gateway answered
                error = exc.error
                raise RuntimeError(
                    f"a call failed in a round of {len(clients)} client(s): {error.code} {error.message}, "
                    f"data {error.data!r}"
                ) from None
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with anyio.create_task_group() as tasks:
        for client in clients:
            tasks.start_soon(one, client)
    return time.perf_counter() - started, latencies


async def upstream_benchmarks(
    calls: int, rounds: int, counts: tuple[int, ...] = (1, 8, 32)
) -> tuple[dict[str, Measurement], dict[str, float]]:
    """Direct vs `proxy --listen --upstream URL` (and, for the CPU yardstick, the same gateway in front of the echo
    server on stdio) with 1, 8 and 32 HTTP clients: each target's best round (calls/s) and its median call; ratios
    x direct, ms added at the median, and the gateway's CPU per call (its /proc times over all rounds)."""
    from .gateway_bench import _listening

    upstream, url = _start(False)
    proxy = [*GATEWAY, "--listen", "127.0.0.1:0"]
    stdio_upstream = [sys.executable, "-c", "from bench.http_upstream_bench import serve_stdio; serve_stdio()"]
    results: dict[str, Measurement] = {}
    ratios: dict[str, float] = {}
    try:
        async with AsyncExitStack() as stack:
            pids: dict[str, dict[str, int]] = {"gateway": {}, "stdio gateway": {}}
            targets = {
                "direct": url,
                "gateway": await stack.enter_async_context(_listening([*proxy, "--upstream", url], pids["gateway"])),
                "stdio gateway": await stack.enter_async_context(
                    _listening([*proxy, "--", *stdio_upstream], pids["stdio gateway"])
                ),
            }
            for count in counts:
                per = max(1, calls // count)
                async with AsyncExitStack() as sessions:
                    clients = {
                        key: [
                            await sessions.enter_async_context(Client(target, mode="legacy", cache=None))
                            for _ in range(count)
                        ]
                        for key, target in targets.items()
                    }
                    for key in targets:  # warm-up
                        await _round(clients[key], max(2, per // 10))
                    best: dict[str, tuple[float, float]] = {}
                    cpu = dict.fromkeys(pids, 0.0)
                    for _ in range(rounds):
                        for key in targets:
                            before = _cpu_s(pids[key]["pid"]) if key in pids else 0.0
                            wall, latencies = await _round(clients[key], per)
                            if key in pids:
                                cpu[key] += _cpu_s(pids[key]["pid"]) - before
                            if key not in best or wall < best[key][0]:
                                best[key] = (wall, statistics.median(latencies))
                for key in targets:
                    wall, median = best[key]
                    name = f"--upstream bench, {count} client(s): {key}"
                    results[name] = Measurement(name, round(median * 1e6, 1), round(per * count / wall, 1))
                label = f"--upstream URL, {count} client(s)"
                direct, gateway = best["direct"], best["gateway"]
                ratios[f"{label} (x direct HTTP)"] = round(direct[0] / gateway[0], 3)
                ratios[f"{label}: ms added at the median"] = round((gateway[1] - direct[1]) * 1000, 3)
                per_call = {key: used * 1000 / (per * count * rounds) for key, used in cpu.items()}
                ratios[f"{label}: gateway CPU ms per call"] = round(per_call["gateway"], 3)
                if per_call["stdio gateway"]:
                    ratios[f"{label}: gateway CPU (x the same with a stdio upstream)"] = round(
                        per_call["gateway"] / per_call["stdio gateway"], 3
                    )
    finally:
        upstream.kill()
        upstream.wait()
    return results, ratios


def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        server = echo_tool_server()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", nargs="?", choices=["serve"])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", help="e.g. 1,8,32: the issue-31 rows (HTTP clients, direct vs --upstream)")
    parser.add_argument("--calls", type=int, default=400, help="with --clients: calls per round (all clients)")
    args = parser.parse_args()
    if args.mode == "serve":
        asyncio.run(_serve(args.json))
    elif args.clients:
        counts = tuple(int(part) for part in args.clients.split(","))
        results, ratios = anyio.run(upstream_benchmarks, args.calls, args.rounds, counts)
        print_table(results, ratios)
    else:
        anyio.run(run, args.iterations, args.rounds)


if __name__ == "__main__":
    main()
