"""Hot reload of the router gateway (`proxy --router --reload`, SIGHUP), on real processes: a policy edit
under a live HTTP session applies to the next call, an invalid edit is rejected (logged without its values)
and the old rule stays, SIGHUP reloads the stdio gateway (and no longer stops it), a chain-file edit starts
and stops a remote interceptor server. Every wait is a bounded poll, never a claim about time."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.ops_helpers import STEP_S, gateway_process, headers_for, open_session, reply_of, rpc, scrape
from tests.processes import children

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TEST_S = 240.0
OPEN = "name: reloadable\nextends: open\nhide_denied: false\n"
DENY_ECHO = OPEN + "deny_tools: [echo]\n"
PLANTED = "sk-live-PLANTEDvaultkey0123456789"
INVALID = DENY_ECHO.replace("deny_tools: [echo]", "deny_tools: 7") + f"vault: {{key: {PLANTED}}}\n"
DENIED = -31001


async def call_echo(http: httpx2.AsyncClient, url: str, session: str, n: int, text: str = "hello") -> dict[str, Any]:
    call = rpc(n, "tools/call", {"name": "echo", "arguments": {"text": text}})
    return reply_of(await http.post(url, json=call, headers=headers_for(session)))


async def until(check: Any, what: str) -> Any:
    """Poll `check()` (async) until it returns something truthy; bounded by STEP_S."""
    deadline = time.monotonic() + STEP_S
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await anyio.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


async def test_a_policy_edit_under_a_live_http_session_applies_to_the_next_call(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(OPEN)
    with anyio.fail_after(TEST_S):
        with gateway_process(tmp_path, "--policy", str(policy), "--reload") as gateway:
            async with httpx2.AsyncClient(timeout=STEP_S) as http:
                session = await open_session(http, gateway.url)
                first = await call_echo(http, gateway.url, session, 1)
                assert first["result"]["structuredContent"] == {"text": "hello"}, first
                policy.write_text(DENY_ECHO)
                counter = iter(range(2, 10_000))

                async def denied() -> Any:
                    reply = await call_echo(http, gateway.url, session, next(counter))
                    return reply if "error" in reply else None

                refused = await until(denied, "the edited policy denying echo")
                assert refused["error"]["code"] == DENIED, refused
                # The same session goes on; another tool still passes.
                other = rpc(90_000, "tools/call", {"name": "sleep", "arguments": {"seconds": 0}})
                assert "result" in reply_of(await http.post(gateway.url, json=other, headers=headers_for(session)))

                policy.write_text(INVALID)

                async def rejected() -> bool:
                    samples = scrape((await http.get(f"{gateway.base}/metrics")).text)
                    return samples.get(("mcp_interceptors_reloads_total", (("outcome", "rejected"),)), 0) >= 1

                await until(rejected, "the invalid edit counted as rejected")
                still = await call_echo(http, gateway.url, session, 90_001)
                assert still["error"]["code"] == DENIED, "the old rule must stay after an invalid edit"
                samples = scrape((await http.get(f"{gateway.base}/metrics")).text)
                assert samples[("mcp_interceptors_reloads_total", (("outcome", "ok"),))] == 1
                assert samples[("mcp_interceptors_config_generation", ())] == 2
                health = (await http.get(f"{gateway.base}/healthz")).json()
                assert health["generation"] == 2 and health["status"] == "ok", health
        log = gateway.log()
        assert "rejected" in log and "deny_tools" in log, log[-2000:]
        assert PLANTED not in log, "a value of the invalid document reached the log"


class LinePeer:
    """A stdio gateway spoken to line by line (a reader thread; every read bounded)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        while True:
            reply: dict[str, Any] = json.loads(self.lines.get(timeout=STEP_S))
            if reply.get("id") == message["id"]:
                return reply


def test_sighup_reloads_the_stdio_gateway_and_keeps_it_running(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(OPEN)
    with gateway_process(
        tmp_path, "--policy", str(policy), listen=False, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as gateway:
        peer = LinePeer(gateway.process)
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "ops", "version": "1"}}
        assert "result" in peer.ask(rpc(0, "initialize", init))
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        def echo(n: int) -> dict[str, Any]:
            return peer.ask(rpc(n, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))

        assert "result" in echo(1)
        policy.write_text(DENY_ECHO)
        assert "result" in echo(2), "without --reload nothing watches the file: only SIGHUP reloads"
        gateway.process.send_signal(signal.SIGHUP)
        deadline, n = time.monotonic() + STEP_S, 3
        while "error" not in (reply := echo(n)):
            assert time.monotonic() < deadline, "SIGHUP never reloaded the policy"
            n += 1
            time.sleep(0.1)
        assert reply["error"]["code"] == DENIED, reply
        assert gateway.process.poll() is None, "SIGHUP must not stop the router gateway"
        gateway.wait_for_log(r"reload \(signal\) done: configuration generation 2")
        assert gateway.process.stdin is not None
        gateway.process.stdin.close()  # the client leaves: exit 0 (checked by gateway_process)
        assert gateway.process.wait(timeout=STEP_S) == 0


def _host_processes(pid: int) -> list[int]:
    found = []
    for child in children(pid):
        try:
            if b"stdio_host" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            continue
    return found


async def test_a_chain_file_edit_starts_and_stops_a_remote_interceptor_server(tmp_path: Path) -> None:
    """Adding a remote server (its mutator upper-cases a `shout:` text) starts it; removing it stops its process."""
    chain = tmp_path / "chain.yaml"
    chain.write_text("servers: []\n")
    with_host = f"servers:\n  - name: host\n    command: [{sys.executable}, -m, tests.servers.stdio_host, --gateway]\n"
    with anyio.fail_after(TEST_S):
        with gateway_process(tmp_path, "--policy", "none", "--chain", str(chain), "--reload") as gateway:
            async with httpx2.AsyncClient(timeout=STEP_S) as http:
                session = await open_session(http, gateway.url)
                counter = iter(range(1, 10_000))

                async def echoed(expected: str) -> bool:
                    reply = await call_echo(http, gateway.url, session, next(counter), "shout:hi")
                    return bool(reply.get("result", {}).get("structuredContent") == {"text": expected})

                assert await echoed("shout:hi")
                chain.write_text(with_host)
                await until(lambda: echoed("SHOUT:HI"), "the added interceptor server's mutator")
                assert _host_processes(gateway.process.pid), "the added server runs as a child of the gateway"
                chain.write_text("servers: []\n")
                await until(lambda: echoed("shout:hi"), "the removed server's mutator gone")

                async def stopped() -> bool:
                    return not _host_processes(gateway.process.pid)

                await until(stopped, "the removed interceptor server's process stopped")
