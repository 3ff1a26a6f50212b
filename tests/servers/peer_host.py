"""An interceptor host shaped like the working group's Python reference SDK on the wire (written from its
observed behaviour, not its code): JSON lines on plain stdin/stdout, no SDK.

python -m tests.servers.peer_host

- the 2025-11-25 handshake (`initialize`), the capability under `capabilities.extensions` only;
- `interceptors/list`: one validator, `peer/check`, on tools/call requests;
- `interceptor/invoke`: `timeoutMs` may be a float (200.0); a payload `{"sleep": s}` answers after s seconds,
  or, when `timeoutMs` expires first, with the peer's timeout answer: -32000 "Interceptor execution timeout"
  and data `{interceptor, timeoutMs (a float), phase}`; otherwise a validation result whose `info` carries
  this process's pid. Requests are served concurrently (a thread each), as the reference host does with a
  task group, and a request the client cancelled is never answered at all.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

CAPABILITY = "io.modelcontextprotocol/interceptors"
_write_lock = threading.Lock()
_cancelled: set[Any] = set()


def send(message: dict[str, Any]) -> None:
    with _write_lock:
        if message.get("id") in _cancelled:
            return
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def invoke(request_id: Any, params: dict[str, Any]) -> None:
    timeout_ms = params.get("timeoutMs")
    payload = params.get("payload")
    sleep = payload.get("sleep", 0) if isinstance(payload, dict) else 0
    if timeout_ms is not None and sleep * 1000 > timeout_ms:
        time.sleep(timeout_ms / 1000)
        data = {"interceptor": params.get("name"), "timeoutMs": float(timeout_ms), "phase": params.get("phase")}
        error = {"code": -32000, "message": "Interceptor execution timeout", "data": data}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
        return
    time.sleep(sleep)
    result = {
        "interceptor": params.get("name"),
        "type": "validation",
        "phase": params.get("phase"),
        "valid": True,
        "info": {"pid": os.getpid(), "timeoutMs": timeout_ms},
    }
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def answer(message: dict[str, Any]) -> None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        if method == "notifications/cancelled":
            with _write_lock:
                _cancelled.add((message.get("params") or {}).get("requestId"))
        return  # notifications: nothing to say
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {CAPABILITY: {"supportedEvents": ["tools/call"]}}},
            "serverInfo": {"name": "peer-host", "version": "0"},
        }
    elif method == "interceptors/list":
        hooks = [{"events": ["tools/call"], "phase": "request"}]
        result = {"interceptors": [{"name": "peer/check", "type": "validation", "hooks": hooks}]}
    elif method == "interceptor/invoke":
        threading.Thread(target=invoke, args=(request_id, message.get("params") or {}), daemon=True).start()
        return
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
        return
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            answer(json.loads(line))


if __name__ == "__main__":
    main()
