"""The interceptor host over real transports: a stdio subprocess and a Streamable HTTP server (uvicorn).

Servers: tests/servers/stdio_host.py and tests/servers/http_host.py, both serving
tests/servers/host_registry.py. Every wait is bounded; every subprocess is reaped.
"""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from interceptors import CAPABILITY, INTERNAL_ERROR, INVALID_PARAMS, Direction, Phase
from interceptors_chain import Chain, SessionConnection, Status
from tests.servers.host_registry import DENY_WORD, SLOW_EVENT

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"
STEP_TIMEOUT_S = 60.0
RPC_TIMEOUT_S = 60.0
NAMES = ["host/deny-word", "host/upper", "host/slow"]
EXPECTED_CAPABILITY = {"supportedEvents": [SLOW_EVENT, "tools/call"]}


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def tool_call(text: str) -> dict[str, Any]:
    return {"name": "echo", "arguments": {"text": text}}


def check_capability(client: Client, mode: str) -> None:
    caps = client.server_capabilities
    assert caps.experimental is not None
    assert caps.experimental[CAPABILITY] == EXPECTED_CAPABILITY
    if mode == "auto":
        assert caps.extensions is not None
        assert caps.extensions[CAPABILITY] == EXPECTED_CAPABILITY


async def check_host(client: Client, mode: str) -> None:
    """list, invoke (validator and mutator), error rows and the capability on one live connection."""
    check_capability(client, mode)
    conn = SessionConnection(client.session)
    listed = await conn.request("interceptors/list", {}, RPC_TIMEOUT_S)
    assert [i["name"] for i in listed["interceptors"]] == NAMES
    assert listed["interceptors"][1] == {
        "name": "host/upper",
        "type": "mutation",
        "hooks": [{"events": ["tools/call"], "phase": "request"}],
    }
    filtered = await conn.request("interceptors/list", {"event": SLOW_EVENT}, RPC_TIMEOUT_S)
    assert [i["name"] for i in filtered["interceptors"]] == ["host/slow"]

    base = {"event": "tools/call", "phase": "request"}
    passed = await conn.request(
        "interceptor/invoke", {**base, "name": "host/deny-word", "payload": tool_call("ok")}, RPC_TIMEOUT_S
    )
    assert passed["valid"] is True and "messages" not in passed and "severity" not in passed
    denied = await conn.request(
        "interceptor/invoke",
        {**base, "phase": "response", "name": "host/deny-word", "payload": tool_call(DENY_WORD)},
        RPC_TIMEOUT_S,
    )
    assert denied["valid"] is False and denied["phase"] == "response" and denied["severity"] == "error"
    mutated = await conn.request(
        "interceptor/invoke", {**base, "name": "host/upper", "payload": tool_call("hi")}, RPC_TIMEOUT_S
    )
    assert (mutated["modified"], mutated["payload"]) == (True, tool_call("HI"))
    unchanged = await conn.request(
        "interceptor/invoke", {**base, "name": "host/upper", "payload": tool_call("HI")}, RPC_TIMEOUT_S
    )
    assert (unchanged["modified"], unchanged["payload"]) == (False, tool_call("HI"))

    with pytest.raises(MCPError) as unknown:
        await conn.request("interceptor/invoke", {**base, "name": "nope", "payload": {}}, RPC_TIMEOUT_S)
    assert unknown.value.error.code == INVALID_PARAMS
    assert unknown.value.error.data == {"name": "nope"}

    with pytest.raises(MCPError) as unhooked:
        await conn.request(
            "interceptor/invoke",
            {**base, "phase": "response", "name": "host/upper", "payload": {}},
            RPC_TIMEOUT_S,
        )
    assert unhooked.value.error.code == INVALID_PARAMS
    assert unhooked.value.error.data == {
        "name": "host/upper",
        "event": "tools/call",
        "phase": "response",
        "advertisedHooks": [{"events": ["tools/call"], "phase": "request"}],
    }

    started = time.perf_counter()
    with pytest.raises(MCPError) as timed_out:
        await conn.request(
            "interceptor/invoke",
            {"name": "host/slow", "event": SLOW_EVENT, "phase": "request", "payload": {}, "timeoutMs": 100},
            RPC_TIMEOUT_S,
        )
    assert time.perf_counter() - started < 10.0  # the handler takes 30 s
    assert timed_out.value.error.code == INTERNAL_ERROR
    assert timed_out.value.error.data == {
        "interceptor": "host/slow",
        "reason": "timeout",
        "timeoutMs": 100,
        "phase": "request",
    }

    # Requests are multiplexed on the one session.
    results: list[dict[str, Any]] = []

    async def one(index: int) -> None:
        params = {**base, "name": "host/upper", "payload": tool_call(f"n{index}")}
        results.append(await conn.request("interceptor/invoke", params, RPC_TIMEOUT_S))

    async with anyio.create_task_group() as group:
        for index in range(8):
            group.start_soon(one, index)
    assert sorted(r["payload"]["arguments"]["text"] for r in results) == sorted(f"N{i}" for i in range(8))


