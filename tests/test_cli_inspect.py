"""`mcp-interceptors serve | list | invoke` from the shell, against real stdio and HTTP servers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT

CLI = [sys.executable, "-m", "integrations.cli"]
SERVE = f"{sys.executable} -m integrations.cli serve --registry tests.servers.host_registry:build_registry"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_list_pretty_and_json() -> None:
    pretty = run("list", "--server", SERVE)
    assert pretty.returncode == 0, pretty.stderr
    assert "host/deny-word  validation  tools/call @request; tools/call @response" in pretty.stdout
    raw = run("list", "--server", SERVE, "--json", "--event", "tools/call")
    listed = json.loads(raw.stdout)
    assert [i["name"] for i in listed["interceptors"]][:1] == ["host/deny-word"]


def test_invoke_prints_the_result_or_the_error() -> None:
    payload = json.dumps({"name": "echo", "arguments": {"text": "a forbidden word"}})
    done = run("invoke", "--server", SERVE, "host/deny-word", "--event", "tools/call", "--phase", "request",
               "--payload", payload, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["valid"] is False and result["severity"] == "error"
    missing = run("invoke", "--server", SERVE, "nope", "--event", "tools/call", "--phase", "request", "--payload", "{}")
    assert missing.returncode == 1
    assert "error -32602" in missing.stderr and '"name": "nope"' in missing.stderr
    assert "Traceback" not in missing.stderr


def test_bad_input_is_a_clear_error_not_a_traceback() -> None:
    bad_json = run("invoke", "--server", SERVE, "x", "--event", "e", "--phase", "request", "--payload", "{nope")
    assert bad_json.returncode == 2 and "not JSON" in bad_json.stderr
    dead = run("list", "--server", f"{sys.executable} -c 'import sys; sys.exit(3)'")
    assert dead.returncode == 1 and "could not talk to the server" in dead.stderr
    assert "Traceback" not in dead.stderr
    unloadable = run("serve", "--registry", "no.such:thing")
    assert unloadable.returncode == 2 and "cannot import" in unloadable.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [*CLI, "serve", "--registry", "tests.servers.host_registry:build_registry", "--http", f"127.0.0.1:{port}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_serve_over_http_and_inspect_it(http_server: str) -> None:
    listed = run("list", "--server", http_server, "--json")
    assert listed.returncode == 0, listed.stderr
    assert "host/deny-word" in {i["name"] for i in json.loads(listed.stdout)["interceptors"]}
