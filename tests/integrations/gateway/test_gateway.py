"""`mcp-interceptors proxy`: the gateway (the message router) as a real subprocess, its command line, and the
in-process gateway of the testing kit; with the helpers the other gateway tests share
(tests/integrations/gateway/router/).

The upstream is tests/servers/upstream_server.py; the interceptors are tests/servers/gateway_registry.py
(a request validator, a redacting response mutator on every operation, a response validator). Every
wait is bounded and every process is waited for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from interceptors import INTERNAL_ERROR, INVALID_PARAMS
from interceptors_chain import SessionConnection
from interceptors_server import LocalChain
from tests.processes import children
from tests.servers.gateway_registry import BLOCK_WORD, DENY_WORD, REDACTED, SHOUT, build
from tests.servers.upstream_server import CUSTOM_METHOD, EXPERIMENT, FAIL_CODE, GREETING_URI, MARKER

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = [sys.executable, "-m", "tests.servers.upstream_server"]
REGISTRY = "tests.servers.gateway_registry:registry"
STEP_S = 60.0  # a wait, never a claim
"""Bound for any single step (a process start, a handshake): generous, only ever hit by a hang."""
TEST_S = 180.0  # a guard against hangs, never a claim
"""Bound for a whole test."""


def proxy_argv(*flags: str, upstream: Sequence[str] = UPSTREAM) -> list[str]:
    """The gateway command; these tests exercise the forwarding itself, so the built-in policy and
    transform stages are off unless a test asks for a policy (tests/integrations/gateway/test_gateway_policy.py covers
    them)."""
    policy = () if "--policy" in flags else ("--policy", "none")
    return [sys.executable, "-m", "integrations.cli", "proxy", *policy, *flags, "--", *upstream]


def gateway_params(*flags: str) -> StdioServerParameters:
    argv = proxy_argv(*flags)
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))


def gateway_pids() -> list[int]:
    """This process's gateway children (what Client(StdioServerParameters) started)."""
    found = []
    for pid in children():
        try:
            if b"integrations.cli" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def assert_no_zombies() -> None:
    assert not [pid for pid, state in children().items() if state == "Z"]


async def wait_gone(pids: Sequence[int], timeout: float = 30.0) -> None:
    with anyio.fail_after(timeout):
        while any(alive(pid) for pid in pids):
            await anyio.sleep(0.05)


