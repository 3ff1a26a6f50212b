"""Detection quality per detector family: recall on generated secrets, precision on near-misses.

The corpus comes from the strategies of `interceptors.testing` (drawn deterministically): for each of the
built-in detector families (93), samples of its format embedded one at a time in a supported syntax (JSON,
YAML, .env, source code, logs, …) inside a tool result, and near-misses of the family (look-alikes no
detector should report) embedded the same way. Measured, per family:

- `recall`: planted values that do not come out of a pipeline that redacts every entity
  (`{"type": "redact", "default": "redact"}`: all detectors and key rules on). Target 1.0.
- `precision`: of the findings a family's detector makes on planted values and near-misses, the share on
  planted values (attributed by scanning the rendered text). Target 0.99 or more.
- `near_miss_pass`: near-misses of the family that come out unchanged from the same pipeline.
- `standard_recall`: for the families the `standard` profile replaces (secrets, credentials), planted
  values that do not come out of the whole standard pipeline.
- `encoded_recall`: the same samples in encoded syntaxes (base64 blobs, data URLs, URL-encoding, hex,
  Kubernetes secrets), which `redact` decodes where the payload marks them: informative, no target.
- `samples`, `near_misses`: corpus sizes.

Pseudo-families: `placeholder` (secret slots holding templates or markers), `sensitive_keys` (values under
sensitive keys, standard pipeline), `unterminated_quotes` (two quoted assignments on one line with their
closing quotes cut off, standard pipeline; target 1.0), and `known:<finding>` (decoys the built-ins are known
to flag, see `interceptors.testing.KNOWN_FALSE_POSITIVES`: their `near_miss_pass` says how often they still
pass; none at present).

`python -m bench.quality [--quick] [--json]`; `quality_report(quick)` for a runner.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

RECALL_TARGET = 1.0
PRECISION_TARGET = 0.99
REDACT_ALL: dict[str, Any] = {"name": "redact-all", "transforms": [{"type": "redact", "default": "redact"}]}


def _collect(strategy: Any, count: int) -> list[Any]:
    """`count` draws from a Hypothesis strategy, the same ones on every run."""
    from hypothesis import HealthCheck, Phase, given, settings

    drawn: list[Any] = []

    @settings(
        max_examples=count, derandomize=True, database=None, phases=[Phase.generate], deadline=None,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(strategy)
    def gather(value: Any) -> None:
        drawn.append(value)

    gather()
    return drawn[:count]


def _spans(text: str, needle: str) -> list[tuple[int, int]]:
    spans, at = [], text.find(needle)
    while at >= 0 and needle:
        spans.append((at, at + len(needle)))
        at = text.find(needle, at + 1)
    return spans


def _attribute(scanner: Any, value: Any, needle: str, *, cover: bool) -> set[str]:
    """Detectors whose findings cover (or, with `cover=False`, touch) `needle` in the rendered value's strings."""
    from interceptors.testing import haystacks

    names: set[str] = set()
    for hay in haystacks(value, depth=1):
        if hay.how != "raw":
            continue
        spans = _spans(hay.text, needle)
        if not spans:
            continue
        for finding in scanner.scan(hay.text):
            for start, end in spans:
                hit = (
                    finding.start <= start and finding.end >= end
                    if cover
                    else finding.start < end and finding.end > start
                )
                if hit:
                    names.add(finding.detector.name)
    return names


def _tool_payload(embedded: Any, index: int) -> dict[str, Any]:
    from interceptors.testing import payload_for

    return payload_for("tool", embedded, ("text", "structured", "both", "meta")[index % 4])


