"""`mcp-interceptors proxy`: the router gateway as a real subprocess, a real SDK client in front and a real
upstream server behind (tests/servers/upstream_server.py, tests/servers/leaky_server.py).

The checks of the old SDK-based gateway (tests/integrations/gateway/test_gateway.py's `check_*`) run here against the
router.
Every wait is bounded and every process is waited for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.shared.exceptions import MCPError

from interceptors import INTERNAL_ERROR, INVALID_PARAMS
from tests.conftest import ROOT
from tests.integrations.gateway.test_gateway import (
    REGISTRY,
    STEP_S,
    TEST_S,
    UPSTREAM,
    Recorder,
    assert_no_zombies,
    check_blocked_channels,
    check_cancellation,
    check_changes,
    check_mirror,
    check_resources_prompts_completions,
    check_tools,
    gateway_pids,
    text_of,
    wait_gone,
)
from tests.processes import children
from tests.servers.big_upstream import PLANTED
from tests.servers.leaky_server import SECRETS
from tests.servers.upstream_server import FAIL_CODE, MARKER

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LEAKY = [sys.executable, "-m", "tests.servers.leaky_server"]


def router_argv(*flags: str, upstream: Sequence[str] = UPSTREAM) -> list[str]:
    policy = () if "--policy" in flags else ("--policy", "none")
    return [sys.executable, "-m", "integrations.cli", "proxy", *policy, *flags, "--", *upstream]


def router_params(*flags: str, upstream: Sequence[str] = UPSTREAM) -> StdioServerParameters:
    argv = router_argv(*flags, upstream=upstream)
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))


def assert_clean(value: Any) -> None:
    text = json.dumps(value, default=str)
    for secret in SECRETS:
        assert secret not in text, "a credential reached the client"


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_every_feature_round_trips_through_the_router_gateway(mode: str) -> None:
    recorder = Recorder()
    client = Client(
        router_params("--registry", REGISTRY),
        mode=mode,
        logging_callback=recorder.on_log,
        message_handler=recorder.on_message,
        log_level="debug",
        read_timeout_seconds=STEP_S,
    )
    with anyio.fail_after(TEST_S):
        async with client:
            gateway = gateway_pids()
            assert len(gateway) == 1
            upstream = list(children(gateway[0]))
            assert len(upstream) == 1
            await check_mirror(client, mode)
            await check_tools(client, recorder)  # progress and logs tied to their call, errors verbatim
            await check_resources_prompts_completions(client)
            await check_blocked_channels(client, recorder)
            await check_changes(client, recorder, mode)  # 2026-07-28: a subscriptions/listen stream
            await check_cancellation(client)
            if mode == "legacy":  # the level reaches the upstream (2025-11-25 only)
                await client.set_logging_level("warning")
                assert (await _stats(client))["level"] == "warning"
            with pytest.raises(MCPError) as missing:  # the upstream's own answer, code and message verbatim
                await client.read_resource("memo://nowhere")
            assert (missing.value.error.code, missing.value.error.message) == (
                INVALID_PARAMS,
                "no resource memo://nowhere",
            )
    await wait_gone([*gateway, *upstream])  # the client left: gateway and upstream both exit
    assert_no_zombies()


async def test_standard_policy_redacts_every_channel_and_hidden_equals_missing(tmp_path: Any) -> None:
    audit = tmp_path / "audit.jsonl"
    progress: list[str] = []
    logs: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    params = router_params("--policy", "standard", "--audit-log", str(audit), upstream=LEAKY)
    with anyio.fail_after(TEST_S):
        async with Client(params, mode="legacy", logging_callback=on_log, read_timeout_seconds=STEP_S) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "reveal_token" not in names and "get_config" in names
            errors = []
            for name in ("reveal_token", "no_such_tool"):  # hidden, and truly missing
                with pytest.raises(MCPError) as refused:
                    await client.session.call_tool(name, {"value": "x"})
                errors.append(refused.value.error)
            assert (errors[0].code, errors[0].message) == (INVALID_PARAMS, "Unknown tool: reveal_token")
            assert (errors[1].code, errors[1].message) == (INVALID_PARAMS, "Unknown tool: no_such_tool")
            assert errors[0].data == errors[1].data

            config = await client.session.call_tool("get_config", {})
            assert_clean(dump(config))  # text, resource link, embedded resource, structuredContent, _meta
            assert len(config.content) == 3
            provenance = (config.meta or {}).get("io.mcp-interceptors/transforms", {}).get("annotations", {})
            assert provenance.get("provenance", {}).get("name") == "get_config"
            await client.session.call_tool("progress_report", {}, progress_callback=on_progress)
            with pytest.raises(MCPError) as failed:
                await client.session.call_tool("fail_loudly", {})
            assert failed.value.error.code == -32050  # the upstream's code, verbatim
            assert_clean([failed.value.error.message, failed.value.error.data])
            with pytest.raises(MCPError) as refused_argument:  # a secret in the arguments never leaves
                await client.session.call_tool("echo_value", {"value": SECRETS[1]})
            assert refused_argument.value.error.code == INVALID_PARAMS
            assert_clean([refused_argument.value.error.message, refused_argument.value.error.data])
            assert_clean(dump(await client.read_resource("file:///app.env")))
            assert_clean(dump(await client.get_prompt("deploy")))
            completion = await client.complete(
                types.PromptReference(type="ref/prompt", name="deploy"), {"name": "token", "value": "g"}
            )
            assert_clean(dump(completion))
            with anyio.fail_after(30):  # a wait, never a claim
                while not logs:
                    await anyio.sleep(0.02)
    assert logs  # (this upstream reads no progress token in SDK 2.x: progress is proven with the next test)
    assert_clean(progress)
    assert_clean(logs)
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert any(entry.get("decision") == "not_found" and entry.get("name") == "reveal_token" for entry in entries)
    text = audit.read_text()  # arguments are recorded only as keyed hashes: no argument value in the audit file
    assert '"x"' not in text and all(secret not in text for secret in SECRETS)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_standard_policy_redacts_progress_logs_and_errors_and_the_call_keeps_its_state() -> None:
    """A credential on the side channels of one call, then in its result: every channel is masked, and the
    result still carries the call's own provenance (side channels do not use up what the request learned)."""
    aws = SECRETS[0]
    masked = "AKIA************7P2L"
    recorder = Recorder()
    params = router_params("--policy", "standard")
    with anyio.fail_after(TEST_S):
        async with Client(
            params, mode="legacy", logging_callback=recorder.on_log, log_level="debug", read_timeout_seconds=STEP_S
        ) as client:
            done = await client.session.call_tool("progress", {"text": aws}, progress_callback=recorder.on_progress)
            assert text_of(done) == f"done: {masked}"
            annotations = (done.meta or {})["io.mcp-interceptors/transforms"]["annotations"]
            assert annotations["provenance"]["name"] == "progress"
            assert [p[2] for p in recorder.progress] == [f"step 1: {masked}", f"step 2: {masked}"]
            assert [log.data for log in recorder.logs] == [f"log line: {masked}", {"note": masked}]
            with pytest.raises(MCPError) as failed:
                await client.call_tool("fail", {"text": aws})
            assert failed.value.error.code == FAIL_CODE
            assert aws not in failed.value.error.message and aws not in json.dumps(failed.value.error.data)
            assert masked in failed.value.error.message


