"""A hand-written MCP server (JSON lines, 2025-11-25 handshake, no SDK) whose one tool answers with a
single huge line: `big {"mib": N}` returns N MiB of text. For the line-size tests of the gateway; and
`bad`, whose result breaks the schema (a text block without its text, holding `PLANTED` instead).

python -m tests.servers.big_upstream
"""

from __future__ import annotations

import json
import sys

_out = sys.stdout.buffer
PLANTED = "AKIAZ3MHALV2QWERT7P2L"


def reply(request_id: object, result: dict[str, object]) -> None:
    _out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")
    _out.flush()


def big_result(request_id: object, mib: float) -> None:
    head = json.dumps({"jsonrpc": "2.0", "id": request_id}).encode()[:-1]
    text = b"a" * int(mib * (1 << 20))
    _out.write(head + b', "result": {"content": [{"type": "text", "text": "' + text + b'"}], "isError": false}}\n')
    _out.flush()


def main() -> None:
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            reply(request_id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "big", "version": "0"}})  # fmt: skip
        elif method == "tools/list":
            schema = {"type": "object", "properties": {"mib": {"type": "number"}}}
            reply(request_id, {"tools": [{"name": "big", "inputSchema": schema},
                                         {"name": "bad", "inputSchema": {"type": "object"}}]})  # fmt: skip
        elif method == "tools/call" and message["params"].get("name") == "bad":
            reply(request_id, {"content": [{"type": "text", "txt": PLANTED}]})
        elif method == "tools/call":
            big_result(request_id, float(message["params"].get("arguments", {}).get("mib", 1)))
        else:
            error = {"code": -32601, "message": "Method not found"}
            _out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n")
            _out.flush()


if __name__ == "__main__":
    main()
