"""Redaction throughput of the standard transforms next to same-run baselines.

The corpus is generated (fixed seed): tool results of the kinds a model reads — cloud inventories,
log searches, configuration files, query rows, issue threads, prose — with credentials planted at
known places. Three things scan the same rendered text:

- ours: the standard `redact` step (and, separately, the whole standard pipeline) over each result;
- one pass of a single regex combining the same active detectors (the floor for any regex scanner);
- detect-secrets' file scan with its default plugins, when it is installed.

Recall is counted on the planted credentials of the formats both scanners cover. The MB/s rows are wall time; the
"of CPU" rows (a 1 MiB corpus, a fresh pipeline per round, the least disturbed of three rounds) are CPU time, which
other jobs on the machine move far less (issue 29's target: the whole standard pipeline at 5 MB/s of CPU or more).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import string
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from interceptors.transforms import STANDARD_TRANSFORMS, Redactor, TransformContext, assemble_output
from interceptors.transforms.base import Pipeline, render_json
from interceptors.transforms.channels import transform_tool_result

MIB = 1 << 20
SEED = 20261130
# Formats both scanners claim to find (detect-secrets' names in parentheses):
SHARED_FORMATS = (
    "aws_access_key_id",  # AWSKeyDetector
    "aws_secret_access_key",  # AWSKeyDetector, labelled and quoted
    "azure_storage_key",  # AzureStorageKeyDetector (AccountKey=...)
    "url_password",  # BasicAuthDetector
    "github_token",  # GitHubTokenDetector
    "jwt",  # JwtTokenDetector
    "password_assignment",  # KeywordDetector
    "private_key",  # PrivateKeyDetector
    "slack_token",  # SlackDetector
    "stripe_key",  # StripeDetector (live secret keys)
)
OWN_ONLY_FORMATS = ("google_api_key", "bearer_token", "sas_signature")


@dataclass
class Planted:
    format: str
    secret: str
    result: int


@dataclass
class Corpus:
    results: list[dict[str, Any]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    planted: list[Planted] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(t.encode()) for t in self.texts)


# --- the corpus ---------------------------------------------------------------------------------------------

_WORDS = (
    "the",
    "a",
    "service",
    "deploy",
    "region",
    "cluster",
    "instance",
    "request",
    "latency",
    "error",
    "timeout",
    "cache",
    "user",
    "account",
    "bucket",
    "policy",
    "update",
    "create",
    "delete",
    "read",
    "write",
    "network",
    "subnet",
    "gateway",
    "route",
    "table",
    "queue",
    "topic",
    "message",
    "event",
    "handler",
    "retry",
    "backoff",
    "config",
    "value",
    "default",
    "enabled",
    "disabled",
    "version",
    "release",
    "build",
    "test",
    "stage",
    "production",
    "staging",
    "metric",
    "alarm",
    "threshold",
    "dashboard",
    "report",
    "owner",
    "team",
    "project",
    "migration",
    "schema",
    "index",
    "query",
    "result",
    "page",
    "token",
    "limit",
    "offset",
)
_ALNUM = string.ascii_letters + string.digits


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _prose(rng: random.Random, words: int) -> str:
    sentences = []
    while words > 0:
        n = min(words, rng.randint(6, 18))
        words -= n
        sentence = " ".join(rng.choice(_WORDS) for _ in range(n))
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
    return " ".join(sentences)


def make_secret(rng: random.Random, fmt: str) -> tuple[str, str]:
    """(the secret, the text that carries it)."""
    if fmt == "aws_access_key_id":
        s = "AKIA" + _rand(rng, string.ascii_uppercase + string.digits, 16)
        return s, f"aws_access_key_id = {s}"
    if fmt == "aws_secret_access_key":
        s = _rand(rng, _ALNUM + "/+", 40)
        return s, f'aws_secret_access_key = "{s}"'
    if fmt == "azure_storage_key":
        s = _rand(rng, _ALNUM + "+/", 86) + "=="
        return s, f"DefaultEndpointsProtocol=https;AccountName=acct{rng.randint(1, 99)};AccountKey={s};EndpointSuffix=x"
    if fmt == "url_password":
        s = _rand(rng, _ALNUM, 14)
        return s, f"postgres://app_user:{s}@db-{rng.randint(1, 9)}.internal:5432/orders"
    if fmt == "github_token":
        s = "ghp_" + _rand(rng, _ALNUM, 36)
        return s, f"GITHUB_TOKEN={s}"
    if fmt == "jwt":
        claims = {"sub": _rand(rng, _ALNUM, 12), "iat": rng.randint(10**9, 2 * 10**9), "scope": rng.choice(_WORDS)}
        header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
        body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
        s = f"{header}.{body}.{_rand(rng, _ALNUM + '-_', 43)}"
        return s, f"Authorization: {s}"
    if fmt == "password_assignment":
        s = _rand(rng, _ALNUM, 10) + "!" + _rand(rng, string.digits, 2)
        return s, f'password = "{s}"'
    if fmt == "private_key":
        body = "\n".join(_rand(rng, _ALNUM + "+/", 64) for _ in range(6))
        s = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
        return s, s
    if fmt == "slack_token":
        s = f"xoxb-{rng.randint(10**11, 10**12)}-{rng.randint(10**11, 10**12)}-{_rand(rng, _ALNUM, 24)}"
        return s, f"slack_bot: {s}"
    if fmt == "stripe_key":
        s = "sk_live_" + _rand(rng, _ALNUM, 24)
        return s, f"STRIPE_SECRET={s}"
    if fmt == "google_api_key":
        s = "AIza" + _rand(rng, _ALNUM + "-_", 35)
        return s, f"maps key {s}"
    if fmt == "bearer_token":
        s = _rand(rng, _ALNUM, 32)
        return s, f"curl -H 'Authorization: Bearer {s}' https://api.example.com"
    s = _rand(rng, _ALNUM, 40) + "%3D"
    return s, f"https://acct.blob.core.windows.net/c/file?sv=2021-08-06&se=2026&sig={s}"


def _asset(rng: random.Random, index: int) -> dict[str, Any]:
    account = str(rng.randint(10**11, 10**12 - 1))
    region = rng.choice(("us-east-1", "eu-west-1", "ap-south-1"))
    iid = "i-" + _rand(rng, "0123456789abcdef", 17)
    return {
        "id": iid,
        "arn": f"arn:aws:ec2:{region}:{account}:instance/{iid}",
        "name": f"web-{index}",
        "type": "ec2_instance",
        "region": region,
        "account_id": account,
        "state": rng.choice(("running", "stopped")),
        "private_ip": f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        "public_ip": f"54.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        "created_at": f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T0{rng.randint(0, 9)}:15:00Z",
        "security_groups": ["sg-" + _rand(rng, "0123456789abcdef", 8) for _ in range(rng.randint(1, 3))],
        "tags": {
            "env": rng.choice(("prod", "dev")),
            "owner": f"team{rng.randint(1, 9)}@example.com",
            "Name": f"web-{index}",
        },
        "metrics": {"cpu": round(rng.random() * 100, 2), "requests": rng.randint(0, 10**6)},
    }


def _result(rng: random.Random, planted: list[tuple[str, str]]) -> dict[str, Any]:
    """One tool result; `planted` (format, carrier text) are woven into its strings."""
    kind = rng.choice(("inventory", "logs", "file", "rows", "issues", "prose"))
    carriers = [c for _, c in planted]
    if kind == "inventory":
        assets = [_asset(rng, i) for i in range(rng.randint(10, 60))]
        for carrier in carriers:
            rng.choice(assets)["user_data"] = f"#!/bin/bash\nexport {carrier}\n"
        structured: dict[str, Any] = {"assets": assets, "count": len(assets), "next_cursor": _rand(rng, _ALNUM, 24)}
        return {"content": [{"type": "text", "text": render_json(structured)}], "structuredContent": structured}
    if kind == "logs":
        lines = []
        for _ in range(rng.randint(40, 200)):
            lines.append(
                f"2026-11-{rng.randint(10, 29)}T1{rng.randint(0, 9)}:0{rng.randint(0, 9)}:00Z "
                f"{rng.choice(('INFO', 'WARN', 'ERROR'))} request_id={_rand(rng, '0123456789abcdef', 16)} "
                f"user={rng.choice(_WORDS)}{rng.randint(1, 99)}@example.com path=/api/v1/{rng.choice(_WORDS)} "
                f"status={rng.choice((200, 200, 201, 404, 500))} latency_ms={rng.randint(1, 900)}"
            )
        for carrier in carriers:
            lines.insert(rng.randrange(len(lines)), f"2026-11-30T10:00:00Z DEBUG env dump {carrier}")
        return {"content": [{"type": "text", "text": "\n".join(lines)}]}
    if kind == "file":
        lines = [f"# {_prose(rng, 8)}"]
        for _ in range(rng.randint(20, 80)):
            key = rng.choice(_WORDS) + "_" + rng.choice(_WORDS)
            lines.append(f"{key} = {rng.choice((str(rng.randint(0, 9999)), rng.choice(_WORDS), 'true'))}")
        for carrier in carriers:
            lines.insert(rng.randrange(len(lines)), carrier)
        return {"content": [{"type": "text", "text": "\n".join(lines)}], "isError": False}
    if kind == "rows":
        rows: list[dict[str, Any]] = [
            {"id": rng.randint(1, 10**6), "email": f"{rng.choice(_WORDS)}{i}@example.org", "status": rng.choice(_WORDS),
             "amount": round(rng.random() * 1000, 2), "note": _prose(rng, rng.randint(3, 15))}
            for i in range(rng.randint(20, 120))
        ]  # fmt: skip
        for carrier in carriers:
            rng.choice(rows)["note"] += " " + carrier
        structured = {"rows": rows, "columns": ["id", "email", "status", "amount", "note"]}
        return {"content": [{"type": "text", "text": render_json(structured)}], "structuredContent": structured}
    if kind == "issues":
        issues: list[dict[str, Any]] = [
            {"number": rng.randint(1, 9999), "title": _prose(rng, 8), "body": _prose(rng, rng.randint(40, 160)),
             "user": {"login": rng.choice(_WORDS) + str(rng.randint(1, 99))},
             "labels": [rng.choice(_WORDS) for _ in range(2)], "comments": rng.randint(0, 40)}
            for _ in range(rng.randint(3, 15))
        ]  # fmt: skip
        for carrier in carriers:
            issue = rng.choice(issues)
            issue["body"] += f"\n\n```\n{carrier}\n```\n"
        return {"content": [{"type": "text", "text": render_json(issues)}]}
    text = "\n\n".join(_prose(rng, rng.randint(60, 200)) for _ in range(rng.randint(2, 8)))
    for carrier in carriers:
        text += f"\n\nExample: {carrier}\n"
    return {"content": [{"type": "text", "text": text}]}


def plain_text(result: dict[str, Any]) -> str:
    """What a model reads of a result: its text blocks as they are, then the structured content as JSON."""
    parts = [b["text"] for b in result.get("content", []) if b.get("type") == "text"]
    if result.get("structuredContent") is not None:
        parts.append(render_json(result["structuredContent"]))
    return "\n".join(parts)


def make_corpus(size: int, seed: int = SEED) -> Corpus:
    """Tool results until their rendered text reaches `size` bytes; about one in four carries a credential."""
    rng = random.Random(seed)
    corpus = Corpus()
    formats = SHARED_FORMATS + OWN_ONLY_FORMATS
    total = 0
    while total < size:
        planted = []
        if rng.random() < 0.25:
            for _ in range(rng.randint(1, 2)):
                fmt = rng.choice(formats)
                secret, carrier = make_secret(rng, fmt)
                planted.append((fmt, carrier))
                corpus.planted.append(Planted(fmt, secret, len(corpus.results)))
        result = _result(rng, planted)
        text = plain_text(result)
        corpus.results.append(result)
        corpus.texts.append(text)
        total += len(text.encode())
    return corpus


# --- the scanners ---------------------------------------------------------------------------------------------


def _standard_redact_pipeline() -> Pipeline:
    redact = next(s for s in STANDARD_TRANSFORMS["transforms"] if isinstance(s, dict) and s.get("type") == "redact")
    return assemble_output({"name": "standard-redact", "transforms": [redact]})


def _clear_caches(pipeline: Pipeline) -> None:
    for transform in pipeline.transforms:
        if isinstance(transform, Redactor):
            transform._cache.clear()


def run_ours(corpus: Corpus, pipeline: Pipeline) -> tuple[float, list[str]]:
    _clear_caches(pipeline)
    outputs = []
    started = time.perf_counter()
    for result in corpus.results:
        new, _ = transform_tool_result(result, pipeline, TransformContext())
        outputs.append(new)
    elapsed = time.perf_counter() - started
    return elapsed, [plain_text(o) for o in outputs]


def combined_regex(pipeline: Pipeline) -> re.Pattern[str]:
    """One alternation of the active detectors' patterns (inline global flags scoped to their branch)."""
    branches = []
    for transform in pipeline.transforms:
        if isinstance(transform, Redactor):
            for detector in transform.detectors:
                pattern = detector.pattern.pattern
                match = re.match(r"\(\?([aiLmsux]+)\)", pattern)
                branches.append(f"(?{match.group(1)}:{pattern[match.end() :]})" if match else f"(?:{pattern})")
    return re.compile("|".join(branches))


