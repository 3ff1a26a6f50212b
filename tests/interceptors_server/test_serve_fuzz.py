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

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"},
}
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
        self.envelope: dict[str, Any] | None = None  # on a 2026-era connection: added to every dict `params`
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
        if self.envelope is not None and isinstance(message.get("params", {}), dict):
            message = {**message, "params": {**message.get("params", {}), "_meta": self.envelope}}
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

    def reply_to(self, request_id: Any) -> dict[str, Any]:
        """The next reply carrying `request_id` (other lines are skipped)."""
        while True:
            try:
                reply: dict[str, Any] = json.loads(self.replies.get(timeout=10))
            except queue.Empty:
                raise AssertionError(f"no reply to request {request_id!r}") from None
            if reply.get("id") == request_id:
                return reply

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


@pytest.fixture(scope="module", params=["2025", "2026"])
def serve(request: pytest.FixtureRequest) -> Iterator[ServeProcess]:
    """A served process on a 2025-era connection (initialize), or a 2026-era one (opened by server/discover,
    every request then carrying the envelope: `interceptor/invoke` is answered by the express lane)."""
    child = ServeProcess()
    if request.param == "2026":
        child.envelope = ENVELOPE
        handshake = child.request({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}})
        assert "result" in handshake
    else:
        client = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}
        handshake = child.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": client})
        assert "result" in handshake
        child.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    yield child
    child.close()


def assert_well_formed(reply: dict[str, Any], modern: bool = False) -> None:
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        error = reply["error"]
        assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str), reply
    else:
        assert isinstance(reply["result"], dict)
        if modern:  # a 2026-era result, from the lane or the SDK, carries its envelope
            assert reply["result"].get("resultType") == "complete", reply
            assert "io.modelcontextprotocol/serverInfo" in reply["result"].get("_meta", {}), reply


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
    assert_well_formed(serve.request(message), modern=serve.envelope is not None)
    assert serve.alive()


def test_an_oversized_line_is_survived_and_answered_with_its_id(serve: ServeProcess) -> None:
    serve.send(b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"' + b"a" * (70 * 1024 * 1024) + b'"}}\n')
    reply = serve.reply_to("big")
    assert reply["error"]["code"] == -32600 and "line limit" in reply["error"]["data"]["reason"]
    probe(serve)


def test_broken_lines_get_the_cores_errors_with_a_reason(serve: ServeProcess) -> None:
    """The server's transport classifies lines as the gateway's router does (`interceptors.protocol.messages`)."""
    serve.send(b'{"jsonrpc":"2.0","id":"torn","method":"ping",\n')  # not JSON: its id read from its first bytes
    torn = serve.reply_to("torn")
    assert torn["error"]["code"] == -32700 and torn["error"]["data"]["reason"]
    serve.send(b'{"jsonrpc":"2.0","id":"arr","method":"interceptors/list","params":[1]}\n')
    shaped = serve.reply_to("arr")
    assert shaped["error"]["code"] == -32602 and shaped["error"]["data"] == {"reason": "params must be an object"}
    probe(serve)
