"""Errors the gateway gives clients never name its internal interceptor servers, and a failure repeated on
every call is logged once per period (issue 31)."""

from __future__ import annotations

import logging
import sys

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from integrations.gateway.chain_adapter import RateLimitedLog, _unnamed
from integrations.gateway.inprocess import InProcessGateway
from interceptors_server import LocalChain
from tests.conftest import ROOT
from tests.servers.crash_registry import registry

SYNC_UPSTREAM = [sys.executable, "-m", "tests.servers.sync_upstream"]


@pytest.mark.anyio
async def test_a_failing_interceptor_is_reported_without_its_server_name(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="interceptors.gateway")
    with anyio.fail_after(60):
        async with (
            LocalChain(registry) as chain,
            InProcessGateway(SYNC_UPSTREAM, chain, cwd=str(ROOT)) as gateway,
            Client(gateway.server, mode="legacy") as client,
        ):
            with pytest.raises(MCPError) as failed:
                await client.call_tool("echo", {"text": "x"})
    error = failed.value.error
    assert error.code == -32603 and error.data is not None
    assert "local-" not in f"{error.message} {error.data}"
    assert error.data["interceptor"] == "crash/always"
    assert error.data["reason"] == "an interceptor server returned error -32603"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server 'local-0' returned error -32603", "an interceptor server returned error -32603"),
        ("interceptor server 'dlp' sent a malformed reply", "an interceptor server sent a malformed reply"),
        ("rejected by validator", "rejected by validator"),
    ],
)
def test_server_names_are_removed(text: str, expected: str) -> None:
    assert _unnamed(text) == expected


def test_repeated_warnings_are_one_line_per_period(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    log = RateLimitedLog(10.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="interceptors.gateway")
    for _ in range(855):
        log.warning("the store is down: %s", "x")
    now[0] += 10.0
    log.warning("the store is down: %s", "y")
    lines = [record.getMessage() for record in caplog.records]
    assert lines == ["the store is down: x", "the store is down: y (and 854 more like it since the last line)"]
