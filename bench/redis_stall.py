"""A stalled Redis under traffic (issue 31): the latency of calls that need no Redis, and how limited calls fare.

One redis-server of its own, one `proxy --listen --redis` gateway whose policy limits the tool `sleep`, and
`--clients` HTTP sessions each looping ping, tools/list and a limited call (with `--vault`, also a call of the
unlimited tool `echo`, whose result the vault in Redis must re-pseudonymise; with `--guard`, also a call of
`later` whose arguments carry a secret, judged by the cross-boundary guard's taints in Redis). After `--warm`
seconds Redis is stopped with SIGSTOP for `--stall` seconds, then continued. Printed: p50/p99/max per kind
during the stall, how the calls that need Redis were answered, and the gateway's warning lines.

python -m bench.redis_stall [--clients 4] [--warm 2] [--stall 10] [--vault] [--guard] [--gateway-root DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.load import Call, call_loop, latency_ms, launch_gateway, open_session, stop_gateway

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
SECRET = "AKIAQ3EGUJZN5XKW7P2L"
"""A key-shaped secret the cross-boundary guard looks up (`--guard`)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answer(text: str) -> str:
    if '"result"' in text:
        return "passed"
    for reason in ("rate_limit_store_unavailable", "vault_store_unavailable", "guard_store_unavailable"):
        if reason in text:
            return f"refused: {reason}"
    return "other error"


async def _run(args: argparse.Namespace, work: Path) -> None:
    import httpx2

    port = _free_port()
    redis = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(work)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    (work / "policy.yaml").write_text(POLICY + ("cross_boundary_guard: true\n" if args.guard else ""))
    log_path = work / "gateway.log"
    root = Path(args.gateway_root).resolve()
    env = {**os.environ, "PYTHONPATH": str(root), "MCP_INTERCEPTORS_VAULT_KEY": "a-bench-key"}
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", str(work / "policy.yaml"),
            "--redis", f"redis://127.0.0.1:{port}/0", "--listen", "127.0.0.1:0", "--",
            sys.executable, "-m", "tests.servers.upstream_server"]  # fmt: skip
    await asyncio.sleep(0.5)
    gateway, url = launch_gateway(argv, log_path, cwd=root, env=env)
    try:
        stalled = asyncio.Event()
        over = asyncio.Event()
        calls: tuple[Call, ...] = (
            ("ping", "ping", None),
            ("tools/list", "tools/list", None),
            ("limited call", "tools/call", {"name": "sleep", "arguments": {"seconds": 0}}),
        )
        if args.vault:
            calls += (("vault call", "tools/call", {"name": "echo", "arguments": {"text": "hello"}}),)
        if args.guard:
            calls += (("guarded call", "tools/call", {"name": "later", "arguments": {"text": SECRET}}),)
        samples: dict[str, list[float]] = {kind: [] for kind, _, _ in calls}
        answers: dict[str, dict[str, int]] = {kind: {} for kind, _, _ in calls[2:]}

        def seen(kind: str, took: float, response: Any) -> None:
            if stalled.is_set() and not over.is_set():
                samples[kind].append(took)
                if kind in answers:
                    reason = _answer(response.text)
                    answers[kind][reason] = answers[kind].get(reason, 0) + 1

        async def client(http: Any) -> None:
            headers = await open_session(http, url, "b")
            await call_loop(http, url, headers, calls, over.is_set, seen)

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
        print(f"Redis stopped {args.stall:g} s, {args.clients} clients (each: {', '.join(samples)})")
        print(f"{'kind':<14}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
        for kind, values in samples.items():
            p50, p99, most = latency_ms(values)
            print(f"{kind:<14}{len(values):>6}{p50:>10.1f}{p99:>10.1f}{most:>10.1f}")
        for kind, counts in answers.items():
            print(f"{kind}s:", counts)
        print(f"warning/error lines while stalled: {len(warnings)}")
        for line in warnings[:12]:
            print("  " + line[:160])
    finally:
        if redis.poll() is None:
            redis.send_signal(signal.SIGCONT)
        stop_gateway(gateway)
        redis.kill()
        redis.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--warm", type=float, default=2.0)
    parser.add_argument("--stall", type=float, default=10.0)
    parser.add_argument("--vault", action="store_true", help="also loop an unlimited call through the vault in Redis")
    parser.add_argument(
        "--guard", action="store_true", help="also loop a call sending a secret, judged by the guard's taints in Redis"
    )
    parser.add_argument("--gateway-root", default=str(ROOT), help="the source tree the gateway runs from")
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (bash .ci/redis.sh installs it)")
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(_run(args, Path(work)))


if __name__ == "__main__":
    main()
