"""A server that takes its folders from the client, as MCP hosts run server-filesystem without a folder:
it asks `roots/list` the moment the handshake ends, and offers tools by what the client declared.

python -m tests.servers.roots_upstream

Tools: `roots` (the roots the client gave, as JSON text; "none yet" before the answer), `declared` (the
client capabilities its `initialize` carried) and, only for a client that declared sampling, `sample`
(server-everything offers its sampling tool the same way), which asks the client `sampling/createMessage`
and answers with the client's result or error as JSON text. Raw JSON lines on stdio, one at a time.
"""

from __future__ import annotations

import json
import sys
from typing import Any

BASE_TOOLS = [
    {"name": "roots", "description": "The client's roots.", "inputSchema": {"type": "object"}},
    {"name": "declared", "description": "The client's capabilities.", "inputSchema": {"type": "object"}},
]
SAMPLE_TOOL = {"name": "sample", "description": "Asks the client to sample.", "inputSchema": {"type": "object"}}


class State:
    def __init__(self) -> None:
        self.declared: dict[str, Any] = {}
        self.roots: Any = None
        self.roots_error: Any = None
        self.sampling: dict[str, Any] = {}  # our sampling/createMessage id -> the tools/call it serves


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def text(value: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value if isinstance(value, str) else json.dumps(value)}]}


def handle(state: State, message: dict[str, Any]) -> None:
    method, request_id = message.get("method"), message.get("id")
    if method is None:  # the client's answer to our roots/list
        if request_id == "startup-roots":
            state.roots = (message.get("result") or {}).get("roots")
            state.roots_error = message.get("error")
        elif request_id in state.sampling:  # the client's answer ends the `sample` call: its result or error
            answer = message.get("result") if "result" in message else {"error": message.get("error")}
            send({"id": state.sampling.pop(request_id), "result": text(answer)})
        return
    params = message.get("params") or {}
    if method == "notifications/initialized":
        if "roots" in state.declared:
            send({"id": "startup-roots", "method": "roots/list"})
        return
    if request_id is None:
        return
    if method == "initialize":
        state.declared = params.get("capabilities") or {}
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "roots-upstream", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": BASE_TOOLS + ([SAMPLE_TOOL] if "sampling" in state.declared else [])}
    elif method == "tools/call" and params.get("name") == "roots":
        result = text(state.roots if state.roots is not None else (state.roots_error or "none yet"))
    elif method == "tools/call" and params.get("name") == "declared":
        result = text(state.declared)
    elif method == "tools/call" and params.get("name") == "sample":
        asked = f"sample-{request_id}"
        state.sampling[asked] = request_id
        ask = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
        send({"id": asked, "method": "sampling/createMessage", "params": ask})
        return
    elif method == "ping":
        result = {}
    else:
        send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})
        return
    send({"id": request_id, "result": result})


def main() -> None:
    state = State()
    for line in sys.stdin:
        if line.strip():
            handle(state, json.loads(line))


if __name__ == "__main__":
    main()
