"""Two real router gateway processes (`--listen`) sharing one real redis-server (`--redis`): one rate limit
for both (exactly N of 2N concurrent calls pass), the cross-boundary guard's session across them (a secret
read through A may not leave through B in the same session), a pseudonym minted by A reversed by B, the
audit stream in Redis without a secret, and a Redis outage failing closed and showing in `/healthz`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.interceptors.security.test_redis_scale import own_redis  # noqa: F401 - the fixture: a redis-server of the test alone
from tests.ops_helpers import STEP_S, GatewayProcess, gateway_process, headers_for, open_session, reply_of, rpc

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
redis = pytest.importorskip("redis")

TEST_S = 240.0
N = 6
SECRET = "AKIAQ3EGUJZN5XKW7P2L"
EMAIL = "carol.owner@example.com"
BEARER = "alice-token"
SESSION_META = "io.mcp-interceptors/session"
POLICY = f"""\
name: shared
extends: open
hide_denied: false
rate_limits:
  - {{rate: {N}, per: minute, burst: {N}, tools: [sleep], scope: global}}
cross_boundary_guard: true
transforms:
  - type: redact
    strategies: {{secret: keep, credential: keep, pii: pseudonymize}}
vault:
  key_env: MCP_INTERCEPTORS_VAULT_KEY
"""


@contextmanager
def two_gateways(tmp_path: Path, url: str) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "tokens.yaml").write_text(f"tokens:\n  - {{id: alice, token: {BEARER}}}\n")
    (tmp_path / "tokens.yaml").chmod(0o600)  # tokens in clear: the owner alone may read them
    env = {**os.environ, "MCP_INTERCEPTORS_VAULT_KEY": "a-shared-test-key-of-both-gateways"}
    flags = ("--policy", str(tmp_path / "policy.yaml"), "--tokens", str(tmp_path / "tokens.yaml"), "--redis", url)
    with ExitStack() as stack:
        a = stack.enter_context(gateway_process(tmp_path, *flags, name="a", env=env))
        b = stack.enter_context(gateway_process(tmp_path, *flags, name="b", env=env))
        yield a, b


async def call(
    http: httpx2.AsyncClient, gateway: GatewayProcess, session: str, n: int, tool: str, arguments: dict[str, Any],
    label: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if label is not None:
        params["_meta"] = {SESSION_META: label}
    response = await http.post(gateway.url, json=rpc(n, "tools/call", params), headers=headers_for(session, BEARER))
    return reply_of(response)


async def test_two_gateways_share_limits_guard_sessions_pseudonyms_and_the_audit_stream(
    tmp_path: Path,
    own_redis: tuple[str, Any],  # noqa: F811
) -> None:
    url, _ = own_redis
    with anyio.fail_after(TEST_S), two_gateways(tmp_path, url) as (a, b):
        async with httpx2.AsyncClient(timeout=STEP_S) as http:
            sessions = {a: await open_session(http, a.url, BEARER), b: await open_session(http, b.url, BEARER)}

            # One limit of N per minute for both gateways together: exactly N of 2N concurrent calls pass.
            replies: list[dict[str, Any]] = []

            async def one(gateway: GatewayProcess, n: int) -> None:
                replies.append(await call(http, gateway, sessions[gateway], n, "sleep", {"seconds": 0}))

            async with anyio.create_task_group() as tasks:
                for n in range(2 * N):
                    tasks.start_soon(one, a if n % 2 else b, 100 + n)
            passed = [r for r in replies if "result" in r]
            refused = [r for r in replies if "error" in r]
            assert len(passed) == N and len(refused) == N, replies
            assert {r["error"]["code"] for r in refused} == {-31029}, refused

            # The guard: read through A, sent out through B in the same (principal, label) session: denied.
            read = await call(http, a, sessions[a], 200, "echo", {"text": f"key {SECRET}"}, label="task-1")
            assert SECRET in str(read["result"]), read
            sent = await call(http, b, sessions[b], 201, "later", {"text": SECRET}, label="task-1")
            assert "error" in sent, "the secret read through A left through B in the same session"
            other = await call(http, b, sessions[b], 202, "later", {"text": SECRET}, label="task-2")
            assert "result" in other, other  # another session never read it
            same_server = await call(http, b, sessions[b], 203, "echo", {"text": SECRET}, label="task-1")
            assert "result" in same_server, same_server  # back to its origin is no boundary crossed

            # A pseudonym minted by A is reversed by B.
            minted = await call(http, a, sessions[a], 300, "echo", {"text": f"owner {EMAIL}"})
            text = minted["result"]["structuredContent"]["text"]
            assert EMAIL not in text, minted
            token = text.split("owner ", 1)[1].strip()
            revealed = await call(http, b, sessions[b], 301, "reveal_token", {"token": token})
            assert revealed["result"]["structuredContent"]["value"] == EMAIL, revealed

    client = redis.Redis.from_url(url)
    records = client.xrange("mcp-interceptors:audit")
    assert records, "the audit stream in Redis is empty"
    dumped = repr([(key, client.dump(key)) for key in client.scan_iter()]) + repr(records)
    assert SECRET not in dumped and EMAIL not in dumped, "a secret or a real value reached Redis in clear"


async def test_a_redis_outage_fails_closed_and_shows_in_healthz(
    tmp_path: Path,
    own_redis: tuple[str, Any],  # noqa: F811
) -> None:
    url, server = own_redis
    with anyio.fail_after(TEST_S), two_gateways(tmp_path, url) as (a, _):
        async with httpx2.AsyncClient(timeout=STEP_S) as http:
            session = await open_session(http, a.url, BEARER)
            health = await http.get(f"{a.base}/healthz")
            assert health.status_code == 200 and health.json()["redis"] == {"reachable": True, "failOpen": False}
            server.kill()
            server.wait(timeout=STEP_S)
            refused = await call(http, a, session, 1, "sleep", {"seconds": 0})
            assert refused["error"]["code"] == -31029, refused
            assert refused["error"]["data"]["reason"] == "rate_limit_store_unavailable", refused
            guarded = await call(http, a, session, 2, "later", {"text": SECRET}, label="task-1")
            assert "error" in guarded, guarded  # the shared stores (guard, vault) cannot answer: refused
            with anyio.fail_after(STEP_S):
                while (health := await http.get(f"{a.base}/healthz")).status_code != 503:
                    await anyio.sleep(0.2)
            assert health.json()["redis"] == {"reachable": False, "failOpen": False}
            scraped = (await http.get(f"{a.base}/metrics")).text
            assert "mcp_interceptors_redis_up 0.0" in scraped


STALL_POLICY = """\
name: stalled
extends: open
hide_denied: false
rate_limits:
  - {rate: 100000, per: minute, burst: 100000, tools: [sleep], scope: global}
