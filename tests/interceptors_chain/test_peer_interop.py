"""Working with the other SEP-2624 implementations as they send things: their -32000 timeout answer, integral
floats, the capability where their readers look. The peer is `tests.servers.peer_host`, a host shaped like the
working group's Python reference SDK on the wire; the process boundary is part of what is tested (a timeout
answer must not restart a healthy server)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from interceptors import CAPABILITY, Direction, Registry, Verdict
from interceptors_chain import Chain, InterceptorOverride, RemoteServer, SessionConnection
from interceptors_chain.result import AbortKind
from interceptors_server import install, interceptor_server
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio

PEER = [sys.executable, "-m", "tests.servers.peer_host"]
CLI = [sys.executable, "-m", "integrations.cli"]
CALL = {"name": "t", "arguments": {}}


async def test_a_peer_timeout_answer_is_a_timeout_and_the_server_keeps_running() -> None:
    """-32000 "Interceptor execution timeout" is the peer's answer, not a lost connection: `kind: timeout`,
    fail closed, the same process answers the next invoke, and timeouts in a row never restart it, whether the
    server answered them late or (being cancelled) not at all: it still answers a ping."""
    async with RemoteServer("peer", command=PEER, cwd=str(ROOT), restart_after_timeouts=2) as remote:
        chain = Chain(overrides={"peer/check": InterceptorOverride.build(timeout_ms=200)})
        await chain.add_remote(remote)
        healthy = await chain.execute("tools/call", "request", CALL, direction=Direction.RECEIVING)
        assert not healthy.blocked
        assert healthy.results[0].result is not None
        pid = healthy.results[0].result["info"]["pid"]
        for gap in (0, 0, 0, 0.3, 0.3, 0.3):  # back to back, and with room for late answers between calls
            slow = {"name": "t", "arguments": {}, "sleep": 1}
            timed_out = await chain.execute("tools/call", "request", slow, direction=Direction.RECEIVING)
            assert timed_out.blocked and timed_out.status == "timeout"
            assert timed_out.results[0].error_kind is AbortKind.TIMEOUT
            await anyio.sleep(gap)
        later = await chain.execute("tools/call", "request", CALL, direction=Direction.RECEIVING)
        assert not later.blocked
        assert later.results[0].result is not None and later.results[0].result["info"]["pid"] == pid
        assert remote.restarts == 0 and remote.connected


async def test_the_servers_own_timeout_answer_reaches_the_chain_as_a_timeout() -> None:
    """With room to answer (our deadline later than its `timeoutMs`), the peer's -32000 is the reply we read."""
    async with RemoteServer("peer", command=PEER, cwd=str(ROOT)) as remote:
        params = {"name": "peer/check", "event": "tools/call", "phase": "request", "payload": {"sleep": 5}}
        with pytest.raises(Exception) as caught:
            await remote.request("interceptor/invoke", {**params, "timeoutMs": 100}, 10)
        error = getattr(caught.value, "error", None)
        assert error is not None and error.code == -32000 and error.message == "Interceptor execution timeout"
        assert remote.restarts == 0 and remote.connected


def test_the_cli_prints_the_peers_timeout_answer() -> None:
    command = " ".join(PEER)
    args = ["invoke", "--server", command, "peer/check", "--event", "tools/call", "--phase", "request"]
    done = subprocess.run(
        [*CLI, *args, "--payload", json.dumps({"sleep": 5}), "--timeout-ms", "200"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert "error -32000: Interceptor execution timeout" in done.stderr, done.stderr
    assert "closed the connection" not in done.stderr and "Traceback" not in done.stderr


def _host() -> Any:
    registry = Registry()

    @registry.validator("ours/allow", events="tools/call", phase="request")
    async def allow(invocation: Any) -> Verdict:
        return Verdict.allow()

    return interceptor_server(registry)


@pytest.mark.parametrize(("timeout", "accepted"), [(200.0, True), (200, True), (200.5, False), (-1.0, False)])
async def test_our_host_takes_an_integral_float_timeout_as_peers_send_it(timeout: float, accepted: bool) -> None:
    async with Client(_host()) as client:
        connection = SessionConnection(client.session)
        params = {"name": "ours/allow", "event": "tools/call", "phase": "request", "payload": {}, "timeoutMs": timeout}
        if accepted:
            result = await connection.request("interceptor/invoke", params, 10)
            assert result["valid"] is True
        else:
            with pytest.raises(MCPError, match="timeoutMs") as refused:
                await connection.request("interceptor/invoke", params, 10)
            assert refused.value.error.code == -32602


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_capability_is_where_every_reader_looks_in_both_eras(mode: str) -> None:
    """SEP-2624 puts it under `extensions`; the 2025-era readers of some peers look only there, others only
    under `experimental`: a host that installs the extension advertises it in both places in both eras."""
    from mcp.server.lowlevel import Server

    server: Server[Any] = Server("both")
    install(server, Registry())
    async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
        capabilities = client.session.server_capabilities
        assert capabilities is not None
        dumped = capabilities.model_dump(by_alias=True, exclude_none=True)
        assert CAPABILITY in (dumped.get("extensions") or {}), dumped


@pytest.mark.parametrize(
    "payload",
    [
        {"method": "tools/call", "params": {"name": "delete_all", "arguments": {}}},
        {"name": "delete_all", "arguments": {}},
    ],
)
async def test_a_handler_reading_params_serves_every_invokers_payload_shape(payload: dict[str, Any]) -> None:
    """Our chain sends SEP-2624's `{method, params}`; Go and the working group's SDK send the params alone."""
    registry = Registry()

    @registry.validator("no-deletes", events="tools/call", phase="request")
    def no_deletes(invocation: Any) -> Verdict:
        name = invocation.params["name"]
        return Verdict.deny(f"{name} is destructive") if name.startswith("delete_") else Verdict.allow()

    async with Client(interceptor_server(registry)) as client:
        params = {"name": "no-deletes", "event": "tools/call", "phase": "request", "payload": payload}
        result = await SessionConnection(client.session).request("interceptor/invoke", params, 10)
    assert result["valid"] is False
