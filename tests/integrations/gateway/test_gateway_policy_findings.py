"""Issue 16 through the real gateway (a subprocess, stdio or HTTP on 127.0.0.1) in front of a real upstream that
resolves paths the lax way and transforms what it is given: the attacks of the report, each one refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.shared.exceptions import MCPError

from tests.conftest import ROOT
from tests.interceptors.policy.test_policy_uris import SPELLINGS
from tests.processes import listening_url, stop
from tests.servers.files_server import OWNER_EMAIL, SECRET_CONTENT

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
UPSTREAM = [sys.executable, "-m", "tests.servers.files_server"]


def gateway(*flags: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    argv = [sys.executable, "-m", "integrations.cli", "proxy", *flags, "--", *UPSTREAM]
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    return block.text if isinstance(block, types.TextContent) else ""


@contextmanager
def http_gateway(*flags: str, env: dict[str, str] | None = None) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "integrations.cli", "proxy", "--listen", "127.0.0.1:0", *flags, "--", *UPSTREAM],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        yield listening_url(process)
    finally:
        stop(process)


async def http_call(url: str, bearer: str, tool: str, arguments: dict[str, Any]) -> str:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {bearer}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        return text_of(await client.session.call_tool(tool, arguments))


PSEUDONYMISING = """\
extends: standard
name: pseudonymising
transforms:
  - type: redact
    strategies: {secret: redact, credential: redact, pii: pseudonymize, identifier: pseudonymize}
"""

DENY_FILES = """\
extends: standard
name: files
deny_resources: ["file:///srv/secret.txt", "file:///etc/*"]
"""


async def test_no_spelling_of_a_denied_resource_reaches_the_upstream(tmp_path: Path) -> None:
    policy = tmp_path / "files.yaml"
    policy.write_text(DENY_FILES)
    spellings = [*SPELLINGS, "file:///tmp/../etc/shadow", "file:///etc/./shadow", "file:///ETC/../etc//shadow"]
    answers: list[Any] = []
    with anyio.fail_after(120):
        async with Client(gateway("--policy", str(policy)), mode="legacy") as client:
            public = await client.session.read_resource("file:///srv/./public.txt")
            assert "nothing to see" in json.dumps(public.model_dump(mode="json"))  # a lax spelling of an allowed file
            for uri in spellings:
                with pytest.raises(MCPError) as refused:
                    await client.session.read_resource(uri)
                error = refused.value.error
                answers.append([uri, error.code, error.message, error.data])
                # Hidden: answered as the upstream answers a missing resource at 2025-11-25 (-32002 with the URI),
                # or refused as ambiguous.
                assert error.code in (-32002, -31001), uri
                if error.code == -32002:
                    assert (error.message, error.data) == ("Resource not found", {"uri": uri}), uri
    assert SECRET_CONTENT not in json.dumps(answers)
    ambiguous = [a for a in answers if a[1] == -31001]
    assert {a[0] for a in ambiguous} >= {"file:///srv/%2573ecret.txt", "file:///srv\\secret.txt"}
    assert all(a[2].startswith("Access denied: resource URI refused: ") for a in ambiguous)


def test_role_with_listen_and_no_tokens_is_refused_at_start(tmp_path: Path) -> None:
    """Otherwise every anonymous HTTP client would get the role, `reveal_token` included."""
    base = [sys.executable, "-m", "integrations.cli", "proxy", "--role", "admin", "--listen", "127.0.0.1:0"]
    run = subprocess.run([*base, "--", *UPSTREAM], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith("error: --role gives the local user's roles, and over HTTP (--listen)")
    assert "--tokens FILE" in run.stderr and "Traceback" not in run.stderr
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n  - {id: alice, token: alice-token}\n")
    tokens.chmod(0o600)  # tokens in clear: the owner alone may read them
    run = subprocess.run(
        [*base, "--tokens", str(tokens), "--", *UPSTREAM], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and "over HTTP each client's roles come from its entry in --tokens" in run.stderr


async def test_guard_secrets_refuses_a_credential_used_as_an_argument_name() -> None:
    github = "ghp_9fK2mQ7rT4vX8zL1nB6cD3hJ5wY0aS2eR4tU"
    with anyio.fail_after(60):
        async with Client(gateway("--policy", "standard"), mode="legacy") as client:
            plain = await client.session.call_tool("echo_keys", {"name": 1})
            assert text_of(plain) == "keys: name"
            for arguments in ({github: 1}, {"nested": {f"x-{github}": "v"}}):
                with pytest.raises(MCPError) as refused:
                    await client.session.call_tool("echo_keys", arguments)
                assert refused.value.error.code == -32602
                assert "secrets" in refused.value.error.message and github not in refused.value.error.message


def start_error(policy: Path, env: dict[str, str] | None = None) -> str:
    """The gateway's start-up refusal: exit status 2, one `error:` line on stderr, no traceback."""
    run = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "proxy", "--policy", str(policy), "--", *UPSTREAM],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1 and run.stderr.startswith("error: ")
    return run.stderr.strip()


