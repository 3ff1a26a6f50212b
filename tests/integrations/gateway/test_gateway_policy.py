"""The gateway with the built-in policy and transform stages (the default `standard` profile and others),
in front of a real upstream that leaks credentials on every channel. (Every channel under `standard`, the
audit file and `reveal_token`: tests/integrations/gateway/router/test_router_gateway.py.)

Where a profile's decision is what is tested, the router runs in this process (`tests/inprocess_gateway.py`);
the default profile, `--policy none`, two processes sharing Redis and HTTP principals go through `proxy`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.shared.exceptions import MCPError

from tests.conftest import ROOT
from tests.inprocess_gateway import routed
from tests.processes import listening_url, stop
from tests.servers.leaky_server import SECRETS

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
UPSTREAM = [sys.executable, "-m", "tests.servers.leaky_server"]


def gateway(*flags: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    argv = [sys.executable, "-m", "integrations.cli", "proxy", *flags, "--", *UPSTREAM]
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)


def assert_clean(value: Any) -> None:
    text = json.dumps(value, default=str)
    for secret in SECRETS:
        assert secret not in text, "a credential reached the client"


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def test_standard_redacts_inside_what_the_upstream_marks_as_encoded() -> None:
    """base64 fields, data URLs, a Kubernetes Secret, a percent-encoded query, hex: redacted, still well-formed."""
    import base64
    import re

    from interceptors.testing import assert_no_leak

    with anyio.fail_after(60):
        async with routed(UPSTREAM, "standard") as served, Client(served.server, mode="legacy") as client:
            result = dump(await client.session.call_tool("echo_value", {"value": "x", "encoded": True}))
    assert_no_leak(result, SECRETS)  # in every spelling: base64, hex, URL-encoding
    expected = "aws=AKIA************7P2L github=[REDACTED:api_token]"  # credentials masked 4 + 4, secrets redacted
    structured = result["structuredContent"]
    assert base64.b64decode(structured["file"]["content"], validate=True).decode() == expected
    assert bytes.fromhex(structured["dump"]["data"]).decode() == expected
    attachment, manifest, url = (block["text"] for block in result["content"])
    assert base64.b64decode(attachment.split(",", 1)[1], validate=True).decode() == expected
    match = re.search(r"\n  config: (\S+)\n", manifest)
    assert match is not None and base64.b64decode(match.group(1), validate=True).decode() == expected
    assert url.startswith("https://api.example.com/callback?state=") and url.endswith("&page=2")


async def test_an_admin_may_reveal_and_read_only_hides_destructive_tools() -> None:
    with anyio.fail_after(60):
        async with routed(UPSTREAM, roles=["admin"]) as served, Client(served.server, mode="legacy") as client:
            assert "reveal_token" in {tool.name for tool in (await client.list_tools()).tools}
            await client.session.call_tool("reveal_token", {"value": "x"})
        async with routed(UPSTREAM, "read_only") as served, Client(served.server, mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "delete_everything" not in names and "get_config" in names
            with pytest.raises(MCPError) as hidden:
                await client.session.call_tool("delete_everything", {})
            assert hidden.value.error.code == -32602


async def test_policy_none_is_a_pure_pass_through() -> None:
    with anyio.fail_after(60):
        async with Client(gateway("--policy", "none"), mode="legacy") as client:
            config = await client.session.call_tool("get_config", {})
            assert SECRETS[0] in json.dumps(dump(config))


async def test_strict_pseudonymises_and_the_tool_still_gets_real_values(tmp_path: Path) -> None:
    """The model sees a token, sends it back, a tool named in `vault.restore_to` receives the real value and
    echoes it, and the client sees the token again: a round trip through the vault with no leak."""
    from tests.servers.leaky_server import OWNER_EMAIL

    policy = tmp_path / "restoring.yaml"
    policy.write_text("extends: strict\nname: restoring\nvault: {restore_to: [echo_value]}\n")
    with anyio.fail_after(60):
        async with routed(UPSTREAM, "strict") as served, Client(served.server, mode="legacy") as client:
            owner = await client.session.call_tool("whoami", {})  # restore_to is empty by default
            token = dump(owner)["content"][0]["text"].split("owner: ", 1)[1].split()[0].strip()
            echoed = await client.session.call_tool("echo_value", {"value": token})
            assert "real=no" in dump(echoed)["content"][0]["text"]
        async with routed(UPSTREAM, str(policy)) as served, Client(served.server, mode="legacy") as client:
            owner = await client.session.call_tool("whoami", {})
            text = owner.content[0].text if isinstance(owner.content[0], types.TextContent) else ""
            assert OWNER_EMAIL not in text
            token = text.split("owner: ", 1)[1].split()[0].strip()
            assert "@" in token  # format-preserving: still an address
            echoed = await client.session.call_tool("echo_value", {"value": token})
            reply = echoed.content[0].text if isinstance(echoed.content[0], types.TextContent) else ""
            assert "real=yes" in reply, "the tool must receive the real value"
            assert OWNER_EMAIL not in json.dumps(dump(echoed)), "the echo must be pseudonymised again"
            assert token in reply


PSEUDONYMISING = """\
extends: standard
name: pseudonymising
transforms:
  - type: redact
    strategies: {secret: redact, credential: redact, pii: pseudonymize, identifier: pseudonymize}
