"""The SDK's private API is read in one module (`interceptors_chain/_sdk.py`), and each attribute it reads is where
it reads it: these tests fail loudly when the SDK moves one (the fast paths would otherwise fall back quietly)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from interceptors import Registry
from interceptors_chain import _sdk
from interceptors_server import interceptor_server
from interceptors_server.install import lowlevel_server
from tests.conftest import ROOT

_PRIVATE = re.compile(
    r"\._stamp\b|\._dispatcher\b|_session_read_timeout_seconds|\._lowlevel_server\b|from mcp[\w.]*\._\w+ import"
    r"|import mcp[\w.]*\._\w+"
)


def test_no_module_reads_the_sdks_private_api_but_sdk() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("interceptors", "interceptors_chain", "interceptors_server", "integrations")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "_sdk.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _PRIVATE.search(line)
    ]
    assert found == []


@pytest.mark.anyio
async def test_the_sessions_raw_path_is_where_we_read_it() -> None:
    async with Client(interceptor_server(Registry())) as client:
        session = client.session
        assert _sdk.has_raw_path(session) and _sdk.can_stamp(session)
        assert not _sdk.session_closed(session)
        data = {"method": "interceptors/list", "params": {}}
        _sdk.stamp(session, data, {})
        assert isinstance(data["params"], dict)
        result = await _sdk.send_raw(session, "interceptors/list", {}, None)
        assert result["interceptors"] == []


def test_the_low_level_server_under_an_mcpserver_is_where_we_read_it() -> None:
    server = MCPServer("x")
    low = lowlevel_server(server)
    assert low is not server and low.name == "x"
    assert lowlevel_server(low) is low


def test_the_sources_are_where_the_test_looks() -> None:
    assert Path(_sdk.__file__).name == "_sdk.py" and (ROOT / "interceptors_chain" / "_sdk.py").exists()


def test_the_intercepting_clients_one_override_is_still_the_sdks_session_builder() -> None:
    """`InterceptingClient` overrides `Client._build_session` (the SDK's one place a client's session is made):
    when the SDK renames it, the override would silently never run and nothing would be intercepted."""
    from integrations.client import InterceptingClient

    assert callable(getattr(Client, "_build_session", None))
    assert InterceptingClient._build_session is not Client._build_session


@pytest.mark.anyio
async def test_the_dispatcher_swap_reaches_the_session() -> None:
    async with Client(interceptor_server(Registry())) as client:
        session = client.session
        seen: list[object] = []

        def wrap(inner: object) -> object:
            seen.append(inner)
            return inner

        _sdk.wrap_dispatcher(session, wrap)
        assert len(seen) == 1 and _sdk.has_raw_path(session)
