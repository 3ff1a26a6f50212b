"""Fairness under a notification flood (issue 31): one session's call streams `--notifications` progress
notifications while another session calls a tool in a loop; printed: the other session's latency (p50, p99,
max) while the flood runs, and how long the flood took.

The upstream (`python -m bench.flood serve`) writes raw JSON lines from threads: the flood of a `flood` call
goes out as fast as the pipe takes it, while `echo` calls are answered at once in between, so the other
session's replies are interleaved with the flood in the upstream's output, as with a real server.

python -m bench.flood [--notifications 100000] [--policy none|standard] [--alone] [--gateway-root DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.load import Call, call_loop, latency_ms, launch_gateway, open_session, stop_gateway

ROOT = Path(__file__).resolve().parent.parent


def serve() -> None:
    """The raw upstream: initialize, tools/list, ping, `echo` (answered at once) and `flood` (a thread)."""
    lock = threading.Lock()
    out = sys.stdout.buffer

    def send(message: dict[str, Any]) -> None:
        data = json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode() + b"\n"
        with lock:
            out.write(data)
            out.flush()

    def flood(request_id: Any, token: Any, count: int) -> None:
        for step in range(1, count + 1):
            if token is not None:
                params = {"progressToken": token, "progress": step, "total": count, "message": f"step {step}"}
                send({"method": "notifications/progress", "params": params})
        send({"id": request_id, "result": {"content": [{"type": "text", "text": f"flooded {count}"}]}})

    tools = [
        {"name": "echo", "inputSchema": {"type": "object"}},
        {"name": "flood", "inputSchema": {"type": "object"}},
    ]
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if request_id is None or method is None:
            continue
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "flood", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "ping":
            result = {}
        elif method == "tools/call" and params.get("name") == "flood":
            token = (params.get("_meta") or {}).get("progressToken")
            count = int((params.get("arguments") or {}).get("count", 1000))
            threading.Thread(target=flood, args=(request_id, token, count), daemon=True).start()
            continue
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": json.dumps(params.get("arguments"))}]}
        else:
            send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"id": request_id, "result": result})


async def _run(args: argparse.Namespace, work: Path) -> None:
    import httpx2

    root = Path(args.gateway_root).resolve()
    env = {**os.environ, "PYTHONPATH": str(root)}
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", args.policy, "--listen", "127.0.0.1:0",
            "--", sys.executable, str(Path(__file__).resolve()), "serve"]  # fmt: skip
    gateway, url = launch_gateway(argv, work / "gateway.log", cwd=root, env=env)
    try:
        async with httpx2.AsyncClient(timeout=300) as flooder, httpx2.AsyncClient(timeout=300) as other:
            flood_headers = await open_session(flooder, url)
            other_headers = await open_session(other, url)
            done = asyncio.Event()
            progress = 0

            async def flood() -> float:
                nonlocal progress
                params = {"name": "flood", "arguments": {"count": args.notifications}, "_meta": {"progressToken": 1}}
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
                started = time.perf_counter()
                async with flooder.stream("POST", url, json=body, headers=flood_headers) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: ") and "notifications/progress" in line:
                            progress += 1
                took = time.perf_counter() - started
                done.set()
                return took

            latencies: list[float] = []
            echo: tuple[Call, ...] = (("echo", "tools/call", {"name": "echo", "arguments": {"n": 1}}),)
            flooding = asyncio.create_task(flood())
            await asyncio.sleep(0.2)  # the flood is under way
            if not args.alone:
                await call_loop(other, url, other_headers, echo, done.is_set, lambda _, s, __: latencies.append(s))
            took = await flooding
        flood_line = f"flood: {args.notifications} progress notifications ({progress} received) in {took:.1f} s"
        print(f"{flood_line}, policy {args.policy}")
        p50, p99, most = latency_ms(latencies)
        print(f"other session meanwhile: {len(latencies)} calls, p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {most:.1f} ms")
    finally:
        stop_gateway(gateway)


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notifications", type=int, default=100_000)
    parser.add_argument("--policy", default="none")
    parser.add_argument("--alone", action="store_true", help="no other session: the flood's own speed")
    parser.add_argument("--gateway-root", default=str(ROOT), help="the source tree the gateway runs from")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(_run(args, Path(work)))


if __name__ == "__main__":
    main()
