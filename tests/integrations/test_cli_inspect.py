"""`mcp-interceptors serve | list | invoke` from the shell, against real stdio and HTTP servers.

The servers are always real processes. The inspecting side runs as a process where the process is what is
tested (exit statuses, signals, timeouts, logging flags, stdin at end of file); where only what it prints
is, `cli()` calls the same `main()` in this process (its stdout and stderr captured at the descriptors).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from integrations.cli import main
from interceptors_chain.stdio_pipe import STOP_GRACE_ENV
from tests.conftest import ROOT
from tests.processes import stop

CLI = [sys.executable, "-m", "integrations.cli"]
SERVE = f"{sys.executable} -m integrations.cli serve --registry tests.servers.host_registry:build_registry"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`cli("list", ...)`: the command's `main()` in this process, its exit status and what it printed."""
    capfd.readouterr()

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        code = main(list(args))
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return call


CLI_FIXTURE = Callable[..., subprocess.CompletedProcess[str]]
# A hung server is stopped on purpose below: it need not get the default 2 s to exit after stdin closes and
# again after SIGTERM (the wait is the same, only shorter; SIGKILL ends it all the same).
SHORT_GRACE = {**os.environ, STOP_GRACE_ENV: "0.2"}


def test_list_pretty_and_json(cli: CLI_FIXTURE) -> None:
    pretty = cli("list", "--server", SERVE)
    assert pretty.returncode == 0, pretty.stderr
    assert "host/deny-word  validation  tools/call @request; tools/call @response" in pretty.stdout
    raw = cli("list", "--server", SERVE, "--json", "--event", "tools/call")
    listed = json.loads(raw.stdout)
    assert [i["name"] for i in listed["interceptors"]][:1] == ["host/deny-word"]


def test_invoke_prints_the_result_or_the_error(cli: CLI_FIXTURE) -> None:
    payload = json.dumps({"name": "echo", "arguments": {"text": "a forbidden word"}})
    done = cli("invoke", "--server", SERVE, "host/deny-word", "--event", "tools/call", "--phase", "request",
               "--payload", payload, "--json")  # fmt: skip
    assert done.returncode == 1, "a validator's rejection is exit status 1 (the result is printed all the same)"
    result = json.loads(done.stdout)
    assert result["valid"] is False and result["severity"] == "error"
    missing = cli("invoke", "--server", SERVE, "nope", "--event", "tools/call", "--phase", "request", "--payload", "{}")
    assert missing.returncode == 1
    assert "error -32602" in missing.stderr and '"name": "nope"' in missing.stderr
    assert "Traceback" not in missing.stderr


def test_bad_input_is_a_clear_error_not_a_traceback(cli: CLI_FIXTURE) -> None:
    bad_json = run("invoke", "--server", SERVE, "x", "--event", "e", "--phase", "request", "--payload", "{nope")
    assert bad_json.returncode == 2 and "not JSON" in bad_json.stderr
    dead = cli("list", "--server", f"{sys.executable} -c 'import sys; sys.exit(3)'")
    assert dead.returncode == 1 and "the connection closed" in dead.stderr
    assert "sys.exit(3)" in dead.stderr  # the server named by its command line
    assert "Traceback" not in dead.stderr
    missing = cli("list", "--server", "no-such-program-anywhere --flag")
    assert missing.returncode == 1
    assert "the program 'no-such-program-anywhere' was not found" in missing.stderr, missing.stderr
    unloadable = cli("serve", "--registry", "no.such:thing")
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


def test_serve_over_http_and_inspect_it(http_server: str, cli: CLI_FIXTURE) -> None:
    listed = cli("list", "--server", http_server, "--json")
    assert listed.returncode == 0, listed.stderr
    assert "host/deny-word" in {i["name"] for i in json.loads(listed.stdout)["interceptors"]}


CLASS_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:Error|Exception|Group)\b")
STAGES = {
    "policy",
    "policy-lists",
    "transforms/request",
    "transforms/input",
    "transforms/output",
    "transforms/outbound",
    "transforms/answers",
}
SERVE_STAGES = f"{sys.executable} -m integrations.cli serve"


def listed_names(cli: CLI_FIXTURE, server: str) -> set[str]:
    done = cli("list", "--server", server, "--json")
    assert done.returncode == 0, done.stderr
    return {i["name"] for i in json.loads(done.stdout)["interceptors"]}


def test_serve_with_no_arguments_serves_the_built_in_standard_stages(tmp_path: Path, cli: CLI_FIXTURE) -> None:
    assert listed_names(cli, SERVE_STAGES) == STAGES
    assert listed_names(cli, f"{SERVE_STAGES} --policy strict") >= STAGES
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text("extends: standard\n")
    assert listed_names(cli, f"{SERVE_STAGES} --policy {policy_file}") >= STAGES
    both = listed_names(cli, f"{SERVE} --policy standard")
    assert both >= STAGES and "host/deny-word" in both
    assert "policy" not in listed_names(cli, SERVE), "with a registry and no --policy, only the registry"
    nothing = cli("serve", "--policy", "none")
    assert nothing.returncode == 2 and "nothing to serve" in nothing.stderr
    unknown = cli("serve", "--policy", "no-such-profile")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: --policy:")
    assert "Traceback" not in unknown.stderr


@pytest.mark.parametrize(
    ("fault", "problem"),
    [("truncated", "not valid JSON"), ("bad-utf8", "not valid UTF-8"), ("string-result", "its result is a string")],
)
def test_invoke_against_a_garbling_server_fails_at_once_in_words(fault: str, problem: str, cli: CLI_FIXTURE) -> None:
    server = f"{sys.executable} -m tests.servers.raw_host {fault}"
    started = time.monotonic()
    done = cli("invoke", "--server", server, "raw/check", "--event", "tools/call", "--phase", "request",
               "--payload", "{}", "--timeout", "120")  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 1
    assert elapsed < 60, "the malformed reply fails the request at once, not at the 120 s timeout"
    assert "sent a malformed reply" in done.stderr and problem in done.stderr, done.stderr
    assert not CLASS_NAME.search(done.stderr), done.stderr


