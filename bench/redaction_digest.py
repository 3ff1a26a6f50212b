"""One digest of everything the `standard` output pipeline produces, for speed work that must not change output.

A change meant only to make detection faster must leave this digest unchanged. It hashes the output of every
item of the public corpora (`bench.public_corpus`, outside the repository; a corpus not built is named and
skipped) and of the 1 MiB mixed throughput corpus of `bench.transforms_bench`, annotations in `_meta` included
(their clock reading `generated_at` left out). Each item travels as a tool result (a text or image block, as in
`bench.public_quality`) and a second time as the `structuredContent` of one (so the JSON walk is covered), all
through one pipeline (its per-string caches warm, as in the gateway); the throughput corpus runs through a fresh
pipeline. `--per-corpus` prints one digest per corpus as well, to find which one moved.

`python -m bench.redaction_digest [--per-corpus]`
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from typing import Any

from .corpus_upstream import block
from .public_corpus import corpora_dir, load
from .public_quality import CORPORA
from .transforms_bench import MIB, make_corpus


def _stable(value: Any) -> Any:
    """The value without the annotation's clock reading (`generated_at`), the one thing that differs run to run."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k != "generated_at"}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _canonical(value: Any) -> bytes:
    value = _stable(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def digests() -> tuple[str, dict[str, str], list[str]]:
    """The overall digest, one per corpus, and the corpora that were not built."""
    from interceptors.transforms import STANDARD_TRANSFORMS, TransformContext, assemble_output
    from interceptors.transforms.channels import transform_tool_result

    overall = hashlib.sha256()
    per: dict[str, str] = {}
    missing: list[str] = []
    pipeline = assemble_output(STANDARD_TRANSFORMS)
    for name, _kind, _title in CORPORA:
        items = load(name)
        if items is None:
            missing.append(name)
            continue
        one = hashlib.sha256()
        for item in items:
            for payload in ({"content": [block(item)]}, {"content": [], "structuredContent": {"value": item["text"]}}):
                out, changed = transform_tool_result(payload, pipeline, TransformContext())
                one.update(_canonical([item.get("id"), changed, out]))
                one.update(b"\n")
        per[name] = one.hexdigest()
        overall.update(f"{name} {per[name]}\n".encode())
    corpus = make_corpus(MIB)
    fresh = assemble_output(STANDARD_TRANSFORMS)
    one = hashlib.sha256()
    for result in corpus.results:
        out, changed = transform_tool_result(result, fresh, TransformContext())
        one.update(_canonical([changed, out]))
        one.update(b"\n")
    per["transforms_bench_1mib"] = one.hexdigest()
    overall.update(f"transforms_bench_1mib {per['transforms_bench_1mib']}\n".encode())
    return overall.hexdigest(), per, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redaction_digest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-corpus", action="store_true", help="print one digest per corpus as well")
    args = parser.parse_args(argv)
    total, per, missing = digests()
    if args.per_corpus:
        for name, value in per.items():
            print(f"{name:24} {value[:16]}")
    for name in missing:
        print(f"not built: {name} (under {corpora_dir()})", file=sys.stderr)
    print(total)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
