"""`mcp-interceptors invoke` against servers that misbehave (issue 32): a malformed reply (not JSON, not UTF-8, a
result that is a string) fails at once with the server named by its command line, never waiting for the
timeout; a crashed server is named. (A hung one: `test_cli_inspect.py`, which also checks that it is reaped.)"""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from integrations.inspect_cli import server_name
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
PATIENT_S = 600.0
"""A --timeout no test waits for: an invoke that waited for it would fail its subprocess bound below."""
BOUND_S = 60.0


def invoke(server: str, timeout: float = PATIENT_S, name: str = "raw/check") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "integrations.cli", "invoke", "--server", server, name, "--event",
         "tools/call", "--phase", "request", "--payload", "{}", "--timeout", str(timeout)],
        cwd=ROOT, capture_output=True, text=True, timeout=BOUND_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ("truncated", "it is not valid JSON"),
        ("bad-utf8", "it is not valid UTF-8"),
        ("string-result", "its result is a string, not an object"),
    ],
)
def test_a_malformed_reply_fails_at_once_naming_the_server(fault: str, problem: str) -> None:
    server = f"{sys.executable} -m tests.servers.raw_host {fault}"
    done = invoke(server)
    assert done.returncode == 1
    named = server_name(shlex.split(server))  # shortened as every error shows it: the venv's path can be long
    assert f"the server '{named}' sent a malformed reply: {problem}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_crashed_server_is_named() -> None:
    server = f"{sys.executable} -m tests.servers.faulty_host crash-after 0"
    done = invoke(server, name="faulty/check")
    assert done.returncode == 1
    named = server_name(shlex.split(server))
    assert done.stderr.strip().endswith(f"error: the server '{named}': the connection closed"), done.stderr


def test_an_unreachable_url_is_named_once() -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "list", "--server", url, "--timeout", str(PATIENT_S)],
        cwd=ROOT, capture_output=True, text=True, timeout=BOUND_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"error: could not reach {url}: All connection attempts failed"