def _exchange(argv: list[str], lines: list[dict[str, Any] | str], want: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Raw lines in (dicts are JSON-encoded; strings go as they are), the replies with the wanted ids out."""
    process = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    watchdog = threading.Timer(TEST_S, process.kill)  # a hang ends as a failed read, never as a stuck test
    watchdog.start()
    try:
        for line in lines:
            text = line if isinstance(line, str) else json.dumps(line)
            process.stdin.write(text.encode() + b"\n")
        process.stdin.flush()
        replies: dict[int, dict[str, Any]] = {}
        while not set(want) <= set(replies):
            raw = process.stdout.readline()
            assert raw, "the gateway closed stdout before answering"
            message = json.loads(raw)
            if isinstance(message.get("id"), int):
                replies[message["id"]] = message
        process.stdin.close()
        assert process.wait(timeout=STEP_S) == 0
        return replies
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
        process.wait(timeout=STEP_S)
        process.stdout.close()


HANDSHAKE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.mark.parametrize("policy", ["none", "standard"])
def test_malformed_requests_are_answered_not_dropped(policy: str) -> None:
    surrogate = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"\\ud800","arguments":{}}}'
    wide = '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"n":' + "9" * 30 + "}}}"
    deep = '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":' + "[" * 200
    deep += "]" * 200 + "}}"
    echo = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "ok"}}}
    lines: list[dict[str, Any] | str] = [HANDSHAKE, INITIALIZED, surrogate, wide, deep, echo]
    replies = _exchange(router_argv("--policy", policy), lines, [1, 2, 3, 4, 5])
    assert replies[2]["error"]["code"] == INVALID_PARAMS
    assert replies[2]["error"]["data"]["reason"] == "a string holds a lone surrogate"
    assert replies[3]["error"]["code"] == INVALID_PARAMS
    assert replies[4]["error"]["code"] == -32600
    assert replies[5]["result"]["content"] == [{"type": "text", "text": "ok"}]  # the session is still fine


async def test_errors_keep_code_and_data_under_an_empty_chain() -> None:
    with anyio.fail_after(TEST_S):
        async with Client(router_params(), mode="legacy", read_timeout_seconds=STEP_S) as client:
            with pytest.raises(MCPError) as failed:
                await client.call_tool("fail", {"text": MARKER})
            error = failed.value.error
            assert (error.code, error.message, error.data) == (FAIL_CODE, f"failed with {MARKER}", {"detail": MARKER})


DIES_ON_TOOLS_LIST = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "d"}}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
    elif message.get("method") == "tools/list":
        sys.exit(3)
"""


def test_an_upstream_dying_while_its_catalog_is_read_ends_the_gateway_with_status_1() -> None:
    """The catalog's own requests are in flight when the upstream goes away: the gateway exits 1 (it used to
    wait for a catalog that could never come, and swallowed the first SIGTERM). The upstream's handshake
    waits for the client's first message (it declares the client's capabilities), so the client speaks."""
    argv = router_argv("--policy", "standard", upstream=[sys.executable, "-c", DIES_ON_TOOLS_LIST])
    process = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode())
    process.stdin.write(b"\n")
    process.stdin.flush()
    try:
        assert process.wait(timeout=STEP_S) == 1
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=STEP_S)


