"""A synchronous upstream (reads a line, writes a line) under concurrent large calls: reading the upstream never
waits on writing to it, so the gateway cannot deadlock against it once both pipes are full. The upstream is a
real process: its pipe buffers are what is tested; the gateway runs in process."""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from integrations.gateway.inprocess import InProcessGateway
from interceptors import Registry
from interceptors_server import LocalChain
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio

SYNC_UPSTREAM = [sys.executable, "-m", "tests.servers.sync_upstream"]
CLIENTS = 8
CALLS = 6
ARGUMENT_BYTES = 48 * 1024


async def test_eight_clients_with_48_kib_arguments_against_a_synchronous_upstream_all_get_answers() -> None:
    answered: list[int] = []
    async with LocalChain(Registry()) as chain, InProcessGateway(SYNC_UPSTREAM, chain, cwd=str(ROOT)) as gateway:

        async def client(number: int) -> None:
            text = str(number) * ARGUMENT_BYTES
            async with Client(gateway.server, mode="legacy") as session:
                for _ in range(CALLS):
                    result = await session.call_tool("echo", {"text": text})
                    block = result.content[0]
                    assert isinstance(block, TextContent) and block.text == text
                    answered.append(number)

        with anyio.fail_after(120):  # a hang guard: the deadlock is forever, a healthy run takes seconds
            async with anyio.create_task_group() as group:
                for number in range(CLIENTS):
                    group.start_soon(client, number)
    assert len(answered) == CLIENTS * CALLS
