"""`interceptor/invoke` over a stdio pipe against a raw JSON echo over the same pipe, in one run.

`python -m bench.stdio_pipe [--count N] [--handler inline|async]`: a plain blocking client (so its own cost
is small and the same for both) drives each server sequentially and with 16 requests in flight, and reports
wall time and the server's CPU time (utime + stime from /proc/PID/stat) per request. On a loaded machine the
CPU per request is the steady measure; wall time is shown for what it is. `--cpu N` runs this client and every
server on CPU N alone: a sequential round trip is then two context switches on one CPU, not a wake-up on whichever
CPU is idle, and its wall time repeats from run to run on a shared machine. The interceptor server runs on
asyncio's event loop and, when uvloop is installed (the `fast` extra), on uvloop's too, in the same run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

import orjson

_PAYLOAD = {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hello", "count": 3}}}
_INVOKE = {"name": "bench/validator-0", "event": "tools/call", "phase": "request", "payload": _PAYLOAD}
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of the line)


class Peer:
    """A server process on two pipes, spoken to line by line."""

    def __init__(self, command: list[str], stderr: int | None = None) -> None:
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, bufsize=0
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in = self.process.stdin
        self._out = self.process.stdout
        self._buffer = b""
        self._next_id = 0

    def send(self, method: str, params: dict[str, Any], notify: bool = False) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self._next_id += 1
            message["id"] = self._next_id
        self._in.write(orjson.dumps(message) + b"\n")

    def receive(self) -> dict[str, Any]:
        """The next reply (a notification or a request from the server is read and passed over)."""
        while True:
            while b"\n" not in self._buffer:
                chunk = os.read(self._out.fileno(), 1 << 16)
                if not chunk:
                    raise EOFError("the server closed its output")
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\n", 1)
            reply: dict[str, Any] = orjson.loads(line)
            if "method" not in reply:
                break
        if "error" in reply:
            raise RuntimeError(f"error reply: {reply['error']}")
        return reply

    def run(self, count: int, in_flight: int, method: str, params: dict[str, Any]) -> tuple[float, float]:
        """(wall s, server CPU s) for `count` requests with `in_flight` outstanding at a time."""
        cpu, started = cpu_seconds(self.process.pid), time.perf_counter()
        for _ in range(in_flight):
            self.send(method, params)
        for done in range(count):
            self.receive()
            if done + in_flight < count:
                self.send(method, params)
        return time.perf_counter() - started, cpu_seconds(self.process.pid) - cpu

    def close(self) -> None:
        self._in.close()
        self.process.wait(10)


def _interceptor_server(handler: str, loop: str) -> Peer:
    inline = ["--inline"] if handler == "inline" else []
    peer = Peer([sys.executable, "-m", "bench.stdio_server", *inline, "--loop", loop])
    peer.send(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
    )
    peer.receive()
    peer.send("notifications/initialized", {}, notify=True)
    return peer


def _loops() -> tuple[str, ...]:
    from interceptors.loops import uvloop_available

    return ("asyncio", "uvloop") if uvloop_available() else ("asyncio",)


def measure(count: int, handler: str, rounds: int = 3) -> dict[str, tuple[float, float]]:
    """Per request (wall us, server CPU us): the best round's wall time, and the CPU time over all the rounds
    (the kernel counts it in 10 ms ticks: one round is too short to read it alone)."""
    echo = Peer([sys.executable, "-m", "bench.pipe_echo"])
    loop_echo = Peer([sys.executable, "-m", "bench.pipe_echo", "--asyncio"])
    servers = {loop: _interceptor_server(handler, loop) for loop in _loops()}
    rows = {
        "raw JSON echo, 1 in flight": (echo, 1, "bench/echo"),
        "raw JSON echo, 16 in flight": (echo, 16, "bench/echo"),
        "raw JSON echo (asyncio), 1 in flight": (loop_echo, 1, "bench/echo"),
        "raw JSON echo (asyncio), 16 in flight": (loop_echo, 16, "bench/echo"),
    }
    for loop, serve in servers.items():
        rows[f"serve interceptor/invoke ({loop}), 1 in flight"] = (serve, 1, "interceptor/invoke")
        rows[f"serve interceptor/invoke ({loop}), 16 in flight"] = (serve, 16, "interceptor/invoke")
    best: dict[str, tuple[float, float]] = {}
    cpu_total = dict.fromkeys(rows, 0.0)
    try:
        for peer, in_flight, method in rows.values():  # warm-up
            peer.run(max(50, count // 10), in_flight, method, _INVOKE)
        for _ in range(rounds):
            for name, (peer, in_flight, method) in rows.items():
                wall, cpu = peer.run(count, in_flight, method, _INVOKE)
                cpu_total[name] += cpu
                best[name] = (min(wall / count * 1e6, best.get(name, (float("inf"),))[0]), 0.0)
    finally:
        echo.close()
        loop_echo.close()
        for serve in servers.values():
            serve.close()
    return {name: (wall, cpu_total[name] / (count * rounds) * 1e6) for name, (wall, _) in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--handler", choices=("inline", "async"), default="inline")
    parser.add_argument("--cpu", type=int, default=None, help="run the client and the servers on this CPU alone")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})  # (the servers inherit it)
    best = measure(args.count, args.handler)
    print(f"{'row (' + args.handler + ' no-op validator)':<44}{'wall us':>10}{'CPU us':>10}")
    for name, (wall, cpu) in best.items():
        print(f"{name:<44}{wall:>10.1f}{cpu:>10.1f}")
    for loop in _loops():
        seq = best[f"serve interceptor/invoke ({loop}), 1 in flight"]
        par = best[f"serve interceptor/invoke ({loop}), 16 in flight"]
        for label, raw in (("raw echo", best["raw JSON echo, 1 in flight"]),
                           ("asyncio echo", best["raw JSON echo (asyncio), 1 in flight"])):  # fmt: skip
            name = f"{loop}: sequential (x {label}), wall / CPU"
            print(f"{name:<44}{raw[0] / seq[0]:>10.2f}{raw[1] / seq[1]:>10.2f}")
        name = f"{loop}: 16 in flight (x sequential), wall / CPU"
        print(f"{name:<44}{seq[0] / par[0]:>10.2f}{seq[1] / par[1]:>10.2f}")


if __name__ == "__main__":
    main()
