"""Detection quality on vendor-format corpora, side by side with detect-secrets (and secretlint, when found).

- **Recall per family**: for every built-in family with a format spec (`Detector.spec`: the vendor's
  documented format, written apart from the detector's pattern), samples drawn from the spec and planted in
  seven syntaxes (prose, JSON, YAML, .env, a shell export, a log line, a Markdown code span) inside tool
  results; a sample is caught when it does not come out of the standard pipeline. Target >= 0.98 per family.
- **Evasions**: the same samples with a zero-width space, a soft hyphen or a word joiner inside, fullwidth
  letters, a `\\u` escape or an HTML character reference for one character: caught the same way.
- **Precision**: the share of items of the benign corpus (`interceptors.testing.benign`, 1,200 items, 16
  categories) the standard pipeline alters. Target <= 0.5%.
- **detect-secrets** (PyPI, default plugins and filters) and **secretlint** (npm, recommended preset; only
  when `SECRETLINT` names its binary or `/work/scratch15/node_modules/.bin/secretlint` exists) scan the same
  planted lines: a sample counts as found when they report a finding on its line.
- **Throughput**: the standard `redact` step over the whole corpus vs detect-secrets' scan of the same text,
  in CPU time (this process) for both.
- **Hostile inputs**: 1 MiB inputs built to trip backtracking (repeated prefixes and labels, long runs,
  unterminated quotes, escapes, invisible characters): the slowest scan, target < 1 s.

`python -m bench.vendor_quality [--quick] [--json]`; `vendor_report(quick)` for `bench --quality`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

from interceptors.testing.benign import altered, benign_corpus
from interceptors.transforms import STANDARD_TRANSFORMS, Redactor, TransformContext, assemble_output
from interceptors.transforms.base import Pipeline
from interceptors.transforms.catalog import BUILTIN_DETECTORS
from interceptors.transforms.channels import transform_tool_result
from interceptors.transforms.detectors import Detector, Scanner
from interceptors.transforms.entities import fold_for_hints
from interceptors.transforms.normalize import needs_normalizing, normalize_for_matching
from interceptors.transforms.tokenspec import parse_spec

RECALL_TARGET = 0.98
ALTERED_TARGET = 0.005
SYNTAXES = (
    "The service answered with {t} and carried on.",
    '{{"config": {{"credential": "{t}", "region": "eu-west-1"}}}}',
    "settings:\n  value: {t}\n  retries: 3",
    "VALUE={t}\nDEBUG=false",
    "export VALUE='{t}'",
    "2026-06-01T10:00:00Z INFO auth ok value={t} latency_ms=12",
    "Use `{t}` for the staging calls.",
)
SECRETLINT_DEFAULT = "/work/scratch15/node_modules/.bin/secretlint"


def _evasions(value: str, rng: random.Random) -> dict[str, str]:
    cut = max(1, min(len(value) - 1, 4 + rng.randint(0, 6)))
    head, tail = value[:cut], value[cut:]
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in value)
    first = value[0]
    return {
        "zero_width_space": head + "\u200b" + tail,
        "soft_hyphen": head + "\u00ad" + tail,
        "word_joiner": head + "\u2060" + tail,
        "fullwidth": fullwidth,
        "unicode_escape": f"\\u{ord(first):04x}" + value[1:],
        "html_entity": f"&#{ord(first)};" + value[1:],
    }


def _families() -> list[Detector]:
    return [d for d in BUILTIN_DETECTORS if d.spec and d.category in ("secret", "credential")]


def _leaked(out: Any, value: str) -> bool:
    text = json.dumps(out, ensure_ascii=False)
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    return value in text or escaped in text


def _standard_pipeline() -> Pipeline:
    return assemble_output(STANDARD_TRANSFORMS)


def vendor_corpus(per_family: int, seed: int = 20261201) -> list[tuple[str, str, str]]:
    """`(family, planted text, secret value)` drawn from each family's spec, in the seven syntaxes."""
    rng = random.Random(seed)
    out = []
    for detector in _families():
        spec = parse_spec(detector.spec)
        for index in range(per_family):
            text, value = spec.generate(rng)
            syntax = SYNTAXES[index % len(SYNTAXES)]
            if "\n" in text and index % len(SYNTAXES) in (1, 4):
                syntax = SYNTAXES[0]  # a multi-line key is not a JSON string or a quoted shell word
            out.append((detector.name, syntax.format(t=text), value))
    return out


