"""Choosing the entropy fallback's rule from two measured numbers, not by hand.

For each candidate `RandomnessRule` (a grid over minimum length, entropy slack and the word-like share):

- `catch`: the share of random tokens (20 to 128 characters, uniform over each alphabet) the fallback reports,
  per alphabet (base62, base64, base64url, base36, BASE32; hex is left to labels: bare hex is what git SHAs,
  digests and trace ids look like);
- `altered`: the share of items of the benign corpus (`interceptors.testing.benign`) a redactor with that rule
  changes;
- `decoys`: the kit's near-misses (look-alikes of every family that must come out unchanged, 200 per family)
  the fallback reports.

The rule chosen is the one with the highest mean catch among those altering at most `MAX_ALTERED` of the
benign items and reporting no decoy; `interceptors.transforms.entities.RANDOMNESS` is set to it (the report
prints the chosen rule next to the one in use).

`python -m bench.entropy [--json]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import string
import sys
from typing import Any

from interceptors.transforms import Redactor, TransformContext
from interceptors.transforms.base import Pipeline
from interceptors.transforms.catalog import BUILTIN_DETECTORS
from interceptors.transforms.channels import transform_tool_result
from interceptors.transforms.entities import RANDOMNESS, RandomnessRule, looks_random

ALPHABETS = {
    "base62": string.ascii_letters + string.digits,
    "base64": string.ascii_letters + string.digits + "+/",
    "base64url": string.ascii_letters + string.digits + "-_",
    "base36": string.ascii_lowercase + string.digits,
    "BASE32": string.ascii_uppercase + "234567",
    "hex": "0123456789abcdef",
}
MAX_ALTERED = 0.005
GRID = [
    RandomnessRule(min_length, slack, wordy)
    for min_length in (20, 24, 32)
    for slack in (0.3, 0.5, 0.8)
    for wordy in (0.3, 0.4, 0.5, 0.6)
]


def random_tokens(per_alphabet: int, seed: int = 7) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {
        name: ["".join(rng.choice(chars) for _ in range(rng.randint(20, 128))) for _ in range(per_alphabet)]
        for name, chars in ALPHABETS.items()
    }


def _redactor(rule: RandomnessRule) -> Redactor:
    def validator(value: str, entity: str) -> str | None:
        return entity if looks_random(value, rule) else None

    catalog = [dataclasses.replace(d, validator=validator) if d.fallback else d for d in BUILTIN_DETECTORS]
    return Redactor({"strategies": {"secret": "redact"}}, catalog=catalog)


def measure(rule: RandomnessRule, tokens: dict[str, list[str]], benign: list[Any]) -> dict[str, float]:
    redactor = _redactor(rule)
    pipeline = Pipeline((redactor,))
    fallback = next(d for d in redactor.detectors if d.fallback)
    row: dict[str, float] = {}
    for name, items in tokens.items():
        caught = 0
        for token in items:
            text = f"the value {token} was returned"
            caught += any(f.detector is fallback and f.value == token for f in redactor.scanner.scan(text))
        row[f"catch_{name}"] = round(caught / len(items), 4)
    from interceptors.testing.formats import _NEAR_MISSES

    rng = random.Random(3)
    row["decoys"] = float(
        sum(
            any(f.detector is fallback for f in redactor.scanner.scan(build(rng)))
            for build in _NEAR_MISSES.values()
            for _ in range(200)
        )
    )
    changed = 0
    for _, payload in benign:
        _, did = transform_tool_result(payload, pipeline, TransformContext())
        changed += did
    row["altered"] = round(changed / len(benign), 4)
    row["mean_catch"] = round(sum(v for k, v in row.items() if k.startswith("catch_") and k != "catch_hex") / 5, 4)
    return row


def choose(quick: bool = False) -> tuple[RandomnessRule, list[tuple[RandomnessRule, dict[str, float]]]]:
    from interceptors.testing.benign import benign_corpus

    tokens = random_tokens(200 if quick else 1000)
    benign = benign_corpus(400 if quick else 1200)
    grid = GRID if not quick else [r for r in GRID if r.min_length == 20]
    rows = [(rule, measure(rule, tokens, benign)) for rule in grid]
    eligible = [(rule, row) for rule, row in rows if row["altered"] <= MAX_ALTERED and not row["decoys"]]
    best = max(eligible or rows, key=lambda item: (item[1]["mean_catch"], -item[1]["altered"]))
    return best[0], rows


def format_rows(best: RandomnessRule, rows: list[tuple[RandomnessRule, dict[str, float]]]) -> str:
    names = list(ALPHABETS)
    header = "| min length | slack | max wordy | " + " | ".join(names) + " | benign altered | decoys | |"
    lines = [header, "|" + " ---: |" * (len(names) + 5) + " --- |"]
    for rule, row in rows:
        mark = "chosen" if rule == best else ("current" if rule == RANDOMNESS else "")
        cells = " | ".join(f"{row['catch_' + n]:.3f}" for n in names)
        head = f"| {rule.min_length} | {rule.slack} | {rule.max_wordy} | {cells}"
        lines.append(f"{head} | {row['altered']:.4f} | {int(row['decoys'])} | {mark} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.entropy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    best, rows = choose(args.quick)
    if args.json:
        print(json.dumps({"chosen": dataclasses.asdict(best), "rows": [
            {**dataclasses.asdict(r), **row} for r, row in rows]}, indent=2))  # fmt: skip
    else:
        print(format_rows(best, rows))
        print(f"chosen: {best}; in use: {RANDOMNESS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
