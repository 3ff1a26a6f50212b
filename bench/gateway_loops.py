"""`proxy --loop asyncio` against `proxy --loop uvloop`: the gateway process's own CPU per `tools/call`, over
real pipes, in one run.

A plain blocking client (`bench.stdio_pipe.Peer`) drives each gateway sequentially and with 16 calls in flight;
the upstream is a raw-JSON echo server (`python -m bench.gateway_loops upstream`: no SDK, so the pipe on both
sides of the gateway is as busy as the gateway lets it be). The gateway's CPU is read from /proc/PID/stat
(utime + stime) over all the rounds, so the machine's load moves it little; wall time is shown for what it is.

`python -m bench.gateway_loops [--count N] [--rounds R] [--policy none|standard ...]`
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import orjson

from .stdio_pipe import Peer

UPSTREAM = [sys.executable, "-m", "bench.gateway_loops", "upstream"]
_ANSWERS: dict[str, Any] = {
    "initialize": {
        "capabilities": {"logging": {}, "tools": {"listChanged": False}},
        "protocolVersion": "2025-11-25",
        "serverInfo": {"name": "bench-upstream", "version": "0"},
    },
    "tools/list": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]},
    "tools/call": {"content": [{"type": "text", "text": "ok"}], "isError": False},
    "ping": {},
    "logging/setLevel": {},
}
_CALL = {"name": "echo", "arguments": {"text": "hello", "count": 3}}
_CLIENT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}


def _serve_upstream() -> None:
    """The raw-JSON upstream: each request answered at once from `_ANSWERS` (else -32601)."""
    read, out = sys.stdin.buffer.readline, sys.stdout.buffer
    while line := read():
        message = orjson.loads(line)
        if "id" not in message or "method" not in message:
            continue
        answer = _ANSWERS.get(message["method"])
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if answer is None:
            reply["error"] = {"code": -32601, "message": "method not found"}
        else:
            reply["result"] = answer
        out.write(orjson.dumps(reply) + b"\n")
        out.flush()


def _gateway(policy: str, loop: str) -> Peer:
    command = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", policy, "--loop", loop, "--", *UPSTREAM]
    peer = Peer(command, stderr=subprocess.DEVNULL)
    peer.send("initialize", _CLIENT)
    peer.receive()
    peer.send("notifications/initialized", {}, notify=True)
    return peer


def measure(count: int, rounds: int, policies: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """Per call (best round's wall us, gateway CPU us over all the rounds), per policy, loop and calls in flight."""
    from interceptors.loops import uvloop_available

    loops = ("asyncio", "uvloop") if uvloop_available() else ("asyncio",)
    gateways = {(policy, loop): _gateway(policy, loop) for policy in policies for loop in loops}
    rows = {
        f"--policy {policy} --loop {loop}, {in_flight} in flight": (peer, in_flight)
        for (policy, loop), peer in gateways.items()
        for in_flight in (1, 16)
    }
    wall = dict.fromkeys(rows, float("inf"))
    cpu = dict.fromkeys(rows, 0.0)
    try:
        for peer, in_flight in rows.values():  # warm-up
            peer.run(max(100, count // 10), in_flight, "tools/call", _CALL)
        for _ in range(rounds):
            for name, (peer, in_flight) in rows.items():
                spent, used = peer.run(count, in_flight, "tools/call", _CALL)
                wall[name] = min(wall[name], spent / count * 1e6)
                cpu[name] += used
    finally:
        for peer in gateways.values():
            peer.close()
    return {name: (wall[name], cpu[name] / (count * rounds) * 1e6) for name in rows}


def main() -> None:
    if sys.argv[1:2] == ["upstream"]:
        _serve_upstream()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policy", action="append", choices=("none", "standard"))
    args = parser.parse_args()
    policies = tuple(args.policy or ("none", "standard"))
    results = measure(args.count, args.rounds, policies)
    print(f"{'tools/call through proxy (stdio)':<52}{'wall us':>10}{'CPU us':>10}")
    for name, (spent, used) in results.items():
        print(f"{name:<52}{spent:>10.1f}{used:>10.1f}")
    for policy in policies:
        for in_flight in (1, 16):
            slow = results.get(f"--policy {policy} --loop asyncio, {in_flight} in flight")
            fast = results.get(f"--policy {policy} --loop uvloop, {in_flight} in flight")
            if slow and fast:
                name = f"--policy {policy}, {in_flight} in flight: uvloop (x asyncio)"
                print(f"{name:<52}{fast[0] / slow[0]:>10.3f}{fast[1] / slow[1]:>10.3f}")


if __name__ == "__main__":
    main()
