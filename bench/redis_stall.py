"""A stalled Redis under traffic (issue 31): the latency of calls that need no Redis, and how limited calls fare.

One redis-server of its own, one `proxy --listen --redis` gateway whose policy limits the tool `sleep`, and
`--clients` HTTP sessions each looping ping, tools/list and a limited call (with `--vault`, also a call of the
unlimited tool `echo`, whose result the vault in Redis must re-pseudonymise). After `--warm` seconds Redis is
stopped with SIGSTOP for `--stall` seconds, then continued. Printed: p50/p99/max per kind during the stall,
how the limited calls were answered, and the gateway's warning lines.

python -m bench.redis_stall [--clients 4] [--warm 2] [--stall 10] [--vault] [--gateway-root DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLICY = """\
name: stalled
extends: open
hide_denied: false
rate_limits:
  - {rate: 1000000, per: minute, burst: 1000000, tools: [sleep], scope: global}
vault:
  key_env: MCP_INTERCEPTORS_VAULT_KEY
"""
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


async def _run(args: argparse.Namespace, work: Path) -> None:
    import httpx2

    port = _free_port()
    redis = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(work)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    (work / "policy.yaml").write_text(POLICY)
    log_path = work / "gateway.log"
    root = Path(args.gateway_root).resolve()
    env = {**os.environ, "PYTHONPATH": str(root), "MCP_INTERCEPTORS_VAULT_KEY": "a-bench-key"}
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", str(work / "policy.yaml"),
            "--redis", f"redis://127.0.0.1:{port}/0", "--listen", "127.0.0.1:0", "--",
            sys.executable, "-m", "tests.servers.upstream_server"]  # fmt: skip
    await asyncio.sleep(0.5)
    with log_path.open("wb") as log:
        gateway = subprocess.Popen(argv, cwd=root, env=env, stdin=subprocess.DEVNULL, stderr=log)
    try:
        url = ""
        for _ in range(600):
            if match := re.search(r"listening on (http://\S+)", log_path.read_text(errors="replace")):
                url = match.group(1)
                break
            await asyncio.sleep(0.05)
        if not url:
            raise SystemExit("the gateway did not start: " + log_path.read_text(errors="replace")[-2000:])
        stalled = asyncio.Event()
        over = asyncio.Event()
        samples: dict[str, list[float]] = {"ping": [], "tools/list": [], "limited call": []}
        if args.vault:
            samples["vault call"] = []
        answers: dict[str, dict[str, int]] = {"limited call": {}, "vault call": {}}

        async def client(http: Any) -> None:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
            opened = await http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
                                     headers=HEADERS)  # fmt: skip
            headers = {
                **HEADERS,
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
            n = 0
            calls: tuple[tuple[str, str, dict[str, Any] | None], ...] = (
                ("ping", "ping", None),
                ("tools/list", "tools/list", None),
                ("limited call", "tools/call", {"name": "sleep", "arguments": {"seconds": 0}}),
            )
            if args.vault:
                calls += (("vault call", "tools/call", {"name": "echo", "arguments": {"text": "hello"}}),)
            while not over.is_set():
                for kind, method, params in calls:
                    n += 1
                    body: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
                    if params is not None:
                        body["params"] = params
                    started = time.perf_counter()
                    response = await http.post(url, json=body, headers=headers)
                    took = time.perf_counter() - started
                    if stalled.is_set() and not over.is_set():
                        samples[kind].append(took)
                        if kind in answers:
                            text = response.text
                            reason = (
                                "refused: store unavailable" if "rate_limit_store_unavailable" in text
                                else "refused: vault unavailable" if "vault_store_unavailable" in text
                                else "passed" if '"result"' in text else "other error"
                            )  # fmt: skip
                            answers[kind][reason] = answers[kind].get(reason, 0) + 1

        async with httpx2.AsyncClient(timeout=60) as http:
            tasks = [asyncio.create_task(client(http)) for _ in range(args.clients)]
            await asyncio.sleep(args.warm)
            lines_before = len(log_path.read_text(errors="replace").splitlines())
            redis.send_signal(signal.SIGSTOP)
            stalled.set()
            await asyncio.sleep(args.stall)
            over.set()
            redis.send_signal(signal.SIGCONT)
            await asyncio.gather(*tasks)
        lines = log_path.read_text(errors="replace").splitlines()[lines_before:]
        warnings = [line for line in lines if " WARNING " in line or " ERROR " in line]
        each = "ping, tools/list, limited call" + (", vault call" if args.vault else "")
        print(f"Redis stopped {args.stall:g} s, {args.clients} clients (each: {each})")
        print(f"{'kind':<14}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
        for kind, values in samples.items():
            p50, p99 = _percentile(values, 0.5) * 1000, _percentile(values, 0.99) * 1000
            print(f"{kind:<14}{len(values):>6}{p50:>10.1f}{p99:>10.1f}{max(values, default=0) * 1000:>10.1f}")
        print("limited calls:", answers["limited call"])
        if args.vault:
            print("vault calls:", answers["vault call"])
        print(f"warning/error lines while stalled: {len(warnings)}")
        for line in warnings[:12]:
            print("  " + line[:160])
    finally:
        if redis.poll() is None:
            redis.send_signal(signal.SIGCONT)
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gateway.kill()
        redis.kill()
        redis.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--warm", type=float, default=2.0)
    parser.add_argument("--stall", type=float, default=10.0)
    parser.add_argument("--vault", action="store_true", help="also loop an unlimited call through the vault in Redis")
    parser.add_argument("--gateway-root", default=str(ROOT), help="the source tree the gateway runs from")
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (bash .ci/redis.sh installs it)")
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(_run(args, Path(work)))


if __name__ == "__main__":
    main()
