"""`--policy standard` in the gateway: a credential planted in each channel the gateway relays never reaches
the client verbatim (issue 14). A real gateway subprocess, a hand-written upstream that plants a distinct key
per channel (tests/servers/planted_upstream.py) and a client speaking raw JSON lines, so every message the
client receives is seen exactly as sent. Each scenario also proves its messages arrived masked (the key's
masked form is there), so a dropped message can never pass for a redacted one.
"""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.servers.planted_upstream import PLANTS

pytestmark = pytest.mark.slow

STEP_S = 60.0
UPSTREAM = [sys.executable, "-m", "tests.servers.planted_upstream"]


def masked(key: str) -> str:
    return f"{key[:4]}{'*' * 12}{key[-4:]}"


class Wire:
    """The client end of a gateway on stdio: raw JSON lines in and out."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, **message: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.process.stdin.flush()

    def next(self) -> dict[str, Any]:
        message = self.lines.get(timeout=STEP_S)
        assert message is not None, "the gateway closed its output"
        self.seen.append(message)
        return message

    def until(self, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            message = self.next()
            if done(message):
                return message

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send(id=request_id, method=method, **({"params": params} if params is not None else {}))
        return self.until(lambda m: m.get("id") == request_id and "method" not in m)


@contextmanager
def gateway() -> Iterator[Wire]:
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--router", "--policy", "standard", "--", *UPSTREAM]
    process = subprocess.Popen(
        argv, cwd=str(ROOT), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        wire = Wire(process)
        capabilities = {"sampling": {}, "elicitation": {}, "roots": {}, "tasks": {}}
        init = wire.request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        assert "result" in init, init
        wire.send(method="notifications/initialized")
        yield wire
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=STEP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _initialize(wire: Wire) -> None:
    pass  # the handshake itself is the scenario


def _lists(wire: Wire) -> None:
    for request_id, method in enumerate(("tools/list", "resources/list", "resources/templates/list", "prompts/list")):
        assert "result" in wire.request(request_id + 1, method)


def _resources(wire: Wire) -> None:
    reply = wire.request(1, "resources/read", {"uri": "file:///r"})
    blob = reply["result"]["contents"][1]["blob"]
    decoded = base64.b64decode(blob).decode()
    assert PLANTS["resource-blob"] not in decoded and masked(PLANTS["resource-blob"]) in decoded


def _prompts(wire: Wire) -> None:
    assert "result" in wire.request(1, "prompts/get", {"name": "p"})


def _completion(wire: Wire) -> None:
    ref = {"type": "ref/prompt", "name": "p"}
    assert "result" in wire.request(1, "completion/complete", {"ref": ref, "argument": {"name": "a", "value": ""}})


def _tool_result(wire: Wire) -> None:
    assert "result" in wire.request(1, "tools/call", {"name": "leak", "arguments": {}})


def _progress_and_log(wire: Wire) -> None:
    wire.request(1, "logging/setLevel", {"level": "debug"})
    wire.until(lambda m: m.get("method") == "notifications/message")  # the log outside any request
    reply = wire.request(2, "tools/call", {"name": "progress", "arguments": {}, "_meta": {"progressToken": "t"}})
    assert "result" in reply
    methods = [m.get("method") for m in wire.seen]
    assert "notifications/progress" in methods and methods.count("notifications/message") == 2


def _error(wire: Wire) -> None:
    reply = wire.request(1, "tools/call", {"name": "fail", "arguments": {}})
    assert reply["error"]["code"] == -32099  # the upstream's code, verbatim


def _resource_updated(wire: Wire) -> None:
    wire.request(1, "resources/subscribe", {"uri": "file:///r"})
    wire.until(lambda m: m.get("method") == "notifications/resources/updated")


def _list_changed(wire: Wire) -> None:
    wire.send(id=1, method="tools/call", params={"name": "change", "arguments": {}})
    wanted = {"notifications/tools/list_changed", 1}  # the notification rides no request: either may come first
    while wanted:
        message = wire.next()
        wanted.discard(message.get("method") or message.get("id"))


def _server_requests(wire: Wire) -> None:
    for request_id, tool, method, answer in (
        (1, "sample", "sampling/createMessage", {"role": "assistant", "content": {"type": "text", "text": "hi"},
                                                 "model": "m"}),
        (2, "elicit", "elicitation/create", {"action": "accept", "content": {"ok": True}}),
    ):  # fmt: skip
        wire.send(id=request_id, method="tools/call", params={"name": tool, "arguments": {}})
        asked = wire.until(lambda m, method=method: m.get("method") == method)
        wire.send(id=asked["id"], result=answer)
        wire.until(lambda m, request_id=request_id: m.get("id") == request_id and "method" not in m)


def _tasks(wire: Wire) -> None:
    created = wire.request(1, "tools/call", {"name": "slow", "arguments": {}, "task": {"ttl": 60000}})
    assert created["result"]["task"]["taskId"] == "task-1"
    wire.until(lambda m: m.get("method") == "notifications/tasks/status")
    assert "result" in wire.request(2, "tasks/get", {"taskId": "task-1"})
    assert "result" in wire.request(3, "tasks/result", {"taskId": "task-1"})


SCENARIOS: dict[str, tuple[Callable[[Wire], None], tuple[str, ...]]] = {
    "initialize": (_initialize, ("instructions", "server-info")),
    "lists": (
        _lists,
        (
            "tool-description",
            "tool-title",
            "schema-description",
            "schema-default",
            "tool-meta",
            "resource-description",
            "resource-uri",
            "template-description",
            "prompt-list-description",
            "prompt-argument",
        ),
    ),
    "resource contents": (_resources, ("resource-text", "resource-meta")),
    "prompt": (_prompts, ("prompt-description", "prompt-message", "prompt-embedded")),
    "completion": (_completion, ("completion",)),
    "tool result": (_tool_result, ("tool-text", "tool-structured", "tool-block-meta")),
    "progress and logs": (_progress_and_log, ("progress", "log-in-call", "log-outside")),
    "error": (_error, ("error-message", "error-data")),
    "resource updated": (_resource_updated, ("resource-updated",)),
    "list changed": (_list_changed, ("list-changed",)),
    "requests to the client": (_server_requests, ("sampling-message", "sampling-system", "elicitation-message")),
    "tasks": (_tasks, ("task-record", "task-status", "task-result")),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_credential_planted_in_each_channel_reaches_the_client_only_masked(scenario: str) -> None:
    drive, channels = SCENARIOS[scenario]
    with gateway() as wire:
        drive(wire)
        seen = json.dumps(wire.seen)
    for channel in channels:
        key = PLANTS[channel]
        assert key not in seen, f"the {channel} credential reached the client verbatim"
        assert masked(key) in seen, f"the {channel} message never reached the client (or was not masked)"


def test_the_table_covers_every_planted_channel() -> None:
    covered = {channel for _, channels in SCENARIOS.values() for channel in channels}
    assert covered | {"resource-blob"} == set(PLANTS)


def test_a_roots_request_of_the_upstream_reaches_the_client_and_its_answer_goes_back() -> None:
    with gateway() as wire:
        wire.send(id=1, method="tools/call", params={"name": "roots", "arguments": {}})
        asked = wire.until(lambda m: m.get("method") == "roots/list")
        wire.send(id=asked["id"], result={"roots": [{"uri": "file:///work", "name": "work"}]})
        reply = wire.until(lambda m: m.get("id") == 1 and "method" not in m)
    assert reply["result"]["content"][0]["text"] == "roots: 1"
