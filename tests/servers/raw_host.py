"""A hand-written interceptor server: JSON lines on plain stdin/stdout, no SDK. For the stdio pipe tests.

python -m tests.servers.raw_host FAULT [SECONDS]

It answers the 2026 `server/discover` opening and `interceptors/list` (one validator, `raw/check`, on
tools/call, both phases). `interceptor/invoke` normally gets a validation result whose `info` echoes the
payload and lists every `notifications/cancelled` request id received so far; the payload may ask for
`{"sleep": s}` (answer after s seconds) or `{"exit": true}` (exit mid-invoke). FAULT changes that:

  ok           every invoke answered normally
  garbage      every invoke is preceded by lines that are not JSON-RPC replies; the first is never answered
  not-object   every result is `5`
  bad-error    every answer is an error object without a code
  late         the first invoke is answered after SECONDS (default 1); later ones normally
  echo-cancel  the first invoke is never answered; later ones normally (they report the cancellations)
  exit         every invoke exits the process (after half a reply line), unless its payload has "stay"
  truncated    every invoke is answered with a torn reply line (it carries the request's id)
  bad-utf8     every reply carries a byte that is not UTF-8
  string-result  every result is a JSON string
  flood        every invoke gets 40 lines that are not JSON-RPC and no reply
  legacy       a 2025-era server: `server/discover` is not found, `initialize` opens the session

Every cancellation is also logged to stderr as `cancelled <id>`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

FAULT = sys.argv[1] if len(sys.argv) > 1 else "ok"
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0

DISCOVER_RESULT = {
    "cacheScope": "private",
    "capabilities": {"extensions": {"io.modelcontextprotocol/interceptors": {"supportedEvents": ["tools/call"]}}},
    "resultType": "complete",
    "supportedVersions": ["2026-07-28"],
    "ttlMs": 0,
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "raw", "version": "0"}},
}
INITIALIZE_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"experimental": {"io.modelcontextprotocol/interceptors": {"supportedEvents": ["tools/call"]}}},
    "serverInfo": {"name": "raw", "version": "0"},
}
LIST_RESULT = {
    "interceptors": [
        {
            "name": "raw/check",
            "type": "validation",
            "hooks": [{"events": ["tools/call"], "phase": "request"}, {"events": ["tools/call"], "phase": "response"}],
        }
    ],
    "resultType": "complete",
}
GARBAGE = [
    b"this is not json",
    b'{"jsonrpc": 2}',
    b"[1, 2, 3]",
    b"5",
    b"\x00\xff\xfe",
    b'{"jsonrpc": "2.0", "id": "x999999", "result": {"stray": true}}',
    b'{"jsonrpc": "2.0", "id": "x1", "resul',
    b"",
    b"   ",
]

_out = sys.stdout.buffer
_lock = threading.Lock()
_cancelled: list[Any] = []
_invokes = 0


def write(data: bytes) -> None:
    with _lock:
        _out.write(data)
        _out.flush()


def reply(request_id: Any, result: Any = None, error: Any = None) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    write(json.dumps(message).encode() + b"\n")


def verdict(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "interceptor": params.get("name"),
        "type": "validation",
        "phase": params.get("phase"),
        "valid": True,
        "info": {"payload": params.get("payload"), "cancelled": list(_cancelled)},
        "resultType": "complete",
    }


def later(seconds: float, request_id: Any, params: dict[str, Any]) -> None:
    def run() -> None:
        time.sleep(seconds)
        reply(request_id, verdict(params))

    threading.Thread(target=run, daemon=True).start()


def invoke(request_id: Any, params: dict[str, Any]) -> None:
    global _invokes
    _invokes += 1
    first = _invokes == 1
    payload = params.get("payload")
    directives = payload if isinstance(payload, dict) else {}
    if directives.get("exit") or (FAULT == "exit" and not directives.get("stay")):
        write(b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "res')
        os._exit(5)
    if FAULT == "garbage":
        write(b"\n".join(GARBAGE) + b"\n")
        if first:
            return
    if FAULT == "truncated":
        write(b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"valid": tr\n')
    elif FAULT == "bad-utf8":
        good = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": verdict(params)}).encode()
        write(good.replace(b'"valid": true', b'"valid": true, "note": "\xff"') + b"\n")
    elif FAULT == "string-result":
        reply(request_id, "a string")
    elif FAULT == "flood":
        write(b"this is not json-rpc\n" * 40)
    elif FAULT == "not-object":
        reply(request_id, 5)
    elif FAULT == "bad-error":
        reply(request_id, error={"message": "an error without a code"})
    elif FAULT == "late" and first:
        later(SECONDS, request_id, params)
    elif FAULT == "echo-cancel" and first:
        return
    elif directives.get("sleep"):
        later(float(directives["sleep"]), request_id, params)
    else:
        reply(request_id, verdict(params))


def handle(message: Any) -> None:
    if not isinstance(message, dict):
        return
    method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "notifications/cancelled":
        _cancelled.append(params.get("requestId"))
        print(f"cancelled {params.get('requestId')}", file=sys.stderr, flush=True)
        return
    if request_id is None:  # another notification, or a reply
        return
    if FAULT == "legacy" and method == "server/discover":
        reply(request_id, error={"code": -32601, "message": "Method not found"})
    elif FAULT == "legacy" and method == "initialize":
        reply(request_id, INITIALIZE_RESULT)
    elif method == "server/discover":
        reply(request_id, DISCOVER_RESULT)
    elif method == "interceptors/list":
        reply(request_id, LIST_RESULT)
    elif method == "interceptor/invoke":
        invoke(request_id, params)
    else:
        reply(request_id, error={"code": -32601, "message": "Method not found"})


def main() -> None:
    print(f"raw host {FAULT} starting", file=sys.stderr, flush=True)
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        handle(message)


if __name__ == "__main__":
    main()
