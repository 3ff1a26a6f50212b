"""Token vault throughput: tokens issued per second and reversals per second, in memory and on Redis.

Scenarios (each the median of a few rounds, single thread):

- `issue_*`: new values, so every call formats and registers a token (`resource_name` is the cheapest
  format; `mixed` cycles through account ids, ARNs, private and public IPv4 and IPv6, e-mails, GUIDs);
- `reissue`: values that already have a token (the redactor's common case);
- `reverse_exact`: exact tokens back to real values;
- `reverse_text`: ~200 characters of text holding three tokens, found by the scanner;
- `repseudonymize_result`: the response stage (fetching the operation's pairs from the store) over a tool
  result echoing two restored values.

Redis runs use `$REDIS_URL`, else a throwaway `redis-server` when one is installed; otherwise they are
skipped with a note on stderr (and `redis_available` is 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from interceptors import Invocation, InvocationContext, Phase, Principal
from interceptors.vault import RedisStore, TokenVault, VaultStages, VaultStore, operation_key

KEY = "bench-vault-key"


def _rate(run: Callable[[int], object], count: int, rounds: int) -> float:
    """Operations per second: the median over rounds of `run(i)` called `count` times."""
    rates = []
    offset = 0
    for _ in range(rounds):
        started = time.perf_counter()
        for i in range(offset, offset + count):
            run(i)
        rates.append(count / (time.perf_counter() - started))
        offset += count
    return round(statistics.median(rates), 1)


def _mixed(i: int) -> tuple[str, str]:
    kind = i % 7
    if kind == 0:
        return f"{100000000000 + i}", "aws_account_id"
    if kind == 1:
        return f"arn:aws:ec2:us-east-1:{200000000000 + i}:instance/i-{i:017x}", "aws_arn"
    if kind == 2:
        return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}", "ip_address"
    if kind == 3:
        return f"8.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}", "ip_address"
    if kind == 4:
        return f"fd00::{i:x}", "ip_address"
    if kind == 5:
        return f"user{i}@corp{i % 50}.example.com", "email"
    return str(uuid.UUID(int=i)), "uuid"


def _scenarios(store: VaultStore | None, quick: bool, prefix: str) -> dict[str, float]:
    count, rounds = (300, 3) if quick else (3000, 5)
    if store is not None and quick:
        count = 150
    vault = TokenVault(KEY, key_env=None, store=store)
    out: dict[str, float] = {}
    out["issue_resource_name_per_s"] = _rate(lambda i: vault.tokenize(f"host-{i}", "resource_name"), count, rounds)
    out["issue_mixed_per_s"] = _rate(lambda i: vault.tokenize(*_mixed(i)), count, rounds)
    out["reissue_per_s"] = _rate(lambda i: vault.tokenize(f"host-{i % count}", "resource_name"), count, rounds)
    tokens = [vault.tokenize(f"host-{i}", "resource_name") for i in range(count)]
    out["reverse_exact_per_s"] = _rate(lambda i: vault.reverse(tokens[i % count]), count, rounds)
    texts = [
        f"Instance {tokens[i % count]} in subnet 10.0.0.0/24 failed its health check after deploy; "
        f"see runbook for {tokens[(i + 1) % count]} and page the owner of {tokens[(i + 2) % count]} "
        f"before 10:00 UTC (ticket OPS-{i})."
        for i in range(count)
    ]
    out["reverse_text_per_s"] = _rate(lambda i: vault.detokenize_text(texts[i % count]), count, rounds)
    stages = VaultStages(vault)
    context = InvocationContext(principal=Principal("user", "bench"), trace_id=f"{prefix}-op")
    operation = operation_key(context, vault.namespace_for("bench"))
    assert operation is not None
    vault.remember(operation, [("host-1", tokens[1]), ("host-2", tokens[2])])
    result = {
        "content": [{"type": "text", "text": "Unknown host 'host-1' (tried host-2, then host-1 again) " * 4}],
        "structuredContent": {"asked": "host-1", "rows": [{"name": f"node-{n}", "peer": "host-2"} for n in range(20)]},
        "_meta": {"io.mcp-interceptors/channel": "progress"},  # not final: the pairs stay for the next round
    }
    echo = Invocation("vault/repseudonymize", "tools/call", Phase.RESPONSE, result, None, context)
    out["repseudonymize_result_per_s"] = _rate(lambda i: stages.response(echo), count, rounds)
    if store is not None:
        store.clear()
    return out


@contextmanager
def _redis() -> Iterator[str | None]:
    """A Redis URL for the run, or None (with a note on stderr)."""
    try:  # the testing kit (the `testing` extra): a plain install runs the in-memory scenarios only
        from interceptors.testing.redis import RedisStartError, RedisUnavailable, throwaway_redis
    except ImportError:
        print('vault bench: Redis runs skipped: they need pip install "mcp-interceptors[testing]"', file=sys.stderr)
        yield None
        return
    try:
        with throwaway_redis() as url:
            yield url
            return
    except (RedisUnavailable, RedisStartError) as exc:
        print(f"vault bench: Redis runs skipped: {exc} (see .ci/redis.sh)", file=sys.stderr)
    yield None


def vault_benchmarks(quick: bool) -> dict[str, float]:
    """Operations per second; keys `memory.<scenario>` and `redis.<scenario>`, plus `redis_available`."""
    results = {f"memory.{name}": value for name, value in _scenarios(None, quick, "").items()}
    with _redis() as url:
        results["redis_available"] = 0.0 if url is None else 1.0
        if url is not None:
            prefix = f"bench-vault-{uuid.uuid4().hex[:8]}"
            store = RedisStore(url, prefix=prefix)
            try:
                results.update({f"redis.{name}": value for name, value in _scenarios(store, quick, prefix).items()})
            finally:
                store.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.vault_bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    results: dict[str, Any] = vault_benchmarks(args.quick)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, value in results.items():
        print(f"{name:45s} {value:12,.1f}" + ("" if name == "redis_available" else " /s"))


if __name__ == "__main__":
    main()
