"""The smaller operator findings of issue 32, each checked where it showed: bench from a plain install, `serve`
stopped by SIGTERM or started with stdin closed, `proxy` when its client leaves during the upstream's
handshake, `proxy --help`, the README's conformance command in a clone, the hidden-resource code in the docs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from integrations.gateway.router.state import DEFAULT_MISSING
from interceptors.protocol.eras import Era
from tests.conftest import ROOT
from tests.integrations.gateway.test_gateway import STEP_S
from tests.ops_helpers import GatewayProcess

WITHOUT_TESTING = [sys.executable, "-m", "tests.servers.without_extras", "hypothesis,pytest,_pytest", "--"]


def test_the_vault_bench_runs_without_the_testing_extra() -> None:
    code = "from bench.vault_bench import _redis\nwith _redis() as url:\n    assert url is None\nprint('ran')"
    done = subprocess.run([*WITHOUT_TESTING, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=STEP_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran"
    assert 'Redis runs skipped: they need pip install "mcp-interceptors[testing]"' in done.stderr


def test_bench_quality_without_the_testing_extra_is_one_line() -> None:
    done = subprocess.run(
        [*WITHOUT_TESTING, "bench", "--quality", "--quick"], cwd=ROOT, capture_output=True, text=True,
        timeout=STEP_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    expected = 'error: bench --quality needs the testing extra: pip install "mcp-interceptors[testing]"'
    assert done.stderr.strip() == expected


def test_serve_http_exits_0_on_sigterm(tmp_path: Path) -> None:
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "integrations.cli", "serve", "--http", "127.0.0.1:0"],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    serving = GatewayProcess(process, log_path)
    try:
        serving.wait_for_log(r"listening on http://")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=STEP_S) == 0, serving.log()
        assert "Traceback" not in serving.log()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=STEP_S)


def test_serve_with_stdin_closed_is_one_error_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "serve"], cwd=ROOT, capture_output=True, text=True,
        timeout=STEP_S, stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: serve speaks MCP on stdin and stdout, and one of them is closed")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_proxy_ends_when_its_client_leaves_during_the_upstreams_handshake() -> None:
    """The upstream never answers `initialize`; the client sends it and closes stdin: the gateway exits 0 then,
    not when the upstream ends (which would be in 10 minutes, past this test's bound)."""
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}) + "\n"
    silent = [sys.executable, "-c", "import time; time.sleep(600)"]
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "none", "--", *silent],
        cwd=ROOT, input=line, capture_output=True, text=True, timeout=STEP_S,
        env={**os.environ, "MCP_INTERCEPTORS_STOP_GRACE_S": "0.2"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_proxy_help_no_longer_ties_reload_to_router() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "proxy", "--help"], cwd=ROOT, capture_output=True, text=True,
        timeout=STEP_S,
    )  # fmt: skip
    flat = " ".join(done.stdout.split())
    reload_help = flat[flat.index("--reload") :][:200]
    assert "with --router" not in reload_help and "reload the policy and chain files" in reload_help


def test_the_readmes_conformance_command_works_in_a_clone() -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"in a clone,\s+`mcp-interceptors conformance (\S+)`", readme)
    assert match is not None
    path = match.group(1)
    assert (ROOT / path).is_dir()  # in the repository, not beside it
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "-q", "conformance", path], cwd=ROOT, capture_output=True,
        text=True, timeout=STEP_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    claimed = re.search(r"`(\d+) passed, 0 failed`", readme[match.end() :])
    assert claimed is not None and f"{claimed.group(1)} passed, 0 failed" in done.stdout


def test_the_policy_doc_gives_the_gateways_hidden_resource_code() -> None:
    row = next(line for line in (ROOT / "doc" / "POLICY.md").read_text().splitlines() if "hidden resource" in line)
    code = DEFAULT_MISSING[(Era.HANDSHAKE, "resources/read")].code
    assert f"{code} `Resource not found` on 2025-11-25" in row
