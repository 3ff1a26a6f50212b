"""The kit catches a broken custom detector without a `spec:`: five planted off-by-ones in a detector for
`acme_(live|test)_[0-9a-f]{32}` each fail the standard properties, and the correct detector passes them.

The detector is written as a user following doc/TESTING.md ("Without a spec") would: a pattern, its hints, and
two tokens copied from the vendor's documentation as `examples:`; no `spec:`.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from hypothesis import settings

from interceptors.testing import PropertyFailures, RedactionSuite, RedactionTarget
from interceptors.testing.boundaries import documented_shape, token_shape
from interceptors.testing.properties import UndocumentedFormat

POLICY = """\
name: acme
extends: standard
detectors:
  - name: acme_token
    description: ACME service tokens (acme_live_ or acme_test_, then 32 lower-case hex digits)
    pattern: '(?<![A-Za-z0-9_])acme_(?:live|test)_[0-9a-f]{32}(?![0-9a-f])'
    hints: [acme_live_, acme_test_]
    entity: acme_token
    category: secret
    confidence: 0.95
    examples:
      - acme_live_5f0c2e9a7b14d3680e1f9c2a4b7d6e05
      - acme_test_0a1b2c3d4e5f60718293a4b5c6d7e8f9
"""
CORRECT = "acme_(?:live|test)_[0-9a-f]{32}(?![0-9a-f])'"
PLANTED = {
    "length_minus_one": "acme_(?:live|test)_[0-9a-f]{31}(?![0-9a-f])'",
    "length_plus_one": "acme_(?:live|test)_[0-9a-f]{33}(?![0-9a-f])'",
    "lost_last_character": "(acme_(?:live|test)_[0-9a-f]{31})[0-9a-f](?![0-9a-f])'\n    group: 1",
    "narrowed_alphabet": "acme_(?:live|test)_[0-9a-e]{32}(?![0-9a-f])'",
    "dropped_prefix_variant": "acme_live_[0-9a-f]{32}(?![0-9a-f])'",
}
settings.register_profile("kit-mutants", max_examples=20, deadline=None, database=None, derandomize=True)


def policy(tmp_path: Path, pattern_tail: str = CORRECT, *, examples: bool = True) -> RedactionTarget:
    text = POLICY.replace(CORRECT, pattern_tail)
    assert text != POLICY or pattern_tail == CORRECT
    if not examples:
        text = text[: text.index("    examples:")]
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return RedactionTarget.load(path)


def test_the_correct_detector_passes_the_standard_properties(tmp_path: Path) -> None:
    target = policy(tmp_path)
    suite = RedactionSuite(target, "ci")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # documented, so no warning either
        done = suite.run()
    assert "boundaries" in done and "own_format" in done
    shape = documented_shape(target.detector("acme_token"))
    assert shape is not None and shape.prefixes == ("acme_live_", "acme_test_")
    assert (shape.alphabet_name, shape.low, shape.high, shape.edges) == ("lower-case hex", 32, 32, "09af")


@pytest.mark.parametrize("bug", list(PLANTED))
def test_each_planted_off_by_one_fails_the_standard_properties(tmp_path: Path, bug: str) -> None:
    mutant = policy(tmp_path, PLANTED[bug])
    assert mutant.detector("acme_token").spec == ""
    with pytest.raises(PropertyFailures) as caught:
        RedactionSuite(mutant, "kit-mutants").run()
    failures = caught.value.failures
    assert "boundaries" in failures, f"{bug}: {sorted(failures)}"
    message = str(failures["boundaries"])
    assert "acme_token: a boundary token" in message and "lower-case hex" in message
    assert "5f0c2e9a" not in str(caught.value)  # the message masks the tokens


def test_without_examples_the_pattern_and_hints_still_catch_what_they_can(tmp_path: Path) -> None:
    """Without a documented token, the length and alphabet can only be the pattern's (and the kit says so), but a
    lost last character and a prefix that the hints document and the pattern dropped are still caught."""
    correct = policy(tmp_path, examples=False)
    with pytest.warns(UndocumentedFormat, match="acme_token: no examples: or spec:"):
        RedactionSuite(correct, "kit-mutants").check("boundaries")
    for bug in ("lost_last_character", "dropped_prefix_variant"):
        mutant = policy(tmp_path, PLANTED[bug], examples=False)
        with pytest.warns(UndocumentedFormat), pytest.raises(AssertionError, match="boundary token"):
            RedactionSuite(mutant, "kit-mutants").check("boundaries")


def test_token_shapes_read_from_patterns(tmp_path: Path) -> None:
    detector = policy(tmp_path).detector("acme_token")
    shape = token_shape(detector)
    assert shape is not None and (shape.prefixes, shape.low, shape.high) == (("acme_live_", "acme_test_"), 32, 32)
    lost = policy(tmp_path, PLANTED["lost_last_character"]).detector("acme_token")
    assert token_shape(lost) == shape  # a group does not change what the pattern matches
    assert RedactionSuite(RedactionTarget.load("standard")).not_applicable(["boundaries"])  # built-ins: own_format
