"""`mcp-interceptors proxy --router --listen`: the router gateway on Streamable HTTP, as a real subprocess with
a real upstream behind it, and in front the SDK's own Streamable HTTP client or raw HTTP (httpx2) where a
test must see the wire itself (content types, status codes, session headers).

Every wait is bounded and every process is stopped and reaped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ROOT
from tests.integrations.gateway.test_gateway import (
    REGISTRY,
    STEP_S,
    TEST_S,
    UPSTREAM,
    Recorder,
    assert_no_zombies,
    check_changes,
    text_of,
    wait_gone,
)
from tests.processes import children, listening_url
from tests.servers.leaky_server import SECRETS
from tests.servers.upstream_server import MARKER

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LEAKY = [sys.executable, "-m", "tests.servers.leaky_server"]
ACCEPT_BOTH = "application/json, text/event-stream"
TWO_PRINCIPALS = "tokens:\n  - {id: alice, token: alice-token}\n  - {id: bob, token: bob-token}\n"
MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


class Gateway:
    """The running gateway: its URL, its process; `stop()` is a SIGTERM that must end it with status 0."""

    def __init__(self, process: subprocess.Popen[bytes], url: str) -> None:
        self.process = process
        self.url = url

    def upstream_pids(self) -> list[int]:
        return list(children(self.process.pid))


@asynccontextmanager
async def http_gateway(*flags: str, upstream: Sequence[str] = UPSTREAM) -> AsyncIterator[Gateway]:
    policy = () if "--policy" in flags else ("--policy", "none")
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--router", *policy, "--listen", "127.0.0.1:0"]
    process = subprocess.Popen(
        [*argv, *flags, "--", *upstream], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        url = await anyio.to_thread.run_sync(listening_url, process)
        gateway = Gateway(process, url)
        upstream_pids = gateway.upstream_pids()
        yield gateway
        process.send_signal(signal.SIGTERM)  # a graceful stop, not an error
        assert await anyio.to_thread.run_sync(lambda: process.wait(timeout=STEP_S)) == 0
        await wait_gone(upstream_pids)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=STEP_S)
        assert process.stderr is not None
        process.stderr.close()
    assert_no_zombies()


def assert_clean(value: Any) -> None:
    text = json.dumps(value, default=str)
    for secret in SECRETS:
        assert secret not in text, "a credential reached the client"


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def sdk_client(url: str, mode: str, bearer: str | None = None, **options: Any) -> tuple[httpx2.AsyncClient, Client]:
    headers = {"authorization": f"Bearer {bearer}"} if bearer is not None else None
    http = httpx2.AsyncClient(headers=headers, timeout=STEP_S)
    return http, Client(
        streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=STEP_S, **options
    )


def rpc(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


async def initialize(http: httpx2.AsyncClient, url: str, bearer: str | None = None) -> httpx2.Response:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    return await http.post(url, json=rpc(0, "initialize", params), headers=headers_for(None, bearer))


def headers_for(session: str | None, bearer: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"accept": ACCEPT_BOTH, "content-type": "application/json", **extra}
    if session is not None:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = "2025-11-25"
    if bearer is not None:
        headers["authorization"] = f"Bearer {bearer}"
    return headers


async def open_session(http: httpx2.AsyncClient, url: str, bearer: str | None = None) -> str:
    opened = await initialize(http, url, bearer)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=headers_for(session, bearer))).status_code == 202
    return session


def sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]


def tokens_file(tmp_path: Path) -> str:
    path = tmp_path / "tokens.yaml"
    path.write_text(TWO_PRINCIPALS)
    path.chmod(0o600)  # tokens in clear: the owner alone may read them
    return str(path)


# The SDK client, both eras -------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_standard_policy_over_http_masks_a_planted_credential_on_every_channel(mode: str) -> None:
    logs: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    with anyio.fail_after(TEST_S):
        async with http_gateway("--policy", "standard", upstream=LEAKY) as gateway:
            http, client = sdk_client(gateway.url, mode, logging_callback=on_log, log_level="debug")
            async with http, client:
                assert client.server_info is not None
                names = [tool.name for tool in (await client.list_tools()).tools]
                assert "get_config" in names and "reveal_token" not in names  # hidden by the policy
                config = await client.call_tool("get_config", {})
                assert_clean(dump(config))
                assert "[REDACTED" in text_of(config)
                assert text_of(await client.call_tool("progress_report", {})) == "done"  # logs a credential
                with anyio.fail_after(STEP_S):
                    while not logs:
                        await anyio.sleep(0.02)
            assert_clean(logs)
            assert "[REDACTED" in json.dumps(logs)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_runtime_changes_reach_both_eras_over_http_and_a_listen_stream_needs_sse(mode: str) -> None:
    """2025-11-25: list_changed and resources/updated on the session's GET stream; 2026-07-28: each on a
    `subscriptions/listen` stream, itself one self-contained exchange."""
    recorder = Recorder()
    with anyio.fail_after(TEST_S):
        async with http_gateway("--registry", REGISTRY) as gateway:
            http, client = sdk_client(gateway.url, mode, message_handler=recorder.on_message)
            async with http, client:
                await check_changes(client, recorder, mode)
            if mode == "auto":
                listen = {**rpc(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True},
                                                            "_meta": ENVELOPE})}  # fmt: skip
                headers = {"accept": "application/json", "content-type": "application/json",
                           "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}  # fmt: skip
                async with httpx2.AsyncClient(timeout=STEP_S) as raw:
                    refused = await raw.post(gateway.url, json=listen, headers=headers)
                assert refused.status_code == 406


async def test_a_calls_progress_and_logs_arrive_on_its_own_response_stream_and_plain_replies_are_json() -> None:
    with anyio.fail_after(TEST_S):
        async with http_gateway() as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            url = gateway.url
            session = await open_session(http, url)
            level = await http.post(
                url, json=rpc(1, "logging/setLevel", {"level": "debug"}), headers=headers_for(session)
            )
            assert level.headers["content-type"] == "application/json" and level.json()["result"] == {}
            echo = await http.post(
                url,
                json=rpc(2, "tools/call", {"name": "echo", "arguments": {"text": MARKER}}),
                headers=headers_for(session),
            )
            assert echo.status_code == 200 and echo.headers["content-type"] == "application/json"
            assert echo.headers["mcp-session-id"] == session
            assert echo.json()["result"]["content"][0]["text"] == MARKER
            params = {"name": "progress", "arguments": {"text": "x", "steps": 3}, "_meta": {"progressToken": "p-1"}}
            call = await http.post(url, json=rpc(3, "tools/call", params), headers=headers_for(session))
            assert call.headers["content-type"].startswith("text/event-stream")
            messages = sse_messages(call.text)
            methods = [m.get("method") for m in messages]
            assert methods == [*["notifications/progress"] * 3, *["notifications/message"] * 2, None]
            assert [m["params"]["progressToken"] for m in messages[:3]] == ["p-1"] * 3  # the client's own token
            assert messages[-1]["id"] == 3 and messages[-1]["result"]["content"][0]["text"] == "done: x"
            json_only = {**headers_for(session), "accept": "application/json"}
            quiet = await http.post(url, json=rpc(4, "tools/call", {**params, "_meta": {}}), headers=json_only)
            assert quiet.headers["content-type"] == "application/json"  # notifications have no wire here
            assert quiet.json()["result"]["content"][0]["text"] == "done: x"
            sse_first = {**headers_for(session), "accept": "text/event-stream, application/json"}
            streamed = await http.post(url, json=rpc(5, "tools/list"), headers=sse_first)
            assert streamed.headers["content-type"].startswith("text/event-stream")  # it said it prefers a stream
            assert sse_messages(streamed.text)[-1]["id"] == 5


async def test_a_request_to_a_json_only_client_is_refused_upstream_so_the_call_still_ends() -> None:
    """The upstream asks the client to sample during a call whose client takes JSON only and has no GET stream:
    nothing can carry the request, so the upstream gets an error at once instead of waiting for ever."""
    planted = [sys.executable, "-m", "tests.servers.planted_upstream"]
    with anyio.fail_after(TEST_S):
        async with http_gateway(upstream=planted) as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            url = gateway.url
            params = {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
                      "clientInfo": {"name": "raw", "version": "1"}}  # fmt: skip
            opened = await http.post(url, json=rpc(0, "initialize", params), headers=headers_for(None))
            session = opened.headers["mcp-session-id"]
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(url, json=note, headers=headers_for(session))
            json_only = {**headers_for(session), "accept": "application/json"}
            call = await http.post(
                url, json=rpc(1, "tools/call", {"name": "sample", "arguments": {}}), headers=json_only
            )
            assert call.status_code == 200 and call.json()["result"]["content"][0]["text"] == "sampled"


# Principals, sessions, quota, expiry -------------------------------------------------------------
async def test_sessions_are_bound_to_the_principal_that_opened_them(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_S):
        async with (
            http_gateway("--tokens", tokens_file(tmp_path)) as gateway,
            httpx2.AsyncClient(timeout=STEP_S) as http,
        ):
            url = gateway.url
            anonymous = await initialize(http, url)
            assert anonymous.status_code == 401 and anonymous.json()["error"]["message"] == "Unauthorized"
            assert (await initialize(http, url, "wrong-token")).status_code == 401
            alices = await open_session(http, url, "alice-token")
            ping = rpc(1, "ping")
            assert (await http.post(url, json=ping, headers=headers_for(alices, "alice-token"))).status_code == 200
            stolen = await http.post(url, json=ping, headers=headers_for(alices, "bob-token"))
            assert stolen.status_code == 404 and stolen.json()["error"]["message"] == "Session not found"
            assert (await http.delete(url, headers=headers_for(alices, "bob-token"))).status_code == 404
            listen = await http.get(url, headers={**headers_for(alices, "bob-token"), "accept": "text/event-stream"})
            assert listen.status_code == 404
            assert (await http.post(url, json=ping, headers=headers_for(alices, "alice-token"))).status_code == 200
            assert (await http.delete(url, headers=headers_for(alices, "alice-token"))).status_code == 200
            gone = await http.post(url, json=ping, headers=headers_for(alices, "alice-token"))
            assert gone.status_code == 404
            missing = await http.post(url, json=ping, headers=headers_for(None, "alice-token"))
            assert missing.status_code == 400 and missing.json()["error"]["code"] == -32600


async def test_logs_of_concurrent_calls_never_reach_another_principal(tmp_path: Path) -> None:
    received: dict[str, list[str]] = {"alice": [], "bob": []}

    async def run(who: str, rounds: int) -> None:
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            received[who].append(json.dumps(params.data))

        http, client = sdk_client(url, "legacy", f"{who}-token", logging_callback=on_log, log_level="debug")
        async with http, client:
            for round_ in range(rounds):
                result = await client.call_tool("progress", {"text": f"{who}-{round_}", "steps": 1})
                assert text_of(result) == f"done: {who}-{round_}"

    with anyio.fail_after(TEST_S):
        async with http_gateway("--tokens", tokens_file(tmp_path)) as gateway:
            url = gateway.url
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(run, "alice", 6)
                tasks.start_soon(run, "bob", 6)
            received["alice"].clear()
            await run("alice", 1)  # alone in flight: her logs are hers without doubt, and they arrive
            with anyio.fail_after(STEP_S):
                while not [line for line in received["alice"] if "alice-0" in line]:
                    await anyio.sleep(0.02)
    for who, other in (("alice", "bob"), ("bob", "alice")):
        assert not [line for line in received[who] if other in line], f"{other}'s log reached {who}"


async def test_a_principal_beyond_its_session_quota_is_refused_and_others_are_not(tmp_path: Path) -> None:
    flags = ("--tokens", tokens_file(tmp_path), "--max-sessions-per-principal", "2")
    with anyio.fail_after(TEST_S):
        async with http_gateway(*flags) as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            url = gateway.url
            first = await open_session(http, url, "alice-token")
            await open_session(http, url, "alice-token")
            refused = await initialize(http, url, "alice-token")
            assert refused.status_code == 429
            error = refused.json()["error"]
            assert error["message"] == "Too many open sessions" and error["data"]["limit"] == 2
            assert "mcp-session-id" not in refused.headers
            await open_session(http, url, "bob-token")  # bob is unaffected
            await open_session(http, url, "bob-token")
            assert (await http.delete(url, headers=headers_for(first, "alice-token"))).status_code == 200
            await open_session(http, url, "alice-token")  # a slot is free again


async def test_an_idle_session_expires_and_a_busy_one_does_not() -> None:
    with anyio.fail_after(TEST_S):
        async with http_gateway("--session-idle-timeout", "0.3") as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            url = gateway.url
            busy = await open_session(http, url)
            sleeping = rpc(1, "tools/call", {"name": "sleep", "arguments": {"seconds": 1.5}})
            slept = await http.post(url, json=sleeping, headers=headers_for(busy))  # in flight 5x the timeout
            assert slept.json()["result"]["content"][0]["text"] == "slept"
            idle = await open_session(http, url)
            status = 200
            for attempt in range(8):  # every probe refreshes the session: each wait is longer than the timeout
                await anyio.sleep(1.0 + attempt)
                probe = await http.post(url, json=rpc(2, "ping"), headers=headers_for(idle))
                status = probe.status_code
                if status == 404:
                    break
            assert status == 404


async def test_delete_cancels_the_sessions_calls_upstream_and_ends_their_responses() -> None:
    with anyio.fail_after(TEST_S):
        async with http_gateway() as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            url = gateway.url
            doomed = await open_session(http, url)
            watcher = await open_session(http, url)
            answers: list[httpx2.Response] = []

            async def long_call() -> None:
                sleeping = rpc(1, "tools/call", {"name": "sleep", "arguments": {"seconds": 30}})
                answers.append(await http.post(url, json=sleeping, headers=headers_for(doomed)))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(long_call)
                await anyio.sleep(0.5)
                assert (await http.delete(url, headers=headers_for(doomed))).status_code == 200
            assert answers[0].status_code == 404  # ended, not left hanging
            cancelled = 0
            for _ in range(100):
                stats = await http.post(url, json=rpc(2, "tools/call", {"name": "stats"}), headers=headers_for(watcher))
                cancelled = stats.json()["result"]["structuredContent"]["cancelled"]
                if cancelled:
                    break
                await anyio.sleep(0.1)
            assert cancelled == 1


# Malformed input, the 2026-07-28 era ----------------------------------------------------------------
async def test_every_malformed_body_gets_a_json_rpc_error_never_silence_and_rebound_names_are_refused() -> None:
    with anyio.fail_after(TEST_S):
        async with http_gateway() as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            url = gateway.url
            session = await open_session(http, url)
            cases = {
                b"{not json": (-32700, None),
                b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"\\ud800"}}': (-32602, 7),
                b'{"jsonrpc":"2.0","id":8,"method":"ping","params":{"n":123456789012345678901234567890}}': (-32602, 8),
                b"[" * 200 + b"]" * 200: (-32600, None),
                b'[{"jsonrpc":"2.0","id":9,"method":"ping"}]': (-32600, None),
            }
            for body, (code, request_id) in cases.items():
                for who in (session, None):  # inside a session, and before any
                    answer = await http.post(url, content=body, headers=headers_for(who))
                    assert answer.status_code == 400, body[:40]
                    error = answer.json()
                    assert error["error"]["code"] == code and error["id"] == request_id, body[:40]
            rebound = await http.post(
                url, json=rpc(11, "ping"), headers={**headers_for(session), "host": "evil.example"}
            )
            assert rebound.status_code == 421 and rebound.json()["error"]["message"] == "Invalid Host header"
            origin = {**headers_for(session), "origin": "http://evil.example"}
            assert (await http.post(url, json=rpc(12, "ping"), headers=origin)).status_code == 403
            local = {**headers_for(session), "origin": "http://localhost:3000"}
            assert (await http.post(url, json=rpc(13, "ping"), headers=local)).status_code == 200
            wrong_type = await http.post(
                url, content=b"{}", headers={**headers_for(session), "content-type": "text/plain"}
            )
            assert wrong_type.status_code == 415 and "error" in wrong_type.json()
            ok = await http.post(url, json=rpc(10, "tools/call", {"name": "echo", "arguments": {"text": "still"}}),
                                 headers=headers_for(session))  # fmt: skip
            assert ok.json()["result"]["content"][0]["text"] == "still"  # the session goes on


async def test_a_principal_beyond_its_2026_07_28_exchange_bound_is_refused_and_others_are_not(
    tmp_path: Path,
) -> None:
    """Session-less (2026-07-28) POSTs are bounded per principal like sessions: with a quota of 2, alice's
    third request while two sleep upstream gets 429; bob's goes through; once hers end, alice's does too."""
    flags = ("--tokens", tokens_file(tmp_path), "--max-sessions-per-principal", "2")
    headers = {
        "accept": ACCEPT_BOTH, "content-type": "application/json", "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
    }  # fmt: skip

    def call(request_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return rpc(request_id, "tools/call", {"name": tool, "arguments": arguments, "_meta": ENVELOPE})

    def as_(bearer: str, tool: str) -> dict[str, str]:
        return {**headers, "mcp-name": tool, "authorization": f"Bearer {bearer}"}

    async def until(status: int, bearer: str) -> httpx2.Response:
        """Ask `stats` until the answer has `status` (polling, no timing claim: the test's bound ends a hang)."""
        while True:
            answer = await http.post(gateway.url, json=call("s", "stats", {}), headers=as_(bearer, "stats"))
            if answer.status_code == status:
                return answer
            await anyio.sleep(0.05)

    with anyio.fail_after(TEST_S):
        async with http_gateway(*flags) as gateway, httpx2.AsyncClient(timeout=STEP_S * 10) as http:

            async def hold(n: int, ready: anyio.Event) -> None:
                """A call in flight for good: its first progress event says it is (the second comes in 600 s)."""
                arguments = {"text": "x", "steps": 2, "interval": 600}
                body = rpc(f"z{n}", "tools/call", {"name": "progress", "arguments": arguments,
                                                   "_meta": {**ENVELOPE, "progressToken": f"p{n}"}})  # fmt: skip
                async with http.stream("POST", gateway.url, json=body, headers=as_("alice-token", "progress")) as held:
                    assert held.status_code == 200
                    async for line in held.aiter_lines():
                        if line.startswith("data: "):
                            ready.set()

            async with anyio.create_task_group() as group:
                for n in (1, 2):
                    ready = anyio.Event()
                    group.start_soon(hold, n, ready)
                    await ready.wait()
                refused = await http.post(gateway.url, json=call("s", "stats", {}), headers=as_("alice-token", "stats"))
                other = await until(200, "bob-token")  # bob is unaffected meanwhile
                group.cancel_scope.cancel()  # the client leaves: both exchanges end, upstream cancelled
            assert refused.status_code == 429, refused.text
            error = refused.json()["error"]
            assert error["message"] == "Too many requests in flight" and error["data"]["limit"] == 2
            assert "result" in other.json()
            again = await until(200, "alice-token")  # her slots are free again
            assert "result" in again.json()


async def test_a_2026_07_28_request_is_one_self_contained_exchange() -> None:
    with anyio.fail_after(TEST_S):
        async with http_gateway() as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            url = gateway.url
            params = {"name": "echo", "arguments": {"text": MARKER}, "_meta": ENVELOPE}
            headers = {
                "accept": ACCEPT_BOTH, "content-type": "application/json", "mcp-protocol-version": MODERN,
                "mcp-method": "tools/call", "mcp-name": "echo",
            }  # fmt: skip
            answer = await http.post(url, json=rpc("a", "tools/call", params), headers=headers)
            assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
            assert "mcp-session-id" not in answer.headers
            result = answer.json()["result"]
            assert result["resultType"] == "complete" and result["content"][0]["text"] == MARKER
            assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "upstream-test"
            mismatch = await http.post(
                url, json=rpc("b", "tools/call", params), headers={**headers, "mcp-name": "other"}
            )
            assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
            bare = await http.post(url, json=rpc("c", "tools/call", {"name": "echo"}), headers=headers)
            assert bare.status_code == 400 and bare.json()["error"]["code"] == -32602  # no envelope
            unknown = {**params, "name": "no_such_tool"}
            missing = await http.post(
                url, json=rpc("d", "tools/call", unknown), headers={**headers, "mcp-name": "no_such_tool"}
            )
            assert missing.json()["error"]["message"] == "unknown tool no_such_tool"
            assert (await http.get(url, headers={**headers, "accept": "text/event-stream"})).status_code == 405


# The socket ----------------------------------------------------------------------------------------
async def test_the_http_front_serves_metrics_and_health_beside_mcp() -> None:
    """`/metrics` (parsed by prometheus-client's own parser) counts the calls made; `/healthz` reports the
    upstream; neither needs a token nor carries a payload value."""
    from prometheus_client.parser import text_string_to_metric_families

    with anyio.fail_after(TEST_S):
        async with http_gateway("--policy", "standard") as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
            session = await open_session(http, gateway.url)
            for n in range(2):
                call = rpc(n + 1, "tools/call", {"name": "echo", "arguments": {"text": MARKER}})
                assert (await http.post(gateway.url, json=call, headers=headers_for(session))).status_code == 200
            base = gateway.url.rsplit("/mcp", 1)[0]
            scraped = await http.get(f"{base}/metrics")
            assert scraped.status_code == 200 and MARKER not in scraped.text
            samples = {
                (sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(scraped.text)
                for sample in family.samples
            }
            calls = [v for (name, labels), v in samples.items() if name.endswith("requests_total")
                     and ("method", "tools/call") in labels]  # fmt: skip
            assert sum(calls) >= 2, sorted(name for name, _ in samples)
            health = await http.get(f"{base}/healthz")
            assert health.status_code == 200 and health.json()["upstream"] == {"connected": True}, health.text
            for path in ("/metrics", "/healthz"):  # the same Host/Origin checks as /mcp (DNS rebinding)
                rebound = await http.get(f"{base}{path}", headers={"host": "attacker.example"})
                assert rebound.status_code == 421 and "mcp_interceptors" not in rebound.text
                foreign = await http.get(f"{base}{path}", headers={"origin": "http://attacker.example"})
                assert foreign.status_code == 403 and "upstream" not in foreign.text


async def test_accepted_connections_have_tcp_nodelay() -> None:
    """Nagle's algorithm with delayed ACKs held each reply ~40 ms: the server side of every connection must
    have TCP_NODELAY. Checked on the accepted socket itself, in process (no timing involved)."""
    import socket

    from integrations.gateway.downstream_http import HttpServer, listening_socket

    seen: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        transport = receive.__self__.transport  # uvicorn's request cycle holds the connection's transport
        seen.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = listening_socket("127.0.0.1", 0)
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    server = HttpServer(app)
    port = sock.getsockname()[1]
    with anyio.fail_after(TEST_S):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: server.serve(sockets=[sock]))
            async with httpx2.AsyncClient(timeout=STEP_S) as http:
                for _ in range(100):
                    if server.started:
                        break
                    await anyio.sleep(0.05)
                for _ in range(3):
                    assert (await http.get(f"http://127.0.0.1:{port}/")).text == "ok"
            server.should_exit = True
    sock.close()
    assert seen and all(seen)


async def test_the_gateway_exits_1_when_the_upstream_dies_and_answers_the_call_in_flight() -> None:
    argv = [
        sys.executable,
        "-m",
        "integrations.cli",
        "proxy",
        "--router",
        "--policy",
        "none",
        "--listen",
        "127.0.0.1:0",
    ]
    process = subprocess.Popen(
        [*argv, "--", *UPSTREAM], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        with anyio.fail_after(TEST_S):
            url = await anyio.to_thread.run_sync(listening_url, process)
            async with httpx2.AsyncClient(timeout=STEP_S) as http:
                session = await open_session(http, url)
                crash = await http.post(url, json=rpc(1, "tools/call", {"name": "crash"}), headers=headers_for(session))
                assert crash.json()["error"]["message"] == "upstream server closed the connection"
            assert await anyio.to_thread.run_sync(lambda: process.wait(timeout=STEP_S)) == 1
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=STEP_S)
        assert process.stderr is not None
        process.stderr.close()
    assert_no_zombies()


@pytest.mark.parametrize(
    ("value", "with_scheme", "local"),
    [
        ("127.0.0.1:8765", False, True),
        ("localhost", False, True),
        ("LOCALHOST:1", False, True),
        ("[::1]:9", False, True),
        ("evil.example", False, False),
        ("127.0.0.1.evil.example:80", False, False),
        ("127.0.0.1:x", False, False),
        ("", False, False),
        ("http://localhost:3000", True, True),
        ("https://[::1]", True, True),
        ("http://evil.example", True, False),
        ("null", True, False),
        ("file://localhost", True, False),
    ],
)
def test_only_loopback_hosts_and_origins_are_accepted(value: str, with_scheme: bool, local: bool) -> None:
    from integrations.gateway.http_front import _loopback_name

    assert _loopback_name(value, with_scheme=with_scheme) is local


@pytest.mark.parametrize(
    ("accept", "json_ok", "sse_ok"),
    [
        ("application/json, text/event-stream", True, True),
        ("application/json", True, False),
        ("text/event-stream;q=0.9", False, True),
        ("*/*", True, True),
        ("application/*, text/*", True, True),
        ("", False, False),
        ("text/html", False, False),
        # a client that states it prefers a stream gets one, as from the SDK's own server
        ("text/event-stream, application/json", False, True),
        ("application/json;q=0.5, text/event-stream", False, True),
        ("text/event-stream;q=0.1, application/json", True, True),
        ("application/json;q=0, text/event-stream", False, True),
        ("text/event-stream, */*", False, True),
    ],
)
def test_accept_headers_choose_the_reply_framing(accept: str, json_ok: bool, sse_ok: bool) -> None:
    from integrations.gateway.http_front import _accepts

    assert _accepts(accept) == (json_ok, sse_ok)


def test_bad_http_options_exit_2_and_a_taken_address_exits_1() -> None:
    import socket

    base = [sys.executable, "-m", "integrations.cli", "proxy", "--router", "--policy", "none"]
    for flags in (["--max-sessions-per-principal", "0"], ["--session-idle-timeout", "-1"]):
        run = subprocess.run(
            [*base, "--listen", "127.0.0.1:0", *flags, "--", *UPSTREAM],
            cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        )  # fmt: skip
        assert run.returncode == 2 and run.stderr.decode().startswith("error: --"), flags
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        run = subprocess.run(
            [*base, "--listen", f"127.0.0.1:{port}", "--", *UPSTREAM],
            cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        )  # fmt: skip
    assert run.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in run.stderr.decode()
    assert b"Traceback" not in run.stderr
    assert_no_zombies()