async def _stats(client: Client) -> dict[str, Any]:
    result = await client.call_tool("stats", {})
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_a_request_the_upstream_never_answers_times_out_and_is_cancelled_upstream() -> None:
    with anyio.fail_after(TEST_S):
        async with Client(
            router_params("--upstream-timeout", "1"), mode="legacy", read_timeout_seconds=STEP_S
        ) as client:
            with pytest.raises(MCPError) as timed_out:
                await client.call_tool("sleep", {"seconds": 600})
            error = timed_out.value.error
            assert (error.code, error.message) == (-32001, "Request timed out")
            assert error.data == {"reason": "upstream timeout", "timeoutSeconds": 1.0}
            with anyio.fail_after(STEP_S):  # the upstream got the cancellation
                while (await _stats(client))["cancelled"] == 0:
                    await anyio.sleep(0.05)
            assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"


async def test_an_oversized_upstream_reply_is_answered_at_once_and_the_next_call_fits() -> None:
    """The reply's first bytes name its request: -32603 saying why, not the timeout (no limit here)."""
    big = [sys.executable, "-m", "tests.servers.big_upstream"]
    params = router_params("--max-line-mib", "1", "--upstream-timeout", "0", upstream=big)
    with anyio.fail_after(TEST_S):
        async with Client(params, mode="legacy", read_timeout_seconds=STEP_S) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("big", {"mib": 2})
            assert (refused.value.error.code, refused.value.error.message) == (
                INTERNAL_ERROR,
                "the upstream server sent a malformed reply: it is larger than the 1 MiB line limit",
            )
            fits = await client.call_tool("big", {"mib": 0.25})
            assert len(text_of(fits)) == 1 << 18


