"""A tool the upstream adds at runtime is callable through the gateway at once (issue 31): the gateway learns
the new catalog before it relays `list_changed`, and a name it does not know gets one re-listing before the
policy refuses it; a hidden tool is still refused exactly as a missing one. In process, the standard policy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from integrations.gateway.inprocess import InProcessGateway
from integrations.gateway.stages import build_stages
from interceptors_server import LocalChain
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio

GROWING = [sys.executable, "-m", "tests.servers.growing_upstream"]
TEST_S = 120.0  # a guard against hangs, never a claim
RUNS = 20


def policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text("name: growing\nextends: standard\ndeny_tools: [hidden]\n")
    return str(path)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), result
    return block.text


async def test_a_tool_called_right_after_list_changed_is_known(tmp_path: Path) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    stages = build_stages(policy(tmp_path), None)
    with anyio.fail_after(TEST_S):
        async with (
            LocalChain(*stages.registries) as chain,
            InProcessGateway(GROWING, chain, stages=stages, cwd=str(ROOT)) as gateway,
            Client(gateway.server, mode="legacy", message_handler=on_message) as client,
        ):
            for _ in range(RUNS):  # announced: the call goes out the moment list_changed arrives
                changed = anyio.Event()
                added = text_of(await client.call_tool("grow", {}))
                await changed.wait()
                assert text_of(await client.call_tool(added, {})) == added
            for _ in range(RUNS):  # never announced: one re-listing before the policy judges the name
                added = text_of(await client.call_tool("sneak", {}))
                assert text_of(await client.call_tool(added, {})) == added
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("hidden", {})
            with pytest.raises(MCPError) as missing:
                await client.call_tool("no-such-tool", {})
    assert hidden.value.error.code == missing.value.error.code == -32602
    assert hidden.value.error.message == "Unknown tool: hidden"
    assert missing.value.error.message == "Unknown tool: no-such-tool"
