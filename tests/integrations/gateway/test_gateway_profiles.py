"""Every built-in profile through the real gateway, and bearer-token principals over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.conftest import ROOT
from tests.processes import listening_url, stop

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
UPSTREAM = [sys.executable, "-m", "tests.servers.leaky_server"]
READS = {"echo_value", "fail_loudly", "get_config", "progress_report", "whoami"}
ALL = READS | {"delete_everything", "reveal_token"}
# (profile, roles) -> the tools that principal sees and may call; everything else looks missing.
EXPECTED = {
    ("open", ()): ALL,
    ("standard", ()): ALL - {"reveal_token"},
    ("standard", ("admin",)): ALL,
    ("strict", ("admin",)): READS,  # strict: no reveal, nothing destructive, not even for admins
    ("read_only", ()): READS,
    ("airgapped", ()): ALL - {"reveal_token"},
    ("audit", ()): READS,
    ("soc-analyst", ()): ALL - {"reveal_token"},
}


def gateway(*flags: str) -> StdioServerParameters:
    argv = [sys.executable, "-m", "integrations.cli", "proxy", *flags, "--", *UPSTREAM]
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))


async def check_profile(client: Client, expected: set[str]) -> None:
    """The principal sees `expected` and may call echo; every other tool looks missing when called."""
    assert {tool.name for tool in (await client.list_tools()).tools} == expected
    for name in sorted(ALL - expected):
        with pytest.raises(MCPError) as hidden:
            await client.session.call_tool(name, {})
        assert (hidden.value.error.code, hidden.value.error.message) == (-32602, f"Unknown tool: {name}")
    result = await client.session.call_tool("echo_value", {"value": "hello"})
    assert not result.is_error


@pytest.mark.parametrize(("profile", "roles"), sorted(EXPECTED))
async def test_profile_visibility_and_calls(profile: str, roles: tuple[str, ...]) -> None:
    """Each profile through the router in this process (the gateway's stages, router and local answers, the
    upstream a real process): what the profile decides does not depend on the gateway's own process."""
    from integrations.gateway.inprocess import InProcessGateway
    from integrations.gateway.stages import build_stages
    from interceptors_server import LocalChain

    stages = build_stages(profile, None)
    with anyio.fail_after(60):
        async with (
            LocalChain(*stages.registries) as chain,
            InProcessGateway(UPSTREAM, chain, stages=stages, roles=roles, cwd=str(ROOT)) as served,
            Client(served.server, mode="legacy") as client,
        ):
            await check_profile(client, EXPECTED[(profile, roles)])
    stages.close()


async def test_a_profile_and_roles_from_the_command_line() -> None:
    """The same through `mcp-interceptors proxy --policy NAME --role ROLE` (a process of its own)."""
    with anyio.fail_after(60):
        async with Client(gateway("--policy", "strict", "--role", "admin"), mode="legacy") as client:
            await check_profile(client, EXPECTED[("strict", ("admin",))])


def test_denied_but_not_hidden_gets_31001_with_reason_and_policy(tmp_path: Path) -> None:
    policy = tmp_path / "visible-denials.yaml"
    policy.write_text("extends: read_only\nname: visible-denials\nhide_denied: false\n")

    async def main() -> None:
        async with Client(gateway("--policy", str(policy)), mode="legacy") as client:
            assert "delete_everything" in {tool.name for tool in (await client.list_tools()).tools}
            with pytest.raises(MCPError) as denied:
                await client.session.call_tool("delete_everything", {})
            assert denied.value.error.code == -31001
            assert set(denied.value.error.data) == {"reason", "policy"}
            assert denied.value.error.data["policy"] == "visible-denials"

    anyio.run(main)


@pytest.fixture(scope="module", params=["tokens-file", "chain-file"])
def http_gateway(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[str]:
    """The same token map from `--tokens FILE` or from the chain file's `tokens:` section; one gateway per
    source for the module (the tests only read through it)."""
    entries = "tokens:\n  - {id: ada, roles: [admin], token: ada-secret-token}\n"
    source = tmp_path_factory.mktemp("tokens") / ("tokens.yaml" if request.param == "tokens-file" else "chain.yaml")
    source.write_text(entries)
    source.chmod(0o600)  # tokens in clear: the owner alone may read them
    flag = "--tokens" if request.param == "tokens-file" else "--chain"
    process = subprocess.Popen(
        [sys.executable, "-m", "integrations.cli", "proxy", "--listen", "127.0.0.1:0", flag, str(source),
         "--", *UPSTREAM],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        yield listening_url(process)
    finally:
        stop(process)


def test_http_without_a_valid_token_is_refused_before_any_mcp(http_gateway: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    for header in (None, "Bearer wrong-token", "Basic ada-secret-token"):
        request = urllib.request.Request(http_gateway, data=body, method="POST")
        request.add_header("content-type", "application/json")
        request.add_header("accept", "application/json, text/event-stream")
        if header:
            request.add_header("authorization", header)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401
        challenge = refused.value.headers["www-authenticate"]  # RFC 9728: where the resource's metadata is
        port = http_gateway.rsplit(":", 1)[1].split("/", 1)[0]
        metadata = f'resource_metadata="http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"'
        error = "" if header is None or header.startswith("Basic") else ', error="invalid_token"'
        assert challenge.startswith(f"Bearer {metadata}{error}"), challenge


def test_http_with_a_token_gets_that_principals_view(http_gateway: str) -> None:
    import httpx2

    async def main() -> None:
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers={"authorization": "Bearer ada-secret-token"})
        async with http, Client(streamable_http_client(http_gateway, http_client=http), mode="legacy") as client:
            # ada is an admin: the reveal tool is visible to her under the default standard profile.
            assert "reveal_token" in {tool.name for tool in (await client.list_tools()).tools}

    anyio.run(main)
