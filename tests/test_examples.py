"""Every example runs."""

from __future__ import annotations

import subprocess
import sys

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
