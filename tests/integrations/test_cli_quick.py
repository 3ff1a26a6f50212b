"""`list` and `invoke` ask a 2026-era stdio server without loading the MCP SDK (`integrations/quick_stdio.py`,
issue 32): the answer, a malformed reply, a crash and a flood of junk come out in the SDK path's words, the SDK
never imported; a 2025-era server (no `server/discover`) is asked through the SDK, as before. Real server
processes; the command runs in a fresh interpreter, so what it imported is what this command needed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
BOUND_S = 60.0
PROBE = """
import sys
from integrations.cli import main
code = main(sys.argv[1:])
print("sdk-loaded" if "mcp" in sys.modules else "sdk-not-loaded", code, file=sys.stderr)
"""


def raw(fault: str) -> str:
    return f"{sys.executable} -m tests.servers.raw_host {fault}"


def command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=BOUND_S,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def invoke(server: str, payload: str = "{}") -> subprocess.CompletedProcess[str]:
    return command("invoke", "--server", server, "raw/check", "--event", "tools/call", "--phase", "request",
                   "--payload", payload, "--timeout", "600")  # fmt: skip


def test_an_answer_comes_without_the_sdk() -> None:
    done = invoke(raw("ok"), '{"a": 1}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"interceptor": "raw/check", "type": "validation", "phase": "request",
                                       "valid": True, "info": {"payload": {"a": 1}, "cancelled": []}}  # fmt: skip
    assert "sdk-not-loaded 0" in done.stderr, done.stderr
    listed = command("list", "--server", raw("ok"), "--json")
    assert json.loads(listed.stdout)["interceptors"][0]["name"] == "raw/check", listed.stderr
    assert "sdk-not-loaded 0" in listed.stderr, listed.stderr


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ("truncated", "it is not valid JSON (truncated or corrupt)"),
        ("bad-utf8", "it is not valid UTF-8"),
        ("string-result", "its result is a string, not an object"),
    ],
)
def test_a_malformed_reply_is_named_without_the_sdk(fault: str, problem: str) -> None:
    done = invoke(raw(fault))
    assert f"error -32603: the server '{raw(fault)}' sent a malformed reply: {problem}" in done.stderr, done.stderr
    assert "sdk-not-loaded 1" in done.stderr, done.stderr


def test_a_server_that_writes_only_junk_is_treated_as_broken_and_named() -> None:
    done = invoke(raw("flood"))
    assert "lines in a row that are not JSON-RPC: treating it as broken" in done.stderr, done.stderr
    assert f"error: the server '{raw('flood')}': the connection closed" in done.stderr, done.stderr
    assert "sdk-not-loaded 1" in done.stderr, done.stderr


def test_a_server_that_exits_mid_reply_is_named() -> None:
    done = invoke(raw("exit"))
    assert f"error: the server '{raw('exit')}': the connection closed" in done.stderr, done.stderr
    assert "sdk-not-loaded 1" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_2025_era_server_is_asked_through_the_sdk() -> None:
    done = invoke(raw("legacy"), '{"b": 2}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["info"]["payload"] == {"b": 2}
    assert "sdk-loaded 0" in done.stderr, done.stderr
