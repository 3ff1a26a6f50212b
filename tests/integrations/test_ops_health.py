"""Health without extras and errors that say what happened (issue 32): `/healthz` and `/readyz` on a plain
install, `--metrics` without its extra in one line, a chain file's unreachable server named with its URL."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import ROOT
from tests.ops_helpers import STEP_S, UPSTREAM, GatewayProcess

BLOCKED = "prometheus_client"
"""The package of the `metrics` extra (the `mcp` SDK itself needs opentelemetry-api, so that one is always there)."""


def _without_extras(*argv: str) -> list[str]:
    return [sys.executable, "-m", "tests.servers.without_extras", BLOCKED, "--", *argv]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=STEP_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_metrics_without_its_extra_is_one_line_naming_the_extra_and_exit_2() -> None:
    done = subprocess.run(
        _without_extras("proxy", "--metrics", "127.0.0.1:0", "--", *UPSTREAM),
        cwd=ROOT, capture_output=True, timeout=STEP_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: --metrics needs the metrics extra")
    assert "pip install 'mcp-interceptors[metrics]'" in lines[0]
    assert done.stdout == b""


def test_a_malformed_metrics_address_is_bad_input() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "proxy", "--metrics", "nowhere", "--", *UPSTREAM],
        cwd=ROOT, capture_output=True, timeout=STEP_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.decode().strip() == "error: --metrics wants HOST:PORT, not 'nowhere'"


def test_healthz_and_readyz_answer_on_listen_without_the_metrics_extra(tmp_path: Path) -> None:
    log_path = tmp_path / "gateway.log"
    argv = _without_extras("proxy", "--policy", "none", "--listen", "127.0.0.1:0", "--", *UPSTREAM)
    with log_path.open("wb") as log:
        process = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    gateway = GatewayProcess(process, log_path)
    try:
        base = gateway.wait_for_log(r"listening on (http://\S+)").group(1).rsplit("/mcp", 1)[0]
        for path in ("/healthz", "/readyz"):
            status, body = _get(base + path)
            assert status == 200, body
            report = json.loads(body)
            assert report["status"] == "ok"
            assert report["upstream"] == {"connected": True}
            assert report["generation"] == 1
        assert _get(base + "/metrics")[0] == 404  # the extra's own page: not there without it
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=STEP_S) == 0, gateway.log()
        assert "prometheus" not in gateway.log().lower()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=STEP_S)


def _chain_with_unreachable_server(tmp_path: Path) -> tuple[Path, str]:
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    chain = tmp_path / "chain.yaml"
    chain.write_text(f"servers:\n  - name: remote-dlp\n    url: {url}?token=s3cr3t-in-query\n")
    return chain, url


def test_a_chain_servers_unreachable_url_is_named_with_the_server(tmp_path: Path) -> None:
    chain, url = _chain_with_unreachable_server(tmp_path)
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--chain", str(chain), "--", *UPSTREAM]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=STEP_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    error = done.stderr.decode().splitlines()[-1]
    assert error.startswith("error: interceptor server 'remote-dlp' is unavailable: could not reach "), error
    assert url in error
    assert "unexpected internal error" not in done.stderr.decode()
    assert "s3cr3t-in-query" not in done.stderr.decode()  # a query can carry credentials: never shown


def test_verbose_adds_the_cause_of_a_start_failure(tmp_path: Path) -> None:
    chain, _ = _chain_with_unreachable_server(tmp_path)
    quiet = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "proxy", "--chain", str(chain), "--", *UPSTREAM],
        cwd=ROOT, capture_output=True, timeout=STEP_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    verbose = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "-v", "proxy", "--chain", str(chain), "--", *UPSTREAM],
        cwd=ROOT, capture_output=True, timeout=STEP_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "Traceback" not in quiet.stderr.decode()
    assert "Traceback" in verbose.stderr.decode()
    assert "ConnectError" in verbose.stderr.decode()  # the HTTP client's own exception, for whoever debugs
