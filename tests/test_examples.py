"""Every example runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_guard_a_tool_server_runs() -> None:
    done = subprocess.run(
        [sys.executable, "examples/guard_a_tool_server.py"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "-- checked" in done.stdout and "blocked: -32602" in done.stdout


def test_hello_registry_serves() -> None:
    serve = f"{sys.executable} -m integrations.cli serve --registry examples.hello_registry:registry"
    payload = '{"content": [{"type": "text", "text": "  hi  "}]}'
    command = [sys.executable, "-m", "integrations.cli", "invoke", "--server", serve, "hello/trim-text"]
    options = ["--event", "tools/call", "--phase", "response", "--payload", payload, "--json"]
    done = subprocess.run([*command, *options], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert '"text": "hi"' in done.stdout


def run_example(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, f"examples/{name}"], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_mcpserver_over_stdio_enforces_its_interceptors() -> None:
    done = run_example("mcpserver_stdio.py")
    assert done.returncode == 0, done.stderr
    assert "read_file: contents of notes.txt" in done.stdout
    assert "delete_file: refused -32602 blocked by interceptor 'example/no-deletes'" in done.stdout


def test_intercepting_client_runs() -> None:
    done = run_example("intercepting_client.py")
    assert done.returncode == 0, done.stderr
    assert "echo: 'hello'" in done.stdout and "shell: refused before it left the client -32602" in done.stdout


def test_fastmcp_adapter_runs() -> None:
    pytest.importorskip("fastmcp", reason="the fastmcp extra is not installed")
    done = run_example("fastmcp_adapter.py")
    assert done.returncode == 0, done.stderr
    assert "echo: hi" in done.stdout and "refused: -32602" in done.stdout
