"""A five-test property suite for a custom detector, written with `interceptors.testing`.

Run it with `pytest examples/custom_detector` (the kit's pytest plugin is registered by the package; from a
checkout that is not installed, add `-p integrations.pytest_plugin`). See doc/TESTING.md for the walk-through.
"""

from __future__ import annotations

import string
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interceptors.testing import (
    Decoy,
    McpCase,
    PropertyFailures,
    RedactionSuite,
    RedactionTarget,
    SecretFormat,
    assert_no_leak,
    assert_not_redacted,
    embedded,
    format_for,
    mcp_payloads,
)
from interceptors.testing.regexgen import seeded_text

POLICY = Path(__file__).with_name("policy.yaml")
SPEC_LINE = "    spec: \"('acme_live_'|'acme_test_') [A-Za-z0-9]{32}\"\n"
TARGET = RedactionTarget.load(POLICY)
ACME = format_for(TARGET.detector("acme_token"))
"""Drawn from the detector's `spec` (the documented format), not from its pattern: every draw is a token ACME
issues, whether or not the pattern agrees."""

LOWER_ALNUM = string.ascii_lowercase + string.digits
LOOK_ALIKES = st.one_of(
    st.just("acme_live_" + "x" * 32),  # the stand-in from our own documentation
    seeded_text(LOWER_ALNUM, 8, 31).map(lambda tail: "acme_live_" + tail),  # too short to be a token
    seeded_text(LOWER_ALNUM, 32, 32).map(lambda tail: "acme_prod_" + tail),  # no such environment
).map(lambda text: Decoy("acme_token", text, text))


@given(mcp_payloads(embedded(ACME.samples)))
def test_acme_tokens_never_reach_the_model(case: McpCase) -> None:
    """In any syntax (JSON, YAML, .env, logs, source code, …) and any result channel, no token comes out."""
    out = TARGET.transform(case.event, case.payload)
    assert_no_leak(out, case.secrets)


@given(mcp_payloads(embedded(LOOK_ALIKES)))
def test_look_alikes_pass_unchanged(case: McpCase) -> None:
    """Stand-ins, truncated tokens and unknown environments are not tokens: they must come out as they went in."""
    out = TARGET.transform(case.event, case.payload)
    assert_not_redacted(out, case.decoys)


@pytest.mark.redaction_rules("policy.yaml")
def test_the_standard_properties_still_hold(redaction_suite: RedactionSuite) -> None:
    """Every built-in guarantee still holds with the new detector in place (and covers it: the custom format
    joins the leak, whole-value and refused-argument properties)."""
    assert "acme_token" in [f.name for f in redaction_suite.target.formats()]
    redaction_suite.run()


def test_a_pattern_off_by_one_is_caught_by_the_spec(tmp_path: Path) -> None:
    """The mutation demo: the same policy with `{31}` for `{32}` in the pattern. Samples generated from the pattern
    agree with it (so they cannot catch it); samples from the spec do, and `own_format` names the detector."""
    mutant_policy = tmp_path / "policy.yaml"
    mutant_policy.write_text(POLICY.read_text().replace("[A-Za-z0-9]{32}(?!", "[A-Za-z0-9]{31}(?!"))
    mutant = RedactionTarget.load(mutant_policy)
    broken = mutant.detector("acme_token")
    assert "{31}" in broken.pattern.pattern and broken.spec  # the pattern drifted, the spec did not
    from_pattern = format_for(replace(broken, spec=""))
    assert from_pattern.origin == "pattern"
    RedactionSuite(mutant).check("own_format", formats=[from_pattern_as_spec(from_pattern)])  # agrees with itself
    with pytest.raises(AssertionError) as caught:
        RedactionSuite(mutant).check("own_format", formats=[format_for(broken)])
    assert "acme_token" in str(caught.value) and "not found whole by the detector itself" in str(caught.value)
    with pytest.raises(PropertyFailures) as failures:  # and so does the whole standard suite
        RedactionSuite(mutant).run()
    assert "own_format" in failures.value.failures


def from_pattern_as_spec(fmt: SecretFormat) -> SecretFormat:
    """The pattern-derived format labelled as a spec, to show what a kit drawing from the pattern would check."""
    return replace(fmt, origin="spec")


def test_without_a_spec_one_documented_token_catches_it(tmp_path: Path) -> None:
    """The same off-by-one with the spec replaced by one token from ACME's handbook (`examples:`): the `boundaries`
    property reads the token shape from the pattern, takes the length and alphabet from the documented token, and
    draws tokens at the edges of that format, which the broken pattern does not find."""
    documented = POLICY.read_text().replace(SPEC_LINE, "    examples: [acme_live_Q3v9TfK2mZ8xLw4RbN7cYp1HdJ6sGe5A]\n")
    assert "spec:" not in documented
    policy = tmp_path / "policy.yaml"
    policy.write_text(documented)
    RedactionSuite(RedactionTarget.load(policy)).check("boundaries")
    policy.write_text(documented.replace("[A-Za-z0-9]{32}(?!", "[A-Za-z0-9]{31}(?!"))
    with pytest.raises(AssertionError, match=r"acme_token: a boundary token .* is not found whole"):
        RedactionSuite(RedactionTarget.load(policy)).check("boundaries")
