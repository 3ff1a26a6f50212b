"""Scale-out on a real redis-server: rate limits shared by independent engines and processes (exactly N of
2N concurrent calls pass), the cross-boundary guard's taint seen across instances, and a Redis outage
refusing (fail closed) instead of crashing."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from interceptors import Invocation, InvocationContext, Phase, Principal
from interceptors.policy import RATE_LIMITED, PolicyEngine
from interceptors.security import CrossBoundaryGuard, RedisTaintStore
from interceptors.testing.redis import RedisUnavailable, throwaway_redis
from tests.interceptors.policy.test_policy_catalog import TOOLS

redis = pytest.importorskip("redis")

ROOT = Path(__file__).resolve().parents[3]
N = 6
SECRET = "AKIAQ3EGUJZN5XKW7P2L"
KEY = b"shared-taint-key-for-tests"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        with throwaway_redis(str(tmp_path_factory.mktemp("redis"))) as url:
            yield url
    except RedisUnavailable as exc:
        pytest.skip(f"{exc} (run .ci/redis.sh)")


def policy(name: str) -> dict[str, Any]:
    return {"name": name, "rate_limits": [{"rate": N, "per": "minute", "burst": N, "tools": ["get_asset"]}]}


def engine(url: str, name: str, **options: Any) -> PolicyEngine:
    instance = PolicyEngine(policy(name), rate_limit_redis=url, **options)
    instance.learn("tools/list", {"tools": TOOLS})
    return instance


def call(instance: PolicyEngine, who: str = "alice") -> Any:
    principal = Principal("user", who, {"roles": []})
    return instance.check_call(principal, "tools/call", {"name": "get_asset", "arguments": {}})


def test_two_engines_share_one_limit_exactly_n_of_2n_concurrent_calls_pass(redis_url: str) -> None:
    name = f"shared-{uuid.uuid4().hex[:8]}"
    first, second = engine(redis_url, name), engine(redis_url, name)
    barrier = threading.Barrier(2 * N)

    def attempt(index: int) -> str:
        barrier.wait(timeout=60)
        return str(call(first if index % 2 else second).outcome)

    with ThreadPoolExecutor(2 * N) as pool:
        outcomes = list(pool.map(attempt, range(2 * N)))
    print("outcomes", sorted(outcomes))
    assert outcomes.count("allowed") == N and outcomes.count("rate_limited") == N
    refused = call(first)
    assert refused.code == RATE_LIMITED and refused.data["limit"] == f"{N}/minute"
    assert 0 < refused.data["retry_after"] <= 60 / N + 0.01
    assert call(second, "bob").allowed  # another principal has its own bucket (principal_tool scope)
    keys = [key.decode() for key in redis.Redis.from_url(redis_url).scan_iter(match=f"{{mcp-interceptors:rl:{name}}}*")]
    assert keys and not any("alice" in key or "get_asset" in key for key in keys)  # hashed, not in clear


_WORKER = """
import sys, threading
from interceptors.policy import PolicyEngine
from interceptors import Principal
from tests.interceptors.policy.test_policy_catalog import TOOLS
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
engine = PolicyEngine({"name": name, "rate_limits": [{"rate": count, "per": "minute", "burst": count,
                       "tools": ["get_asset"]}]}, rate_limit_redis=url)
engine.learn("tools/list", {"tools": TOOLS})
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()  # both processes start together
outcomes = []
def go():
    d = engine.check_call(Principal("user", "alice", {"roles": []}), "tools/call", {"name": "get_asset"})
    outcomes.append(d.outcome)
