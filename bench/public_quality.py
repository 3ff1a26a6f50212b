"""Detection quality on corpora built from public material, ours side by side with detect-secrets and CredSweeper.

The corpora are built by `bench.public_corpus` from checkouts of gitleaks, CredSweeper and detect-secrets and
from installed packages, outside the repository; a corpus that was not built is reported as "not built".
Every scanner sees the same items in the same run:

- **ours**: each item as a tool result (a text block; an image as an image block) through the `standard`
  output pipeline, in process (`transform_tool_result`), and a sample through a real `mcp-interceptors proxy
  --policy standard` subprocess (`gateway` rows: the share of items whose result through the gateway equals
  the in-process one, and the gateway's own rates).
- **detect-secrets** (default plugins and filters) and **CredSweeper** (default rules, filters and ML), when
  installed: each item written to its own `.txt` file; a peer not installed is skipped and named.

Definitions, the same for every scanner:

- an item is **flagged** by ours when the standard pipeline's output differs from the input (our own report
  in `_meta` aside: `interceptors.testing.benign.altered`); by a peer when it reports any finding in the item;
- **recall** (secret corpora): flagged items / items; for ours also **value recall**: items whose planted
  value (when the corpus knows it) no longer appears in the output;
- **altered** (benign corpora): flagged items / items; **precision** over a pair of corpora (the gitleaks
  tps/fps, CredSweeper's positives/negatives): flagged positives / all flagged items.

Two rows are derived from those corpora rather than read from one:

- **families** (secret corpora): the share of families every item of which ours flags, per split;
- **encoded_public**: labelled single-line secrets nobody here wrote (one line per gitleaks family, every
  second CredSweeper credential) rewritten in every encoding of the testing kit's `ENCODERS` (bare and
  labelled base64, base64 twice, hex, `%XX`, quoted-printable, wrapping, escapes, gzip, homoglyphs,
  invisible characters). Ours: **recall** is flagged items, **value recall** items of which no piece of the
  encoded secret comes out (`interceptors.testing.encodings.leaked`), and **given plain** the value recall
  over the items whose plain line ours redacts; peers: flagged items, and flagged given their plain flag.

Each corpus is split by a hash of the item id into `tune` and `heldout`; both are reported (judge on
`heldout`). `python -m bench.public_quality [--quick] [--json] [--no-gateway] [--latest PATH]`.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .corpus_upstream import result_of
from .public_corpus import corpora_dir, load

CORPORA: tuple[tuple[str, str, str], ...] = (
    ("gitleaks_generated", "secret", "secrets drawn from gitleaks' rules, in gitleaks' context shapes"),
    ("gitleaks_tps", "secret", "gitleaks maintainers' literal true positives"),
    ("gitleaks_fps", "benign", "gitleaks maintainers' literal false positives"),
    ("credsweeper_pos", "secret", "CredSweeper's labelled credentials (lines its expected report lists)"),
    ("credsweeper_neg", "benign", "CredSweeper's labelled non-credentials (rule matches its report rejects)"),
    ("detect_secrets_pos", "secret", "detect-secrets' test data (lines its own scan reports)"),
    ("realworld_benign", "benign", "real files of installed packages (sources, docs, digests, certs, images)"),
    ("tool_outputs", "benign", "realistic benign tool outputs built from public material (40 categories)"),
)
PEERS = ("detect-secrets", "CredSweeper")
ENCODED = "encoded_public"
ENCODED_SOURCES = ("gitleaks_generated", "credsweeper_pos")
SPLITS = ("heldout", "tune")


@dataclass
class Outcome:
    flagged: bool
    value_gone: bool | None
    before: str
    after: str


@dataclass
class Run:
    items: list[dict[str, Any]]
    ours: list[Outcome] = field(default_factory=list)
    peers: dict[str, list[bool] | None] = field(default_factory=dict)


def _payload(item: dict[str, Any]) -> dict[str, Any]:
    return result_of(item)


def _text_of(result: Any) -> str:
    try:
        first = result["content"][0]
        return str(first.get("text", first.get("data", "")))
    except (KeyError, IndexError, TypeError, AttributeError):
        return json.dumps(result)


def run_ours(items: list[dict[str, Any]]) -> tuple[list[Outcome], float]:
    from interceptors.testing.benign import altered
    from interceptors.transforms import STANDARD_TRANSFORMS, TransformContext, assemble_output
    from interceptors.transforms.channels import transform_tool_result

    pipeline = assemble_output(STANDARD_TRANSFORMS)
    outcomes = []
    started = time.process_time()
    for item in items:
        payload = _payload(item)
        out, _ = transform_tool_result(payload, pipeline, TransformContext())
        after = _text_of(out)
        secret = item.get("secret")
        gone = None if not secret else secret not in json.dumps(out, ensure_ascii=False) and secret not in after
        outcomes.append(Outcome(altered(payload, out), gone, item["text"], after))
    return outcomes, time.process_time() - started


def _write_items(items: list[dict[str, Any]], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, item in enumerate(items):
        path = folder / f"{index:05d}.txt"
        path.write_text(item["text"], encoding="utf-8")
        paths.append(path)
    return paths


def run_detect_secrets(paths: list[Path]) -> tuple[list[bool], float] | None:
    try:
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    flags = []
    started = time.process_time()
    with default_settings():
        for path in paths:
            flags.append(any(True for _ in scan_file(str(path))))
    return flags, time.process_time() - started


def credsweeper_available() -> bool:
    try:
        import credsweeper  # noqa: F401
    except ImportError:
        return False
    return True


def run_credsweeper(folder: Path) -> float | None:
    """CredSweeper's CLI (default rules, filters and ML) over the folder, once; its report is written beside
    the folder (`credsweeper.json`). Returns the wall time, or None when CredSweeper is not installed."""
    if not credsweeper_available():
        return None
    report = folder.parent / "credsweeper.json"
    argv = [sys.executable, "-m", "credsweeper", "--path", str(folder), "--save-json", str(report), "--no-stdout",
            "--log", "error"]  # fmt: skip
    started = time.time()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0 or not report.is_file():
        raise RuntimeError(f"CredSweeper failed: {done.stderr[-500:]}")
    return time.time() - started


def _rates(flags: Sequence[bool], mask: Sequence[bool]) -> tuple[float, int]:
    chosen = [f for f, m in zip(flags, mask, strict=True) if m]
    return (round(sum(chosen) / len(chosen), 4) if chosen else float("nan")), len(chosen)


def _diff_snippet(before: str, after: str, width: int = 60) -> str:
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            lo = max(0, i1 - width // 2)
            return (f"…{before[lo:i1]}⟦{before[i1:i2][:width]}⟧→⟦{after[j1:j2][:width]}⟧{before[i2:i2 + width // 2]}…"
                    .replace("\n", "⏎"))  # fmt: skip
    return "(no text change)"


def gateway_sample(items: list[dict[str, Any]], inprocess: list[Outcome], count: int) -> dict[str, Any]:
    """`count` items (every k-th) through a real `proxy --policy standard` subprocess: agreement with the
    in-process result, and the gateway's flagged share."""
    from interceptors.testing.benign import altered

    if not items or count <= 0:
        return {}
    step = max(1, len(items) // count)
    chosen = list(range(0, len(items), step))[:count]
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "items.jsonl"
        path.write_text("".join(json.dumps(items[i]) + "\n" for i in chosen), encoding="utf-8")
        env = {**os.environ, "CORPUS_ITEMS": str(path), "PYTHONPATH": str(root)}
        argv = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "standard", "--",
                sys.executable, "-m", "bench.corpus_upstream"]  # fmt: skip
        process = subprocess.Popen(argv, cwd=str(root), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)  # fmt: skip
        assert process.stdin is not None and process.stdout is not None

        def ask(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            assert process.stdin is not None and process.stdout is not None
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            for line in process.stdout:
                answer = json.loads(line)
                if answer.get("id") == request_id and "method" not in answer:
                    return dict(answer)
            raise RuntimeError("the gateway closed its output")

        try:
            ask(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "bench", "version": "1"}})  # fmt: skip
            process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
            process.stdin.flush()
            same = flagged = 0
            for n, index in enumerate(chosen):
                answer = ask(n + 1, "tools/call", {"name": "item", "arguments": {"index": n}})
                result = answer.get("result") or {}
                flagged += altered(_payload(items[index]), result)
                same += _text_of(result) == inprocess[index].after
        finally:
            process.stdin.close()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return {"items": len(chosen), "same_as_in_process": round(same / len(chosen), 4),
            "flagged": round(flagged / len(chosen), 4)}  # fmt: skip