def quality_report(quick: bool) -> dict[str, dict[str, float]]:
    """Recall and precision per detector family (see the module docstring); `quick` uses a small corpus."""
    try:
        from interceptors.testing import (
            BUILTIN_FORMATS,
            CONTEXTS,
            ENCODED_CONTEXTS,
            KNOWN_FALSE_POSITIVES,
            MIN_SECRET_LENGTH,
            NEAR_MISS_FAMILIES,
            RedactionTarget,
            embedded,
            find_leaks,
            keyed_secrets,
            known_false_positives,
            near_misses,
            placeholders,
        )
    except ImportError as exc:  # hypothesis is a development dependency
        raise RuntimeError(
            "the quality report needs the development extra: pip install 'mcp-interceptors[dev]'"
        ) from exc
    from interceptors.transforms import STANDARD_TRANSFORMS

    size = 40 if quick else 300
    everything = RedactionTarget.load(REDACT_ALL)
    standard = RedactionTarget.load(STANDARD_TRANSFORMS)
    assert everything.redactor is not None
    scanner = everything.redactor.scanner
    report: dict[str, dict[str, float]] = {}
    true_hits: Counter[str] = Counter()
    false_hits: Counter[str] = Counter()

    def leaked(target: Any, case: Any, index: int) -> bool:
        out = target.transform("tools/call", _tool_payload(case, index))
        return bool(find_leaks(out, case.secrets))

    def survived(target: Any, case: Any, index: int) -> bool:
        out = target.transform("tools/call", _tool_payload(case, index))
        texts = [hay.text for hay in _haystacks(out)]
        return all(any(d.value in t for t in texts) for d in case.decoys)

    def long_enough(sample: Any) -> bool:
        return len(sample.value) >= MIN_SECRET_LENGTH

    for name, fmt in BUILTIN_FORMATS.items():
        samples = fmt.samples.filter(long_enough)
        cases = _collect(embedded(samples, contexts=CONTEXTS, max_samples=1), size)
        row: dict[str, float] = {"samples": float(len(cases))}
        missed = 0
        for index, case in enumerate(cases):
            if leaked(everything, case, index):
                missed += 1
            for detector in _attribute(scanner, case.value, case.secrets[0].value, cover=True):
                true_hits[detector] += 1
        row["recall"] = _ratio(len(cases) - missed, len(cases))
        if any(standard.replaces(fmt.detector, e) for e in fmt.detector.entities):
            kept = [c for c in cases if standard.replaces(fmt.detector, c.secrets[0].entity)]
            row["standard_recall"] = _ratio(sum(not leaked(standard, c, i) for i, c in enumerate(kept)), len(kept))
        encoded = _collect(embedded(samples, contexts=ENCODED_CONTEXTS, max_samples=1), max(10, size // 4))
        row["encoded_recall"] = _ratio(sum(not leaked(everything, c, i) for i, c in enumerate(encoded)), len(encoded))
        report[name] = row

    def decoy_rows(label: str, strategy: Any, *, attribute: bool = True) -> None:
        cases = _collect(embedded(strategy, contexts=CONTEXTS, max_samples=1), size)
        passed = 0
        for index, case in enumerate(cases):
            if survived(everything, case, index):
                passed += 1
            if attribute:
                for detector in _attribute(scanner, case.value, case.decoys[0].value, cover=False):
                    false_hits[detector] += 1
        row = report.setdefault(label, {})
        row["near_misses"] = float(len(cases))
        row["near_miss_pass"] = _ratio(passed, len(cases))

    for family in NEAR_MISS_FAMILIES:
        decoy_rows(family, near_misses([family]))
    decoy_rows("placeholder", placeholders())
    for family in KNOWN_FALSE_POSITIVES:  # measured, not counted against precision: listed in doc/TESTING.md
        decoy_rows(f"known:{family}", known_false_positives([family]), attribute=False)

    for name in BUILTIN_FORMATS:
        row = report[name]
        row["precision"] = _ratio(true_hits[name], true_hits[name] + false_hits[name])
        row["false_positives"] = float(false_hits[name])

    keyed = _collect(keyed_secrets(), size)
    keyed_missed = 0
    for index, (key, value) in enumerate(keyed):
        node = {key: value} if index % 2 else {"items": [{key: value}]}
        payload = {"content": [{"type": "text", "text": json.dumps(node)}]} if index % 3 == 0 else {
            "content": [], "structuredContent": node}  # fmt: skip
        if find_leaks(standard.transform("tools/call", payload), [str(value)]):
            keyed_missed += 1
    report["sensitive_keys"] = {
        "samples": float(len(keyed)),
        "standard_recall": _ratio(len(keyed) - keyed_missed, len(keyed)),
    }
    report["unterminated_quotes"] = _unterminated_quotes(standard, size)
    report["overall"] = _overall(report)
    return report


def _unterminated_quotes(standard: Any, size: int) -> dict[str, float]:
    """Two quoted `secret_assignment` values on one line, both closing quotes cut off (a truncated document):
    the share of planted values that do not come out of the standard pipeline."""
    from hypothesis import strategies as st

    from interceptors.testing import BUILTIN_FORMATS, MIN_SECRET_LENGTH, find_leaks
    from interceptors.testing.formats import derived_samples

    def quoted(sample: Any) -> bool:
        at = sample.text.find(sample.value)
        end = at + len(sample.value)
        return (
            len(sample.value) >= MIN_SECRET_LENGTH
            and at > 0
            and sample.text[at - 1] in "\"'"
            and (sample.text[end : end + 1] == sample.text[at - 1])
        )

    # Quoted values come from the pattern-derived samples (the family's spec writes bare values).
    samples = derived_samples(BUILTIN_FORMATS["secret_assignment"].detector)[0].filter(quoted)
    pairs = _collect(st.tuples(samples, samples).filter(lambda p: p[0].value not in p[1].text), size)
    missed = planted = 0
    for first, second in pairs:
        cut = [s.text[: s.text.rfind(s.value) + len(s.value)] for s in (first, second)]
        payload = {"content": [{"type": "text", "text": f"{cut[0]} then {cut[1]} done"}]}
        out = standard.transform("tools/call", payload)
        planted += 2
        missed += len(find_leaks(out, [first.value, second.value]))
    return {"samples": float(planted), "standard_recall": _ratio(planted - missed, planted)}


def _haystacks(value: Any) -> Any:
    from interceptors.testing import haystacks

    return haystacks(value)


def _ratio(part: float, whole: float) -> float:
    return 1.0 if whole == 0 else round(part / whole, 4)


def _overall(report: dict[str, dict[str, float]]) -> dict[str, float]:
    families = [row for name, row in report.items() if "recall" in row]
    below_recall = [row for row in families if row["recall"] < RECALL_TARGET]
    below_precision = [row for row in families if row.get("precision", 1.0) < PRECISION_TARGET]
    passes = [row["near_miss_pass"] for name, row in report.items() if "near_miss_pass" in row and ":" not in name]
    standard = [row["standard_recall"] for row in families if "standard_recall" in row]
    return {
        "families": float(len(families)),
        "min_recall": min((row["recall"] for row in families), default=1.0),
        "min_precision": min((row.get("precision", 1.0) for row in families), default=1.0),
        "min_near_miss_pass": min(passes, default=1.0),
        "min_standard_recall": min(standard, default=1.0),
        "below_recall_target": float(len(below_recall)),
        "below_precision_target": float(len(below_precision)),
    }


def failing_families(report: dict[str, dict[str, float]]) -> list[str]:
    """Families under a target: recall below 1.0, precision below 0.99, or near-misses altered."""
    out = []
    for name, row in report.items():
        if name == "overall" or name.startswith("known:"):
            continue
        recall = min(row.get("recall", 1.0), row.get("standard_recall", 1.0))
        precision = min(row.get("precision", 1.0), row.get("near_miss_pass", 1.0))
        if recall < RECALL_TARGET or precision < PRECISION_TARGET:
            out.append(name)
    return out


COLUMNS: Sequence[tuple[str, str]] = (
    ("recall", "recall"), ("precision", "precision"), ("near_miss_pass", "near-miss pass"),
    ("standard_recall", "standard recall"), ("encoded_recall", "encoded recall"), ("samples", "samples"),
    ("near_misses", "near-misses"),
)  # fmt: skip


def format_report(report: dict[str, dict[str, float]]) -> str:
    """A Markdown table, families first, then the pseudo-families and the overall line."""
    header = "| family | " + " | ".join(title for _, title in COLUMNS) + " |"
    lines = [header, "| --- |" + " ---: |" * len(COLUMNS)]

    def cell(row: dict[str, float], key: str) -> str:
        if key not in row:
            return ""
        return f"{int(row[key])}" if key in ("samples", "near_misses") else f"{row[key]:.4f}"

    for name, row in report.items():
        if name == "overall":
            continue
        lines.append(f"| {name} | " + " | ".join(cell(row, key) for key, _ in COLUMNS) + " |")
    overall = report.get("overall", {})
    lines.append("")
    lines.append("overall: " + ", ".join(f"{k} {v:g}" for k, v in overall.items()))
    failing = failing_families(report)
    lines.append("below target: " + (", ".join(failing) if failing else "none"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small corpus (seconds rather than a minute)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    report = quality_report(args.quick)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(format_report(report))
        print(f"({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
