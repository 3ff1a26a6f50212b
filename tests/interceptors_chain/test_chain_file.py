"""The chain file: validated at start, secrets never echoed, and every kind of server connected in order."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from integrations.chain_file import ChainFileError, load_chain_file, open_chain, parse_chain_file
from interceptors import Direction, Mode
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"servers": [{"name": "a", "command": "x", "url": "http://h/mcp"}]}, "servers.0"),
        ({"servers": [{"name": "a", "command": "x", "token": "SECRET-TOKEN-123"}]}, "servers.0.token"),
        ({"servers": [{"name": "a", "url": "ftp://h"}]}, "servers.0"),
        ({"servers": [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]}, "unique"),
        ({"overrides": {"x": {"mode": "loud"}}}, "overrides.x.mode"),
        ({"overrides": {"x": {"timeout_ms": -1}}}, "overrides.x.timeout_ms"),
        ({"overrides": {"x": {"hooks": [{"events": [], "phase": "request"}]}}}, "overrides.x.hooks.0.events"),
        ({"deadline_ms": "soon"}, "deadline_ms"),
        ({"servers": [{"name": "a", "command": "x", "env": {"API_KEY": 12345}}]}, "servers.0.env.API_KEY"),
    ],
)
def test_invalid_documents_name_the_field_and_never_echo_values(document: dict[str, object], field: str) -> None:
    with pytest.raises(ChainFileError) as caught:
        parse_chain_file(document)
    message = str(caught.value)
    assert field in message
    assert "SECRET-TOKEN-123" not in message and "12345" not in message and "loud" not in message


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ChainFileError, match="cannot read"):
        load_chain_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers: [\n  - name: a\n    command: x: y\n")
    with pytest.raises(ChainFileError, match="not valid YAML at line"):
        load_chain_file(bad)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{nope")
    with pytest.raises(ChainFileError, match="not valid JSON"):
        load_chain_file(bad_json)
    with pytest.raises(ChainFileError, match="top level"):
        parse_chain_file(["not", "a", "mapping"])


async def test_a_chain_file_connects_stdio_and_registry_servers_in_order(tmp_path: Path) -> None:
    spec_file = tmp_path / "chain.yaml"
    spec_file.write_text(
        "servers:\n"
        f"  - name: remote\n    command: [{json.dumps(sys.executable)}, -m, tests.servers.faulty_host, ok]\n"
        f"    cwd: {json.dumps(str(ROOT))}\n    timeout_ms: 5000\n"
        "  - name: local\n    registry: tests.servers.host_registry:build_registry\n"
        "overrides:\n  faulty/check:\n    mode: audit\n"
        "deadline_ms: 10000\n"
    )
    spec = load_chain_file(spec_file)
    async with open_chain(spec) as chain:
        assert [server.name for server in chain.servers] == ["remote", "local"]
        assert dict((name, info.name) for name, info in chain.interceptors() if name == "remote")
        plan = chain.plan("tools/call", "response", Direction.SENDING)
        assert {entry.name: entry.mode for entry in plan.validators}["faulty/check"] is Mode.AUDIT
        result = await chain.execute(
            "tools/call", "request", {"name": "echo", "arguments": {"text": "hi"}}, direction=Direction.SENDING
        )
        assert not result.blocked
        assert result.final_payload["tagged"] is True


async def test_a_registry_that_cannot_load_is_a_chain_file_error() -> None:
    spec = parse_chain_file({"servers": [{"name": "x", "registry": "no.such.module:thing"}]})
    with pytest.raises(ChainFileError, match=r"servers\[x\]\.registry"):
        async with open_chain(spec):
            pass
