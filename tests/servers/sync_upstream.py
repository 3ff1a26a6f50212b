"""The plainest MCP server there is: read a line, write a line, blocking, one request at a time.

python -m tests.servers.sync_upstream

It answers `initialize`, `tools/list` (one tool, `echo`) and `tools/call` (the `text` argument back as a text
block); notifications get nothing. It never reads while it writes, so a gateway that stops reading its
output until its own writes drain deadlocks against it once both pipes are full.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOL = {"name": "echo", "description": "Echo the text.", "inputSchema": {"type": "object"}}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None or method is None:
        return None
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "sync-upstream", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