def public_report(
    quick: bool = False, gateway: int = 40, folder: Path | None = None, peers: bool = True, encoded: bool = True
) -> dict[str, Any]:
    """The report (see the module docstring); corpora not built are listed under `not_built`."""
    folder = folder or corpora_dir()
    report: dict[str, Any] = {"corpora": {}, "not_built": [], "peers_skipped": [], "folder": str(folder)}
    runs: dict[str, Run] = {}
    for name, _, _ in CORPORA:
        items = load(name, folder)
        if items is None:
            report["not_built"].append(name)
            continue
        if quick:
            items = items[::4]
        runs[name] = Run(items)
    if not runs:
        return report
    if encoded and (derived := encoded_items(runs)):
        runs[ENCODED] = Run(derived[::4] if quick else derived)
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        files = Path(scratch) / "items"
        all_paths: dict[str, list[Path]] = {}
        for name, run in runs.items():
            run.ours, seconds = run_ours(run.items)
            if name == ENCODED:
                _encoded_value_gone(run)
            timings["ours"] = timings.get("ours", 0.0) + seconds
            all_paths[name] = _write_items(run.items, files / name)
        ds = {name: run_detect_secrets(paths) if peers else None for name, paths in all_paths.items()}
        if not peers:
            report["peers_skipped"].append("detect-secrets and CredSweeper (--no-peers)")
        elif any(v is None for v in ds.values()):
            report["peers_skipped"].append("detect-secrets (not installed: pip install detect-secrets)")
        cs_seconds = run_credsweeper(files) if peers else None
        if cs_seconds is None and peers:
            report["peers_skipped"].append("CredSweeper (not installed: pip install credsweeper)")
        elif cs_seconds is not None:
            timings["CredSweeper (wall)"] = cs_seconds
            _credsweeper_by_path(files, runs)
        for name, run in runs.items():
            result = ds[name]
            run.peers["detect-secrets"] = None if result is None else result[0]
            timings["detect-secrets"] = timings.get("detect-secrets", 0.0) + (0 if result is None else result[1])
    size_mb = sum(len(i["text"].encode()) for run in runs.values() for i in run.items) / 1e6
    report["cpu_seconds"] = {k: round(v, 2) for k, v in timings.items()}
    report["megabytes"] = round(size_mb, 2)
    for name, kind, title in CORPORA:
        if name not in runs:
            continue
        report["corpora"][name] = _corpus_rows(runs[name], kind, title)
        if gateway:
            report["corpora"][name]["gateway"] = gateway_sample(
                [i for i in runs[name].items if i["split"] == "heldout"],
                [o for o, i in zip(runs[name].ours, runs[name].items, strict=True) if i["split"] == "heldout"],
                gateway // (2 if quick else 1),
            )
    if ENCODED in runs:
        report["corpora"][ENCODED] = _encoded_rows(runs[ENCODED], runs)
    report["precision"] = _precision(runs)
    return report


