"""Issue 30's vault cases through the real gateway: `--policy strict` over HTTP with `--tokens`, in front of an
upstream whose `encode` tool echoes its argument in each of the 27 ways of
`tests/interceptors/vault/test_vault_echo.py`.

With strict's defaults (`restore_to: []`) no case recovers the owner's real e-mail, and pseudonyms do not cross
principals; with `encode` named in `restore_to`, the tool gets the real value and still no case gives it back.

python -m tests.interceptors.vault.test_vault_echo_gateway   (the upstream, on stdio)
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import ROOT
from tests.interceptors.vault.test_vault_echo import ECHOES, leaked
from tests.processes import listening_url, stop

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning")]
OWNER = "grace.hopper@navy-example.org"
TWO_PRINCIPALS = "tokens:\n  - {id: alice, token: alice-token}\n  - {id: bob, token: bob-token}\n"
UPSTREAM = [sys.executable, "-m", "tests.interceptors.vault.test_vault_echo_gateway"]

Call = Callable[[str, dict[str, Any]], Awaitable[tuple[str, Any]]]


# --- the upstream ----------------------------------------------------------------------------------------------


def build_server() -> Any:
    import warnings

    from mcp import types
    from mcp.server.lowlevel.server import Server
    from mcp.shared.exceptions import MCPError

    def tool(name: str) -> types.Tool:
        hints = types.ToolAnnotations(readOnlyHint=True, openWorldHint=False)
        return types.Tool(name=name, input_schema={"type": "object"}, annotations=hints)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("whoami"), tool("echo_value"), tool("encode")])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        value = str(arguments.get("value"))
        structured = None
        if params.name == "whoami":
            text = f"owner: {OWNER}"
        elif params.name == "echo_value":
            text = f"real={'yes' if value == OWNER else 'no'}"
        elif params.name == "encode":
            echoed = ECHOES[str(arguments.get("how"))](value)
            text, structured = echoed if isinstance(echoed, tuple) else (echoed, None)
        else:
            raise MCPError(-32602, f"Unknown tool: {params.name}")
        content = [types.TextContent(type="text", text=text)]
        return types.CallToolResult(content=content, structured_content=structured)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Server("echoes", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


# --- the tests ---------------------------------------------------------------------------------------------------


@contextmanager
def http_gateway(*flags: str) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "integrations.cli", "proxy", "--listen", "127.0.0.1:0", *flags, "--", *UPSTREAM],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        yield listening_url(process)
    finally:
        stop(process)


@asynccontextmanager
async def session(url: str, bearer: str) -> AsyncIterator[Call]:
    import httpx2
    from mcp import Client, types
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {bearer}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:

        async def call(tool: str, arguments: dict[str, Any]) -> tuple[str, Any]:
            result = await client.session.call_tool(tool, arguments)
            block = result.content[0] if result.content else None
            return (block.text if isinstance(block, types.TextContent) else ""), result.structured_content

        yield call


async def cases(url: str, *, restored: bool) -> None:
    async with session(url, "alice-token") as alice, session(url, "bob-token") as bob:
        owner = (await alice("whoami", {}))[0].split("owner: ", 1)[1].strip()
        bobs = (await bob("whoami", {}))[0].split("owner: ", 1)[1].strip()
        assert OWNER not in owner + bobs and owner != bobs  # pseudonyms do not link the two principals
        assert (await bob("echo_value", {"value": owner}))[0] == "real=no"  # another's pseudonym: nothing real
        assert (await alice("echo_value", {"value": bobs}))[0] == "real=no"
        expected = "real=yes" if restored else "real=no"
        assert (await alice("echo_value", {"value": owner}))[0] == expected
        withheld = []
        for how in ECHOES:
            text, structured = await alice("encode", {"value": owner, "how": how})
            assert not leaked(how, OWNER, text, structured), (how, text)
            if restored and how == "plain":  # swapped back in place: the client reads its own pseudonym
                assert ECHOES[how](owner) == text, (how, owner, text)
            if text.startswith("result withheld by the vault"):
                withheld.append(how)
        assert withheld == [] if not restored else 0 < len(withheld) < len(ECHOES), withheld


def test_strict_over_http_defaults_no_echo_recovers_the_value(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TWO_PRINCIPALS)
    tokens.chmod(0o600)
    with http_gateway("--policy", "strict", "--tokens", str(tokens)) as url:
        anyio.run(lambda: cases(url, restored=False))


def test_strict_with_encode_in_restore_to_still_never_echoes_the_value(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TWO_PRINCIPALS)
    tokens.chmod(0o600)
    policy = tmp_path / "restoring.yaml"
    policy.write_text("extends: strict\nname: restoring\nvault: {restore_to: [encode, echo_value]}\n")
    with http_gateway("--policy", str(policy), "--tokens", str(tokens)) as url:
        anyio.run(lambda: cases(url, restored=True))


if __name__ == "__main__":
    anyio.run(main)