cross_boundary_guard: true
vault:
  key_env: MCP_INTERCEPTORS_VAULT_KEY
"""


async def test_a_stalled_redis_refuses_limited_calls_and_holds_up_nothing_else(
    tmp_path: Path,
    own_redis: tuple[str, Any],  # noqa: F811
) -> None:
    """Redis stopped (SIGSTOP) under traffic: every limited call is refused with the documented error (the
    store's deadline opens the breaker; the calls behind it do not wait on the store); every unlimited call
    fails with the vault's documented error (its result must be re-pseudonymised through the vault in Redis:
    fail closed, nothing passed in clear, no server named); a call whose arguments carry a secret fails with
    the guard's documented error (its taints are in Redis); ping and lists are answered; the warnings stay a
    handful (none per call); after SIGCONT all kinds pass again. Timing is measured by bench/redis_stall.py
    (`--vault`), not asserted here."""
    import signal

    url, server = own_redis
    (tmp_path / "policy.yaml").write_text(STALL_POLICY)
    env = {**os.environ, "MCP_INTERCEPTORS_VAULT_KEY": "a-test-key-of-the-stalled-gateway"}
    flags = ("--policy", str(tmp_path / "policy.yaml"), "--redis", url)
    with anyio.fail_after(TEST_S), gateway_process(tmp_path, *flags, env=env) as gateway:
        async with httpx2.AsyncClient(timeout=STEP_S) as http:
            session = await open_session(http, gateway.url)

            async def post(n: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
                response = await http.post(gateway.url, json=rpc(n, method, params), headers=headers_for(session))
                return reply_of(response)

            sleep = {"name": "sleep", "arguments": {"seconds": 0}}
            echo = {"name": "echo", "arguments": {"text": "hello"}}
            guarded = {"name": "later", "arguments": {"text": SECRET}}
            assert "result" in await post(1, "tools/call", sleep)  # the store answers: the call passes
            assert "result" in await post(2, "tools/call", echo)
            server.send_signal(signal.SIGSTOP)
            try:
                replies: dict[int, dict[str, Any]] = {}

                async def one(n: int, method: str, params: dict[str, Any] | None = None) -> None:
                    replies[n] = await post(n, method, params)

                async with anyio.create_task_group() as tasks:
                    for n in range(100, 130):
                        tasks.start_soon(one, n, "tools/call", sleep)
                        tasks.start_soon(one, n + 100, "ping")
                        tasks.start_soon(one, n + 200, "tools/list")
                        tasks.start_soon(one, n + 300, "tools/call", echo)
                        tasks.start_soon(one, n + 400, "tools/call", guarded)
                for n in range(100, 130):
                    error = replies[n].get("error")
                    assert error is not None and error["code"] == -31029, replies[n]
                    assert error["data"]["reason"] == "rate_limit_store_unavailable", replies[n]
                    assert replies[n + 100]["result"] == {}, replies[n + 100]
                    assert "sleep" in {tool["name"] for tool in replies[n + 200]["result"]["tools"]}
                    error = replies[n + 300].get("error")
                    assert error is not None and error["code"] == -32603, replies[n + 300]
                    assert error["data"] == {"reason": "vault_store_unavailable", "retry_after": 1.0}, error
                    assert error["message"] == "Vault state unavailable; retry in 1s", error
                    error = replies[n + 400].get("error")
                    assert error is not None and error["code"] == -32603, replies[n + 400]
                    assert error["data"] == {"reason": "guard_store_unavailable", "retry_after": 1.0}, error
                    assert SECRET not in str(error), error
            finally:
                server.send_signal(signal.SIGCONT)
            for params in (sleep, echo, guarded):
                for n in range(1000, 1000 + int(STEP_S * 10)):  # each store is asked again after a moment
                    if "result" in (back := await post(n, "tools/call", params)):
                        break
                    await anyio.sleep(0.1)
                assert "result" in back, back
                if params is echo:
                    assert "hello" in str(back["result"]["content"])
    warnings = [line for line in gateway.log().splitlines() if "WARNING" in line or "unavailable" in line]
    assert 1 <= len(warnings) < 10, warnings