def _credsweeper_by_path(files: Path, runs: dict[str, Run]) -> None:
    """Re-attribute CredSweeper's findings by corpus folder (its report keeps each finding's path)."""
    report = files.parent / "credsweeper.json"
    hit: set[tuple[str, str]] = set()
    for finding in json.loads(report.read_text(encoding="utf-8")):
        for line in finding.get("line_data_list", []):
            parts = Path(line["path"]).parts
            for at, part in enumerate(parts):
                if part in runs and at + 1 < len(parts):
                    hit.add((part, parts[at + 1]))
    for name, run in runs.items():
        run.peers["CredSweeper"] = [(name, f"{index:05d}.txt") in hit for index in range(len(run.items))]


def _corpus_rows(run: Run, kind: str, title: str) -> dict[str, Any]:
    rows: dict[str, Any] = {"title": title, "kind": kind, "items": len(run.items)}
    metric = "recall" if kind == "secret" else "altered"
    ours_flags = [o.flagged for o in run.ours]
    for split in (*SPLITS, "all"):
        mask = [split == "all" or i["split"] == split for i in run.items]
        row: dict[str, Any] = {}
        row["ours"], row["items"] = _rates(ours_flags, mask)
        if kind == "secret":
            known = [m and o.value_gone is not None for o, m in zip(run.ours, mask, strict=True)]
            if any(known):
                row["ours_value_recall"], _ = _rates([bool(o.value_gone) for o in run.ours], known)
            row["ours_families"], row["families"] = _families_caught(run, mask)
        for peer in PEERS:
            flags = run.peers.get(peer)
            if flags is not None:
                row[peer], _ = _rates(flags, mask)
        rows[split] = row
    rows["metric"] = metric
    if kind == "secret":
        missed: Counter[str] = Counter(i["family"] for i, o in zip(run.items, run.ours, strict=True) if not o.flagged)
        rows["missed_families"] = dict(missed.most_common(40))
        peer_only: Counter[str] = Counter()
        for index, (item, outcome) in enumerate(zip(run.items, run.ours, strict=True)):
            if not outcome.flagged and any((run.peers.get(p) or [False] * (index + 1))[index] for p in PEERS):
                peer_only[item["family"]] += 1
        rows["missed_but_a_peer_caught"] = dict(peer_only.most_common(25))
        rows["miss_examples"] = [
            {"family": i["family"], "text": i["text"][:160]}
            for i, o in zip(run.items, run.ours, strict=True) if not o.flagged
        ][:12]  # fmt: skip
    else:
        altered_by: Counter[str] = Counter(i["family"] for i, o in zip(run.items, run.ours, strict=True) if o.flagged)
        seen: Counter[str] = Counter(i["family"] for i in run.items)
        rows["altered_by_category"] = {k: f"{v}/{seen[k]}" for k, v in altered_by.most_common(50)}
        examples: dict[str, list[str]] = {}
        for item, outcome in zip(run.items, run.ours, strict=True):
            if outcome.flagged and len(examples.setdefault(item["family"], [])) < 3:
                examples[item["family"]].append(
                    "(image data changed)" if str(item.get("kind", "")).startswith("image")
                    else _diff_snippet(outcome.before, outcome.after))  # fmt: skip
        rows["altered_examples"] = examples
    return rows