async def check_chain(client: Client, name: str) -> None:
    """A Chain discovers the remote host and runs request and response phases end to end."""
    chain = Chain()
    await chain.add_session(client.session, name)
    assert [(server, info.name) for server, info in chain.interceptors()] == [(name, n) for n in NAMES]

    sent = await chain.execute("tools/call", Phase.REQUEST, tool_call("hello"), direction=Direction.SENDING)
    assert sent.status is Status.SUCCESS and not sent.blocked
    assert sent.modified and sent.final_payload == tool_call("HELLO")
    assert [r.interceptor for r in sent.results] == ["host/upper", "host/deny-word"]
    assert all(r.server == name and r.error is None for r in sent.results)

    blocked = await chain.execute(
        "tools/call", Phase.REQUEST, tool_call(f"a {DENY_WORD} word"), direction=Direction.SENDING
    )
    assert blocked.blocked and blocked.status is Status.VALIDATION_FAILED
    assert blocked.final_payload is None
    assert [a.interceptor for a in blocked.aborted_at] == ["host/deny-word"]

    received = await chain.execute(
        "tools/call", "response", {"content": [], "arguments": {"text": DENY_WORD}}, direction="receiving"
    )
    assert received.status is Status.VALIDATION_FAILED
    clean = await chain.execute("tools/call", "response", {"content": []}, direction="receiving")
    assert clean.status is Status.SUCCESS and not clean.modified

    untouched = await chain.execute("tools/list", "request", {}, direction="sending")
    assert untouched.status is Status.SUCCESS and untouched.results == []

    slow = Chain(default_timeout_ms=100)
    await slow.add_session(client.session, name)
    started = time.perf_counter()
    timed_out = await slow.execute(SLOW_EVENT, "request", {}, direction="sending")
    assert time.perf_counter() - started < 10.0  # the handler takes 30 s
    assert timed_out.status is Status.TIMEOUT and timed_out.blocked


# stdio -------------------------------------------------------------------------------------------------


def stdio_params(*, by_path: bool = False) -> StdioServerParameters:
    script = ["tests/servers/stdio_host.py"] if by_path else ["-m", "tests.servers.stdio_host"]
    return StdioServerParameters(command=sys.executable, args=script, cwd=str(ROOT))


async def test_stdio_host(mode: str) -> None:
    with anyio.fail_after(STEP_TIMEOUT_S):
        async with Client(stdio_params(), mode=mode) as client:  # type: ignore[arg-type]
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            await check_host(client, mode)
            await check_chain(client, "stdio")


async def test_stdio_host_runs_by_path() -> None:
    with anyio.fail_after(STEP_TIMEOUT_S):
        async with Client(stdio_params(by_path=True), mode="legacy") as client:
            check_capability(client, "legacy")
            listed = await SessionConnection(client.session).request("interceptors/list", {}, RPC_TIMEOUT_S)
    assert [i["name"] for i in listed["interceptors"]] == NAMES


# Streamable HTTP -----------------------------------------------------------------------------------------


def _read_port(proc: subprocess.Popen[bytes], timeout: float) -> int:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the HTTP host did not report its port in time")
        ready, _, _ = select.select([proc.stdout], [], [], remaining)
        if not ready:
            continue
        line = proc.stdout.readline().decode()
        if not line:
            raise RuntimeError(f"the HTTP host exited early with code {proc.wait(timeout=5)}")
        if line.startswith("PORT "):
            return int(line.split()[1])


def _wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="module", params=["stateful", "stateless"])
def http_url(request: pytest.FixtureRequest) -> Iterator[str]:
    args = [sys.executable, "-m", "tests.servers.http_host", "--host", LOOPBACK, "--port", "0"]
    if request.param == "stateless":
        args.append("--stateless")
    proc = subprocess.Popen(args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        port = _read_port(proc, timeout=STEP_TIMEOUT_S)
        _wait_for_port(port, timeout=STEP_TIMEOUT_S)
        yield f"http://{LOOPBACK}:{port}/mcp"
    finally:
        _stop(proc)
    assert proc.returncode is not None


async def test_http_host(http_url: str, mode: str) -> None:
    with anyio.fail_after(STEP_TIMEOUT_S):
        async with Client(http_url, mode=mode) as client:  # type: ignore[arg-type]
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            await check_host(client, mode)
            await check_chain(client, "http")


def test_http_host_refuses_non_loopback_addresses() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.servers.http_host", "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode != 0
    assert b"PORT" not in done.stdout


async def test_remote_server_over_http_in_a_chain(http_url: str) -> None:
    """A supervised RemoteServer reached by URL: discovery and execution over Streamable HTTP."""
    from interceptors import Direction
    from interceptors_chain import Chain, RemoteServer

    async with RemoteServer("http", url=http_url) as remote:
        chain = Chain()
        await chain.add_remote(remote)
        allowed = await chain.execute("tools/call", "request", tool_call("hello"), direction=Direction.SENDING)
        assert not allowed.blocked
        blocked = await chain.execute("tools/call", "request", tool_call("forbidden"), direction=Direction.SENDING)
        assert blocked.blocked
