"""What the router gateway's spec check costs per call: the sans-IO router alone (a tools/call in, its
result back, no chain), with and without `SpecCheck`, plus the check by itself on typical results.

python -m bench.spec_check_bench [--calls N]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from integrations.gateway.router import Era, Router, RouterConfig, SendUpstream
from integrations.gateway.spec_check import SpecCheck

RESULTS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools/call, one text block": ("tools/call", {"content": [{"type": "text", "text": "hello " * 20}]}),
    "tools/call, text + structured": (
        "tools/call",
        {"content": [{"type": "text", "text": '{"a": 1}'}], "structuredContent": {"a": 1}, "isError": False},
    ),
    "tools/list, 20 tools": (
        "tools/list",
        {"tools": [{"name": f"t{i}", "description": "d" * 80, "inputSchema": {"type": "object"}} for i in range(20)]},
    ),
}


def _router(check: SpecCheck | None) -> Router:
    router = Router(RouterConfig(upstream_era=Era.HANDSHAKE, has_work=lambda *_: False, check_result=check))
    (start,) = router.start()
    assert isinstance(start, SendUpstream)
    init = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "u"}}
    router.receive_upstream(json.dumps({"jsonrpc": "2.0", "id": start.request_id, "result": init}))
    router.open_session("s")
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "0"}}
    router.receive_downstream("s", json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}))
    return router


def per_call_us(check: SpecCheck | None, calls: int) -> float:
    router = _router(check)
    result = RESULTS["tools/call, one text block"][1]
    started = time.perf_counter()
    for n in range(1, calls + 1):
        request = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
        (sent,) = router.receive_downstream("s", json.dumps(request).encode())
        assert isinstance(sent, SendUpstream)
        router.receive_upstream(json.dumps({"jsonrpc": "2.0", "id": sent.request_id, "result": result}).encode())
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    calls = parser.parse_args().calls
    check = SpecCheck()
    for name, (method, result) in RESULTS.items():
        check(method, result, "2025-11-25")
        started = time.perf_counter()
        for _ in range(calls):
            check(method, result, "2025-11-25")
        print(f"check alone, {name}: {(time.perf_counter() - started) / calls * 1e6:.1f} µs")
    per_call_us(None, 1000)  # warm-up
    without = min(per_call_us(None, calls) for _ in range(3))
    with_check = min(per_call_us(SpecCheck(), calls) for _ in range(3))
    print(f"router per call, no check: {without:.1f} µs; with the check: {with_check:.1f} µs")


if __name__ == "__main__":
    main()
