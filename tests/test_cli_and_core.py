"""The console entry points and the promise that the core never imports an MCP SDK."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_core_does_not_import_mcp() -> None:
    code = (
        "import sys, interceptors, interceptors.security; "
        "bad = [m for m in ('mcp', 'mcp_types', 'starlette') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=ROOT)


def test_demo_blocks_and_changes_a_call() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "demo"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "<[email]>" in done.stdout and "ada@example.com" not in done.stdout
    assert done.stdout.count("call delete_repository -> blocked: error -32602") == 2  # in-process and gateway
    assert done.stdout.count("<[email]>") == 2
    # Part 3: the standard profile redacts the leaky tool's credentials before the client sees them.
    seen = next(line for line in done.stdout.splitlines() if "client saw:" in line)
    assert "[REDACTED" in seen and "ghp_" not in seen and "AKIAZ7X3Q9WM4LR2KT6P" not in seen
