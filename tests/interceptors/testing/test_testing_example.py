"""The worked example of doc/TESTING.md (examples/custom_detector) runs, as its own pytest session."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_the_custom_detector_example_passes() -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "integrations.pytest_plugin", "examples/custom_detector"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "5 passed" in done.stdout