threads = [threading.Thread(target=go) for _ in range(count)]
for t in threads: t.start()
for t in threads: t.join()
print(outcomes.count("allowed"), outcomes.count("rate_limited"))
"""


def test_two_processes_share_one_limit(redis_url: str) -> None:
    name = f"procs-{uuid.uuid4().hex[:8]}"
    argv = [sys.executable, "-c", _WORKER, redis_url, name, str(N)]
    workers = [
        subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results = [worker.communicate(timeout=120)[0].split() for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    allowed = sum(int(result[0]) for result in results)
    refused = sum(int(result[1]) for result in results)
    print("per process (allowed, refused):", results)
    assert (allowed, refused) == (N, N)


def invocation(phase: Phase, payload: Any, session: str) -> Invocation:
    return Invocation("guard", "tools/call", phase, payload, None, InvocationContext(session_id=session))


def guard(url: str, prefix: str, **options: Any) -> CrossBoundaryGuard:
    return CrossBoundaryGuard(store=RedisTaintStore(url, key=KEY, prefix=prefix), **options)


def test_taint_recorded_by_one_guard_denies_the_send_in_another(redis_url: str) -> None:
    prefix = f"taint-{uuid.uuid4().hex[:8]}"
    reader, sender = guard(redis_url, prefix), guard(redis_url, prefix)
    read = {"name": "read_file", "arguments": {"path": "/etc/creds"}}
    assert reader(invocation(Phase.REQUEST, read, "s1")).valid
    ingested = reader(invocation(Phase.RESPONSE, {"content": [{"type": "text", "text": f"key={SECRET}"}]}, "s1"))
    assert ingested.valid and ingested.info is not None and ingested.info["ingested"] == 1
    leak = {"name": "write_query", "arguments": {"query": f"insert '{SECRET}'"}}
    denied = sender(invocation(Phase.REQUEST, leak, "s1"))
    assert not denied.valid
    print("guard B:", [m.message for m in denied.messages or ()])
    assert "read from 'filesystem' may not be sent to 'sqlite'" in denied.messages[0].message
    assert SECRET not in denied.messages[0].message
    assert sender(invocation(Phase.REQUEST, {"name": "write_file", "arguments": {"x": SECRET}}, "s1")).valid
    assert sender(invocation(Phase.REQUEST, leak, "another-session")).valid
    stored = redis.Redis.from_url(redis_url)
    dumped = b"".join(
        b"".join(k + v for k, v in stored.hgetall(key).items()) for key in stored.scan_iter(match=f"{prefix}:*")
    )
    assert dumped and SECRET.encode() not in dumped and b"s1" not in dumped


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test alone, so the test can stop it."""
    binary = "redis-server"
    if subprocess.run(["which", binary], capture_output=True).returncode != 0:
        pytest.skip("redis-server is not installed (run .ci/redis.sh)")
    port = free_port()
    server = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 30
    while True:
        try:
            redis.Redis.from_url(url, socket_timeout=1).ping()
            break
        except redis.RedisError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.skip("the test's own redis-server did not start")
            time.sleep(0.05)
    try:
        yield url, server
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=30)


def test_redis_stopped_means_refusal_not_a_crash(own_redis: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, server = own_redis
    limited = engine(url, "outage")
    open_engine = engine(url, "outage-open", rate_limit_fail_open=True)
    taint = guard(url, "outage")
    lenient = guard(url, "outage-lenient", fail_open=True)
    assert call(limited).allowed
    assert taint(invocation(Phase.REQUEST, {"name": "read_file"}, "s")).valid
    server.terminate()
    server.wait(timeout=30)
    refused = call(limited)
    assert refused.outcome == "rate_limited" and refused.code == RATE_LIMITED
    assert refused.data["reason"] == "rate_limit_store_unavailable"
    assert refused.message.startswith("Rate limit state unavailable")
    assert call(open_engine).allowed  # failOpen: the limit is skipped while Redis is away
    send = {"name": "write_query", "arguments": {"q": SECRET}}
    denied = taint(invocation(Phase.REQUEST, send, "s"))
    assert not denied.valid and "unavailable" in denied.messages[0].message
    blocked = taint(invocation(Phase.RESPONSE, {"content": [{"type": "text", "text": SECRET}]}, "s"))
    assert not blocked.valid  # a secret it cannot remember is not released
    assert taint(invocation(Phase.RESPONSE, {"content": [{"type": "text", "text": "plain"}]}, "s")).valid
    assert lenient(invocation(Phase.REQUEST, send, "s")).valid


def test_redis_flag_and_its_old_name_set_the_same_option() -> None:
    import argparse

    from integrations.gateway.cli import add_proxy_command

    parser = argparse.ArgumentParser()
    add_proxy_command(parser.add_subparsers())
    for flag in ("--redis", "--vault-redis"):
        args = parser.parse_args(["proxy", flag, "redis://127.0.0.1:1/0", "--metrics", "127.0.0.1:9", "--", "up"])
        assert args.vault_redis == "redis://127.0.0.1:1/0" and args.metrics == "127.0.0.1:9"