def _recall(corpus: list[tuple[str, str, str]], pipeline: Pipeline) -> dict[str, float]:
    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for family, text, value in corpus:
        out, _ = transform_tool_result({"content": [{"type": "text", "text": text}]}, pipeline, TransformContext())
        total[family] += 1
        caught[family] += not _leaked(out, value)
    return {family: round(caught[family] / total[family], 4) for family in total}


def _evasion_recall(corpus: list[tuple[str, str, str]], pipeline: Pipeline) -> dict[str, float]:
    rng = random.Random(5)
    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for _, text, value in corpus:
        if "\n" in value:
            continue
        for name, evaded in _evasions(value, rng).items():
            payload = {"content": [{"type": "text", "text": text.replace(value, evaded)}]}
            out, _ = transform_tool_result(payload, pipeline, TransformContext())
            total[name] += 1
            caught[name] += not _leaked(out, evaded) and not _leaked(out, value)
    return {name: round(caught[name] / total[name], 4) for name in total}


def _precision(count: int) -> tuple[float, dict[str, float]]:
    pipeline = _standard_pipeline()
    changed: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for category, payload in benign_corpus(count):
        out, _ = transform_tool_result(payload, pipeline, TransformContext())
        seen[category] += 1
        changed[category] += altered(payload, out)
    rate = sum(changed.values()) / max(1, sum(seen.values()))
    return round(rate, 4), {c: round(changed[c] / seen[c], 4) for c in seen}


def _line_hits(corpus: list[tuple[str, str, str]], found_lines: set[int]) -> dict[str, float]:
    """Per family: the share of samples whose lines (one sample per block of lines) carry a finding."""
    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    line = 1
    for family, text, _ in corpus:
        lines = text.count("\n") + 1
        total[family] += 1
        caught[family] += any(n in found_lines for n in range(line, line + lines))
        line += lines + 1  # a blank line between samples
    return {family: round(caught[family] / total[family], 4) for family in total}


def _corpus_file(corpus: list[tuple[str, str, str]]) -> str:
    return "".join(text + "\n\n" for _, text, _ in corpus)


def detect_secrets_run(corpus: list[tuple[str, str, str]]) -> tuple[dict[str, float], float] | None:
    try:
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as handle:
        handle.write(_corpus_file(corpus))
        path = handle.name
    try:
        with default_settings():
            started = time.process_time()  # CPU time, as for ours: a busy machine moves both alike
            lines = {secret.line_number for secret in scan_file(path)}
            elapsed = time.process_time() - started
    finally:
        os.unlink(path)
    return _line_hits(corpus, lines), elapsed


def secretlint_binary() -> str | None:
    candidate = os.environ.get("SECRETLINT") or SECRETLINT_DEFAULT
    return candidate if os.path.exists(candidate) and shutil.which("node") else None


def secretlint_run(corpus: list[tuple[str, str, str]]) -> dict[str, float] | None:
    """secretlint's recommended preset over the corpus, one file per family (its JSON output repeats each file)."""
    binary = secretlint_binary()
    if binary is None:
        return None
    by_family: dict[str, list[tuple[str, str, str]]] = {}
    for item in corpus:
        by_family.setdefault(item[0], []).append(item)
    hits: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, ".secretlintrc.json")
        with open(config, "w", encoding="utf-8") as handle:
            json.dump({"rules": [{"id": "@secretlint/secretlint-rule-preset-recommend"}]}, handle)
        paths = {}
        for family, items in by_family.items():
            paths[family] = os.path.join(folder, f"{family}.txt")
            with open(paths[family], "w", encoding="utf-8") as handle:
                handle.write(_corpus_file(items))
        names = list(by_family)
        for begin in range(0, len(names), 8):
            chunk = names[begin : begin + 8]
            report = os.path.join(folder, "report.json")  # a pipe would cut node's output at 64 KiB
            subprocess.run(
                [binary, "--format", "json", "--output", report, "--secretlintrc", config, *(paths[n] for n in chunk)],
                capture_output=True, text=True, timeout=900,
                cwd=os.path.dirname(os.path.dirname(os.path.dirname(binary))),
            )  # fmt: skip
            try:
                with open(report, encoding="utf-8") as handle:
                    results = json.load(handle)
            except (OSError, json.JSONDecodeError):
                return None
            found_by_path = {
                r["filePath"]: {m["loc"]["start"]["line"] for m in r.get("messages", []) if "loc" in m} for r in results
            }
            for family in chunk:
                hits.update(_line_hits(by_family[family], found_by_path.get(paths[family], set())))
    return hits


