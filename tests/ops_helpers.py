"""Real gateway processes for the operations tests (reload, Redis scale-out, load): stderr goes to a file,
so a chatty gateway never blocks on a full pipe and a test can read every log line afterwards."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

UPSTREAM = [sys.executable, "-m", "tests.servers.upstream_server"]
STEP_S = 60.0  # a wait, never a claim
ACCEPT_BOTH = "application/json, text/event-stream"


class GatewayProcess:
    """One `proxy --router` process; `url` once it listens (`--listen`), `log()` its stderr so far."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.process = process
        self.log_path = log_path
        self.url = ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, pattern: str, timeout: float = STEP_S) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if match := re.search(pattern, self.log()):
                return match
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in the gateway's log: {self.log()[-2000:]}")

    @property
    def base(self) -> str:
        return self.url.rsplit("/mcp", 1)[0]


@contextmanager
def gateway_process(
    tmp_path: Path,
    *flags: str,
    name: str = "gateway",
    listen: bool = True,
    upstream: Sequence[str] = UPSTREAM,
    env: dict[str, str] | None = None,
    stdin: Any = subprocess.DEVNULL,
    stdout: Any = subprocess.DEVNULL,
) -> Iterator[GatewayProcess]:
    """Start it, wait until it listens, yield it; SIGTERM at the end must stop it with status 0."""
    log_path = tmp_path / f"{name}.log"
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--router", *flags]
    if listen:
        argv += ["--listen", "127.0.0.1:0"]
    with log_path.open("wb") as log:
        process = subprocess.Popen([*argv, "--", *upstream], cwd=ROOT, stdin=stdin, stdout=stdout, stderr=log, env=env)
    gateway = GatewayProcess(process, log_path)
    try:
        if listen:
            gateway.url = gateway.wait_for_log(r"listening on (http://\S+)").group(1)
        yield gateway
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=STEP_S) == 0, gateway.log()[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=STEP_S)


def rpc(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def headers_for(session: str | None, bearer: str | None = None) -> dict[str, str]:
    headers = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
    if session is not None:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = "2025-11-25"
    if bearer is not None:
        headers["authorization"] = f"Bearer {bearer}"
    return headers


def reply_of(response: Any) -> dict[str, Any]:
    """The JSON-RPC reply of a POST (a JSON body, or the last `data:` event of an SSE body)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        return dict(events[-1])
    return dict(response.json())


async def open_session(http: Any, url: str, bearer: str | None = None) -> str:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "ops", "version": "1"}}
    opened = await http.post(url, json=rpc(0, "initialize", params), headers=headers_for(None, bearer))
    assert opened.status_code == 200, opened.text
    session: str = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=headers_for(session, bearer))).status_code == 202
    return session


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A Prometheus exposition parsed by prometheus-client's own parser: (sample name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
