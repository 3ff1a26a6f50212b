"""The multi-server gateway (issue 35) in front of the npm reference servers: server-everything,
server-filesystem and server-memory behind one Claude-Desktop-style `mcpServers` file. Skipped unless
MCP_INTERCEPTORS_NPM_SERVERS names a folder where they are installed (see
tests/integrations/gateway/test_gateway_realservers.py);
CI does not need them.

Through the aggregate over stdio (a raw JSON-lines client, so every message is seen): the three catalogs,
namespaced; sampling, elicitation and roots relayed to server-everything and answered back; a task of
server-everything (`simulate-research-query`, task support required) created, polled, listed and its
result fetched by its namespaced id; server-memory killed: its calls fail at once naming it, the other
two go on, and it comes back in the same client session.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.integrations.gateway.test_gateway_realservers import _npm_servers
from tests.processes import children, stop

pytestmark = [pytest.mark.slow]


class RawClient:
    """JSON lines to and from the gateway; answers the servers' requests to the client as a host would."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notes: list[dict[str, Any]] = []
        self.asked: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._ids = iter(range(1, 1_000_000))

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.inbox.put(json.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        request_id = next(self._ids)
        self.send({"id": request_id, "method": method, "params": params or {}})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if "method" in message and "id" in message:
                self._answer(message)
            elif "method" in message:
                self.notes.append(message)
            elif message.get("id") == request_id:
                return message
        raise AssertionError(f"no answer to {method} within {timeout} s")

    def _answer(self, message: dict[str, Any]) -> None:
        method = message["method"]
        self.asked.append(method)
        result: dict[str, Any] = {}
        if method == "roots/list":
            result = {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}
        elif method == "sampling/createMessage":
            result = {"role": "assistant", "content": {"type": "text", "text": "sampled by the host"}, "model": "m"}
        elif method == "elicitation/create":
            result = {"action": "accept", "content": {"name": "Ada"}}
        self.send({"id": message["id"], "result": result})

    def call(self, name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments or {}, **extra})


def text(reply: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in reply["result"]["content"])


def test_three_npm_servers_behind_one_mcp_servers_file(tmp_path: Path) -> None:
    bin_dir, env = _npm_servers()
    if not (bin_dir / "mcp-server-memory").exists():
        pytest.skip("mcp-server-memory is not installed")
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "note.txt").write_text("hello from the filesystem")
    document = {
        "mcpServers": {
            "everything": {"command": str(bin_dir / "mcp-server-everything")},
            "filesystem": {"command": str(bin_dir / "mcp-server-filesystem"), "args": [str(folder)]},
            "memory": {
                "command": str(bin_dir / "mcp-server-memory"),
                "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
            },
        }
    }
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(document))
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "none", "--config", str(path)]
    client = RawClient(argv, {**env, "PYTHONPATH": str(ROOT)})
    try:
        capabilities = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}}
        init = client.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                                             "clientInfo": {"name": "raw", "version": "1"}})  # fmt: skip
        assert "tasks" in init["result"]["capabilities"]
        client.send({"method": "notifications/initialized"})
        tools = {tool["name"] for tool in client.request("tools/list")["result"]["tools"]}
        assert {"everything__echo", "filesystem__read_text_file", "memory__read_graph"} <= tools
        assert {name.partition("__")[0] for name in tools} == {"everything", "filesystem", "memory"}
        uris = [r["uri"] for r in client.request("resources/list")["result"]["resources"]]
        assert any(uri.startswith("everything+demo://") for uri in uris)
        assert all(uri.startswith(("everything+", "filesystem+", "memory+")) for uri in uris)

        assert "hello from the filesystem" in text(
            client.call("filesystem__read_text_file", {"path": str(folder / "note.txt")})
        )
        sampled = client.call("everything__trigger-sampling-request", {"prompt": "hi"})
        assert "sampled by the host" in text(sampled)
        elicited = client.call("everything__trigger-elicitation-request")
        assert "Ada" in text(elicited)
        assert "file:///tmp" in text(client.call("everything__get-roots-list"))
        assert {"sampling/createMessage", "elicitation/create", "roots/list"} <= set(client.asked)

        created = client.call("everything__simulate-research-query", {"topic": "gateways"}, task={"ttl": 60000})
        task_id = created["result"]["task"]["taskId"]
        assert task_id.startswith("everything__")
        assert client.request("tasks/get", {"taskId": task_id})["result"]["taskId"] == task_id
        assert task_id in [t["taskId"] for t in client.request("tasks/list")["result"]["tasks"]]
        assert "gateways" in text(client.request("tasks/result", {"taskId": task_id}, timeout=60))

        # server-memory killed: fast failures naming it, the others unaffected, back in the same session
        client.call("memory__create_entities", {"entities": [{"name": "a", "entityType": "t", "observations": []}]})
        gateway_pid = client.process.pid
        memory = [pid for pid in children(gateway_pid) if "memory" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(memory) == 1
        os.kill(memory[0], signal.SIGKILL)
        failures: list[float] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert "hello" in text(client.call("filesystem__read_text_file", {"path": str(folder / "note.txt")}))
            started = time.monotonic()
            reply = client.call("memory__read_graph")
            if "error" in reply:
                failures.append(time.monotonic() - started)
                assert reply["error"]["data"]["server"] == "memory" and "memory" in reply["error"]["message"]
                time.sleep(0.05)
                continue
            assert '"name": "a"' in text(reply) or '"name":"a"' in text(reply)  # its file kept the entity
            break
        else:
            raise AssertionError("server-memory did not come back")
        assert all(seconds < 5 for seconds in failures)
        print(f"memory killed: {len(failures)} failed calls, slowest {max(failures, default=0):.3f} s")
    finally:
        stop(client.process)