async def test_an_invalid_upstream_result_is_answered_with_what_is_wrong_never_its_values() -> None:
    big = [sys.executable, "-m", "tests.servers.big_upstream"]
    with anyio.fail_after(TEST_S):
        async with Client(router_params(upstream=big), mode="legacy", read_timeout_seconds=STEP_S) as client:
            with pytest.raises(MCPError) as invalid:
                await client.call_tool("bad", {})
            error = invalid.value.error
            assert (error.code, error.message) == (INTERNAL_ERROR, "the upstream server returned an invalid result")
            assert isinstance(error.data, dict)
            assert error.data["reason"] == "the tools/call result does not match the 2025-11-25 schema"
            assert {"path": "content.0.TextContent.text", "type": "missing"} in error.data["errors"]
            assert PLANTED not in json.dumps(error.data)
            assert len(text_of(await client.call_tool("big", {"mib": 0.01}))) > 0  # valid results pass


async def test_the_built_in_stages_are_never_exposed_to_clients() -> None:
    """`--expose-interceptors` serves the user's registries, never the policy, vault or transform stages: an
    `interceptor/invoke` carries the client's own context, so `vault/depseudonymize` would be a way around
    the `reveal` grant."""
    from interceptors_chain import SessionConnection

    flags = ("--policy", "strict", "--registry", REGISTRY, "--expose-interceptors")
    params = router_params(*flags)
    with anyio.fail_after(TEST_S):
        async with Client(params, mode="legacy", read_timeout_seconds=STEP_S) as client:
            listed = await SessionConnection(client.session).request("interceptors/list", {}, STEP_S)
            assert [i["name"] for i in listed["interceptors"]] == ["gw/deny", "gw/shout", "gw/redact", "gw/block"]
            with pytest.raises(MCPError) as unknown:
                invoke = {"name": "vault/depseudonymize", "event": "tools/call", "phase": "request", "payload": {}}
                await SessionConnection(client.session).request("interceptor/invoke", invoke, STEP_S)
            assert unknown.value.error.code == INVALID_PARAMS


async def test_exposed_interceptors_are_answered_by_the_router_gateway() -> None:
    from interceptors import CAPABILITY
    from interceptors_chain import SessionConnection

    params = router_params("--registry", REGISTRY, "--expose-interceptors")
    with anyio.fail_after(TEST_S):
        async with Client(params, mode="legacy", read_timeout_seconds=STEP_S) as client:
            assert CAPABILITY in (client.server_capabilities.experimental or {})
            connection = SessionConnection(client.session)
            listed = await connection.request("interceptors/list", {}, STEP_S)
            assert [i["name"] for i in listed["interceptors"]] == ["gw/deny", "gw/shout", "gw/redact", "gw/block"]
            invoke = {
                "name": "gw/shout",
                "event": "tools/call",
                "phase": "request",
                "payload": {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "shout:hi"}}},
            }
            shouted = await connection.request("interceptor/invoke", invoke, STEP_S)
            assert shouted["payload"]["params"]["arguments"]["text"] == "SHOUT:HI"
            with pytest.raises(MCPError) as unknown:  # the host's own error, verbatim
                await connection.request("interceptor/invoke", {**invoke, "name": "gw/nope"}, STEP_S)
            assert (unknown.value.error.code, unknown.value.error.data) == (INVALID_PARAMS, {"name": "gw/nope"})
            assert text_of(await client.call_tool("echo", {"text": "shout:x"})) == "SHOUT:X"  # the chain still runs
        async with Client(router_params("--registry", REGISTRY), mode="legacy", read_timeout_seconds=STEP_S) as client:
            with pytest.raises(MCPError) as missing:  # not exposed unless asked
                await SessionConnection(client.session).request("interceptors/list", {}, STEP_S)
            assert missing.value.error.code == -32601


