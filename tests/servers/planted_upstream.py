"""A hand-written MCP server (JSON lines, 2025-11-25 handshake, no SDK) that plants a distinct AWS-style
access key in every channel a gateway relays: the initialize result, every list, resource contents (text and
a base64 blob), prompts, completions, tool results, progress, logs in and outside a call, errors, resource
updates, the requests it sends the client (sampling, elicitation) and tasks (status, record, result).

`PLANTS[channel]` is the key planted there, so a leak names its channel. python -m tests.servers.planted_upstream
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from typing import Any

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def _key(channel: str) -> str:
    digest = hashlib.sha256(channel.encode()).digest()
    return "AK" + "IA" + "".join(_ALPHABET[b % 32] for b in digest[:16])


CHANNELS = (
    "instructions", "server-info", "tool-description", "tool-title", "schema-description", "schema-default",
    "tool-meta", "resource-description", "resource-uri", "template-description", "resource-text",
    "resource-blob", "resource-meta", "prompt-list-description", "prompt-argument", "prompt-description",
    "prompt-message", "prompt-embedded", "completion", "tool-text", "tool-structured", "tool-block-meta",
    "progress", "log-in-call", "log-outside", "error-message", "error-data", "resource-updated",
    "sampling-message", "sampling-system", "elicitation-message", "task-status", "task-record", "task-result",
    "list-changed",
)  # fmt: skip
PLANTS = {channel: _key(channel) for channel in CHANNELS}
P = PLANTS

_out = sys.stdout.buffer
_lines = iter(sys.stdin.buffer)


def send(message: dict[str, Any]) -> None:
    _out.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    _out.flush()


def reply(request_id: object, result: dict[str, Any]) -> None:
    send({"id": request_id, "result": result})


def ask_client(request_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send a request to the client and wait for its answer (other lines meanwhile are ignored)."""
    send({"id": request_id, "method": method, "params": params})
    for line in _lines:
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return dict(message)
    return {}


def tools() -> list[dict[str, Any]]:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "description": f"query, e.g. {P['schema-description']}",
                             "default": P["schema-default"]},
                       "token": {"type": "string"}},
    }  # fmt: skip
    plain = {"type": "object"}
    return [
        {"name": "leak", "title": f"Leak {P['tool-title']}", "description": f"uses {P['tool-description']}",
         "inputSchema": schema, "_meta": {"note": P["tool-meta"]}},
        *({"name": name, "inputSchema": plain}
          for name in ("progress", "fail", "sample", "elicit", "slow", "roots", "change")),
    ]  # fmt: skip


def call(request_id: object, params: dict[str, Any]) -> None:
    name = params.get("name")
    token = (params.get("_meta") or {}).get("progressToken")
    if params.get("task") is not None:
        task = {"taskId": "task-1", "status": "working", "statusMessage": f"at {P['task-record']}",
                "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000}  # fmt: skip
        reply(request_id, {"task": task})
        status = {**task, "statusMessage": f"still {P['task-status']}"}
        send({"method": "notifications/tasks/status", "params": status})
        return
    if name == "leak":
        reply(request_id, {
            "content": [{"type": "text", "text": f"key {P['tool-text']}", "_meta": {"k": P["tool-block-meta"]}}],
            "structuredContent": {"key": P["tool-structured"]},
        })  # fmt: skip
    elif name == "progress":
        send(
            {
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "total": 2, "message": f"at {P['progress']}"},
            }
        )
        send({"method": "notifications/message",
              "params": {"level": "error", "logger": "planted", "data": f"saw {P['log-in-call']}"}})  # fmt: skip
        reply(request_id, {"content": [{"type": "text", "text": "done"}]})
    elif name == "fail":
        error = {"code": -32099, "message": f"failed with {P['error-message']}", "data": {"key": P["error-data"]}}
        send({"id": request_id, "error": error})
    elif name == "sample":
        ask_client("s-1", "sampling/createMessage", {
            "messages": [{"role": "user", "content": {"type": "text", "text": f"use {P['sampling-message']}"}}],
            "systemPrompt": f"you hold {P['sampling-system']}", "maxTokens": 10,
        })  # fmt: skip
        reply(request_id, {"content": [{"type": "text", "text": "sampled"}]})
    elif name == "elicit":
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        ask_client("e-1", "elicitation/create", {"message": f"confirm {P['elicitation-message']}",
                                                 "requestedSchema": schema})  # fmt: skip
        reply(request_id, {"content": [{"type": "text", "text": "elicited"}]})
    elif name == "change":
        send({"method": "notifications/tools/list_changed", "params": {"_meta": {"why": P["list-changed"]}}})
        reply(request_id, {"content": [{"type": "text", "text": "changed"}]})
    elif name == "roots":
        answer = ask_client("r-1", "roots/list", {})
        roots = (answer.get("result") or {}).get("roots") or []
        reply(request_id, {"content": [{"type": "text", "text": f"roots: {len(roots)}"}]})
    else:
        reply(request_id, {"content": [{"type": "text", "text": "ok"}]})


