"""`mcp-interceptors serve` read one line at a time: a client that waits for each reply before it writes the next
line hands the server reads of exactly one whole line, the framing's one-line path (`LineSplitter.feed`) and the
lane's reply to the read. The replies must be those of the same lines written in one go (the general path)."""

from __future__ import annotations

import json

import pytest

from interceptors.loops import uvloop_available
from tests.interceptors_server.test_serve_loops import _script, _serve

LOOPS = ["asyncio", "uvloop"] if uvloop_available() else ["asyncio"]


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("era", ["2025", "2026"])
def test_one_line_per_read_gets_the_replies_of_one_write(loop: str, era: str) -> None:
    script = _script(era)
    line_by_line = _serve(loop, script, line_by_line=True)
    assert line_by_line == _serve(loop, script)
    by_id = {json.dumps(reply.get("id")): reply for reply in line_by_line}
    assert by_id["2"]["result"]["payload"]["arguments"]["text"] == "HELLO"  # the lane's inline invoke
    assert by_id["4"]["error"]["code"] == -32602  # an unknown interceptor
    unnamed = sorted(reply["error"]["code"] for reply in line_by_line if reply["id"] is None)
    assert unnamed == [-32700, -32600]  # not JSON, a float id: answered by the transport
