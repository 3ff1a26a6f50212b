"""The gateway file (issue 35): both spellings, every error naming its server and key, and the namespacing
rule (reversible, collision-free) checked by Hypothesis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from integrations.gateway.hub.config import GatewayFileError, load_gateway_file, parse_gateway
from integrations.gateway.hub.names import name_in, name_out, uri_in, uri_out

CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "my_memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"X": "1"}},
        "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}},
        "off": {"command": "x", "disabled": True},
        "cline": {"command": "y", "autoApprove": ["a"], "alwaysAllow": []},
    },
    "globalShortcut": "Ctrl+Space",
}


def test_a_claude_desktop_file_is_accepted_as_is(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(CLAUDE_DESKTOP))
    gateway = load_gateway_file(path)
    assert [s.name for s in gateway.servers] == ["filesystem", "my_memory", "remote", "cline"]
    fs = gateway.server("filesystem")
    assert fs.command == ("npx", "-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop")
    assert fs.eager and fs.roles is None and fs.prefix == "filesystem"
    memory = gateway.server("my_memory")
    assert memory.env == {"X": "1"} and memory.prefix == "my-memory"
    remote = gateway.server("remote")
    assert remote.url == "https://example.com/mcp" and remote.headers == (("Authorization", "Bearer t"),)


def test_the_gateways_own_spelling_with_policies_roles_and_start_modes(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "policy: strict\n"
        "list_timeout: 2\n"
        "servers:\n"
        "  fs:\n"
        "    command: [python, server.py]\n"
        "    policy: fs-policy.yaml\n"
        "    roles: [ops]\n"
        "    start: on-first-use\n"
        "    cwd: work\n"
        "  web:\n"
        "    url: http://127.0.0.1:9/mcp\n"
        "    prefix: w\n"
        "    timeout: 3\n"
    )
    gateway = load_gateway_file(path)
    fs, web = gateway.servers
    assert fs.command == ("python", "server.py") and not fs.eager and fs.roles == ("ops",)
    assert fs.policy == str(tmp_path / "fs-policy.yaml") and fs.cwd == str(tmp_path / "work")
    assert gateway.policy == "strict" and gateway.list_timeout == 2.0
    assert web.prefix == "w" and web.timeout == 3.0 and web.policy is None
    assert fs.visible_to(["ops", "x"]) and not fs.visible_to(["dev"]) and web.visible_to([])


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"servers": {"a": {"comand": "x"}}}, "server 'a': unknown key 'comand' (did you mean 'command'?)"),
        ({"servers": {"a": {"args": ["x"]}}}, "server 'a': give either 'command' (stdio) or 'url'"),
        ({"servers": {"a": {"command": "x", "url": "http://h/mcp"}}}, "server 'a': give either"),
        ({"servers": {"a": {"command": "x", "args": "y"}}}, "server 'a': 'args' must be a list of strings"),
        ({"servers": {"a": {"command": "x", "env": {"K": ["v"]}}}}, "server 'a': 'env' must map names"),
        ({"servers": {"a": {"url": "ftp://h"}}}, "server 'a': 'url' must be an http:// or https:// URL"),
        ({"servers": {"a": {"url": "http://h", "env": {}}}}, "server 'a': 'env' is for a 'command' server"),
        ({"servers": {"a": {"command": "x", "start": "lazy"}}}, "server 'a': 'start' must be 'eager' or"),
        ({"servers": {"a": {"command": "x", "timeout": -1}}}, "server 'a': 'timeout' must be a positive"),
        ({"servers": {"a": {"command": "x", "roles": [1]}}}, "server 'a': 'roles' must be a list"),
        ({"servers": {"a": {"url": "http://h", "type": "sse"}}}, "server 'a': 'type' 'sse' is not"),
        ({"servers": {"a": {"command": "x", "prefix": "a_b"}}}, "server 'a': prefix 'a_b' cannot prefix"),
        ({"servers": {"9x": {"command": "x"}}}, "server '9x': name (its default prefix) '9x' cannot"),
        ({"servers": {"a-b": {"command": "x"}, "a_b": {"command": "y"}}}, "servers 'a-b' and 'a_b' have the same"),
        ({"servers": {}}, "'servers' must be an object naming at least one server"),
        ({"servers": {"a": {"command": "x"}}, "polcy": "x"}, "unknown key 'polcy' (did you mean 'policy'?)"),
        ({"servers": {"a": {"command": "x"}}, "mcpServers": {}}, "both 'servers' and 'mcpServers'"),
        ([], "must hold an object"),
        ({"mcpServers": {"a": {"command": "x", "disabled": True}}}, "every server is disabled"),
    ],
)
def test_every_error_names_the_server_and_the_key(document: object, says: str) -> None:
    with pytest.raises(GatewayFileError) as caught:
        parse_gateway(document, "g.yaml")
    assert str(caught.value).startswith("g.yaml: ") and says in str(caught.value)


def test_header_values_are_never_echoed(tmp_path: Path) -> None:
    with pytest.raises(GatewayFileError) as caught:
        parse_gateway({"servers": {"a": {"url": "http://h", "headers": {"Bad Name": "s3cr3t-value"}}}}, "g")
    assert "s3cr3t" not in str(caught.value) and "server 'a'" in str(caught.value)


def test_unreadable_and_malformed_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(GatewayFileError, match="cannot read the gateway file"):
        load_gateway_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(GatewayFileError, match="invalid JSON at line 1"):
        load_gateway_file(bad)
    with pytest.raises(GatewayFileError, match="no server named 'zz' \\(servers: a\\)"):
        parse_gateway({"servers": {"a": {"command": "x"}}}).server("zz")


PREFIXES = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,31}", fullmatch=True)


@given(PREFIXES, PREFIXES, st.text(min_size=0, max_size=40), st.text(min_size=0, max_size=40))
def test_namespacing_is_reversible_and_never_collides(p1: str, p2: str, n1: str, n2: str) -> None:
    assert name_in(name_out(p1, n1)) == (p1, n1)
    assert uri_in(uri_out(p1, n1)) == (p1, n1)
    if (p1, n1) != (p2, n2):
        assert name_out(p1, n1) != name_out(p2, n2)
        assert uri_out(p1, n1) != uri_out(p2, n2)


def test_names_no_server_made_map_to_none() -> None:
    assert name_in("plain") is None and name_in("a_b") is None and name_in("a_b__c") is None
    assert uri_in("file:///x") is None and uri_in("+x") is None
