"""`mcp-interceptors serve --loop`: the same bytes in give the same replies on asyncio's loop and on uvloop's.

Only the event loop differs between the two (`interceptors.loops.run_on_loop`); the stdio transport,
the express lane and the SDK session above it are one code. The script covers both eras' handshakes, the
lane's inline invokes, the SDK's requests, and the lines the transport answers itself.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from typing import Any

import pytest

from interceptors.loops import LOOPS, LoopUnavailableError, run_on_loop, uvloop_available
from tests.conftest import ROOT
from tests.interceptors_server.test_express import ENVELOPE, without_durations

CLIENT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "loops", "version": "0"}}


def _invoke(request_id: int, text: str, name: str, meta: bool) -> dict[str, Any]:
    payload = {"name": "echo", "arguments": {"text": text}}
    params: dict[str, Any] = {"name": name, "event": "tools/call", "phase": "request", "payload": payload}
    if meta:
        params["_meta"] = ENVELOPE
    return {"jsonrpc": "2.0", "id": request_id, "method": "interceptor/invoke", "params": params}


def _script(era: str) -> bytes:
    modern = era == "2026"
    lines: list[bytes] = []
    if modern:
        discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": ENVELOPE}}
        lines.append(json.dumps(discover).encode())
    else:
        lines.append(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": CLIENT}).encode())
        lines.append(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    listing: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "interceptors/list", "params": {}}
    if modern:
        listing["params"]["_meta"] = ENVELOPE
    lines.append(json.dumps(listing).encode())
    lines.append(json.dumps(_invoke(2, "hello", "host/upper", modern)).encode())
    lines.append(json.dumps(_invoke(3, "a forbidden word", "host/deny-word", modern)).encode())
    lines.append(json.dumps(_invoke(4, "x", "host/absent", modern)).encode())
    lines.append(b"not json at all")
    lines.append(b'{"jsonrpc":"2.0","id":6,"method":"ping","params":[1]}')
    lines.append(b'{"jsonrpc":"2.0","id":7.5,"method":"ping"}')
    unknown: dict[str, Any] = {"jsonrpc": "2.0", "id": 8, "method": "nope/nope", "params": {}}
    if modern:
        unknown["params"]["_meta"] = ENVELOPE
    lines.append(json.dumps(unknown).encode())
    return b"\n".join(lines) + b"\n"


REPLIES = 9  # every request but the notification, and one error each for the two lines without a usable id


def _read_into(out: Any, lines: queue.Queue[bytes]) -> None:
    for line in out:
        lines.put(line)


def _serve(loop: str, script: bytes, line_by_line: bool = False) -> list[dict[str, Any]]:
    """The replies to `script`, read until all have come (stdin stays open till then: a server may drop the
    replies still in flight when its client hangs up), sorted by id. `line_by_line`: each line written alone and,
    but for the notification, its reply read before the next line is written (one whole line per read)."""
    command = [sys.executable, "-m", "integrations.cli", "serve", "--loop", loop,
               "--registry", "tests.servers.host_registry:build_registry"]  # fmt: skip
    child = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    lines: queue.Queue[bytes] = queue.Queue()
    assert child.stdin is not None and child.stdout is not None
    threading.Thread(target=_read_into, args=(child.stdout, lines), daemon=True).start()
    replies: list[dict[str, Any]] = []
    try:
        if line_by_line:
            for line in script.splitlines():
                child.stdin.write(line + b"\n")
                child.stdin.flush()
                if b'"notifications/' not in line:
                    replies.append(without_durations(json.loads(lines.get(timeout=30))))
        else:
            child.stdin.write(script)
            child.stdin.flush()
            replies += [without_durations(json.loads(lines.get(timeout=30))) for _ in range(REPLIES)]
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert len(replies) == REPLIES
    return sorted(replies, key=lambda reply: json.dumps(reply.get("id")))


@pytest.mark.skipif(not uvloop_available(), reason="uvloop is not installed (the `fast` extra)")
@pytest.mark.parametrize("era", ["2025", "2026"])
def test_the_same_replies_on_both_loops(era: str) -> None:
    script = _script(era)
    on_asyncio, on_uvloop = _serve("asyncio", script), _serve("uvloop", script)
    assert on_uvloop == on_asyncio
    by_id = {json.dumps(reply.get("id")): reply for reply in on_asyncio}
    assert "result" in by_id["0"] and "result" in by_id["1"]
    assert by_id["2"]["result"]["payload"]["arguments"]["text"] == "HELLO"
    assert by_id["3"]["result"]["valid"] is False
    assert by_id["4"]["error"]["code"] == -32602  # an unknown interceptor
    assert by_id["6"]["error"]["code"] == -32602  # array params
    assert by_id["8"]["error"]["code"] == -32601  # an unknown method, answered by the SDK
    unnamed = sorted(reply["error"]["code"] for reply in on_asyncio if reply["id"] is None)
    assert unnamed == [-32700, -32600]  # not JSON, a float id: answered by the transport


def test_an_unknown_loop_is_refused_before_anything_runs() -> None:
    async def never() -> None:
        raise AssertionError("ran")

    with pytest.raises(LoopUnavailableError, match="not an event loop"):
        run_on_loop(never, loop="trio")


def test_the_cli_offers_the_loops_serving_knows() -> None:
    done = subprocess.run([sys.executable, "-m", "integrations.cli", "serve", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert "{" + ",".join(LOOPS) + "}" in done.stdout
