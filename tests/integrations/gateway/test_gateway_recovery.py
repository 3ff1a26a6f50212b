"""The gateway recovering a lost upstream (real subprocesses; every wait bounded, no sleep is a claim).

- `--restart-upstream`: a stdio upstream that dies is started again with backoff (bounded, then exit 1); the
  client's session goes on, its requests in flight and those sent while the upstream is down get an error
  at once, its subscriptions and log level are renewed, a catalog that differs is announced (list_changed);
  `upstream_restarts` in `/metrics` moves.
- `--upstream URL`: a server that forgot the gateway's session (404) gets a new one transparently; a safe
  request is sent again, a `tools/call` never twice (`data.sessionLost`); a server ending every new session
  makes the gateway give up (exit 1) instead of looping; a server restarted on its port is reconnected.
- A cancellation's POST never overtakes its request's (in process, against a raw HTTP server).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from interceptors import INTERNAL_ERROR
from tests.conftest import ROOT
from tests.integrations.gateway.router.test_router_http import headers_for, open_session, rpc
from tests.integrations.gateway.router.test_router_upstream_http import gateway_argv
from tests.integrations.gateway.test_gateway import (
    STEP_S,
    TEST_S,
    GatewayProcess,
    Recorder,
    assert_no_zombies,
    proxy_argv,
    text_of,
)
from tests.processes import stop

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

GREETING = "memo://greeting"


def gated(gate: Path) -> list[str]:
    return [sys.executable, "-m", "tests.servers.gated_upstream", str(gate)]


async def until(condition: Any, what: str, timeout: float = STEP_S) -> Any:
    """Poll an async condition until it holds (a wait, never a claim about time)."""
    with anyio.fail_after(timeout):
        while True:
            value = await condition()
            if value:
                return value
            await anyio.sleep(0.05)


def tool_list_changes(recorder: Recorder) -> int:
    return sum(isinstance(n, types.ToolListChangedNotification) for n in recorder.notifications)


async def stats(client: Client) -> dict[str, Any]:
    return (await client.call_tool("stats", {})).structured_content or {}


# --restart-upstream (stdio) --------------------------------------------------------------------------------
async def test_a_dead_stdio_upstream_is_restarted_and_the_client_session_goes_on(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    recorder = Recorder()
    argv = proxy_argv("--restart-upstream", "--max-upstream-restarts", "30", upstream=gated(gate))
    gateway = GatewayProcess(argv)
    with anyio.fail_after(TEST_S):
        async with (
            gateway.running(),
            Client(
                gateway.transport(), mode="legacy", read_timeout_seconds=STEP_S, message_handler=recorder.on_message
            ) as client,
        ):
            await client.subscribe_resource(GREETING)
            await client.set_logging_level("warning")
            assert text_of(await client.call_tool("add_tool", {})) == "added"
            await recorder.notified(types.ToolListChangedNotification)
            assert "bonus" in {tool.name for tool in (await client.list_tools()).tools}
            before = tool_list_changes(recorder)

            gate.touch()  # the first restarts cannot succeed: the upstream stays down for a while
            errors: list[MCPError] = []

            async def long_call() -> None:
                with pytest.raises(MCPError) as gone:
                    await client.call_tool("sleep", {"seconds": 600})
                errors.append(gone.value)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(long_call)
                with pytest.raises(MCPError) as crashed:
                    await client.call_tool("crash", {})
            assert crashed.value.error.code == INTERNAL_ERROR
            (in_flight,) = errors
            assert (in_flight.error.code, in_flight.error.message) == (
                INTERNAL_ERROR,
                "upstream server closed the connection",
            )
            await gateway.stderr_line("restarting it")
            with pytest.raises(MCPError) as down:  # while it is down: an error, never a hang
                await client.call_tool("echo", {"text": "down"})
            assert down.value.error.code == INTERNAL_ERROR

            gate.unlink()
            await gateway.stderr_line("the restarted upstream server is ready")
            assert text_of(await client.call_tool("echo", {"text": "back"})) == "back"
            # Renewed in the new process: the subscription and the log level.
            renewed = await until(
                lambda: _renewed(client), "the subscription and the log level reach the new upstream process"
            )
            assert renewed == {"subscribed": [GREETING], "level": "warning"}
            # The new process has no `bonus`: the catalog differs, and the client is told.
            await until(lambda: _more(recorder, before), "a tools list_changed after the restart")
            assert "bonus" not in {tool.name for tool in (await client.list_tools()).tools}
    assert "not supported" not in "\n".join(gateway.stderr)
    assert_no_zombies()


async def _renewed(client: Client) -> dict[str, Any] | None:
    seen = await stats(client)
    found = {"subscribed": seen.get("subscribed"), "level": seen.get("level")}
    return found if found == {"subscribed": [GREETING], "level": "warning"} else None


async def _more(recorder: Recorder, before: int) -> bool:
    return tool_list_changes(recorder) > before


async def test_an_upstream_that_cannot_be_restarted_ends_the_gateway_with_status_1(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gateway = GatewayProcess(proxy_argv("--restart-upstream", "--max-upstream-restarts", "2", upstream=gated(gate)))
    with anyio.fail_after(TEST_S):
        async with (
            gateway.running(),
            Client(gateway.transport(), mode="legacy", read_timeout_seconds=STEP_S) as client,
        ):
            assert text_of(await client.call_tool("echo", {"text": "up"})) == "up"
            gate.touch()
            with pytest.raises(MCPError):
                await client.call_tool("crash", {})
            assert await gateway.wait(STEP_S) == 1
    assert any("2 restarts within 60 s, giving up" in line for line in gateway.stderr), gateway.stderr
    assert_no_zombies()


async def test_restarts_are_counted_in_the_metrics_over_http(tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client")
    from tests.integrations.gateway.router.test_router_http import http_gateway

    gate = tmp_path / "gate"
    with anyio.fail_after(TEST_S):
        async with (
            http_gateway("--restart-upstream", upstream=gated(gate)) as gateway,
            httpx2.AsyncClient(timeout=STEP_S) as http,
        ):
            base = gateway.url.rsplit("/mcp", 1)[0]
            assert _restarts((await http.get(f"{base}/metrics")).text) == 0
            session = await open_session(http, gateway.url)
            crash = rpc(1, "tools/call", {"name": "crash", "arguments": {}})
            crashed = await http.post(gateway.url, json=crash, headers=headers_for(session))
            assert "upstream server closed the connection" in crashed.text

            async def restarted() -> bool:
                return _restarts((await http.get(f"{base}/metrics")).text) == 1

            await until(restarted, "upstream_restarts_total reaches 1")
            echo = rpc(2, "tools/call", {"name": "echo", "arguments": {"text": "again"}})

            async def answered() -> str | None:  # the same client session, once the handshake is redone
                reply = await http.post(gateway.url, json=echo, headers=headers_for(session))
                return reply.text if '"again"' in reply.text else None

            await until(answered, "the client's session is served by the restarted upstream")
            health = await http.get(f"{base}/healthz")
            assert health.json()["upstream"] == {"connected": True}, health.text


def _restarts(text: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "mcp_interceptors_upstream_restarts_total":
                return sample.value
    raise AssertionError("no upstream_restarts counter")


# --upstream URL: sessions the server forgot ---------------------------------------------------------------
@contextmanager
def forgetful(port: int = 0) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.servers.forgetful_http_upstream", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(b"PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}", process
    finally:
        if process.poll() is None:
            stop(process)
        if process.stdout is not None:
            process.stdout.close()


async def record(http: httpx2.AsyncClient, base: str) -> list[dict[str, Any]]:
    return list((await http.get(f"{base}/record")).json())


async def test_a_forgotten_http_session_is_renewed_and_only_safe_requests_are_sent_again() -> None:
    recorder = Recorder()
    with forgetful() as (base, _), anyio.fail_after(TEST_S):
        gateway = GatewayProcess(gateway_argv(f"{base}/mcp", "-v"))
        async with (
            httpx2.AsyncClient(timeout=STEP_S) as http,
            gateway.running(),
            Client(
                gateway.transport(), mode="legacy", read_timeout_seconds=STEP_S, message_handler=recorder.on_message
            ) as client,
        ):
            await client.subscribe_resource(GREETING)
            assert text_of(await client.call_tool("echo", {"text": "first"})) == "first"
            (first_session,) = {r["session"] for r in await record(http, base) if r["method"] == "tools/call"}

            assert (await http.post(f"{base}/forget")).status_code == 200
            names = {tool.name for tool in (await client.list_tools()).tools}  # 404, a new session, sent again
            assert "echo" in names
            seen = await record(http, base)
            initializes = [r for r in seen if r["method"] == "initialize"]
            assert len(initializes) == 2 and seen[-1]["session"] != first_session
            lists = [r for r in seen if r["method"] == "tools/list" and r["session"] == first_session]
            assert lists[-1]["refused"]  # the one the old session refused, sent again on the new one

            async def resubscribed() -> list[dict[str, Any]]:
                return [
                    r
                    for r in await record(http, base)
                    if r["method"] == "resources/subscribe" and r["session"] not in (None, first_session)
                ]

            (renewed,) = await until(resubscribed, "the subscription renewed on the new session")
            assert renewed["uri"] == GREETING and not renewed["refused"]
            second_session = renewed["session"]

            # A tools/call that meets a forgotten session is answered, and never sent twice.
            assert (await http.post(f"{base}/forget")).status_code == 200
            with pytest.raises(MCPError) as lost:
                await client.call_tool("echo", {"text": "once"})
            assert lost.value.error.code == INTERNAL_ERROR
            assert isinstance(lost.value.error.data, dict) and lost.value.error.data["sessionLost"] is True
            calls = [r for r in await record(http, base) if r["method"] == "tools/call"]
            assert [(r["session"], r["refused"]) for r in calls[1:]] == [(second_session, True)]
            assert text_of(await client.call_tool("echo", {"text": "then"})) == "then"

            # The catalog did not change: both new sessions' compare walks said so, and no list_changed came.
            with anyio.fail_after(STEP_S):
                while sum("catalog of the new upstream session: unchanged" in line for line in gateway.stderr) < 2:
                    await gateway.stderr_line("catalog of the new upstream session")
                    await anyio.sleep(0.05)
            assert text_of(await client.call_tool("echo", {"text": "sync"})) == "sync"
            assert tool_list_changes(recorder) == 0
    assert_no_zombies()


async def test_a_server_that_ends_every_new_session_makes_the_gateway_give_up() -> None:
    with forgetful() as (base, _), anyio.fail_after(TEST_S):
        gateway = GatewayProcess(gateway_argv(f"{base}/mcp"))
        async with (
            httpx2.AsyncClient(timeout=STEP_S) as http,
            gateway.running(),
            Client(gateway.transport(), mode="legacy", read_timeout_seconds=STEP_S) as client,
        ):
            assert text_of(await client.call_tool("echo", {"text": "up"})) == "up"
            assert (await http.post(f"{base}/forget?always=1")).status_code == 200
            for _ in range(20):  # each request gets an answer (an error) until the gateway gives up
                try:
                    await client.list_tools()
                except MCPError as exc:
                    if exc.error.message == "Connection closed":  # the gateway is gone
                        break
                    assert exc.error.code == INTERNAL_ERROR
                if gateway.proc.returncode is not None:
                    break
            assert await gateway.wait(STEP_S) == 1
            initializes = [r for r in await record(http, base) if r["method"] == "initialize"]
            assert len(initializes) <= 1 + 5  # the first session, then at most MAX_RENEWALS new ones
    assert any("new sessions within" in line for line in gateway.stderr), gateway.stderr
    assert_no_zombies()


async def test_a_remote_server_restarted_on_its_port_is_reconnected_and_its_new_catalog_announced() -> None:
    recorder = Recorder()
    with anyio.fail_after(TEST_S):
        with forgetful() as (base, first):
            port = int(base.rsplit(":", 1)[1])
            gateway = GatewayProcess(gateway_argv(f"{base}/mcp", "--restart-upstream", "--max-upstream-restarts", "30"))
            async with (
                gateway.running(),
                Client(
                    gateway.transport(),
                    mode="legacy",
                    read_timeout_seconds=STEP_S,
                    message_handler=recorder.on_message,
                ) as client,
            ):
                assert text_of(await client.call_tool("add_tool", {})) == "added"
                await recorder.notified(types.ToolListChangedNotification)
                assert "bonus" in {tool.name for tool in (await client.list_tools()).tools}
                before = tool_list_changes(recorder)
                stop(first)
                with forgetful(port) as _:
                    # Either way back (a 404 for the old session, or a reconnection): the new catalog is announced.
                    await until(lambda: _more(recorder, before), "a tools list_changed from the new server")
                    assert "bonus" not in {tool.name for tool in (await client.list_tools()).tools}
                    assert text_of(await client.call_tool("echo", {"text": "back"})) == "back"
    assert_no_zombies()


# The cancellation race (in process) ------------------------------------------------------------------------
async def test_a_cancellation_never_overtakes_its_request() -> None:
    """The request's body is large and the server reads it late: its cancellation must wait for it."""
    from integrations.gateway.upstream_http import HttpUpstream

    order: list[str] = []
    big = "x" * (32 << 20)  # far more than the socket buffers take: its POST is still being written

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                if length > 1 << 20:
                    order.append("request")  # its headers are in; its body is held back a moment
                    await asyncio.sleep(2)  # (only holds the body back: nothing here is a claim about time)
                body = await reader.readexactly(length)
                message = json.loads(body)
                if message.get("method") == "notifications/cancelled":
                    order.append("cancel")
                    writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                else:
                    reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                        + str(len(reply)).encode()
                        + b"\r\n\r\n"
                        + reply
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    upstream = await HttpUpstream.start(f"http://127.0.0.1:{port}/mcp", max_message=1 << 20)
    try:
        with anyio.fail_after(STEP_S):
            request = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "x", "arguments": {"t": big}},
            }
            upstream.send(json.dumps(request).encode(), 7)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            upstream.send(json.dumps(cancel).encode())
            async for item in upstream.lines():
                assert isinstance(item, tuple) and item[1] == 7
                break
            while len(order) < 2:
                await asyncio.sleep(0.02)
        assert order == ["request", "cancel"]
    finally:
        await upstream.aclose()
        server.close()
        await server.wait_closed()
