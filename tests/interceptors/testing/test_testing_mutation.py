"""The kit catches a weakened policy: the standard properties fail when one detector misses the last character
of what it finds, or when the `sensitive_key` rule is dropped. (A property kit that passes everything is
worthless; these tests show ours does not.)"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from interceptors.testing import (
    BUILTIN_FORMATS,
    PropertyFailures,
    RedactionSuite,
    RedactionTarget,
    check_redaction_rules,
)
from interceptors.transforms import STANDARD_TRANSFORMS, Redactor, assemble_output
from interceptors.transforms.base import Pipeline
from interceptors.transforms.catalog import BUILTIN_BY_NAME, BUILTIN_DETECTORS
from interceptors.transforms.keyrules import BUILTIN_KEY_RULES


def _off_by_one_github() -> RedactionTarget:
    """The standard pipeline, except that `github_token` reports its match minus the last character."""
    original = BUILTIN_BY_NAME["github_token"]
    weakened = replace(
        original, pattern=re.compile(r"(gh[pousr]_[A-Za-z0-9]{35,254})[A-Za-z0-9]|(github_pat_[A-Za-z0-9_]{21,254})\w"),
        group=(1, 2),
    )  # fmt: skip
    catalog = tuple(weakened if d is original else d for d in BUILTIN_DETECTORS)
    standard = assemble_output(STANDARD_TRANSFORMS)
    steps = []
    for step in standard.transforms:
        if isinstance(step, Redactor):
            redact = next(s for s in STANDARD_TRANSFORMS["transforms"] if isinstance(s, dict) and s["type"] == "redact")
            step = Redactor({k: v for k, v in redact.items() if k != "type"}, catalog=catalog)
        steps.append(step)
    return RedactionTarget.load(Pipeline(tuple(steps)))


def test_a_detector_that_misses_the_last_character_fails_the_standard_properties() -> None:
    target = _off_by_one_github()
    # Every property runs; the two that look at values whole draw only github tokens, so that the weakened detector
    # is met on every example (over all formats, a 100-example run may never draw one).
    focus = {"formats": [BUILTIN_FORMATS["github_token"]]}
    with pytest.raises(PropertyFailures) as caught:
        RedactionSuite(target, options={"own_format": focus, "whole_values": focus}).run()
    failures = caught.value.failures
    # `own_format` (the detector alone against its independent spec) fails on every github token, since a sample is
    # always followed by a non-word character; `whole_values` (the whole pipeline) fails whenever no other secret
    # reading of the same text happens to cover the missing character, so it is not required.
    assert "own_format" in failures
    for name in {"own_format", "whole_values"} & set(failures):
        message = str(failures[name])
        assert "github_token" in message and "[+0..-1]" in message, name
    # The same suite passes on the real detector, and its messages never spell a token out.
    assert not re.search(r"gh[pousr]_[A-Za-z0-9]{36}", str(caught.value))


def test_the_real_detector_passes_the_same_property() -> None:
    RedactionSuite(RedactionTarget.load(STANDARD_TRANSFORMS)).check(
        "whole_values", formats=[BUILTIN_FORMATS["github_token"]]
    )


def test_dropping_the_sensitive_key_rule_fails_the_standard_properties() -> None:
    rules = [rule.name for rule in BUILTIN_KEY_RULES if rule.name != "sensitive_key"]
    weakened = {
        **STANDARD_TRANSFORMS,
        "transforms": [
            {**step, "key_rules": rules} if isinstance(step, dict) and step.get("type") == "redact" else step
            for step in STANDARD_TRANSFORMS["transforms"]
        ],
    }
    with pytest.raises(PropertyFailures) as caught:
        check_redaction_rules(weakened, properties=["sensitive_keys", "decoys_survive"])
    assert list(caught.value.failures) == ["sensitive_keys"]
    assert "came out in the tool result (value under" in str(caught.value)


def _with_detector(name: str, pattern: str) -> RedactionTarget:
    """The standard pipeline with one built-in detector's pattern replaced (its spec kept)."""
    original = BUILTIN_BY_NAME[name]
    mutant = replace(original, pattern=re.compile(pattern))
    catalog = tuple(mutant if d is original else d for d in BUILTIN_DETECTORS)
    redact = next(s for s in STANDARD_TRANSFORMS["transforms"] if isinstance(s, dict) and s["type"] == "redact")
    steps = [
        Redactor({k: v for k, v in redact.items() if k != "type"}, catalog=catalog) if isinstance(s, Redactor) else s
        for s in assemble_output(STANDARD_TRANSFORMS).transforms
    ]
    return RedactionTarget.load(Pipeline(tuple(steps)))


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?<![A-Za-z0-9_-])npm_[A-Za-z0-9]{35}(?![A-Za-z0-9_-])",  # off by one
        r"(?<![A-Za-z0-9_-])npm_[A-Za-z]{36}(?![A-Za-z0-9_-])",  # a narrowed class
        r"(?<![A-Za-z0-9_-])npm_[A-Za-z0-9]{35}",  # a dropped look-ahead that leaves one character
    ],
    ids=["off_by_one", "narrowed_class", "dropped_lookahead"],
)
def test_a_broken_detector_fails_its_own_format_spec(pattern: str) -> None:
    """Samples drawn from the vendor's format (the spec), not from the pattern: each mutation is caught, by name,
    even though the entropy fallback would still cover most of these tokens in the whole pipeline."""
    target = _with_detector("npm_token", pattern)
    with pytest.raises(AssertionError) as caught:
        RedactionSuite(target).check("own_format", formats=[BUILTIN_FORMATS["npm_token"]])
    assert "npm_token" in str(caught.value) and "not found whole by the detector itself" in str(caught.value)
    assert not re.search(r"npm_[A-Za-z0-9]{36}", str(caught.value))  # the message never spells a token out


def test_the_real_detector_passes_its_own_format_spec() -> None:
    RedactionSuite(RedactionTarget.load(STANDARD_TRANSFORMS)).check("own_format")
