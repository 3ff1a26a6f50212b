"""The built-in stages served by `mcp-interceptors serve` in their own process, used by a gateway through the
chain file example of doc/CHAIN_FILE.md: it must redact and refuse exactly like `--policy standard` in-process."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.conftest import ROOT
from tests.servers.leaky_server import SECRETS

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
UPSTREAM = [sys.executable, "-m", "tests.servers.leaky_server"]
CLI = f"{sys.executable} -m integrations.cli"


def documented_chain_file() -> str:
    """The stages.yaml example of doc/CHAIN_FILE.md, with `mcp-interceptors` run from this checkout."""
    text = (ROOT / "doc" / "CHAIN_FILE.md").read_text()
    section = text.split("## The built-in stages as a remote interceptor server", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return block.group(1).replace("command: mcp-interceptors ", f"command: {CLI} ")


def gateway(*flags: str) -> StdioServerParameters:
    argv = [sys.executable, "-m", "integrations.cli", "proxy", *flags, "--", *UPSTREAM]
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))


def dump(model: Any) -> Any:
    """The result as JSON, its provenance timestamp blanked (the two gateways run seconds apart)."""
    text = json.dumps(model.model_dump(mode="json", by_alias=True, exclude_none=True))
    return json.loads(re.sub(r'"generated_at": "[^"]*"', '"generated_at": "-"', text))


async def observe(params: StdioServerParameters) -> dict[str, Any]:
    """What a client sees through a gateway: the tool list, a leaky result, a refused secret argument."""
    seen: dict[str, Any] = {}
    with anyio.fail_after(90):
        async with Client(params, mode="legacy") as client:
            seen["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
            seen["config"] = dump(await client.session.call_tool("get_config", {}))
            with pytest.raises(MCPError) as refused:
                await client.session.call_tool("echo_value", {"value": SECRETS[1]})
            seen["refused"] = (refused.value.error.code, refused.value.error.message)
            seen["echo"] = dump(await client.session.call_tool("echo_value", {"value": "plain words"}))
    return seen


async def test_a_gateway_using_the_remote_stage_server_redacts_like_policy_standard_in_process(tmp_path: Path) -> None:
    chain_file = tmp_path / "stages.yaml"
    chain_file.write_text(documented_chain_file())
    remote = await observe(gateway("--chain", str(chain_file)))
    local = await observe(gateway("--policy", "standard"))
    text = json.dumps(remote)
    assert all(secret not in text for secret in SECRETS), "a credential reached the client"
    assert remote["refused"][0] == -32602
    assert remote == local
