"""`mcp-interceptors proxy --loop`: the same client gets the same answers on asyncio's loop and on uvloop's.

Only the event loop differs (`interceptors.loops.run_on_loop`): the router, the runner, the pipes and the HTTP
front above it are one code. `auto` picks uvloop when it is installed, so the other gateway tests that start
`proxy` run on uvloop; these run a few representative conversations on both loops and compare them whole:
stdio with an interceptor registry (a redacting mutator on every channel, a request validator), stdio with the
`standard` policy against an upstream that leaks credentials, Streamable HTTP (`--listen`), and a gateway file
(`--config`, several servers behind one endpoint). The upstreams are real subprocesses.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from interceptors.loops import LOOPS, LoopUnavailableError, run_on_loop, uvloop_available, wants_uvloop
from tests.conftest import ROOT
from tests.integrations.gateway.router.test_router_http import (
    headers_for,
    http_gateway,
    open_session,
    rpc,
    sse_messages,
)
from tests.integrations.gateway.test_gateway import REGISTRY, UPSTREAM
from tests.servers.leaky_server import SECRETS
from tests.servers.upstream_server import CUSTOM_METHOD, MARKER

BOTH = pytest.mark.skipif(not uvloop_available(), reason="uvloop is not installed (the `fast` extra)")
STEP_S = 60.0  # a wait, never a claim
LEAKY = [sys.executable, "-m", "tests.servers.leaky_server"]
CLIENT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "loops", "version": "0"}}


def _call(name: str, arguments: dict[str, Any], token: str | None = None) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return "tools/call", params


REGISTRY_SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("tools/list", {}),
    _call("echo", {"text": f"hello {MARKER}"}),  # the registry's mutator redacts the marker
    _call("echo", {"text": "shout:quiet"}),  # its request mutator upper-cases this
    _call("echo", {"text": "a forbidden word"}),  # its request validator refuses this
    _call("progress", {"text": MARKER, "steps": 3}, token="p-1"),  # progress and logs, redacted too
    _call("fail", {"text": MARKER}),  # an upstream error, its message and data redacted
    _call("nope", {}),
    ("resources/list", {}),
    ("resources/read", {"uri": "memo://greeting"}),
    ("resources/templates/list", {}),
    ("prompts/get", {"name": "greet", "arguments": {"name": "ada"}}),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "al"}},
    ),
    (CUSTOM_METHOD, {"x": 1}),
    ("nope/nope", {}),
    ("tools/call", {"arguments": {}}),  # no tool name
]
STANDARD_SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("tools/list", {}),
    _call("get_config", {}),  # credentials on every part of a result
    _call("progress_report", {}, token="p-2"),  # and in progress and a log message
    _call("fail_loudly", {}),  # and in an error's message and data
    _call("echo_value", {"value": "x", "split": True}, token="p-3"),  # cut in two across messages
    _call("delete_everything", {}),  # a destructive tool: the policy's to decide
]


def _timeless(value: Any) -> Any:
    """`value` with the transforms' `generated_at` stamps (the wall clock, to the second) taken out."""
    if isinstance(value, dict):
        return {key: "<time>" if key == "generated_at" else _timeless(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_timeless(item) for item in value]
    return value


class _Stdio:
    """A gateway on two pipes, spoken to one request at a time, every line it writes kept."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.process = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)  # fmt: skip
        self._lines: queue.Queue[bytes] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        self.notifications: list[dict[str, Any]] = []

    def _read(self, out: Any) -> None:
        for line in out:
            self._lines.put(line)

    def write(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict[str, Any]:
        """The next reply; what the gateway sends before it (notifications, requests) is kept aside."""
        while True:
            message: dict[str, Any] = _timeless(json.loads(self._lines.get(timeout=STEP_S)))
            if "method" not in message:
                return message
            self.notifications.append(message)

    def request(self, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode())
        return self.reply()

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=STEP_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=STEP_S)


def _stdio_transcript(loop: str, flags: Sequence[str], upstream: Sequence[str],
                      script: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:  # fmt: skip
    """Every reply of `script` in order, the lines the gateway answers itself, the notifications (their order
    across calls is the upstream's, so compared as a sorted list), and the exit status once stdin closes."""
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--loop", loop, *flags, "--", *upstream]
    gateway = _Stdio(argv)
    try:
        replies = [gateway.request(0, "initialize", CLIENT)]
        gateway.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        replies += [gateway.request(number, method, params) for number, (method, params) in enumerate(script, 1)]
        gateway.write(b"not json at all")
        replies.append(gateway.reply())
        gateway.write(b'{"jsonrpc":"2.0","id":[1],"method":"ping"}')
        replies.append(gateway.reply())
        replies.append(gateway.request(len(script) + 1, "ping", {}))  # after every call's notifications
    finally:
        status = gateway.close()
    notifications = sorted(json.dumps(message, sort_keys=True) for message in gateway.notifications)
    return {"replies": replies, "notifications": notifications, "status": status}


@BOTH
def test_a_registry_gateway_on_stdio_answers_the_same_on_both_loops() -> None:
    flags = ("--policy", "none", "--registry", REGISTRY)
    on_asyncio, on_uvloop = (
        _stdio_transcript(loop, flags, UPSTREAM, REGISTRY_SCRIPT) for loop in ("asyncio", "uvloop")
    )
    assert on_uvloop == on_asyncio
    replies = on_asyncio["replies"]
    assert on_asyncio["status"] == 0
    assert "result" in replies[0] and "tools" in replies[1]["result"]
    assert replies[2]["result"]["content"][0]["text"] == "hello [REDACTED]"
    assert replies[3]["result"]["content"][0]["text"] == "SHOUT:QUIET"
    assert "error" in replies[4] and "error" in replies[6] and "error" in replies[7]
    assert replies[5]["result"]["content"][0]["text"] == "done: [REDACTED]"
    assert replies[13]["result"]["echo"] == {"x": 1}
    assert replies[14]["error"]["code"] == -32601 and "error" in replies[15]
    assert replies[-3]["error"]["code"] == -32700 and replies[-2]["error"]["code"] == -32600
    assert replies[-1] == {"jsonrpc": "2.0", "id": len(REGISTRY_SCRIPT) + 1, "result": {}}
    progress = [n for n in on_asyncio["notifications"] if "notifications/progress" in n]
    assert len(progress) == 3 and all("[REDACTED]" in n and MARKER not in n for n in progress)
    assert MARKER not in json.dumps(on_asyncio)


@BOTH
def test_the_standard_policy_on_stdio_answers_the_same_on_both_loops() -> None:
    flags = ("--policy", "standard")
    on_asyncio, on_uvloop = (_stdio_transcript(loop, flags, LEAKY, STANDARD_SCRIPT) for loop in ("asyncio", "uvloop"))
    assert on_uvloop == on_asyncio
    assert on_asyncio["status"] == 0
    text = json.dumps(on_asyncio)
    assert not [secret for secret in SECRETS if secret in text]
    assert on_asyncio["replies"][2]["result"]["content"][0]["text"].startswith("config loaded: aws=")
    assert any("notifications/progress" in n for n in on_asyncio["notifications"])


async def _http_transcript(loop: str) -> list[Any]:
    """One Streamable HTTP session through `proxy --listen` (stopped by SIGTERM, status 0: `http_gateway`)."""
    seen: list[Any] = []
    async with http_gateway("--registry", REGISTRY, "--loop", loop) as gateway, \
            httpx2.AsyncClient(timeout=STEP_S) as http:  # fmt: skip
        url = gateway.url
        session = await open_session(http, url)
        headers = headers_for(session)
        level = await http.post(url, json=rpc(1, "logging/setLevel", {"level": "debug"}), headers=headers)
        seen.append((level.status_code, level.headers["content-type"], level.json()))
        echo = await http.post(url, json=rpc(2, "tools/call", {"name": "echo", "arguments": {"text": MARKER}}),
                               headers=headers)  # fmt: skip
        seen.append((echo.status_code, echo.headers["content-type"], echo.json()))
        params = {"name": "progress", "arguments": {"text": MARKER, "steps": 3}, "_meta": {"progressToken": "p"}}
        streamed = await http.post(url, json=rpc(3, "tools/call", params), headers=headers)
        seen.append((streamed.status_code, streamed.headers["content-type"], sse_messages(streamed.text)))
        listed = await http.post(url, json=rpc(4, "tools/list"), headers=headers)
        seen.append((listed.status_code, listed.json()))
        broken = await http.post(url, content=b"{not json", headers=headers)
        seen.append((broken.status_code, broken.json()))
        gone = await http.delete(url, headers=headers)
        seen.append(gone.status_code)
        after = await http.post(url, json=rpc(5, "ping"), headers=headers)
        seen.append(after.status_code)
    return seen


@BOTH
@pytest.mark.anyio
async def test_the_http_front_answers_the_same_on_both_loops() -> None:
    with anyio.fail_after(180):
        on_asyncio = await _http_transcript("asyncio")
        on_uvloop = await _http_transcript("uvloop")
    assert on_uvloop == on_asyncio
    assert on_asyncio[1] == (200, "application/json", {"jsonrpc": "2.0", "id": 2, "result": on_asyncio[1][2]["result"]})
    assert on_asyncio[1][2]["result"]["content"][0]["text"] == "[REDACTED]"
    methods = sorted(str(message.get("method")) for message in on_asyncio[2][2])
    assert methods == ["None", *["notifications/message"] * 2, *["notifications/progress"] * 3]
    assert on_asyncio[2][2][-1]["result"]["content"][0]["text"] == "done: [REDACTED]"
    assert MARKER not in json.dumps(on_asyncio)
    assert on_asyncio[-2] in (200, 204) and on_asyncio[-1] == 404  # a deleted session is gone


def _hub_file(tmp_path: Path) -> str:
    path = tmp_path / "gateway.json"
    command = {"command": sys.executable, "cwd": str(ROOT)}
    servers = {
        "memo": {**command, "args": ["-m", "tests.servers.upstream_server"], "policy": "none"},
        "leaky": {**command, "args": ["-m", "tests.servers.leaky_server"], "policy": "standard"},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


@BOTH
def test_a_gateway_file_answers_the_same_on_both_loops(tmp_path: Path) -> None:
    flags = ("--config", _hub_file(tmp_path))
    script = [("tools/list", {}), _call("memo__echo", {"text": "hub"}), _call("leaky__get_config", {})]
    on_asyncio, on_uvloop = (_stdio_transcript(loop, flags, [], script) for loop in ("asyncio", "uvloop"))
    assert on_uvloop == on_asyncio
    assert on_asyncio["status"] == 0
    names = {tool["name"] for tool in on_asyncio["replies"][1]["result"]["tools"]}
    assert {"memo__echo", "leaky__get_config"} <= names
    text = json.dumps(on_asyncio)
    assert not [secret for secret in SECRETS if secret in text]


@BOTH
def test_a_chain_server_that_cannot_start_is_named_the_same_on_both_loops(tmp_path: Path) -> None:
    """uvloop's spawn raises FileNotFoundError without the program's name, asyncio's with it: the chain's pipe
    puts the name back (`interceptors_chain.stdio_pipe`), so the one error line names the program on both."""
    chain = tmp_path / "chain.yaml"
    chain.write_text("servers:\n  - name: dlp\n    command: [no-such-interceptor-program, --flag]\n")
    lines = []
    for loop in ("asyncio", "uvloop"):
        argv = [sys.executable, "-m", "integrations.cli", "proxy", "--loop", loop, "--policy", "none",
                "--chain", str(chain), "--", *UPSTREAM]  # fmt: skip
        done = subprocess.run(argv, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=2 * STEP_S)  # fmt: skip
        assert done.returncode == 1
        lines.append([line for line in done.stderr.splitlines() if line.startswith("error:")])
    assert (
        lines[0]
        == lines[1]
        == ["error: interceptor server 'dlp' is unavailable: the program 'no-such-interceptor-program' was not found"]
    )


# The choice itself ----------------------------------------------------------------------------------
def _without_uvloop(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`mcp-interceptors ARGV` in an interpreter where uvloop cannot be imported, as without the `fast` extra;
    it prints the status and the modules of the SDK and the chain it loaded."""
    probe = (
        "import sys\n"
        "sys.modules['uvloop'] = None  # import uvloop fails, find_spec finds nothing\n"
        "from integrations.cli import main\n"
        f"code = main({argv!r})\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'interceptors_chain'))\n"
        "print(code, heavy[:3])\n"
    )
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.parametrize(
    "argv",
    [
        ["proxy", "--loop", "uvloop", "--", "true"],
        ["proxy", "--loop", "uvloop", "--config", "gateway.yaml"],
        ["serve", "--loop", "uvloop"],
    ],
)
def test_loop_uvloop_without_uvloop_is_one_sentence_and_status_2_before_the_sdk_loads(argv: list[str]) -> None:
    done = _without_uvloop(argv)
    assert done.stdout.strip() == "2 []", done.stderr
    assert done.stderr == (
        "error: --loop uvloop: uvloop is not installed; install it with pip install 'mcp-interceptors[fast]', "
        "or run on asyncio's loop with --loop asyncio (or auto)\n"
    )


def test_auto_runs_on_asyncio_without_uvloop_and_asyncio_is_always_there() -> None:
    assert wants_uvloop("asyncio") is False
    assert wants_uvloop("auto") is uvloop_available()
    with pytest.raises(LoopUnavailableError, match="not an event loop; choose one of auto, asyncio, uvloop"):
        wants_uvloop("trio")


@pytest.mark.parametrize("loop", LOOPS)
def test_run_on_loop_returns_what_the_function_returns_on_the_loop_it_names(loop: str) -> None:
    if loop == "uvloop" and not uvloop_available():
        pytest.skip("uvloop is not installed (the `fast` extra)")

    async def which(extra: int) -> tuple[str, int]:
        import asyncio

        return type(asyncio.get_running_loop()).__module__.split(".")[0], extra

    expected = "uvloop" if loop == "uvloop" or (loop == "auto" and uvloop_available()) else "asyncio"
    assert run_on_loop(which, 7, loop=loop) == (expected, 7)


def test_proxy_offers_the_loops_it_knows() -> None:
    done = subprocess.run([sys.executable, "-m", "integrations.cli", "proxy", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert "--loop {" + ",".join(LOOPS) + "}" in done.stdout