def test_vault_files_and_keys_that_cannot_be_trusted_stop_the_gateway_at_start(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "FILES_VAULT_KEY": "a stable key for the files vault"}
    env.pop("UNSET_VAULT_KEY", None)
    vault = tmp_path / "vault.json"
    policy = tmp_path / "vaulted.yaml"
    policy.write_text(PSEUDONYMISING + f"vault: {{key_env: FILES_VAULT_KEY, path: {json.dumps(str(vault))}}}\n")
    plain = {"format": "mcp-interceptors-vault/1", "encrypted": False,
             "entries": [["global", "email", "attacker@evil.example", "user-1@d-1.example", 1.0, 1.0]]}  # fmt: skip
    vault.write_text(json.dumps(plain))
    vault.chmod(0o600)
    assert "is not encrypted, and this vault has encrypt: true" in start_error(policy, env)
    vault.chmod(0o644)
    assert f"vault file {vault}: mode 0644 lets group or others read" in start_error(policy, env)
    vault.write_text(json.dumps({**plain, "entries": [plain["entries"][0], ["global", 7]]}))
    vault.chmod(0o600)
    plain_policy = tmp_path / "plain.yaml"
    plain_policy.write_text(
        PSEUDONYMISING + f"vault: {{key_env: FILES_VAULT_KEY, encrypt: false, path: {json.dumps(str(vault))}}}\n"
    )
    assert start_error(plain_policy, env).startswith(f"error: vault file {vault}: row 2 (entries[1]): must be")
    unset = tmp_path / "unset.yaml"
    unset.write_text(PSEUDONYMISING + "vault: {key_env: UNSET_VAULT_KEY}\n")
    assert "the vault key variable UNSET_VAULT_KEY is not set" in start_error(unset, env)


TWO_PRINCIPALS = "tokens:\n  - {id: alice, token: alice-token}\n  - {id: bob, token: bob-token}\n"
ECHO_SPELLINGS = ("plain", "upper", "base64", "base64url", "hex", "percent", "json", "html", "reversed", "spaced")