def _families_caught(run: Run, mask: Sequence[bool]) -> tuple[float, int]:
    """The share of families (among the masked items) every item of which ours flags, and their count."""
    missed: dict[str, bool] = {}
    for item, outcome, chosen in zip(run.items, run.ours, mask, strict=True):
        if chosen:
            missed[item["family"]] = missed.get(item["family"], False) or not outcome.flagged
    return (round(sum(not m for m in missed.values()) / len(missed), 4) if missed else float("nan")), len(missed)


def encoded_items(runs: dict[str, Run]) -> list[dict[str, Any]]:
    """`encoded_public`'s items (see the module docstring), from the loaded source corpora; each keeps the index
    of its plain line in `plain` (`(corpus, index)`) and the pieces that must not come out in `pieces`."""
    from interceptors.testing.encodings import encode_spelled

    items: list[dict[str, Any]] = []
    for source in ENCODED_SOURCES:
        run = runs.get(source)
        if run is None:
            continue
        seen: set[tuple[str, str]] = set()
        eligible = 0
        for index, item in enumerate(run.items):
            text, value = item["text"].strip(), item.get("secret")
            if not isinstance(value, str) or len(value) < 8 or value not in text or "\n" in text or len(text) > 2000:
                continue
            if source == "gitleaks_generated":
                if (item["split"], item["family"]) in seen:
                    continue
                seen.add((item["split"], item["family"]))
            else:
                eligible += 1
                if eligible % 2:
                    continue
            for case in encode_spelled(item["family"], text, value):
                items.append({"id": f"{item['id']}:{case.encoding}", "corpus": ENCODED,
                              "family": f"{source}:{case.encoding}", "encoding": case.encoding, "label": "secret",
                              "text": case.text, "secret": value, "split": item["split"],
                              "pieces": list(case.pieces), "plain": [source, index]})  # fmt: skip
    return items


