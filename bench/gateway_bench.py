"""Gateway throughput: tools/call over stdio straight to an upstream server vs through `mcp-interceptors proxy`.

Both clients run against real subprocesses in the same run, interleaved in rounds (`bench.runner.measure`):
the upstream is a low-level SDK echo server on the SDK's own stdio transport (what a typical server uses),
and the gateway runs it with an empty chain, so the ratio is the cost of the extra hop alone.

`python -m bench.gateway_bench` prints the numbers; `python -m bench.gateway_bench upstream` is the upstream.
"""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from .runner import Call, Measurement, echo_tool_server, measure, print_table

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = [sys.executable, "-m", "bench.gateway_bench", "upstream"]
PROXY = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "none", "--", *UPSTREAM]
PROXY_STANDARD = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "standard", "--", *UPSTREAM]
ARGUMENTS = {"text": "hello", "count": 3}
LOGGING_UPSTREAM = [sys.executable, "-m", "bench.gateway_bench", "upstream-logging"]
RATIO = "gateway throughput (x direct stdio)"
LEGACY_RATIO = "gateway throughput, 2025-11-25 clients (x direct stdio)"


def _client(argv: list[str], mode: str) -> Client:
    return Client(StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT)), mode=mode, cache=None)


async def gateway_benchmarks(iterations: int, rounds: int) -> tuple[dict[str, Measurement], dict[str, float]]:
    """calls/s direct vs through the proxy, for 2026-07-28 (the default) and 2025-11-25 clients."""
    names = {
        ("direct", "auto"): "tools/call direct to upstream (stdio)",
        ("proxy", "auto"): "tools/call through proxy (stdio, empty chain)",
        ("direct", "legacy"): "tools/call direct to upstream (stdio, 2025-11-25)",
        ("proxy", "legacy"): "tools/call through proxy (stdio, empty chain, 2025-11-25)",
        ("standard", "auto"): "tools/call through proxy (stdio, standard policy + transforms)",
    }
    argv = {"direct": UPSTREAM, "proxy": PROXY, "standard": PROXY_STANDARD}
    async with AsyncExitStack() as stack:
        scenarios: dict[str, Call] = {}
        for (path, mode), name in names.items():
            client = await stack.enter_async_context(_client(argv[path], mode))
            scenarios[name] = _call(client)
        results = await measure(scenarios, iterations, rounds)
    ratios = {
        RATIO: _ratio(results, names[("proxy", "auto")], names[("direct", "auto")]),
        LEGACY_RATIO: _ratio(results, names[("proxy", "legacy")], names[("direct", "legacy")]),
        "gateway with the standard policy (x direct stdio)": _ratio(
            results, names[("standard", "auto")], names[("direct", "auto")]
        ),
    }
    return results, ratios


async def router_benchmarks(iterations: int, rounds: int) -> tuple[dict[str, Measurement], dict[str, float]]:
    """The issue-14 targets: stdio, an upstream that declares `logging`, 2025-11-25 clients; the old gateway,
    the router gateway (`--router`) and a do-nothing line forwarder (the floor), all against direct."""
    proxy = [sys.executable, "-m", "integrations.cli", "proxy"]
    argv = {
        "direct": LOGGING_UPSTREAM,
        "floor": [sys.executable, "-m", "bench.line_forwarder", "--", *LOGGING_UPSTREAM],
        "old none": [*proxy, "--policy", "none", "--", *LOGGING_UPSTREAM],
        "router none": [*proxy, "--router", "--policy", "none", "--", *LOGGING_UPSTREAM],
        "old standard": [*proxy, "--policy", "standard", "--", *LOGGING_UPSTREAM],
        "router standard": [*proxy, "--router", "--policy", "standard", "--", *LOGGING_UPSTREAM],
    }
    names = {key: f"tools/call, logging upstream, 2025-11-25: {key}" for key in argv}
    async with AsyncExitStack() as stack:
        scenarios: dict[str, Call] = {}
        for key, name in names.items():
            client = await stack.enter_async_context(_client(argv[key], "legacy"))
            scenarios[name] = _call(client)
        results = await measure(scenarios, iterations, rounds)
    ratios = {
        f"{key} (x direct, logging upstream, 2025-11-25)": _ratio(results, names[key], names["direct"])
        for key in argv
        if key != "direct"
    }
    return results, ratios


def _call(client: Client) -> Call:
    async def call() -> Any:
        return await client.session.call_tool("echo", ARGUMENTS)

    return call


def _ratio(results: dict[str, Measurement], proxied: str, direct: str) -> float:
    return round(results[proxied].calls_per_s / results[direct].calls_per_s, 3)


async def _serve_upstream(logging: bool = False) -> None:
    import warnings

    from mcp import types
    from mcp.server.stdio import stdio_server

    server = echo_tool_server("bench-upstream")
    if logging:  # most real servers declare `logging`: it changes what a gateway must do per call

        async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
            return types.EmptyResult()

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str]) -> int:
    if argv[:1] in (["upstream"], ["upstream-logging"]):
        anyio.run(_serve_upstream, argv[0] == "upstream-logging")
        return 0
    quick = "--quick" in argv
    iterations, rounds = (200, 3) if quick else (1000, 5)
    if "--router" in argv:
        results, ratios = anyio.run(router_benchmarks, iterations, rounds)
        print_table(results, ratios)
        return 0

    async def run() -> tuple[dict[str, Measurement], dict[str, float]]:
        return await gateway_benchmarks(iterations, rounds)

    results, ratios = anyio.run(run)
    print_table(results, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
