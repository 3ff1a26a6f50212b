"""Instructions the `proxy` process executes per `tools/call`, counted by valgrind's callgrind: a number the
machine's load does not move, for the real process (C code included: orjson, the event loop, the regex engine),
where `gateway_cpu --opcodes` counts only Python bytecodes in an in-process copy of the gateway.

The proxy runs under callgrind twice, in front of the bench's echo upstream (not under callgrind), and a raw
JSON-lines client sends N1 and then N2 calls; start-up and shutdown cancel out in (I2 - I1) / (N2 - N1). Two runs
of the same tree agree within about 2 %.

`python -m bench.proxy_instructions [--calls N1 N2] [--era 2026-07-28] POLICY [POLICY ...]` (a profile name or a
policy file; `none` for no stages). Needs `valgrind` on PATH; a run takes about a minute per policy.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = [sys.executable, "-m", "bench.gateway_bench", "upstream"]
_COLLECTED = re.compile(r"Collected : (\d+)")


def _line(message: dict[str, object]) -> bytes:
    return orjson.dumps(message) + b"\n"


MODERN = "2026-07-28"
LEGACY = "2025-11-25"
_MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
"""What the SDK's client puts in every request's `_meta` at 2026-07-28 (no `initialize`: `server/discover` first)."""


def instructions(policy: str, calls: int, era: str = LEGACY) -> int:
    """Every instruction the proxy process ran: start-up, its handshake, `calls` calls and shutdown. `era`: the
    client's protocol version, as the SDK's client speaks it (2026-07-28: `_meta` on every request)."""
    with tempfile.TemporaryDirectory() as folder:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/callgrind.out",
                   sys.executable, "-m", "integrations.cli", "proxy", "--policy", policy, "--", *UPSTREAM]  # fmt: skip
        proxy = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)  # fmt: skip
        assert proxy.stdin is not None and proxy.stdout is not None and proxy.stderr is not None
        params: dict[str, object] = {"name": "echo", "arguments": {"text": "hello", "count": 3}}
        if era == MODERN:
            discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": _MODERN_META}}
            proxy.stdin.write(_line(discover))
            proxy.stdin.flush()
            proxy.stdout.readline()
            params["_meta"] = _MODERN_META
        else:
            init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
            proxy.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
            proxy.stdin.flush()
            proxy.stdout.readline()
            proxy.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        for index in range(calls):
            proxy.stdin.write(_line({"jsonrpc": "2.0", "id": 10 + index, "method": "tools/call", "params": params}))
            proxy.stdin.flush()
            reply = proxy.stdout.readline()
            if b'"result"' not in reply:
                proxy.kill()
                raise RuntimeError(f"call {index} through --policy {policy} got {reply[:200]!r}")
        proxy.stdin.close()
        proxy.wait(timeout=900)
        found = _COLLECTED.search(proxy.stderr.read().decode("utf-8", "replace"))
        if found is None:
            raise RuntimeError("callgrind printed no instruction count")
        return int(found.group(1))


def per_call(policy: str, first: int, second: int, era: str = LEGACY) -> float:
    return (instructions(policy, second, era) - instructions(policy, first, era)) / (second - first)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.proxy_instructions", description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="+", metavar="POLICY")
    parser.add_argument("--calls", nargs=2, type=int, default=(100, 600), metavar=("N1", "N2"))
    parser.add_argument("--era", choices=(LEGACY, MODERN), default=LEGACY, help="the client's protocol version")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing to count", file=sys.stderr)
        return 2
    first, second = args.calls
    for policy in args.policies:
        count = per_call(policy, first, second, args.era)
        print(f"--policy {policy}, {args.era} client: {count:,.0f} instructions per tools/call in the proxy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