def _encoded_value_gone(run: Run) -> None:
    """Value recall for encoded items: no piece of the encoded secret (nor the value) in the output."""
    from interceptors.testing.encodings import EncodedCase, leaked

    for item, outcome in zip(run.items, run.ours, strict=True):
        case = EncodedCase(item["family"], item["encoding"], item["text"], item["secret"], tuple(item["pieces"]))
        outcome.value_gone = not leaked(case, outcome.after)


def _encoded_rows(run: Run, runs: dict[str, Run]) -> dict[str, Any]:
    rows: dict[str, Any] = {"title": "public labelled secrets in every encoding of the kit", "kind": "secret",
                            "items": len(run.items), "metric": "recall"}  # fmt: skip

    def plain_flag(item: dict[str, Any], scanner: str) -> bool:
        source, index = item["plain"]
        if scanner == "ours":
            return bool(runs[source].ours[index].value_gone)
        flags = runs[source].peers.get(scanner)
        return bool(flags and flags[index])

    for split in (*SPLITS, "all"):
        mask = [split == "all" or i["split"] == split for i in run.items]
        row: dict[str, Any] = {}
        row["ours"], row["items"] = _rates([o.flagged for o in run.ours], mask)
        gone = [bool(o.value_gone) for o in run.ours]
        row["ours_value_recall"], _ = _rates(gone, mask)
        given = [m and plain_flag(i, "ours") for i, m in zip(run.items, mask, strict=True)]
        row["ours_given_plain"], row["items_given_plain"] = _rates(gone, given)
        for peer in PEERS:
            flags = run.peers.get(peer)
            if flags is not None:
                row[peer], _ = _rates(flags, mask)
                peer_given = [m and plain_flag(i, peer) for i, m in zip(run.items, mask, strict=True)]
                row[f"{peer}_given_plain"], _ = _rates(flags, peer_given)
        rows[split] = row
    by_encoding: dict[str, dict[str, float]] = {}
    for encoding in dict.fromkeys(i["encoding"] for i in run.items):
        mask = [i["split"] == "heldout" and i["encoding"] == encoding for i in run.items]
        gone = [bool(o.value_gone) for o in run.ours]
        given = [m and plain_flag(i, "ours") for i, m in zip(run.items, mask, strict=True)]
        cells = {"ours_value_recall": _rates(gone, mask)[0], "ours_given_plain": _rates(gone, given)[0]}
        for peer in PEERS:
            flags = run.peers.get(peer)
            if flags is not None:
                cells[peer] = _rates(flags, mask)[0]
        by_encoding[encoding] = cells
    rows["heldout_by_encoding"] = by_encoding
    missed: Counter[str] = Counter(
        i["plain"][0] + ":" + i["encoding"] for i, o in zip(run.items, run.ours, strict=True)
        if i["split"] == "heldout" and not o.value_gone
    )  # fmt: skip
    rows["missed_families"] = dict(missed.most_common(40))
    rows["missed_but_a_peer_caught"] = {}
    return rows


def _flags(run: Run, scanner: str) -> list[bool] | None:
    return [o.flagged for o in run.ours] if scanner == "ours" else run.peers.get(scanner)


def _precision(runs: dict[str, Run]) -> dict[str, dict[str, float]]:
    """Per pair of corpora (positives, negatives), on the held-out split: flagged positives / flagged items."""
    out: dict[str, dict[str, float]] = {}
    pairs = (
        ("gitleaks_tps", "gitleaks_fps", "gitleaks tps/fps"),
        ("credsweeper_pos", "credsweeper_neg", "CredSweeper pos/neg"),
    )
    for pos, neg, label in pairs:
        if pos not in runs or neg not in runs:
            continue
        row: dict[str, float] = {}
        for scanner in ("ours", *PEERS):
            p, n = _flags(runs[pos], scanner), _flags(runs[neg], scanner)
            if p is None or n is None:
                continue
            tp = sum(f for f, i in zip(p, runs[pos].items, strict=True) if i["split"] == "heldout")
            fp = sum(f for f, i in zip(n, runs[neg].items, strict=True) if i["split"] == "heldout")
            row[scanner] = round(tp / (tp + fp), 4) if tp + fp else float("nan")
        out[label + " (heldout)"] = row
    return out