def run_single_regex(text: str, pattern: re.Pattern[str]) -> float:
    started = time.perf_counter()
    for _ in pattern.finditer(text):
        pass
    return time.perf_counter() - started


def detect_secrets_available() -> bool:
    try:
        import detect_secrets  # noqa: F401
    except ImportError:
        return False
    return True


def run_detect_secrets(text: str) -> tuple[float, list[tuple[int, str, str]]]:
    """detect-secrets' own file scan (all default plugins and filters) over the same text."""
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import default_settings

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as handle:
        handle.write(text)
        path = handle.name
    try:
        with default_settings():
            started = time.perf_counter()
            found = [(s.line_number, s.type, s.secret_value or "") for s in scan_file(path)]
            elapsed = time.perf_counter() - started
    finally:
        os.unlink(path)
    return elapsed, found


# --- recall --------------------------------------------------------------------------------------------------


def our_recall(corpus: Corpus, outputs: list[str], formats: tuple[str, ...]) -> tuple[int, int]:
    targets = [p for p in corpus.planted if p.format in formats]
    hidden = sum(
        1 for p in targets if _escaped(p.secret) not in outputs[p.result] and p.secret not in outputs[p.result]
    )
    return hidden, len(targets)


def _escaped(secret: str) -> str:
    return json.dumps(secret)[1:-1]


