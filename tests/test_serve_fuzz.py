"""`mcp-interceptors serve` over stdio under hostile input: it never crashes, and every request is answered
with a well-formed JSON-RPC result or error."""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT

METHODS = ["interceptors/list", "interceptor/invoke", "tools/call", "ping", "initialize", "nope/nope", "", "*"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)  # fmt: skip


class ServeProcess:
    """One `serve` child; replies are read by a thread so a silent server cannot hang the test."""

    def __init__(self) -> None:
        command = [
            sys.executable,
            "-m",
            "integrations.cli",
            "serve",
            "--registry",
            "tests.servers.host_registry:build_registry",
        ]
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.replies: queue.Queue[bytes] = queue.Queue()
        self.ids = itertools.count(1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.replies.put(line)

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the reply carrying its id (other lines are checked and skipped)."""
        self.send(json.dumps(message).encode() + b"\n")
        while True:
            try:
                line = self.replies.get(timeout=10)
            except queue.Empty:
                raise AssertionError(f"no reply to request {message.get('id')}") from None
            reply = json.loads(line)
            assert reply.get("jsonrpc") == "2.0"
            if reply.get("id") == message["id"]:
                return reply  # type: ignore[no-any-return]

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def serve() -> Iterator[ServeProcess]:
    child = ServeProcess()
    handshake = child.request({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}},
    })  # fmt: skip
    assert "result" in handshake
    child.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    yield child
    child.close()


def assert_well_formed(reply: dict[str, Any]) -> None:
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        error = reply["error"]
        assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str), reply
    else:
        assert isinstance(reply["result"], dict)


def probe(serve: ServeProcess) -> None:
    reply = serve.request({"jsonrpc": "2.0", "id": next(serve.ids), "method": "interceptors/list"})
    assert "result" in reply and serve.alive()


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_it(serve: ServeProcess, data: bytes) -> None:
    serve.send(data.replace(b"\n", b" ") + b"\n")
    probe(serve)


@SETTINGS
@given(method=st.sampled_from(METHODS) | st.text(max_size=30), params=JSON | st.fixed_dictionaries({
    "name": st.sampled_from(["host/deny-word", "host/tag", "nope"]) | st.text(max_size=10),
    "event": st.sampled_from(["tools/call", "*", "tools/*", "ping"]) | st.text(max_size=10),
    "phase": st.sampled_from(["request", "response", "both"]) | JSON,
    "payload": JSON,
    "timeoutMs": st.none() | st.integers(-5, 5000) | JSON,
    "config": st.none() | JSON,
    "context": st.none() | JSON,
}))  # fmt: skip
def test_arbitrary_json_rpc_requests_get_well_formed_answers(serve: ServeProcess, method: str, params: Any) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(serve.ids), "method": method}
    if params is not None:
        message["params"] = params
    assert_well_formed(serve.request(message))
    assert serve.alive()


def test_an_oversized_line_is_survived(serve: ServeProcess) -> None:
    serve.send(b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"' + b"a" * (70 * 1024 * 1024) + b'"}}\n')
    probe(serve)
