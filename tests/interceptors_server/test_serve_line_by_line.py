"""`mcp-interceptors serve` read one line at a time: a client that waits for each reply before it writes the next
line hands the server reads of exactly one whole line, the framing's one-line path (`LineSplitter.feed`) and the
lane's reply to the read. The replies must be those of the same lines written in one go (the general path)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from typing import Any

import pytest

from interceptors.loops import uvloop_available
from tests.conftest import ROOT
from tests.interceptors_server.test_express import without_durations
from tests.interceptors_server.test_serve_loops import REPLIES, _read_into, _script, _serve

LOOPS = ["asyncio", "uvloop"] if uvloop_available() else ["asyncio"]


def _serve_line_by_line(loop: str, script: bytes) -> list[dict[str, Any]]:
    """The replies to `script`, each line written alone and, but for the notification, its reply read before
    the next line is written; sorted by id."""
    command = [sys.executable, "-m", "integrations.cli", "serve", "--loop", loop,
               "--registry", "tests.servers.host_registry:build_registry"]  # fmt: skip
    child = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    lines: queue.Queue[bytes] = queue.Queue()
    assert child.stdin is not None and child.stdout is not None
    threading.Thread(target=_read_into, args=(child.stdout, lines), daemon=True).start()
    replies: list[dict[str, Any]] = []
    try:
        for line in script.splitlines():
            child.stdin.write(line + b"\n")
            child.stdin.flush()
            if b'"notifications/' not in line:
                replies.append(without_durations(json.loads(lines.get(timeout=30))))
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert len(replies) == REPLIES
    return sorted(replies, key=lambda reply: json.dumps(reply.get("id")))


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("era", ["2025", "2026"])
def test_one_line_per_read_gets_the_replies_of_one_write(loop: str, era: str) -> None:
    script = _script(era)
    line_by_line = _serve_line_by_line(loop, script)
    assert line_by_line == _serve(loop, script)
    by_id = {json.dumps(reply.get("id")): reply for reply in line_by_line}
    assert by_id["2"]["result"]["payload"]["arguments"]["text"] == "HELLO"  # the lane's inline invoke
    assert by_id["4"]["error"]["code"] == -32602  # an unknown interceptor
    unnamed = sorted(reply["error"]["code"] for reply in line_by_line if reply["id"] is None)
    assert unnamed == [-32700, -32600]  # not JSON, a float id: answered by the transport
