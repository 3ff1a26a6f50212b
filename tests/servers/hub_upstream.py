"""A small raw MCP server for the multi-server gateway tests (issue 35), one mode per argument:

- `paged N`: N tools `t0`..`t{N-1}`, listed two to a page (a cursor per page), each answering its name;
- `silent`: answers its handshake and `ping`, never a list or a call (a slow server).

python -m tests.servers.hub_upstream paged 5
"""

from __future__ import annotations

import json
import sys
from typing import Any

PAGE = 2


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def main() -> None:
    mode = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or method is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": f"hub-{mode}", "version": "1"},
            }
            send({"id": request_id, "result": result})
        elif method == "ping":
            send({"id": request_id, "result": {}})
        elif mode == "silent":
            continue
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            names = [f"t{i}" for i in range(start, min(start + PAGE, count))]
            page: dict[str, Any] = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]}
            if start + PAGE < count:
                page["nextCursor"] = str(start + PAGE)
            send({"id": request_id, "result": page})
        elif method == "tools/call":
            send({"id": request_id, "result": {"content": [{"type": "text", "text": params.get("name")}]}})
        else:
            send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
