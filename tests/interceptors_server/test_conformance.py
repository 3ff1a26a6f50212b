"""The conformance runner: the public fixtures, our own extra fixtures, and failure reporting."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from interceptors_server.conformance import run_conformance
from tests.conftest import ROOT, shared_fixtures

OWN_FIXTURES = ROOT / "tests" / "fixtures" / "conformance"


def _run(paths: list[Path], mode: str = "auto", transport: str = "inprocess") -> tuple[int, int, str]:
    out = io.StringIO()

    async def main() -> tuple[int, int]:
        return await run_conformance(paths, mode=mode, out=out, transport=transport)  # type: ignore[arg-type]

    passed, failed = anyio.run(main)
    return passed, failed, out.getvalue()


TRANSPORTS = [("inprocess", "auto"), ("mcp", "auto"), ("mcp", "legacy")]
"""The in-process transport, and the SDK's in-memory MCP transport in both eras: the same fixtures, the same
results, which is what "in-process and remote take the same path" rests on."""


@pytest.mark.parametrize(("transport", "mode"), TRANSPORTS)
def test_public_fixtures_all_pass(transport: str, mode: str) -> None:
    fixtures = shared_fixtures()
    if fixtures is None:
        pytest.skip("the shared conformance fixtures are not beside this checkout")
    passed, failed, output = _run([fixtures], mode, transport)
    assert (passed, failed) == (24, 0), output
    assert output.strip().splitlines()[-1] == "24 passed, 0 failed"


@pytest.mark.parametrize(("transport", "mode"), TRANSPORTS)
def test_own_fixtures_cover_the_rest_of_the_secret_catalog(transport: str, mode: str) -> None:
    passed, failed, output = _run([OWN_FIXTURES], mode, transport)
    assert failed == 0, output
    assert passed == len(list(OWN_FIXTURES.glob("*.json")))


def test_cli_prints_the_summary_and_exits_zero() -> None:
    fixtures = shared_fixtures() or OWN_FIXTURES
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "conformance", str(fixtures)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].endswith("passed, 0 failed")


def _write(path: Path, document: dict[str, object]) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_failures_are_reported_per_step_and_exit_one(tmp_path: Path) -> None:
    base = json.loads((OWN_FIXTURES / "invoke-errors.json").read_text())
    wrong = dict(base, id="protocol/wrong-expectation")
    steps = [dict(step) for step in base["steps"]]
    steps[0] = {**steps[0], "expect": {"errorCode": -32602}}
    steps[3] = {**steps[3], "expect": {"decision": "deny"}}
    wrong["steps"] = steps
    bad_behavior = dict(base, id="protocol/bad-behavior")
    bad_behavior["interceptors"] = [{**base["interceptors"][0], "behavior": "no-such-behavior"}]
    _write(tmp_path / "wrong.json", wrong)
    _write(tmp_path / "bad.json", bad_behavior)
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "manifest.json").write_text(json.dumps({"fixtures": []}))  # not a fixture: ignored
    passed, failed, output = _run([tmp_path])
    assert (passed, failed) == (0, 3), output
    assert "step 0 (invoke): expected error -32602, got -32603" in output
    assert "step 3 (apply): expected decision 'deny', got 'allow'" in output
    assert "no-such-behavior" in output
    assert output.strip().splitlines()[-1] == "0 passed, 3 failed"
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "conformance", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1


def test_strawman_without_security_behaviors_fails_the_flows(tmp_path: Path) -> None:
    """Binding the guard to allow-all must fail every relaybleed fixture: the runner really checks."""
    for source in OWN_FIXTURES.glob("relaybleed-*.json"):
        document = json.loads(source.read_text())
        for spec in document["interceptors"]:
            spec["behavior"] = "allow-all"
        _write(tmp_path / source.name, document)
    passed, failed, output = _run([tmp_path])
    assert passed == 0 and failed == 4, output
    assert output.count("expected decision 'deny', got 'allow'") == 4
