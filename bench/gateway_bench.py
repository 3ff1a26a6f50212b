"""Gateway throughput: tools/call over stdio straight to an upstream server vs through `mcp-interceptors proxy`.

Both clients run against real subprocesses in the same run, interleaved in rounds (`bench.runner.measure`):
the upstream is a low-level SDK echo server on the SDK's own stdio transport (what a typical server uses),
and the gateway runs it with an empty chain, so the ratio is the cost of the extra hop alone.

`python -m bench.gateway_bench` prints the numbers; `python -m bench.gateway_bench upstream` is the upstream.
`--router`: the stdio targets of issue 14 (an upstream that declares `logging`, with a do-nothing line
forwarder as the floor); `--http`: its Streamable HTTP targets (`proxy --listen` against the same echo
server served by the SDK over HTTP; `upstream-http` is that server).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from .runner import Call, Measurement, echo_tool_server, measure, print_table

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = [sys.executable, "-m", "bench.gateway_bench", "upstream"]
PROXY = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "none", "--", *UPSTREAM]
PROXY_STANDARD = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "standard", "--", *UPSTREAM]
FLOOR = [sys.executable, "-m", "bench.line_forwarder", "--", *UPSTREAM]
ARGUMENTS = {"text": "hello", "count": 3}
UPSTREAM_HTTP = [sys.executable, "-m", "bench.gateway_bench", "upstream-http"]
LOGGING_UPSTREAM = [sys.executable, "-m", "bench.gateway_bench", "upstream-logging"]
RATIO = "gateway throughput (x direct stdio)"
LEGACY_RATIO = "gateway throughput, 2025-11-25 clients (x direct stdio)"


def _client(argv: list[str], mode: str) -> Client:
    return Client(StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT)), mode=mode, cache=None)


async def gateway_benchmarks(iterations: int, rounds: int) -> tuple[dict[str, Measurement], dict[str, float]]:
    """calls/s direct vs through the proxy (the router gateway), for 2026-07-28 (the default) and 2025-11-25
    clients, and through a do-nothing line forwarder: the floor any gateway process hop costs."""
    names = {
        ("direct", "auto"): "tools/call direct to upstream (stdio)",
        ("proxy", "auto"): "tools/call through proxy (stdio, empty chain)",
        ("direct", "legacy"): "tools/call direct to upstream (stdio, 2025-11-25)",
        ("proxy", "legacy"): "tools/call through proxy (stdio, empty chain, 2025-11-25)",
        ("standard", "auto"): "tools/call through proxy (stdio, standard policy + transforms)",
        ("floor", "auto"): "tools/call through a do-nothing line forwarder (stdio, the floor)",
    }
    argv = {"direct": UPSTREAM, "proxy": PROXY, "standard": PROXY_STANDARD, "floor": FLOOR}
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
        "line forwarder, the floor (x direct stdio)": _ratio(
            results, names[("floor", "auto")], names[("direct", "auto")]
        ),
    }
    return results, ratios


async def router_benchmarks(iterations: int, rounds: int) -> tuple[dict[str, Measurement], dict[str, float]]:
    """The issue-14 targets: stdio, an upstream that declares `logging`, 2025-11-25 clients; the gateway with
    `--policy none` and `standard`, and a do-nothing line forwarder (the floor), all against direct."""
    proxy = [sys.executable, "-m", "integrations.cli", "proxy"]
    argv = {
        "direct": LOGGING_UPSTREAM,
        "floor": [sys.executable, "-m", "bench.line_forwarder", "--", *LOGGING_UPSTREAM],
        "gateway none": [*proxy, "--policy", "none", "--", *LOGGING_UPSTREAM],
        "gateway standard": [*proxy, "--policy", "standard", "--", *LOGGING_UPSTREAM],
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


@asynccontextmanager
async def _listening(argv: list[str], pid: dict[str, int] | None = None) -> AsyncIterator[str]:
    """A server subprocess that announces `listening on http://...` on stderr; stopped with SIGTERM and reaped
    (its process id in `pid["pid"]` when given)."""
    process = subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if pid is not None:
        pid["pid"] = process.pid
    try:
        assert process.stderr is not None
        url = None
        for _ in range(50):
            line = (await anyio.to_thread.run_sync(process.stderr.readline)).decode()
            if "listening on http://" in line:
                url = line.split("listening on ", 1)[1].split()[0]
                break
        if url is None:
            raise RuntimeError(f"{argv[2:5]} did not start listening")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


async def http_benchmarks(iterations: int, rounds: int) -> tuple[dict[str, Measurement], dict[str, float]]:
    """The issue-14 HTTP targets: the echo upstream served directly over Streamable HTTP by the SDK vs the same
    server (on stdio) behind `proxy --policy none --listen`."""
    proxy = [sys.executable, "-m", "integrations.cli", "proxy"]
    listen = ["--listen", "127.0.0.1:0"]
    argv = {
        "direct": [*UPSTREAM_HTTP],
        "direct nodelay": [*UPSTREAM_HTTP, "--nodelay"],
        "gateway none": [*proxy, "--policy", "none", *listen, "--", *UPSTREAM],
    }
    modes = {"legacy": "2025-11-25", "auto": "2026-07-28"}
    names = {(key, mode): f"tools/call over HTTP, {label}: {key}" for key in argv for mode, label in modes.items()}
    async with AsyncExitStack() as stack:
        urls = {key: await stack.enter_async_context(_listening(command)) for key, command in argv.items()}
        scenarios: dict[str, Call] = {}
        for (key, mode), name in names.items():
            client = await stack.enter_async_context(Client(urls[key], mode=mode, cache=None))
            scenarios[name] = _call(client)
            if mode == "legacy":  # the request the issue timed at ~42 ms through the old SDK-based gateway
                scenarios[f"ping over HTTP, 2025-11-25: {key}"] = client.session.send_ping
        results = await measure(scenarios, iterations, rounds)
    ratios: dict[str, float] = {}
    for mode, label in modes.items():
        for base in ("direct", "direct nodelay"):
            direct = results[names[(base, mode)]]
            proxied = results[names[("gateway none", mode)]]
            ratios[f"gateway none (x {base}, {label})"] = _ratio(results, proxied.name, direct.name)
            added = round((proxied.per_call_us - direct.per_call_us) / 1000, 3)
            ratios[f"gateway none: ms added per call vs {base} ({label})"] = added
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


async def _serve_upstream_http(nodelay: bool) -> None:
    """The bench upstream on the SDK's own Streamable HTTP (uvicorn), on a free loopback port; `nodelay` gives
    its connections TCP_NODELAY (uvicorn leaves Nagle on, which costs an SSE reply ~40 ms), as a fair floor."""
    import socket

    import uvicorn

    from integrations.gateway.downstream_http import NoDelayProtocol

    app = echo_tool_server("bench-upstream").streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    http: Any = NoDelayProtocol if nodelay else "auto"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", http=http))
    print(f"bench upstream: listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    await server.serve(sockets=[sock])


def main(argv: list[str]) -> int:
    if argv[:1] in (["upstream"], ["upstream-logging"]):
        anyio.run(_serve_upstream, argv[0] == "upstream-logging")
        return 0
    if argv[:1] == ["upstream-http"]:
        anyio.run(_serve_upstream_http, "--nodelay" in argv)
        return 0
    quick = "--quick" in argv
    iterations, rounds = (200, 3) if quick else (1000, 7)
    if "--http" in argv:
        results, ratios = anyio.run(http_benchmarks, iterations // 2, rounds)
        print_table(results, ratios)
        return 0
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