def format_public_report(report: dict[str, Any]) -> str:
    lines = []
    if not report["corpora"]:
        lines.append(f"public corpora: not built (python -m bench.public_corpus build …; looked in {report['folder']})")
        return "\n".join(lines)
    lines.append("| corpus (split) | measure | items | ours | " + " | ".join(PEERS) + " |")
    lines.append("| --- | --- | ---: | ---: |" + " ---: |" * len(PEERS))
    for name, rows in report["corpora"].items():
        for split in SPLITS:
            row = rows[split]
            cells = " | ".join(f"{row[p]:.3f}" if p in row else "—" for p in PEERS)
            ours = f"{row['ours']:.3f}"
            if "ours_value_recall" in row:
                ours += f" (value {row['ours_value_recall']:.3f})"
            if "ours_given_plain" in row:
                ours += f" (given plain {row['ours_given_plain']:.3f} of {row['items_given_plain']})"
                cells = " | ".join(f"{row[p]:.3f} (given plain {row[p + '_given_plain']:.3f})" if p in row else "—"
                                   for p in PEERS)  # fmt: skip
            lines.append(f"| {name} ({split}) | {rows['metric']} | {row['items']} | {ours} | {cells} |")
            if "ours_families" in row:
                lines.append(f"| {name} ({split}) | families all caught | {row['families']} |"
                             f" {row['ours_families']:.3f} |" + " — |" * len(PEERS))  # fmt: skip
    lines.append("")
    for label, row in report.get("precision", {}).items():
        lines.append(f"precision, {label}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()))
    if report["not_built"]:
        lines.append("not built: " + ", ".join(report["not_built"]))
    if report["peers_skipped"]:
        lines.append("peers skipped: " + "; ".join(report["peers_skipped"]))
    lines.append(f"size {report['megabytes']} MB; CPU seconds: {report['cpu_seconds']}")
    for name, rows in report["corpora"].items():
        if rows.get("gateway"):
            lines.append(f"gateway sample, {name}: {rows['gateway']}")
    if ENCODED in report["corpora"]:
        lines.append(f"\n{ENCODED}, held out, by encoding (ours value recall, peers flagged):")
        for encoding, cells in report["corpora"][ENCODED]["heldout_by_encoding"].items():
            lines.append(f"  {encoding}: " + ", ".join(f"{k} {v:.3f}" for k, v in cells.items()))
    for name, rows in report["corpora"].items():
        if rows["kind"] == "secret":
            lines.append(f"\n{name}: ours missed, by family: {rows['missed_families']}")
            lines.append(f"{name}: ours missed where a peer caught: {rows['missed_but_a_peer_caught']}")
        else:
            lines.append(f"\n{name}: ours altered, by category: {rows['altered_by_category']}")
            for category, examples in rows["altered_examples"].items():
                for example in examples[:2]:
                    lines.append(f"  {category}: {example[:240]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.public_quality", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every fourth item")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--gateway", type=int, default=40, help="items per corpus sent through the gateway (0: none)")
    parser.add_argument("--corpora", type=Path, default=None, help="the corpora folder (default $MCPI_CORPORA)")
    parser.add_argument("--no-peers", action="store_true", help="ours only (no detect-secrets, no CredSweeper)")
    parser.add_argument("--no-encoded", action="store_true", help=f"skip the derived {ENCODED} corpus")
    parser.add_argument("--latest", type=Path, default=None, help="also write the Markdown report to this file")
    args = parser.parse_args(argv)
    report = public_report(args.quick, args.gateway, args.corpora, peers=not args.no_peers,
                           encoded=not args.no_encoded)  # fmt: skip
    text = json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_public_report(report)
    print(text)
    if args.latest is not None:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        command = "python -m bench.public_quality " + " ".join(argv if argv is not None else sys.argv[1:])
        args.latest.write_text(f"# Public-corpus quality ({stamp})\n\n`{command}`\n\n"
                               + format_public_report(report) + "\n", encoding="utf-8")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
