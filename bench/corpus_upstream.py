"""A hand-written MCP server (JSON lines, no SDK) that serves the items of a corpus file as tool results.

`tools/call` of `item` with `{"index": N}` answers item N of the JSON-lines file named by `$CORPUS_ITEMS` as
a text block (or an image block for an image item), so the bench can send public corpora through a real
`mcp-interceptors proxy`. python -m bench.corpus_upstream
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def block(item: dict[str, Any]) -> dict[str, Any]:
    """The content block an item travels in: an image block for an image, a text block otherwise."""
    kind = str(item.get("kind") or "text")
    if kind.startswith("image:"):
        return {"type": "image", "data": item["text"], "mimeType": kind.split(":", 1)[1]}
    return {"type": "text", "text": item["text"]}


def result_of(item: dict[str, Any]) -> dict[str, Any]:
    """The tool result an item travels in: its block, plus `structuredContent` when the item has one."""
    result: dict[str, Any] = {"content": [block(item)]}
    if isinstance(item.get("structured"), dict):
        result["structuredContent"] = item["structured"]
    return result


def main() -> int:
    with open(os.environ["CORPUS_ITEMS"], encoding="utf-8") as handle:
        items = [json.loads(line) for line in handle if line.strip()]
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, params = message["method"], message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "corpus", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "item", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            index = int((params.get("arguments") or {}).get("index", 0))
            result = result_of(items[index])
        else:
            result = {}
        out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
