"""The aggregated endpoint in the 2026-07-28 era (issue 35): the real `mcp` SDK client in `mode="auto"` (it
sends `server/discover` and stays modern when it is answered), the real `proxy --config` process, real
subprocess upstreams, over stdio and Streamable HTTP; raw lines for the envelope's errors.

What a modern client gets through the aggregate: discovery answered by the gateway, the namespaced catalogs,
calls, reads, prompts and completions routed back, progress, a server's error naming the server, per-principal
views; each result stamped (`resultType`, the server-info `_meta`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from interceptors import INVALID_PARAMS
from interceptors.protocol.messages import INVALID_REQUEST
from tests.conftest import ROOT
from tests.integrations.gateway.hub.test_hub_gateway import (
    UPSTREAM,
    check_both_servers,
    hub_argv,
    names,
    write_file,
    write_tokens,
)
from tests.integrations.gateway.test_gateway import STEP_S, TEST_S, text_of
from tests.processes import listening_url, stop

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def modern_client(path: Path, **options: Any) -> Client:
    argv = hub_argv(path)
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
    return Client(params, mode="auto", read_timeout_seconds=STEP_S, **options)


async def test_a_2026_07_28_client_discovers_lists_and_calls_through_the_aggregate_over_stdio(tmp_path: Path) -> None:
    path = write_file(tmp_path, {"alpha": {"command": UPSTREAM}, "beta": {"command": UPSTREAM}})
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    with anyio.fail_after(TEST_S):
        async with modern_client(path) as client:
            assert client.protocol_version == MODERN  # discovery answered: no fallback to initialize
            assert client.server_info is not None and client.server_info.name == "mcp-interceptors-gateway"
            assert "alpha (alpha)" in (client.instructions or "")
            await check_both_servers(client)
            assert [p.name for p in (await client.list_prompts()).prompts] == ["alpha__greet", "beta__greet"]
            prompt = await client.get_prompt("beta__greet", {"name": "Ada"})
            assert isinstance(prompt.messages[0].content, types.TextContent)
            assert prompt.messages[0].content.text == "Hello Ada"
            completed = await client.complete(
                types.PromptReference(name="alpha__greet"), {"name": "name", "value": "al"}
            )
            assert completed.completion.values == ["alice", "albert"]
            await client.call_tool(
                "alpha__progress", {"text": "p", "steps": 2, "interval": 0.01}, progress_callback=on_progress
            )
            assert progress


async def test_a_2026_07_28_client_over_http_sees_its_roles_view_each_request_on_its_own(tmp_path: Path) -> None:
    servers = {
        "fs": {"command": UPSTREAM, "roles": ["files", "admin"]},
        "mem": {"command": UPSTREAM, "roles": ["admin"]},
    }
    path = write_file(tmp_path, servers)
    tokens = write_tokens(tmp_path)
    process = subprocess.Popen(
        hub_argv(path, "--listen", "127.0.0.1:0", "--tokens", str(tokens)), cwd=ROOT, stderr=subprocess.PIPE
    )
    try:
        url = listening_url(process)
        with anyio.fail_after(TEST_S):
            for bearer, want_mem in (("fay-token", False), ("ada-token", True)):
                async with (
                    httpx2.AsyncClient(headers={"authorization": f"Bearer {bearer}"}, timeout=STEP_S) as http,
                    Client(
                        streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=STEP_S
                    ) as client,
                ):
                    assert client.protocol_version == MODERN
                    tools = names(await client.list_tools())
                    assert "fs__echo" in tools and any(n.startswith("mem__") for n in tools) is want_mem
                    assert text_of(await client.call_tool("fs__echo", {"text": bearer})) == bearer
                    if want_mem:
                        assert text_of(await client.call_tool("mem__echo", {"text": "m"})) == "m"
                    else:
                        with pytest.raises(MCPError) as hidden:  # hidden equals missing
                            await client.call_tool("mem__echo", {"text": "m"})
                        assert hidden.value.error.message == "Unknown tool: mem__echo"
            headers = {
                "authorization": "Bearer ada-token",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": MODERN,
            }
            async with httpx2.AsyncClient(headers=headers, timeout=STEP_S) as http:  # raw: the result's stamp
                listed = await http.post(
                    url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}},
                    headers={"mcp-method": "tools/list"},
                )
                result = listed.json()["result"]
                assert result["resultType"] == "complete" and result["_meta"][SERVER_INFO]["name"].startswith("mcp-")
                assert listed.headers.get("mcp-session-id") is None  # no session: each request stands alone
    finally:
        stop(process)


def test_the_envelope_is_checked_and_an_auto_clients_fallback_to_initialize_still_works(tmp_path: Path) -> None:
    from tests.integrations.gateway.router.test_router_gateway import INITIALIZED, _exchange

    path = write_file(tmp_path, {"alpha": {"command": UPSTREAM}})

    def call(request_id: int, meta: dict[str, Any] | None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": "alpha__echo", "arguments": {"text": f"n{request_id}"}}
        if meta is not None:
            params["_meta"] = meta
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    no_capabilities = {"io.modelcontextprotocol/protocolVersion": MODERN}
    future = {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    lines: list[dict[str, Any] | str] = [
        call(1, None),  # neither initialize nor the envelope
        call(2, no_capabilities),
        call(3, future),
        {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": ENVELOPE}},
        call(5, ENVELOPE),
    ]
    replies = _exchange(hub_argv(path), lines, [1, 2, 3, 4, 5])
    assert replies[1]["error"]["code"] == INVALID_REQUEST
    assert replies[2]["error"]["code"] == INVALID_PARAMS
    assert replies[3]["error"]["code"] == -32022 and replies[3]["error"]["data"]["supported"] == [MODERN]
    assert replies[4]["result"]["resultType"] == "complete"
    assert replies[5]["result"]["content"][0]["text"] == "n5"
    assert replies[5]["result"]["resultType"] == "complete"

    probe = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}}
    initialize = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    replies = _exchange(hub_argv(path), [probe, initialize, INITIALIZED, call(3, None)], [1, 2, 3])
    assert replies[1]["result"]["supportedVersions"] == [MODERN]
    assert replies[2]["result"]["protocolVersion"] == "2025-11-25"  # the probe's fallback: a handshake session
    assert replies[3]["result"]["content"][0]["text"] == "n3" and "resultType" not in replies[3]["result"]
