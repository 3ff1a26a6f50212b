"""A bounded load test on loopback: several router gateway processes (`proxy --router --listen`), many
concurrent Streamable HTTP clients, for a fixed time; calls/s, p50/p99, wrong or missing replies, RSS.

    python -m bench.load [--seconds 30] [--clients 50] [--gateways 2] [--policy standard] [--redis URL]

Each client holds one 2025-11-25 session on gateway `i % gateways` and calls `echo` in a loop with a text
of its own (`c<client>-<n>`); a reply whose text is not that one is wrong, an error or a transport failure
is missing. The upstream (`python -m bench.load upstream`) echoes the text back. RSS is each gateway's
VmRSS once it listens (before) and after the run. Default 5 s, for a quick look.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

UPSTREAM = [sys.executable, "-m", "bench.load", "upstream"]
ACCEPT = "application/json, text/event-stream"


def serve_upstream() -> None:
    """An echo tool server on stdio that answers with the text it was given."""
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema=schema)])

    server: Any = Server("bench-load-upstream", on_call_tool=call_tool, on_list_tools=list_tools)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def launch_gateway(
    argv: list[str], log: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start a `--listen 127.0.0.1:0` gateway (its stderr to `log`) and return it with the URL it announces."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if match := re.search(r"listening on (http://\S+)", log.read_text(errors="replace")):
            return process, match.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"a gateway did not start: {log.read_text(errors='replace')[-2000:]}")


def stop_gateway(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def start_gateway(policy: str, redis: str | None, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--router", "--policy", policy]
    argv += ["--listen", "127.0.0.1:0", "--max-sessions-per-principal", "1024"]
    if redis:
        argv += ["--redis", redis]
    return launch_gateway([*argv, "--", *UPSTREAM], log)


def _headers(session: str | None) -> dict[str, str]:
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    return headers


def _reply(response: Any) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        return dict(events[-1]) if events else {}
    return dict(response.json())


async def open_session(http: Any, url: str, name: str = "load") -> dict[str, str]:
    """A 2025-11-25 session (initialize, then initialized): the headers each of its requests carries."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}
    opened = await http.post(url, json=body, headers=_headers(None))
    headers = _headers(opened.headers["mcp-session-id"])
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


Call = tuple[str, str, dict[str, Any] | None]
"""(kind, method, params) of one request a client loop sends."""


async def call_loop(
    http: Any,
    url: str,
    headers: dict[str, str],
    calls: Sequence[Call],
    stop: Callable[[], bool],
    seen: Callable[[str, float, Any], None],
) -> None:
    """One client: sends `calls` in turn, one at a time, until `stop()`; `seen(kind, seconds, response)` each."""
    n = 0
    while not stop():
        for kind, method, params in calls:
            n += 1
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
            if params is not None:
                body["params"] = params
            started = time.perf_counter()
            response = await http.post(url, json=body, headers=headers)
            seen(kind, time.perf_counter() - started, response)


def percentile(values: Sequence[float], share: float) -> float:
    """The value below which `share` of `values` lie (nearest rank; NaN for none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def latency_ms(values: Sequence[float]) -> tuple[float, float, float]:
    """p50, p99 and max of latencies in seconds, in milliseconds."""
    return percentile(values, 0.5) * 1000, percentile(values, 0.99) * 1000, max(values, default=0) * 1000


async def run_load(urls: list[str], clients: int, seconds: float) -> dict[str, Any]:
    import httpx2

    latencies: list[float] = []
    wrong = missing = 0
    limits = httpx2.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
        sessions = [await open_session(http, urls[index % len(urls)]) for index in range(clients)]
        stop_at = time.monotonic() + seconds

        async def client(index: int) -> None:
            nonlocal wrong, missing
            url, headers, n = urls[index % len(urls)], sessions[index], 0
            while time.monotonic() < stop_at:
                n += 1
                text = f"c{index}-{n}"
                body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"text": text}}}  # fmt: skip
                started = time.perf_counter()
                try:
                    reply = _reply(await http.post(url, json=body, headers=headers))
                except Exception:
                    missing += 1
                    continue
                latencies.append(time.perf_counter() - started)
                content = (reply.get("result") or {}).get("content") or [{}]
                if "result" not in reply or reply.get("id") != n:
                    missing += 1
                elif content[0].get("text") != text:
                    wrong += 1

        started = time.monotonic()
        async with anyio.create_task_group() as tasks:
            for index in range(clients):
                tasks.start_soon(client, index)
        elapsed = time.monotonic() - started
    latencies.sort()
    count = len(latencies)
    return {
        "calls": count,
        "seconds": round(elapsed, 1),
        "calls_per_s": round(count / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2) if count else None,
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2) if count else None,
        "wrong": wrong,
        "missing": missing,
    }


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["upstream"]:
        serve_upstream()
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="how long the clients call (default 5; 30 for the record)"
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--gateways", type=int, default=2)
    parser.add_argument("--policy", default="standard")
    parser.add_argument("--redis", metavar="URL", help="give every gateway --redis URL (shared limits, vault, audit)")
    args = parser.parse_args(args_list)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        started = [start_gateway(args.policy, args.redis, Path(tmp) / f"g{i}.log") for i in range(args.gateways)]
        try:
            urls = [url for _, url in started]

            async def measured() -> dict[str, Any]:
                return await run_load(urls, args.clients, args.seconds)

            before = [rss_kib(process.pid) for process, _ in started]
            result = anyio.run(measured)
            after = [rss_kib(process.pid) for process, _ in started]
        finally:
            for process, _ in started:
                stop_gateway(process)
    result |= {"gateways": args.gateways, "clients": args.clients, "policy": args.policy,
               "rss_kib_before": before, "rss_kib_after": after}  # fmt: skip
    print(json.dumps(result, indent=2))
    return 0 if result["wrong"] == 0 and result["missing"] == 0 and result["calls"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
