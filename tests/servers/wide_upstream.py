"""`tests.servers.sync_upstream` plus `wide`: a tool whose result holds a million-element array (issue 31: such a
result took 22-44 s through the gateway). Its arguments' `text` is echoed as the first text block.

python -m tests.servers.wide_upstream
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from tests.servers import sync_upstream

ELEMENTS = 10**6
WIDE = {"name": "wide", "description": "A million-element result.", "inputSchema": {"type": "object"}}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    reply = sync_upstream.answer(message)
    if reply is None:
        return None
    params = message.get("params") or {}
    if message.get("method") == "tools/list":
        reply["result"]["tools"].append(WIDE)
    elif message.get("method") == "tools/call" and params.get("name") == "wide":
        text = str((params.get("arguments") or {}).get("text", ""))
        reply["result"] = {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"n": list(range(ELEMENTS))},
            "isError": False,
        }
    return reply


def main() -> None:
    for line in sys.stdin.buffer:
        if line.strip():
            reply = answer(orjson.loads(line))
            if reply is not None:
                sys.stdout.buffer.write(orjson.dumps(reply) + b"\n")
                sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