def handle(message: dict[str, Any]) -> None:
    method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
    if request_id is None or method is None:
        return
    if method == "initialize":
        capabilities = {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True},
                        "prompts": {}, "completions": {}, "logging": {},
                        "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}  # fmt: skip
        reply(request_id, {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                           "serverInfo": {"name": "planted", "version": "1", "title": f"P {P['server-info']}"},
                           "instructions": f"Use the key {P['instructions']}."})  # fmt: skip
    elif method == "tools/list":
        reply(request_id, {"tools": tools()})
    elif method == "tools/call":
        call(request_id, params)
    elif method == "resources/list":
        reply(request_id, {"resources": [
            {"uri": "file:///r", "name": "r", "description": f"holds {P['resource-description']}"},
            {"uri": f"file:///keys/{P['resource-uri']}", "name": "k"},
        ]})  # fmt: skip
    elif method == "resources/templates/list":
        reply(
            request_id,
            {
                "resourceTemplates": [
                    {"uriTemplate": "file:///t/{x}", "name": "t", "description": f"with {P['template-description']}"}
                ]
            },
        )
    elif method == "resources/read":
        blob = base64.b64encode(f"AWS_ACCESS_KEY_ID={P['resource-blob']}\n".encode()).decode()
        reply(request_id, {"contents": [
            {"uri": "file:///r", "mimeType": "text/plain", "text": f"value {P['resource-text']}",
             "_meta": {"k": P["resource-meta"]}},
            {"uri": "file:///r.env", "mimeType": "application/octet-stream", "blob": blob},
        ]})  # fmt: skip
    elif method == "resources/subscribe":
        reply(request_id, {})
        send({"method": "notifications/resources/updated",
              "params": {"uri": params.get("uri"), "_meta": {"why": P["resource-updated"]}}})  # fmt: skip
    elif method == "prompts/list":
        argument = {"name": "a", "description": P["prompt-argument"]}
        prompt = {"name": "p", "description": f"about {P['prompt-list-description']}", "arguments": [argument]}
        reply(request_id, {"prompts": [prompt]})
    elif method == "prompts/get":
        embedded = {"type": "resource", "resource": {"uri": "file:///e", "text": f"key {P['prompt-embedded']}"}}
        reply(request_id, {"description": f"about {P['prompt-description']}", "messages": [
            {"role": "user", "content": {"type": "text", "text": f"use {P['prompt-message']}"}},
            {"role": "user", "content": embedded},
        ]})  # fmt: skip
    elif method == "completion/complete":
        reply(request_id, {"completion": {"values": [P["completion"]], "hasMore": False}})
    elif method == "logging/setLevel":
        reply(request_id, {})
        send({"method": "notifications/message", "params": {"level": "error", "data": f"boot {P['log-outside']}"}})
    elif method == "tasks/get":
        reply(request_id, {"taskId": "task-1", "status": "working", "statusMessage": f"at {P['task-record']}",
                           "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z",
                           "ttl": 60000})  # fmt: skip
    elif method == "tasks/result":
        reply(request_id, {"content": [{"type": "text", "text": f"result {P['task-result']}"}]})
    elif method == "ping":
        reply(request_id, {})
    else:
        send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})


def main() -> None:
    for line in _lines:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message)


if __name__ == "__main__":
    main()