"""


async def test_two_gateway_processes_share_tokens_through_redis(tmp_path: Path) -> None:
    """Behind a load balancer: a token issued by one gateway is reversed by another, through one Redis."""
    import os

    from tests.servers.leaky_server import OWNER_EMAIL

    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("REDIS_URL is not set: .ci/run starts a redis-server for this test")
    policy = tmp_path / "shared.yaml"
    policy.write_text(PSEUDONYMISING + "vault: {key_env: SHARED_VAULT_KEY, restore_to: ['*']}\n")
    env = {"SHARED_VAULT_KEY": "a shared vault key for both gateways"}
    flags = ("--policy", str(policy), "--vault-redis", url)
    with anyio.fail_after(60):
        async with (
            Client(gateway(*flags, env=env), mode="legacy") as first,
            Client(gateway(*flags, env=env), mode="legacy") as second,
        ):
            owner = await first.session.call_tool("whoami", {})
            text = owner.content[0].text if isinstance(owner.content[0], types.TextContent) else ""
            token = text.split("owner: ", 1)[1].split()[0].strip()
            again = await second.session.call_tool("whoami", {})
            assert token in (again.content[0].text if isinstance(again.content[0], types.TextContent) else "")
            echoed = await second.session.call_tool("echo_value", {"value": token})
            reply = echoed.content[0].text if isinstance(echoed.content[0], types.TextContent) else ""
            assert "real=yes" in reply and OWNER_EMAIL not in reply


async def test_a_restored_value_echoed_on_errors_progress_and_logs_is_pseudonymised_again(tmp_path: Path) -> None:
    from tests.servers.leaky_server import OWNER_EMAIL

    policy = tmp_path / "pseudonymising.yaml"
    policy.write_text(PSEUDONYMISING + "vault: {restore_to: ['*']}\n")
    logs: list[Any] = []
    progress: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with anyio.fail_after(60):
        async with (
            routed(UPSTREAM, str(policy)) as served,
            Client(served.server, mode="legacy", logging_callback=on_log) as client,
        ):
            owner = await client.session.call_tool("whoami", {})
            text = owner.content[0].text if isinstance(owner.content[0], types.TextContent) else ""
            token = text.split("owner: ", 1)[1].split()[0].strip()
            with pytest.raises(MCPError) as failed:
                await client.session.call_tool(
                    "echo_value", {"value": token, "channels": True}, progress_callback=on_progress
                )
            with anyio.fail_after(30):  # a wait, never a claim
                while not logs:
                    await anyio.sleep(0.02)
    emitted = json.dumps([failed.value.error.message, failed.value.error.data, logs, progress])
    assert OWNER_EMAIL not in emitted, "the real value leaked on a side channel"
    assert token in failed.value.error.message  # the tool got the real value; the client sees the token again


def test_two_principals_cannot_reverse_each_others_tokens(tmp_path: Path) -> None:
    """Over HTTP with bearer tokens and `scope: principal`: alice's token means nothing to bob."""
    import subprocess

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    policy = tmp_path / "per-principal.yaml"
    policy.write_text(PSEUDONYMISING + "vault: {scope: principal, restore_to: ['*']}\n")
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n  - {id: alice, token: alice-token}\n  - {id: bob, token: bob-token}\n")
    tokens.chmod(0o600)  # tokens in clear: the owner alone may read them
    process = subprocess.Popen(
        [sys.executable, "-m", "integrations.cli", "proxy", "--policy", str(policy), "--listen", "127.0.0.1:0",
         "--tokens", str(tokens), "--", *UPSTREAM],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        url = listening_url(process)

        async def call(who: str, tool: str, arguments: dict[str, Any]) -> str:
            http = httpx2.AsyncClient(headers={"authorization": f"Bearer {who}-token"})
            async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                result = await client.session.call_tool(tool, arguments)
                return result.content[0].text if isinstance(result.content[0], types.TextContent) else ""

        async def main() -> None:
            token = (await call("alice", "whoami", {})).split("owner: ", 1)[1].split()[0].strip()
            assert "real=yes" in await call("alice", "echo_value", {"value": token})
            assert "real=no" in await call("bob", "echo_value", {"value": token})

        anyio.run(main)
    finally:
        stop(process)


async def test_a_secret_split_across_messages_never_reaches_the_client_whole_or_in_joining_halves() -> None:
    """Each credential cut in two across two progress notifications, two log messages and two adjacent text
    blocks of the result (and one in a log's logger name): neither whole nor in halves that join to it."""
    progress: list[str] = []
    logs: list[Any] = []
    loggers: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)
        loggers.append(params.logger)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with anyio.fail_after(60):
        async with Client(gateway(), mode="legacy", logging_callback=on_log) as client:
            result = await client.session.call_tool(
                "echo_value", {"value": "x", "split": True}, progress_callback=on_progress
            )
            with anyio.fail_after(10):
                while not any("named" in str(item) for item in logs):
                    await anyio.sleep(0.02)
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    assert progress and logs and len(texts) == 2, (progress, logs, texts)
    for channel in (progress, [str(item) for item in logs], texts, [str(name) for name in loggers]):
        assert_clean(channel)
        assert_clean("".join(channel))  # halves joined by the reader
        assert_clean("".join(part.strip() for part in channel))
