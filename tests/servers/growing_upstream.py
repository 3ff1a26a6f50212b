"""A server whose tools grow at runtime: each `grow` adds a tool `tool-N`, announced by
`notifications/tools/list_changed` before its reply; `sneak` adds one without announcing it.

python -m tests.servers.growing_upstream

Raw JSON lines on stdio, one at a time. `hidden` is always listed (a policy may hide it); any listed tool
answers its own name.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"the tool {name}", "inputSchema": {"type": "object"}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def main() -> None:
    names = ["grow", "sneak", "hidden"]
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None or request_id is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "growing-upstream", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [tool(name) for name in names]}
        elif method == "tools/call" and params.get("name") in ("grow", "sneak"):
            added = f"tool-{len(names)}"
            names.append(added)
            if params["name"] == "grow":
                send({"method": "notifications/tools/list_changed"})
            result = {"content": [{"type": "text", "text": added}]}
        elif method == "tools/call" and params.get("name") in names:
            result = {"content": [{"type": "text", "text": params["name"]}]}
        elif method == "tools/call":
            send({"id": request_id, "error": {"code": -32602, "message": f"Unknown tool: {params.get('name')}"}})
            continue
        elif method == "ping":
            result = {}
        else:
            send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"id": request_id, "result": result})


if __name__ == "__main__":
    main()
