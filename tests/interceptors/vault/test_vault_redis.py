"""The Redis store: the vault's semantics on a shared store, nothing readable in Redis, and two real processes
that agree on every token and every reversal.

Uses `$REDIS_URL` (see `.ci/redis.sh`), else starts a throwaway `redis-server` itself when the binary is
installed; skips only when neither is possible, and says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interceptors import Invocation, InvocationContext, Phase, Principal
from interceptors.testing.redis import RedisUnavailable, throwaway_redis
from interceptors.vault import Entry, RedisStore, TokenVault, VaultStages

ROOT = Path(__file__).resolve().parents[3]
KEY = "redis-shared-key-0123456789"


def _client_module() -> Any:
    try:
        import redis
    except ImportError:
        pytest.skip("the redis client package is not installed (pip install 'mcp-interceptors[redis]')")
    return redis


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _client_module()
    try:
        with throwaway_redis(str(tmp_path_factory.mktemp("redis"))) as url:
            yield url
    except RedisUnavailable as exc:
        pytest.skip(f"{exc} (run .ci/redis.sh)")


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    name = f"test-vault-{uuid.uuid4().hex[:12]}"
    yield name
    redis = _client_module()
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"{name}:*"):
        client.delete(key)
    client.close()


def shared(url: str, prefix: str, **kwargs: Any) -> TokenVault:
    return TokenVault(KEY, key_env=None, store=RedisStore(url, prefix=prefix), **kwargs)


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def test_the_vault_behaves_the_same_on_redis(redis_url: str, prefix: str) -> None:
    memory = TokenVault(KEY, key_env=None, scope="principal")
    v = shared(redis_url, prefix, scope="principal")
    alice, bob = v.namespace_for("alice"), v.namespace_for("bob")
    values = [("arn:aws:iam::123456789012:role/ops", "aws_arn"), ("10.1.2.3", "ip_address"), ("a@b.example", "email")]
    tokens = [v.tokenize(value, entity, alice) for value, entity in values]
    assert tokens == [memory.tokenize(value, entity, alice) for value, entity in values]
    for (value, entity), token in zip(values, tokens, strict=True):
        assert v.reverse(token, alice) == value and v.reverse(token, bob) is None
        assert v.lookup(value, entity, alice) == token
    account = v.tokenize("123456789012", "aws_account_id", alice)
    assert v.reverse(account, alice) == "123456789012"  # a component registered on its own
    text = f"role {tokens[0]} at ({tokens[1]}), mail <{tokens[2]}>"
    assert (
        v.detokenize_text(text, alice)[0] == "role arn:aws:iam::123456789012:role/ops at (10.1.2.3), mail <a@b.example>"
    )
    assert v.detokenize_text(text, bob)[0] == text
    exported = v.export()
    assert len(exported["entries"]) == v.stats()["entries"] > 3
    copy = TokenVault("another-key", key_env=None)
    copy.import_mappings(exported)
    assert copy.reverse(tokens[0], alice) == values[0][0]


def test_ttl_collisions_and_operations_on_redis(redis_url: str, prefix: str) -> None:
    clock = Clock()
    v = shared(redis_url, prefix, ttl_seconds=10, clock=clock)
    used, idle = v.tokenize("used-name", "resource_name"), v.tokenize("idle-name", "resource_name")
    clock.now += 6
    assert v.reverse(used) == "used-name"
    clock.now += 6
    assert v.reverse(used) == "used-name" and v.reverse(idle) is None
    assert v.tokenize("idle-name", "resource_name") == idle
    clock.now += 30
    assert v.purge_expired() == 2 and v.stats()["entries"] == 0

    probe = TokenVault(KEY, key_env=None)
    wanted = probe.tokenize("prod-db", "resource_name")
    fresh = shared(redis_url, prefix)
    fresh.store.put([Entry("global", "resource_name", "someone-else", wanted, 0.0, 1e18)], overwrite=False)
    token = fresh.tokenize("prod-db", "resource_name")
    assert token != wanted and fresh.reverse(wanted) == "someone-else" and fresh.reverse(token) == "prod-db"

    fresh.remember("op-1", [("prod-db", token)])
    fresh.remember("op-1", [("prod-db", token), ("x-y-z", "res-1")])
    assert shared(redis_url, prefix).recall("op-1") == [("prod-db", token), ("x-y-z", "res-1")]
    assert fresh.recall("op-2") == []


def test_redis_holds_no_real_value_and_entries_cannot_move(redis_url: str, prefix: str) -> None:
    redis = _client_module()
    v = shared(redis_url, prefix, scope="principal")
    secret_values = ["payments-primary-db", "10.77.1.2", "carol@corp.example.com"]
    ns = v.namespace_for("principal-carol")
    entities = ["db", "ip_address", "email"]
    tokens = [v.tokenize(value, entity, ns) for value, entity in zip(secret_values, entities, strict=True)]
    v.remember("op", [(secret_values[0], tokens[0])])
    client = redis.Redis.from_url(redis_url)
    dump = b""
    for key in client.scan_iter(match=f"{prefix}:*"):
        dump += key
        kind = client.type(key)
        if kind == b"hash":
            for field, value in client.hgetall(key).items():
                dump += field + value
        elif kind == b"list":
            dump += b"".join(client.lrange(key, 0, -1))
        else:
            dump += client.get(key) or b""
    for needle in [*secret_values, "principal-carol", "corp.example", KEY]:
        assert needle.encode() not in dump
    # Copying an entry's sealed blob under another namespace's field does not make it reversible there.
    store = v.store
    assert isinstance(store, RedisStore)
    field = store._field(ns, tokens[0])
    other = store._field(v.namespace_for("mallory"), tokens[0])
    tok, _, used = store._names()
    client.hset(tok, other, client.hget(tok, field) or b"")
    client.hset(used, other, client.hget(used, field) or b"")
    assert v.reverse(tokens[0], v.namespace_for("mallory")) is None
    client.close()


WORKER = textwrap.dedent(
    """
    import json, sys
    from interceptors import Invocation, InvocationContext, Phase, Principal
    from interceptors.vault import RedisStore, TokenVault, VaultStages

    url, prefix, key, job = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    vault = TokenVault(key, key_env=None, scope="principal", store=RedisStore(url, prefix=prefix), restore_to=["*"])
    out = {}
    if job["do"] == "issue":
        ns = vault.namespace_for(job["principal"])
        out = {value: vault.tokenize(value, entity, ns) for value, entity in job["values"]}
    elif job["do"] == "reverse":
        ns = vault.namespace_for(job["principal"])
        out = {token: vault.reverse(token, ns) for token in job["tokens"]}
        out["__text__"] = vault.detokenize_text(job["text"], ns)[0]
    elif job["do"] in ("request", "response"):
        stages = VaultStages(vault)
        ctx = InvocationContext(principal=Principal("user", job["principal"]), trace_id=job["trace"])
        phase = Phase.REQUEST if job["do"] == "request" else Phase.RESPONSE
        handler = stages.request if job["do"] == "request" else stages.response
        out = handler(Invocation("vault", "tools/call", phase, job["payload"], None, ctx)).payload
    print(json.dumps(out))
    """
)


def run_workers(url: str, prefix: str, jobs: list[dict[str, Any]]) -> list[Any]:
    """Start every job as its own Python process at once; their parsed outputs, in order."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, prefix, KEY, json.dumps(job)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        for job in jobs
    ]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        outputs.append(json.loads(out))
    return outputs


