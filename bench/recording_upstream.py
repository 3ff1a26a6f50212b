"""An upstream that writes down every message it receives, for counting what reaches a server through the gateway.

python -m bench.recording_upstream LOG_PATH

Each message from the client side (requests, notifications and the answers to its own requests) is appended to
LOG_PATH as one JSON line before it is handled. It offers a tool `echo` (answers "ok"), a tool `ask` (sends the
client the request named by its `method` argument — sampling/createMessage, elicitation/create or roots/list —
and answers with what came back: `answered` or `refused: <the error's message>`), a prompt `p` with an argument
`name`, a resource template `notes://n/{path}`, subscriptions and completions. Raw JSON lines on stdio.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

TOOLS = [
    {"name": "echo", "description": "Answers ok.", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True, "openWorldHint": False}},
    {"name": "ask", "description": "Asks the client.", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True, "openWorldHint": False}},
]  # fmt: skip
ASKS = {
    "sampling/createMessage": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "summarise the note"}}],
        "maxTokens": 100,
    },
    "elicitation/create": {
        "message": "Which note?",
        "requestedSchema": {"type": "object", "properties": {"note": {"type": "string"}}},
    },
    "roots/list": None,
}


def send(out: TextIO, message: dict[str, Any]) -> None:
    out.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    out.flush()


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def result_for(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}, "prompts": {}, "resources": {"subscribe": True}, "completions": {}},
            "serverInfo": {"name": "recording-upstream", "version": "0"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "prompts/list":
        return {"prompts": [{"name": "p", "arguments": [{"name": "name"}]}]}
    if method == "prompts/get":
        return {"messages": [{"role": "user", "content": {"type": "text", "text": "ok"}}]}
    if method == "resources/list":
        return {"resources": []}
    if method == "resources/templates/list":
        return {"resourceTemplates": [{"uriTemplate": "notes://n/{path}", "name": "notes"}]}
    if method == "resources/read":
        return {"contents": [{"uri": params.get("uri", ""), "text": "ok"}]}
    if method == "completion/complete":
        return {"completion": {"values": [], "total": 0, "hasMore": False}}
    if method in ("resources/subscribe", "resources/unsubscribe", "ping", "logging/setLevel"):
        return {}
    if method == "tools/call":
        return text("ok")
    return None


def main() -> None:
    log = open(sys.argv[1], "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
    out = sys.stdout
    waiting: dict[str, Any] = {}  # our request id -> the tools/call id it answers
    asked = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        log.write(line.rstrip("\n") + "\n")
        log.flush()
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None:  # the client's answer to one of our requests
            call = waiting.pop(str(request_id), None)
            if call is not None:
                error = message.get("error")
                answer = "answered" if error is None else f"refused: {error.get('message', '')}"
                send(out, {"id": call, "result": text(answer)})
            continue
        if request_id is None:
            continue
        params = message.get("params") or {}
        if method == "tools/call" and params.get("name") == "ask":
            wanted = str((params.get("arguments") or {}).get("method"))
            if wanted in ASKS:
                asked += 1
                waiting[f"ask-{asked}"] = request_id
                body: dict[str, Any] = {"id": f"ask-{asked}", "method": wanted}
                if ASKS[wanted] is not None:
                    body["params"] = ASKS[wanted]
                send(out, body)
                continue
        result = result_for(method, params)
        if result is None:
            send(out, {"id": request_id, "error": {"code": -32601, "message": "Method not found"}})
        else:
            send(out, {"id": request_id, "result": result})


if __name__ == "__main__":
    main()