_ENTROPY_TYPES = frozenset({"Base64 High Entropy String", "Hex High Entropy String"})


def detect_secrets_recall(
    corpus: Corpus, found: list[tuple[int, str, str]], text: str, formats: tuple[str, ...]
) -> tuple[int, int]:
    """A planted secret counts as found when, on a line it occupies, detect-secrets reports a finding of a
    specific detector, or an entropy finding whose value overlaps the secret (6+ characters either way).
    Specific detectors may report only part of a match (GitHub reports `ghp`), hence the line test."""
    by_line: dict[int, list[tuple[str, str]]] = {}
    for line, kind, value in found:
        by_line.setdefault(line, []).append((kind, value))
    hits = 0
    targets = [p for p in corpus.planted if p.format in formats]
    for planted in targets:
        if any(_flagged(by_line, text, planted, form) for form in (planted.secret, _escaped(planted.secret))):
            hits += 1
    return hits, len(targets)


def _flagged(by_line: dict[int, list[tuple[str, str]]], text: str, planted: Planted, form: str) -> bool:
    start = text.find(form)
    while start >= 0:
        first = text.count("\n", 0, start) + 1
        last = first + form.count("\n")
        if planted.format == "private_key":
            first -= 1  # the BEGIN line is where a private key is reported
        for line in range(first, last + 1):
            for kind, value in by_line.get(line, []):
                overlaps = len(value) >= 6 and (value in planted.secret or planted.secret in value)
                if kind not in _ENTROPY_TYPES or overlaps:
                    return True
        start = text.find(form, start + 1)
    return False