class GatewayProcess:
    """The gateway started by hand, so a test sees its exit status and stderr; `transport()` feeds a Client."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.stderr: list[str] = []
        self.process: anyio.abc.Process | None = None
        self._to_client = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        self._from_client = anyio.create_memory_object_stream[SessionMessage](16)
        self._stderr_changed = anyio.Event()

    @property
    def proc(self) -> anyio.abc.Process:
        assert self.process is not None
        return self.process

    @asynccontextmanager
    async def transport(self) -> AsyncIterator[tuple[Any, Any]]:
        yield self._to_client[1], self._from_client[0]

    async def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        send = self._to_client[0]
        buffer = b""
        async with send:
            async for chunk in self.proc.stdout:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        message = types.jsonrpc_message_adapter.validate_json(line)
                        await send.send(SessionMessage(message))

    async def _pump_in(self) -> None:
        assert self.proc.stdin is not None
        async with self._from_client[1]:
            async for item in self._from_client[1]:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await self.proc.stdin.send(data.encode())
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
        await self.proc.stdin.aclose()

    async def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        buffer = b""
        async for chunk in self.proc.stderr:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            self.stderr += [line.decode(errors="replace") for line in lines]
            self._stderr_changed.set()
            self._stderr_changed = anyio.Event()

    async def stderr_line(self, contains: str, timeout: float = STEP_S) -> str:
        with anyio.fail_after(timeout):
            while True:
                for line in self.stderr:
                    if contains in line:
                        return line
                await self._stderr_changed.wait()

    async def wait(self, timeout: float = 30.0) -> int:
        with anyio.fail_after(timeout):
            return await self.proc.wait()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[GatewayProcess]:
        self.process = await anyio.open_process(self.argv, cwd=str(ROOT))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump_out)
                tg.start_soon(self._pump_in)
                tg.start_soon(self._pump_err)
                try:
                    yield self
                finally:
                    self._from_client[0].close()
                    with anyio.move_on_after(5):
                        await self.proc.wait()
                    if self.proc.returncode is None:
                        self.proc.kill()
                        await self.proc.wait()
                    tg.cancel_scope.cancel()
        finally:
            for stream in (*self._to_client, *self._from_client):
                stream.close()
            await self.proc.aclose()


# Round trips, both eras ----------------------------------------------------------------------------------
class Recorder:
    """The callbacks a client gets: log messages, notifications, progress."""

    def __init__(self) -> None:
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.notifications: list[types.ServerNotification] = []
        self.progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.notifications.append(message)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def notified(self, kind: type[Any], timeout: float = 30.0) -> Any:
        with anyio.fail_after(timeout):
            while True:
                for notification in self.notifications:
                    if isinstance(notification, kind):
                        return notification
                await anyio.sleep(0.02)


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def stats(client: Client) -> dict[str, Any]:
    result = await client.call_tool("stats", {})
    assert result.structured_content is not None
    return result.structured_content


async def check_mirror(client: Client, mode: str) -> None:
    info = client.server_info
    assert info is not None
    assert (info.name, info.version, info.title) == ("upstream-test", "3.1.4", "Upstream for gateway tests")
    assert client.instructions is not None and "use echo first" in client.instructions
    caps = client.server_capabilities
    assert caps.tools is not None and caps.tools.list_changed
    assert caps.resources is not None and caps.resources.subscribe and caps.resources.list_changed
    assert caps.prompts is not None and caps.prompts.list_changed
    assert caps.completions is not None
    assert (caps.experimental or {}).get(EXPERIMENT) == {"version": 1}
    assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")


async def check_tools(client: Client, recorder: Recorder) -> None:
    tools = await client.list_tools()
    assert {"echo", "progress", "fail", "sleep", "crash"} <= {tool.name for tool in tools.tools}

    echoed = await client.call_tool("echo", {"text": f"say {MARKER}"})
    assert text_of(echoed) == f"say {REDACTED}"
    assert echoed.structured_content == {"text": f"say {REDACTED}"}
    shouted = await client.call_tool("echo", {"text": f"{SHOUT} hi"})  # a request mutator's params go upstream
    assert text_of(shouted) == f"{SHOUT} hi".upper()

    # A vendor method outside the spec is forwarded too, with the chain around it.
    custom = await SessionConnection(client.session).request(CUSTOM_METHOD, {"x": MARKER}, STEP_S)
    assert (custom["echo"], custom["note"]) == ({"x": REDACTED}, REDACTED)

    with pytest.raises(MCPError) as denied:
        await client.call_tool("echo", {"text": f"a {DENY_WORD} word"})
    assert denied.value.error.code == INVALID_PARAMS

    done = await client.call_tool("progress", {"text": MARKER, "steps": 2}, progress_callback=recorder.on_progress)
    assert text_of(done) == f"done: {REDACTED}"
    assert recorder.progress == [(1.0, 2.0, f"step 1: {REDACTED}"), (2.0, 2.0, f"step 2: {REDACTED}")]
    assert [log.data for log in recorder.logs] == [f"log line: {REDACTED}", {"note": REDACTED}]
    assert all(log.logger == "upstream" and log.level == "info" for log in recorder.logs)

    with pytest.raises(MCPError) as failed:
        await client.call_tool("fail", {"text": MARKER})
    assert failed.value.error.code == FAIL_CODE
    assert failed.value.error.message == f"failed with {REDACTED}"
    assert failed.value.error.data == {"detail": REDACTED}


async def check_resources_prompts_completions(client: Client) -> None:
    resources = await client.list_resources()
    assert [str(r.uri) for r in resources.resources] == [GREETING_URI]
    templates = await client.list_resource_templates()
    assert [t.uri_template for t in templates.resource_templates] == ["memo://notes/{name}"]
    greeting = await client.read_resource(GREETING_URI)
    assert [c.text for c in greeting.contents if isinstance(c, types.TextResourceContents)] == [f"hello {REDACTED}"]
    note = await client.read_resource("memo://notes/ideas")
    assert [c.text for c in note.contents if isinstance(c, types.TextResourceContents)] == ["note ideas"]
    prompts = await client.list_prompts()
    assert [p.name for p in prompts.prompts] == ["greet"]
    prompt = await client.get_prompt("greet", {"name": "Ada"})
    assert isinstance(prompt.messages[0].content, types.TextContent)
    assert prompt.messages[0].content.text == "Hello Ada"
    completed = await client.complete(types.PromptReference(name="greet"), {"name": "name", "value": "al"})
    assert completed.completion.values == ["alice", "albert"]


async def check_blocked_channels(client: Client, recorder: Recorder) -> None:
    """A response validator that blocks: the error becomes generic, progress and logs are dropped."""
    before_logs, before_progress = len(recorder.logs), len(recorder.progress)
    with pytest.raises(MCPError) as blocked:
        await client.call_tool("fail", {"text": BLOCK_WORD})
    assert (blocked.value.error.code, blocked.value.error.message) == (INTERNAL_ERROR, "blocked by interceptor")
    assert BLOCK_WORD not in str(blocked.value.error.data)
    with pytest.raises(MCPError) as result_blocked:
        await client.call_tool("progress", {"text": BLOCK_WORD}, progress_callback=recorder.on_progress)
    assert result_blocked.value.error.code == INVALID_PARAMS
    assert len(recorder.logs) == before_logs and len(recorder.progress) == before_progress


async def check_changes(client: Client, recorder: Recorder, mode: str) -> None:
    """list_changed and resources/updated: notifications at 2025-11-25, a listen stream at 2026-07-28."""
    if mode == "legacy":
        await client.subscribe_resource(GREETING_URI)
        await client.call_tool("add_tool", {})
        for kind in (types.ToolListChangedNotification, types.PromptListChangedNotification):
            await recorder.notified(kind)
        await recorder.notified(types.ResourceListChangedNotification)
        await client.call_tool("touch", {"uri": GREETING_URI})
        updated = await recorder.notified(types.ResourceUpdatedNotification)
        assert str(updated.params.uri) == GREETING_URI
        assert GREETING_URI in (await stats(client))["subscribed"]
        await client.unsubscribe_resource(GREETING_URI)
        assert GREETING_URI not in (await stats(client))["subscribed"]
    else:
        wanted = {ToolsListChanged(), PromptsListChanged(), ResourcesListChanged(), ResourceUpdated(uri=GREETING_URI)}
        seen: set[Any] = set()
        async with client.listen(
            tools_list_changed=True,
            prompts_list_changed=True,
            resources_list_changed=True,
            resource_subscriptions=[GREETING_URI],
        ) as subscription:
            assert GREETING_URI in (await stats(client))["subscribed"]
            await client.call_tool("add_tool", {})
            await client.call_tool("touch", {"uri": GREETING_URI})
            with anyio.fail_after(30):  # a wait, never a claim
                async for event in subscription:
                    seen.add(event)
                    if wanted <= seen:
                        break
        with anyio.fail_after(30):  # a wait, never a claim
            while GREETING_URI in (await stats(client))["subscribed"]:
                await anyio.sleep(0.05)
    assert "bonus" in {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools}


async def check_cancellation(client: Client) -> None:
    """The client gives up on a call: the gateway cancels it upstream."""
    before = (await stats(client))["cancelled"]
    started = time.monotonic()
    with pytest.raises(MCPError):
        await client.call_tool("sleep", {"seconds": 30}, read_timeout_seconds=0.5)
    assert time.monotonic() - started < 15  # the client's 0.5 s, not the tool's 30 s
    with anyio.fail_after(20):
        while (await stats(client))["cancelled"] == before:
            await anyio.sleep(0.05)


# The upstream going away -----------------------------------------------------------------------------------
@pytest.mark.slow
async def test_upstream_crash_mid_call_is_a_clean_error_and_the_gateway_exits(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_S):
        chain = tmp_path / "chain.yaml"
        chain.write_text(f"servers:\n  - name: local\n    registry: {REGISTRY}\n")
        gateway = GatewayProcess(proxy_argv("--chain", str(chain)))
        recorder = Recorder()
        async with (
            gateway.running(),
            Client(
                gateway.transport(), mode="legacy", logging_callback=recorder.on_log, read_timeout_seconds=STEP_S
            ) as client,
        ):
            upstream = list(children(gateway.proc.pid))
            assert len(upstream) == 1
            with pytest.raises(MCPError) as denied:  # the chain file's interceptors are in force
                await client.call_tool("echo", {"text": DENY_WORD})
            assert denied.value.error.code == INVALID_PARAMS
            assert text_of(await client.call_tool("echo", {"text": MARKER})) == REDACTED
            # A log outside any call goes only to sessions that asked for logs (logging/setLevel): none here.
            await client.call_tool("later", {"text": MARKER})
            await anyio.sleep(0.3)
            assert recorder.logs == []
            started = time.monotonic()
            with pytest.raises(MCPError) as crashed:
                with anyio.fail_after(20):  # at once, not at the 60 s read timeout (wide: never flaky)
                    await client.call_tool("crash", {})
            assert time.monotonic() - started < 20
            assert (crashed.value.error.code, crashed.value.error.message) == (
                INTERNAL_ERROR,
                "upstream server closed the connection",
            )
            assert await gateway.wait() == 1
        await wait_gone(upstream)
        assert any("upstream server closed the connection" in line for line in gateway.stderr)
        assert_no_zombies()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # setLevel: 2025 only
async def test_upstream_exit_while_idle_stops_the_gateway() -> None:
    with anyio.fail_after(TEST_S):
        gateway = GatewayProcess(proxy_argv())
        recorder = Recorder()
        async with (
            gateway.running(),
            Client(
                gateway.transport(), mode="legacy", logging_callback=recorder.on_log, read_timeout_seconds=STEP_S
            ) as client,
        ):
            await client.set_logging_level("debug")
            assert text_of(await client.call_tool("echo", {"text": MARKER})) == MARKER  # empty chain: untouched
            await client.call_tool("later", {"text": MARKER})  # a log outside any call: to who asked for logs
            with anyio.fail_after(30):  # a wait, never a claim
                while not recorder.logs:
                    await anyio.sleep(0.02)
            assert recorder.logs[0].data == f"late: {MARKER}"
            upstream = list(children(gateway.proc.pid))
            assert len(upstream) == 1
            os.kill(upstream[0], signal.SIGKILL)
            assert await gateway.wait() == 1
        await wait_gone(upstream)
        assert_no_zombies()


def test_a_missing_program_in_the_chain_file_is_named() -> None:
    chain = ROOT / "tests" / "data_missing_program.yaml"
    try:
        chain.write_text("servers:\n  - name: dlp\n    command: [no-such-interceptor-program, --flag]\n")
        done = subprocess.run(proxy_argv("--chain", str(chain)), cwd=ROOT, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=STEP_S * 2)  # fmt: skip
    finally:
        chain.unlink()
    assert done.returncode == 1
    assert (
        "error: interceptor server 'dlp' is unavailable: the program 'no-such-interceptor-program' was not found"
        in done.stderr
    ), done.stderr
    assert "Error" not in done.stderr.replace("error:", "")


# The command line ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_bad_command_lines_exit_2_with_a_message(tmp_path: Path) -> None:
    bad_chain = tmp_path / "chain.yaml"
    bad_chain.write_text("servers: [{name: x}]\n")
    cases = {
        "no command": proxy_argv(upstream=[]),
        "bad listen": proxy_argv("--listen", "nowhere", upstream=UPSTREAM),
        "public listen": proxy_argv("--listen", "0.0.0.0:8080", upstream=UPSTREAM),
        "bad registry": proxy_argv("--registry", "no_such_module:thing", upstream=UPSTREAM),
        "bad chain file": proxy_argv("--chain", str(bad_chain), upstream=UPSTREAM),
    }
    running = {
        name: subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for name, argv in cases.items()
    }
    for name, proc in running.items():
        out, err = proc.communicate(timeout=STEP_S)
        assert proc.returncode == 2, name
        assert out == b"", name
        assert err.decode().startswith("error: "), name
    missing = subprocess.run(
        proxy_argv(upstream=["/nonexistent/server"]),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=STEP_S,
    )
    assert missing.returncode == 1 and b"cannot start the upstream server" in missing.stderr
    assert missing.stdout == b""


def test_old_switches_are_accepted_and_change_nothing() -> None:
    """`--router`, `MCP_INTERCEPTORS_ROUTER=1` and `--no-restart-upstream` from old command lines still start the
    gateway, which answers as ever (one process carries all three: each would exit 2 if it were refused);
    `--restart-upstream` starts it too (it restarts a dead upstream:
    tests/integrations/gateway/test_gateway_recovery.py)."""
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    echo = {"name": "echo", "arguments": {"text": "ok"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo},
    ]
    argv = proxy_argv("--router", "--no-restart-upstream")
    env = {**os.environ, "MCP_INTERCEPTORS_ROUTER": "1"}
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    process = subprocess.Popen(argv, cwd=ROOT, env=env, text=True, **pipes)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
    process.stdin.flush()
    replies: dict[Any, Any] = {}
    while 2 not in replies:  # the gateway answers both requests, then the client leaves
        line = process.stdout.readline()
        assert line
        message = json.loads(line)
        replies[message.get("id")] = message
    process.stdin.close()
    assert process.wait(timeout=STEP_S) == 0
    assert process.stderr is not None
    err = process.stderr.read()
    assert replies[2]["result"]["content"] == [{"type": "text", "text": "ok"}]
    assert "not supported" not in err, err


def test_listen_addresses_and_the_upstream_command() -> None:
    from integrations.gateway.cli import parse_listen, upstream_command

    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("localhost:8080") == ("127.0.0.1", 8080)
    assert parse_listen("[::1]:9") == ("::1", 9)
    for bad in ("8080", "127.0.0.1:", "127.0.0.1:99999", "example.com:80", "10.0.0.1:80"):
        with pytest.raises(ValueError):
            parse_listen(bad)
    assert upstream_command(["--", "python", "-m", "server", "--flag"]) == ["python", "-m", "server", "--flag"]
    for empty in ([], ["--"]):
        with pytest.raises(ValueError):
            upstream_command(empty)


# In process ------------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_the_gateway_in_process_serves_several_clients_with_progress_and_logs() -> None:
    """`InProcessGateway` (behind the testing kit's `gateway_for` and the demo): the router with in-memory SDK
    clients, each its own session: progress and logs of a call reach only the client that made it."""
    from integrations.gateway.inprocess import InProcessGateway

    with anyio.fail_after(TEST_S):
        async with LocalChain(build()) as chain, InProcessGateway(UPSTREAM, chain, cwd=str(ROOT)) as gateway:
            recorder, other = Recorder(), Recorder()
            async with (
                Client(gateway.server, mode="legacy", logging_callback=recorder.on_log) as client,
                Client(gateway.server, mode="legacy", logging_callback=other.on_log) as bystander,
            ):
                done = await client.call_tool("progress", {"text": MARKER}, progress_callback=recorder.on_progress)
                assert text_of(done) == f"done: {REDACTED}"
                assert [p[2] for p in recorder.progress] == [f"step 1: {REDACTED}", f"step 2: {REDACTED}"]
                assert [log.data for log in recorder.logs] == [f"log line: {REDACTED}", {"note": REDACTED}]
                assert text_of(await bystander.call_tool("echo", {"text": MARKER})) == REDACTED
                assert other.logs == []
            upstream = gateway.upstream
            assert upstream is not None
            async with Client(gateway.server) as modern:  # 2026-07-28 too; a client that left is forgotten
                assert text_of(await modern.call_tool("echo", {"text": "hi"})) == "hi"
        assert upstream.process.returncode is not None  # the gateway reaped its upstream