def hang_server(marker: Path) -> str:
    return f"{sys.executable} -m tests.servers.faulty_host hang-once {marker}"


def wait_for_pid(marker: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text():
            return int(marker.read_text())
        time.sleep(0.05)
    raise AssertionError("the server did not start")


def test_invoke_times_out_and_reaps_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    marker = tmp_path / "hung"
    done = run("invoke", "--server", hang_server(marker), "faulty/check", "--event", "tools/call", "--phase",
               "request", "--payload", "{}", "--timeout", "5", env=SHORT_GRACE)  # fmt: skip
    assert done.returncode == 1
    assert "' did not answer within 5 s (see --timeout)" in done.stderr, done.stderr  # named by its command
    assert "error: the server '" in done.stderr and "faulty_host" in done.stderr
    assert not process_alive(int(marker.read_text()))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_invoke_reaps_its_server(tmp_path: Path, signum: int) -> None:
    marker = tmp_path / "hung"
    cli = subprocess.Popen(
        [*CLI, "invoke", "--server", hang_server(marker), "faulty/check", "--event", "tools/call", "--phase",
         "request", "--payload", "{}", "--timeout", "300"],
        cwd=ROOT, env=SHORT_GRACE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        server_pid = wait_for_pid(marker)
        time.sleep(1)  # let the invoke reach the server
        cli.send_signal(signum)
        assert cli.wait(timeout=60) == 130
        assert not process_alive(server_pid), "the server (it ignores SIGTERM and stdin) must have been killed"
        assert b"Traceback" not in cli.stderr.read()  # type: ignore[union-attr]
    finally:
        stop(cli)


def test_version_and_verbosity_flags_anywhere(cli: CLI_FIXTURE) -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("mcp-interceptors ")
    assert cli("list", "--server", SERVE, "-q").returncode == 0
    assert run("-v", "list", "--server", SERVE).returncode == 0
    proxy_help = run("proxy", "-v", "--help")
    assert proxy_help.returncode == 0, proxy_help.stderr
    assert "(default: 10)" in " ".join(run("invoke", "--help").stdout.split())


def test_a_handler_crash_is_one_warning_and_a_traceback_under_v_without_the_payload(cli: CLI_FIXTURE) -> None:
    invoke = ["invoke", "crash/always", "--event", "tools/call", "--phase", "request", "--payload",
              '{"name": "t", "arguments": {"secret": "s3cr3t-value"}}']  # fmt: skip
    serve = f"{sys.executable} -m integrations.cli serve --registry tests.servers.crash_registry:registry"
    quiet = cli(*invoke[:1], "--server", serve, *invoke[1:])
    assert quiet.returncode == 1
    assert "interceptor 'crash/always' failed: its handler raised TypeError" in quiet.stderr
    assert "Traceback" not in quiet.stderr and "traceback" not in quiet.stderr
    loud = cli(*invoke[:1], "--server", f"{serve} -v", *invoke[1:])
    assert "traceback of the TypeError" in loud.stderr and "in always" in loud.stderr, loud.stderr
    assert "s3cr3t-value" not in loud.stderr


@pytest.mark.parametrize(
    "command",
    [["serve"], ["proxy", "--", sys.executable, "-m", "tests.servers.upstream_server"]],
    ids=["serve", "proxy"],
)
def test_stdin_at_end_of_file_is_a_clean_exit(command: list[str]) -> None:
    for stdout in (subprocess.PIPE, subprocess.DEVNULL):
        done = subprocess.run([*CLI, *command], stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                              timeout=60, cwd=ROOT)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert b"Error" not in done.stderr, done.stderr


def test_serve_over_http_announces_its_address_flushed_to_a_file(tmp_path: Path, cli: CLI_FIXTURE) -> None:
    log = tmp_path / "stderr.txt"
    with log.open("wb") as sink:
        process = subprocess.Popen([*CLI, "serve", "--http", "127.0.0.1:0"], cwd=ROOT, stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + 60
        url = None
        while time.monotonic() < deadline and url is None:
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", log.read_text())
            url = found.group(1) if found else None
            time.sleep(0.05)
        assert url is not None, log.read_text()
        assert listed_names(cli, url) == STAGES
    finally:
        stop(process)


def process_alive(pid: int) -> bool:
    deadline = time.monotonic() + 10  # reparented orphans are reaped by init a moment later
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat[stat.rfind(")") + 2] == "Z":
            return False
        time.sleep(0.05)
    return True


def test_version_help_and_bad_arguments_do_not_load_the_sdk() -> None:
    """`--version`, `--help` and a bad `proxy` line answer before the MCP SDK and the chain are imported (issue 33:
    each of those imports costs most of a second of CPU): checked by what is imported, never by time."""
    probe = (
        "import contextlib, io, sys\n"
        "from integrations.cli import main\n"
        "for argv in (['--version'], ['--help'], ['proxy', '--help'], ['invoke', '--help']):\n"
        "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "        main(argv)\n"
        "with contextlib.redirect_stderr(io.StringIO()):\n"
        "    assert main(['proxy', '--listen', '0.0.0.0:1', '--', 'x']) == 2\n"
        "    assert main(['proxy', '--upstream', 'ftp://h/mcp']) == 2\n"
        "    assert main(['proxy', '--policy', 'no-such-profile', '--', 'x']) == 2\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'interceptors_chain'))\n"
        "print(heavy[:5])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