# --- the entry point -----------------------------------------------------------------------------------------


def _median(run: Callable[[], float], rounds: int) -> float:
    samples = sorted(run() for _ in range(rounds))
    return samples[len(samples) // 2]


def _cpu_best(corpus: Corpus, build: Callable[[], Pipeline], rounds: int) -> float:
    """CPU seconds of the least disturbed of `rounds` runs over `corpus`, each through a fresh pipeline (no
    per-string result carried over from an earlier round)."""
    best = float("inf")
    for _ in range(rounds):
        pipeline = build()
        started = time.process_time()
        run_ours(corpus, pipeline)
        best = min(best, time.process_time() - started)
    return best


def transforms_benchmarks(quick: bool) -> tuple[dict[str, float], dict[str, float]]:
    """(measurements, ratios). Throughputs in MB/s over the rendered corpus; recall as fractions."""
    size = MIB if quick else 8 * MIB
    rounds = 1 if quick else 3
    corpus = make_corpus(size)
    text = "\n".join(corpus.texts)
    megabytes = corpus.size / 1e6
    redact = _standard_redact_pipeline()
    full = assemble_output(STANDARD_TRANSFORMS)
    pattern = combined_regex(redact)

    outputs: list[str] = []

    def ours() -> float:
        nonlocal outputs
        elapsed, outputs = run_ours(corpus, redact)
        return elapsed

    ours_s = _median(ours, rounds)
    full_s = _median(lambda: run_ours(corpus, full)[0], rounds)
    regex_s = _median(lambda: run_single_regex(text, pattern), rounds)
    hidden, planted = our_recall(corpus, outputs, SHARED_FORMATS)
    hidden_all, planted_all = our_recall(corpus, outputs, SHARED_FORMATS + OWN_ONLY_FORMATS)
    results: dict[str, float] = {
        "corpus MB": round(megabytes, 2),
        "planted credentials": float(planted_all),
        "standard redact MB/s": round(megabytes / ours_s, 2),
        "standard pipeline (sanitize+redact+project+annotate) MB/s": round(megabytes / full_s, 2),
        "single combined regex, one pass MB/s": round(megabytes / regex_s, 2),
        "standard redact recall (shared formats)": round(hidden / planted, 4) if planted else 1.0,
        "standard redact recall (all planted formats)": round(hidden_all / planted_all, 4) if planted_all else 1.0,
    }
    small = corpus if size == MIB else make_corpus(MIB)
    run_ours(small, _standard_redact_pipeline())  # first-use costs (compiled patterns, memos) out of the measure
    for name, build in (("standard redact", _standard_redact_pipeline),
                        ("standard pipeline", lambda: assemble_output(STANDARD_TRANSFORMS))):  # fmt: skip
        results[f"{name}, MB/s of CPU (1 MiB, fresh pipeline, best of 3)"] = round(
            small.size / 1e6 / _cpu_best(small, build, 3), 2
        )
    ratios: dict[str, float] = {"redact time / single-regex time (target <= 4)": round(ours_s / regex_s, 3)}
    if detect_secrets_available():
        ds_s, found = run_detect_secrets(text)
        ds_hits, ds_total = detect_secrets_recall(corpus, found, text, SHARED_FORMATS)
        results["detect-secrets MB/s"] = round(megabytes / ds_s, 2)
        results["detect-secrets recall (shared formats)"] = round(ds_hits / ds_total, 4) if ds_total else 1.0
        ratios["redact throughput / detect-secrets throughput (target >= 10)"] = round(ds_s / ours_s, 2)
    return results, ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a 1 MiB corpus and one round")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results, ratios = transforms_benchmarks(args.quick)
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], "results": results, "ratios": ratios}, indent=2))
        return 0
    width = max(len(k) for k in [*results, *ratios]) + 2
    for name, value in results.items():
        print(f"{name:<{width}}{value:>12}")
    if not detect_secrets_available():
        print(f"{'detect-secrets':<{width}}{'not installed':>12}")
    print()
    for name, value in ratios.items():
        print(f"{name:<{width}}{value:>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
