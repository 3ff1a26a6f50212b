"""The speed paths of the standard pipeline give exactly what the plain ways give.

A detector with a `reach` is matched only at the starts near its hints (`matches_near_hints`) instead of by a
search over every position: on texts dense in labels, separators, values and the non-ASCII letters `re.I`
folds to ASCII, those tries find the same matches, spans and groups as `finditer`, and the standard scanner
reports the same findings as one whose detectors all search every position.
"""

from __future__ import annotations

import dataclasses
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.testing import secrets
from interceptors.transforms import STANDARD_TRANSFORMS, Redactor, assemble_output
from interceptors.transforms.catalog import BUILTIN_DETECTORS
from interceptors.transforms.detectors import (
    Detector,
    Scanner,
    hint_anchors,
    matches_at_anchors,
    matches_near_hints,
)
from interceptors.transforms.entities import fold_for_hints

REACHING = [d for d in BUILTIN_DETECTORS if d.reach is not None]
BY_NAME = {d.name: d for d in REACHING}

LABELS = ["client_secret", "Secret-Key", "private key", "API.KEY", "apikey", "access_token", "AuthToken",
          "refresh token", "passphrase", "PASSWORD", "passwd", "bearer", "token", "pwd", "PSWD", "psswd", "psswrd",
          "paswd", "passwrd", "db_pass", "X3_PSWD", "mysqlrootpassword", "abcdefghijklmnop_pass",
          "abcdefghijklmnopq.pass", "license-key", "app key", "credentials", "auths", "keys", "key", "aws",
          "AWS_SECRET_ACCESS_KEY", "aws_sk", "aws.region.secret", "dbPassword", "ETSYToken", "cache_key",
          "pa\u017f\u017fword", "to\u212aen", "\u0130", "\u0131", "\u212a", "\u017f", "SECRET", "monkey"]  # fmt: skip
SEPARATORS = ["=", ": ", ":=", " => ", '"', "'", "\\", '\\"', " string ", "!!str ", "?=", ".=", "::=", ":"]
VALUES = ["abcd1234efgh5678", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "x", "get_token(scope)", "${X}",
          "****", "0123456789abcdef0123456789abcdef", "s3cr3t!", "n/a"]  # fmt: skip
OTHER = ["\n", " ", "<", ">", "&", ";", "(", ",", "_", ".", "-", "ABC", "aB", "9"]
assignments = st.tuples(st.sampled_from(LABELS), st.sampled_from(SEPARATORS), st.sampled_from(VALUES)).map("".join)
texts = st.lists(
    assignments | st.sampled_from(LABELS) | st.sampled_from(SEPARATORS) | st.sampled_from(VALUES)
    | st.sampled_from(OTHER) | st.text(max_size=5),
    max_size=12,
).map("".join)  # fmt: skip


def _spans(matches: object) -> list[tuple[tuple[int, int], tuple[str | None, ...]]]:
    assert matches is not None
    return [(m.span(), m.groups()) for m in matches]  # type: ignore[attr-defined]


def test_the_reaching_detectors_are_the_slow_labelled_ones() -> None:
    assert {d.name for d in REACHING} >= {"secret_assignment", "labelled_key", "aws_secret_access_key"}
    assert all(d.hints for d in REACHING)


@settings(max_examples=500, deadline=None)
@given(texts, st.sampled_from(REACHING))
# each label at its longest reach before its hint
@example("x abcdefghijklmnop_pass: s3cr3tvalue1", BY_NAME["secret_assignment"])
@example("refresh-token=abcd1234efgh5678", BY_NAME["secret_assignment"])
@example(" license-key: abcd1234efgh5678", BY_NAME["labelled_key"])
@example("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", BY_NAME["aws_secret_access_key"])
def test_tries_near_hints_find_what_the_search_finds(text: str, detector: Detector) -> None:
    assert detector.reach is not None
    folded = fold_for_hints(text)
    assert len(folded) == len(text)
    anchors = hint_anchors(folded, detector.hints)
    assert anchors is not None
    tried = matches_at_anchors(detector.pattern, text, anchors, detector.reach)
    searched = _spans(detector.pattern.finditer(text))
    if tried is not None:  # (None: an empty match, left to finditer)
        assert _spans(tried) == searched
    assert _spans(matches_near_hints(detector.pattern, text, folded, detector.hints, detector.reach)) == searched


@given(st.text(max_size=40))
def test_an_empty_match_is_left_to_finditer(text: str) -> None:
    pattern = re.compile(r"(?=a)|b")
    folded = fold_for_hints(text)
    assert _spans(matches_near_hints(pattern, text, folded, ("a", "b"), 0)) == _spans(pattern.finditer(text))


def _unreached(scanner: Scanner) -> Scanner:
    return Scanner(tuple(dataclasses.replace(d, reach=None) for d in scanner.detectors))


STANDARD_SCANNER = next(t for t in assemble_output(STANDARD_TRANSFORMS).transforms if isinstance(t, Redactor)).scanner
PLAIN_SCANNER = _unreached(STANDARD_SCANNER)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts | secrets().map(lambda s: s.text), min_size=1, max_size=3).map(" ".join))
def test_the_standard_scanner_finds_the_same_with_and_without_reach(text: str) -> None:
    def seen(scanner: Scanner) -> list[tuple[int, int, str, str, str]]:
        return [(f.start, f.end, f.value, f.entity, f.detector.name) for f in scanner.scan(text)]

    assert seen(STANDARD_SCANNER) == seen(PLAIN_SCANNER)