def test_strict_over_http_keeps_each_principals_pseudonyms_and_no_echo_spelling_leaks(tmp_path: Path) -> None:
    """`--policy strict` names no vault scope: with tokens it is per principal. Bob sending alice's pseudonym gets
    nothing real, and whatever spelling a tool echoes alice's restored value in, she reads only her token."""
    from interceptors.testing import assert_no_leak

    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TWO_PRINCIPALS)
    tokens.chmod(0o600)
    policy = tmp_path / "restoring.yaml"  # strict restores nothing by default: name the tools that may
    policy.write_text("extends: strict\nname: restoring\nvault: {restore_to: [echo_value, encode_value]}\n")

    async def main(url: str) -> None:
        owner = (await http_call(url, "alice-token", "whoami", {})).split("owner: ", 1)[1].strip()
        assert OWNER_EMAIL not in owner and "@" in owner
        assert "real=yes" in await http_call(url, "alice-token", "echo_value", {"value": owner})
        assert "real=no" in await http_call(url, "bob-token", "echo_value", {"value": owner})
        bobs = (await http_call(url, "bob-token", "whoami", {})).split("owner: ", 1)[1].strip()
        assert bobs != owner  # a different namespace: a different pseudonym for the same address
        for how in ECHO_SPELLINGS:
            echoed = await http_call(url, "alice-token", "encode_value", {"value": owner, "how": how})
            assert_no_leak(echoed, [OWNER_EMAIL], what=f"{how} echo")
            folded = echoed.casefold()
            assert OWNER_EMAIL[::-1].casefold() not in folded
            assert OWNER_EMAIL.casefold() not in folded.replace(" ", "")

    with http_gateway("--policy", str(policy), "--tokens", str(tokens)) as url:
        anyio.run(main, url)


def test_restore_to_limits_which_tools_receive_real_values(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TWO_PRINCIPALS)
    tokens.chmod(0o600)
    policy = tmp_path / "restore.yaml"
    policy.write_text("extends: strict\nname: restore-some\nvault: {restore_to: [encode_value]}\n")

    async def main(url: str) -> None:
        owner = (await http_call(url, "alice-token", "whoami", {})).split("owner: ", 1)[1].strip()
        assert "real=no" in await http_call(url, "alice-token", "echo_value", {"value": owner})  # the token, as is
        assert OWNER_EMAIL not in await http_call(url, "alice-token", "encode_value", {"value": owner, "how": "plain"})

    with http_gateway("--policy", str(policy), "--tokens", str(tokens)) as url:
        anyio.run(main, url)


async def test_no_secret_planted_in_a_name_uri_or_query_string_reaches_the_audit_file(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    policy = tmp_path / "audited.yaml"
    policy.write_text("extends: standard\nname: audited\naudit: true\n")  # allowed calls are recorded too
    github = "ghp_9fK2mQ7rT4vX8zL1nB6cD3hJ5wY0aS2eR4tU"
    password = "Sup3rS3cretPW"
    stripe = "sk_live_51HxQzX2eZvKYlo2C9xqWmA7"
    aws = "AKIAQ3EGUJZN5XKW7P2L"
    planted = (github, password, stripe, aws)
    with anyio.fail_after(60):
        async with Client(gateway("--policy", str(policy), "--audit-log", str(audit)), mode="legacy") as client:
            attempts = [
                client.session.call_tool(f"tool_{github}", {}),  # a secret in a tool name
                client.session.call_tool("echo_keys", {f"arg_{github}": 1}),  # ... in an argument name (refused)
                client.session.get_prompt(f"prompt_{aws}", {}),  # ... in a prompt name
                client.session.read_resource(f"postgres://admin:{password}@db.internal/app"),  # a URI password
                client.session.read_resource(f"https://api.example.com?api_key={stripe}&user=me"),  # a query string
                client.session.read_resource(f"https://admin:{password}@api.example.com"),
            ]
            for index, attempt in enumerate(attempts):
                with pytest.raises(MCPError):
                    await attempt
                    raise AssertionError(f"attempt {index} was answered")
            await client.complete(
                types.ResourceTemplateReference(type="ref/resource", uri=f"https://x:{password}@h/{{id}}"),
                {"name": "id", "value": "1"},
            )
    text = audit.read_text()
    decisions = [json.loads(line)["decision"] for line in text.splitlines()]
    assert decisions.count("not_found") == 6 and decisions.count("allowed") == 1  # echo_keys: allowed, then refused
    for secret in planted:
        assert secret not in text
    assert "[REDACTED:" in text  # masked, not dropped: the entry still says what was tried
