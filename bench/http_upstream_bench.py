"""The router gateway's HTTP upstream hop: sequential tools/call, a 2025-11-25 client, in one run.

Scenarios, interleaved in rounds (`bench.runner.measure`): the SDK client straight to an SDK echo server
over Streamable HTTP; the same client on stdio to `proxy --policy none --upstream URL` in front
of that server (SSE replies, and a second server answering plain JSON); and the gateway in front of the
same echo server on stdio, for the hop's cost. The servers bind 127.0.0.1 with TCP_NODELAY.

python -m bench.http_upstream_bench [--iterations N] [--rounds R]
`python -m bench.http_upstream_bench serve [--json]` is the upstream (prints `PORT n`).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from .runner import Call, echo_tool_server, measure, print_table

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
    args = parser.parse_args()
    if args.mode == "serve":
        asyncio.run(_serve(args.json))
    else:
        anyio.run(run, args.iterations, args.rounds)


if __name__ == "__main__":
    main()