def test_two_processes_agree_on_every_token_and_reversal(redis_url: str, prefix: str) -> None:
    common = [(f"shared-host-{i}", "resource_name") for i in range(150)]
    common += [(f"10.{i}.0.1", "ip_address") for i in range(30)] + [("arn:aws:iam::123456789012:role/a", "aws_arn")]
    only_a = [(f"a-only-{i}", "resource_name") for i in range(40)]
    only_b = [(f"b-only-{i}@corp.example", "email") for i in range(40)]
    # A value whose first-choice token is already taken: both processes must settle on the same second choice.
    wanted = TokenVault(KEY, key_env=None, scope="principal").tokenize("contested", "resource_name", "p:alice")
    seeded = shared(redis_url, prefix, scope="principal")
    seeded.store.put([Entry("p:alice", "resource_name", "squatter", wanted, 0.0, 1e18)], overwrite=False)
    common.append(("contested", "resource_name"))

    jobs = [
        {"do": "issue", "principal": "alice", "values": common + only_a},
        {"do": "issue", "principal": "alice", "values": list(reversed(only_b + common))},
    ]
    tokens_a, tokens_b = run_workers(redis_url, prefix, jobs)
    for value, _ in common:
        assert tokens_a[value] == tokens_b[value], value
    assert tokens_a["contested"] != wanted

    text_a = " ".join(tokens_a[v] for v, _ in only_a[:5])
    text_b = ", ".join(tokens_b[v] for v, _ in only_b[:5])
    reversals = run_workers(
        redis_url,
        prefix,
        [
            {"do": "reverse", "principal": "alice", "tokens": [tokens_b[v] for v, _ in only_b], "text": text_b},
            {"do": "reverse", "principal": "alice", "tokens": [tokens_a[v] for v, _ in only_a], "text": text_a},
            {"do": "reverse", "principal": "bob", "tokens": [tokens_a[v] for v, _ in only_a], "text": text_a},
        ],
    )
    assert reversals[0] == {**{tokens_b[v]: v for v, _ in only_b}, "__text__": ", ".join(v for v, _ in only_b[:5])}
    assert reversals[1] == {**{tokens_a[v]: v for v, _ in only_a}, "__text__": " ".join(v for v, _ in only_a[:5])}
    assert reversals[2] == {**{tokens_a[v]: None for v, _ in only_a}, "__text__": text_a}  # bob reverses nothing


def test_request_in_one_process_echo_guarded_in_another(redis_url: str, prefix: str) -> None:
    v = shared(redis_url, prefix, scope="principal")
    token = v.tokenize("prod-payments", "resource_name", v.namespace_for("alice"))
    request = {"method": "tools/call", "params": {"name": "t", "arguments": {"db": token}}}
    echo = {"content": [{"type": "text", "text": "Unknown db 'prod-payments'"}]}
    (restored,) = run_workers(
        redis_url, prefix, [{"do": "request", "principal": "alice", "trace": "tr-9", "payload": request}]
    )
    assert restored["params"]["arguments"] == {"db": "prod-payments"}
    (guarded,) = run_workers(
        redis_url, prefix, [{"do": "response", "principal": "alice", "trace": "tr-9", "payload": echo}]
    )
    assert guarded["content"][0]["text"] == f"Unknown db '{token}'"
    # And in this process too: the pairs live in Redis.
    ctx = InvocationContext(principal=Principal("user", "alice"), trace_id="tr-9")
    local = VaultStages(v).response(Invocation("vault", "tools/call", Phase.RESPONSE, echo, None, ctx))
    assert local.payload["content"][0]["text"] == f"Unknown db '{token}'"