def _throughput(corpus: list[tuple[str, str, str]], ds_seconds: float | None) -> dict[str, float]:
    redact = next(s for s in STANDARD_TRANSFORMS["transforms"] if isinstance(s, dict) and s["type"] == "redact")
    redactor = Redactor({k: v for k, v in redact.items() if k != "type"})
    pipeline = Pipeline((redactor,))
    # Results of a realistic size (40 samples, about 4 KB each), not one tiny result per sample.
    texts = [text for _, text, _ in corpus]
    batches = ["\n\n".join(texts[i : i + 40]) for i in range(0, len(texts), 40)]
    payloads = [{"content": [{"type": "text", "text": batch}]} for batch in batches]
    size = sum(len(text.encode()) for _, text, _ in corpus) / 1e6
    redactor._cache.clear()
    started = time.process_time()
    for payload in payloads:
        transform_tool_result(payload, pipeline, TransformContext())
    ours = time.process_time() - started
    row = {"ours MB/s": round(size / ours, 2)}
    if ds_seconds:
        row["detect-secrets MB/s"] = round(size / ds_seconds, 2)
        row["ours / detect-secrets (target >= 10)"] = round(ds_seconds / ours, 2)
    return row


def hostile_inputs() -> dict[str, str]:
    """1 MiB inputs shaped to trip a backtracking pattern."""
    size = 1 << 20
    hints = sorted({h for d in BUILTIN_DETECTORS for h in d.hints if len(h) >= 2})

    def fill(unit: str) -> str:
        return (unit * (size // max(1, len(unit)) + 1))[:size]

    inputs = {
        "letters": fill("a"),
        "base64": fill("aB3+/"),
        "hex": fill("0f"),
        "digits_colon": fill("1234567890:"),
        "password_labels": fill("password="),
        "password_quotes": fill('password="'),
        "escaped_quotes": fill('\\"password\\": \\"'),
        "mysql_p": fill("mysql -p"),
        "curl_u": fill("-u a:"),
        "netrc": fill("login x "),
        "unicode_escapes": fill("\\u0061"),
        "html_references": fill("&#97;"),
        "zero_width": fill("a\u200b"),
        "fullwidth": fill("\uff41"),
        "urls": fill("https://a:"),
        "private_key_begin": fill("-----BEGIN PRIVATE KEY-----"),
        "putty_lines": "Private-Lines: 9\n" + fill("A" * 100 + "\n"),
        "jwt_prefix": fill("eyJa."),
        "dots": fill("a."),
        "dashes": fill("a-"),
    }
    for hint in hints:
        inputs[f"hint:{hint}"] = fill(hint)
    return inputs


def _hostile(quick: bool) -> dict[str, float | str]:
    """Per hostile input: the normalisation step and every detector's pattern alone (what must be linear), and
    the whole scan with validators and findings (informative: a megabyte of real findings costs their number)."""
    items = hostile_inputs()
    if quick:
        items = dict(list(items.items())[:24])
    worst_pattern = (0.0, "")
    worst_normal = (0.0, "")
    worst_scan = (0.0, "")
    scanner = Scanner(BUILTIN_DETECTORS)
    for name, text in items.items():
        started = time.perf_counter()
        normal = normalize_for_matching(text)[0] if needs_normalizing(text) else text
        elapsed = time.perf_counter() - started
        worst_normal = max(worst_normal, (elapsed, name))
        folded = fold_for_hints(normal)
        for detector in BUILTIN_DETECTORS:
            if detector.hints and not any(hint in folded for hint in detector.hints):
                continue  # the scanner never runs a detector whose hints the text lacks
            begun = time.perf_counter()
            for _ in detector.pattern.finditer(normal):
                pass
            worst_pattern = max(worst_pattern, (time.perf_counter() - begun, f"{detector.name} on {name}"))
        begun = time.perf_counter()
        scanner.scan(text)
        worst_scan = max(worst_scan, (time.perf_counter() - begun, name))
    return {
        "inputs": float(len(items)),
        "slowest_pattern_s": round(worst_pattern[0], 3), "slowest_pattern": worst_pattern[1],
        "slowest_normalisation_s": round(worst_normal[0], 3), "slowest_normalisation": worst_normal[1],
        "slowest_full_scan_s": round(worst_scan[0], 3), "slowest_full_scan": worst_scan[1],
    }  # fmt: skip


def vendor_report(quick: bool) -> dict[str, Any]:
    per_family = 50 if quick else 200
    corpus = vendor_corpus(per_family)
    pipeline = _standard_pipeline()
    ours = _recall(corpus, pipeline)
    ds = detect_secrets_run(corpus)
    sl = secretlint_run(corpus)
    families = {}
    for family, recall in ours.items():
        row: dict[str, float | str] = {"recall": recall}
        if ds is not None:
            row["detect-secrets"] = ds[0].get(family, 0.0)
        if sl is not None:
            row["secretlint"] = sl.get(family, 0.0)
        families[family] = row
    altered_rate, by_category = _precision(400 if quick else 1200)
    report: dict[str, Any] = {
        "families": families,
        "evasions": _evasion_recall(corpus[:: 4 if quick else 2], pipeline),
        "precision": {"benign_items": 400 if quick else 1200, "altered": altered_rate, "by_category": by_category},
        "throughput": _throughput(corpus, ds[1] if ds is not None else None),
        "hostile_1mib": _hostile(quick),
    }
    below = [f for f, r in families.items() if float(r["recall"]) < RECALL_TARGET]
    behind = [
        f for f, r in families.items()
        if any(float(r["recall"]) < float(r[k]) for k in ("detect-secrets", "secretlint") if k in r)
    ]  # fmt: skip
    report["summary"] = {
        "families": len(families),
        "min_recall": min(float(r["recall"]) for r in families.values()),
        "below_recall_target": below,
        "behind_a_peer": behind,
        "altered_within_target": altered_rate <= ALTERED_TARGET,
        "secretlint": "run" if sl is not None else "not available",
    }
    return report


def format_vendor_report(report: dict[str, Any]) -> str:
    peers = [k for k in ("detect-secrets", "secretlint") if any(k in r for r in report["families"].values())]
    lines = ["| family | ours | " + " | ".join(peers) + " |", "| --- | ---: |" + " ---: |" * len(peers)]
    for family, row in report["families"].items():
        cells = " | ".join(f"{row.get(p, 0.0):.3f}" for p in peers)
        lines.append(f"| {family} | {row['recall']:.3f} | {cells} |")
    lines.append("")
    lines.append("evasions: " + ", ".join(f"{k} {v:.3f}" for k, v in report["evasions"].items()))
    precision = report["precision"]
    lines.append(f"benign items altered: {precision['altered']:.4f} of {precision['benign_items']} "
                 + "(" + ", ".join(f"{k} {v:.3f}" for k, v in precision["by_category"].items() if v) + ")")  # fmt: skip
    lines.append("throughput: " + ", ".join(f"{k} {v}" for k, v in report["throughput"].items()))
    lines.append("hostile 1 MiB: " + ", ".join(f"{k} {v}" for k, v in report["hostile_1mib"].items()))
    lines.append("summary: " + json.dumps(report["summary"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vendor_quality", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = vendor_report(args.quick)
    print(json.dumps(report, indent=2) if args.json else format_vendor_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