PSEUDONYMISING = """\
extends: standard
name: pseudonymising
transforms:
  - type: redact
    strategies: {secret: redact, credential: redact, pii: pseudonymize, identifier: pseudonymize}
"""


async def test_reveal_token_is_offered_by_the_router_gateway_only_to_principals_with_reveal(tmp_path: Any) -> None:
    from tests.servers.leaky_server import OWNER_EMAIL

    policy = tmp_path / "pseudonymising.yaml"
    policy.write_text(PSEUDONYMISING)
    audit = tmp_path / "audit.jsonl"
    admin = router_params("--policy", str(policy), "--role", "admin", "--audit-log", str(audit), upstream=LEAKY)
    with anyio.fail_after(TEST_S):
        async with Client(admin, mode="legacy", read_timeout_seconds=STEP_S) as client:
            assert "reveal_token" in {tool.name for tool in (await client.list_tools()).tools}
            owner = await client.session.call_tool("whoami", {})
            text = text_of(owner)
            token = text.split("owner: ", 1)[1].split()[0].strip()
            assert OWNER_EMAIL not in text
            revealed = await client.session.call_tool("reveal_token", {"token": token})
            assert revealed.structured_content is not None
            assert revealed.structured_content["value"] == OWNER_EMAIL  # the gateway's own tool, untransformed
        anyone = router_params("--policy", str(policy), upstream=LEAKY)
        async with Client(anyone, mode="legacy", read_timeout_seconds=STEP_S) as client:
            assert "reveal_token" not in {tool.name for tool in (await client.list_tools()).tools}
            with pytest.raises(MCPError) as hidden:
                await client.session.call_tool("reveal_token", {"token": token})
            assert hidden.value.error.code == INVALID_PARAMS
    text = audit.read_text()  # every reveal is audited, and the revealed value appears nowhere in the audit file
    assert "reveal_token" in text and OWNER_EMAIL not in text


PER_TOOL = f"""\
extends: open
name: per-tool
rules:
  - name: progress-only
    match: {{names: [progress]}}
    transforms: [{{type: regex_replace, rules: [{{pattern: "{MARKER}", replace: "[per-tool]"}}]}}]
"""


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # setLevel: 2025 only
async def test_a_per_tool_rule_holds_on_that_tools_progress_and_logs_as_well_as_its_result(tmp_path: Any) -> None:
    policy = tmp_path / "per-tool.yaml"
    policy.write_text(PER_TOOL)
    recorder = Recorder()
    params = router_params("--policy", str(policy))
    with anyio.fail_after(TEST_S):
        async with Client(
            params, mode="legacy", logging_callback=recorder.on_log, log_level="debug", read_timeout_seconds=STEP_S
        ) as client:
            await client.set_logging_level("debug")
            done = await client.session.call_tool("progress", {"text": MARKER}, progress_callback=recorder.on_progress)
            assert [p[2] for p in recorder.progress] == ["step 1: [per-tool]", "step 2: [per-tool]"]
            assert [log.data for log in recorder.logs] == ["log line: [per-tool]", {"note": "[per-tool]"}]
            assert text_of(done) == "done: [per-tool]"  # the result still gets the rule after its side channels
            assert text_of(await client.call_tool("echo", {"text": MARKER})) == MARKER  # another tool: no rule


async def test_a_request_that_keeps_reporting_progress_outlives_the_timeout() -> None:
    """Progress every 0.2 s for about 3 s against a 2 s timeout: each report gives the call another period
    (a gap of 2 s, ten times the interval, would be needed to time it out)."""
    recorder = Recorder()
    params = router_params("--upstream-timeout", "2")
    with anyio.fail_after(TEST_S):
        async with Client(params, mode="legacy", read_timeout_seconds=STEP_S) as client:
            arguments = {"text": "t", "steps": 15, "interval": 0.2}
            done = await client.session.call_tool("progress", arguments, progress_callback=recorder.on_progress)
            assert text_of(done) == "done: t"
            assert len(recorder.progress) == 15
