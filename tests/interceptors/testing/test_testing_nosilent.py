"""No silent greens: a policy that redacts nothing fails the standard properties unless the test says it is
meant to, and properties a policy cannot satisfy by design are named up front, never skipped quietly."""

from __future__ import annotations

import pytest
from hypothesis import settings

from interceptors.testing import (
    PropertiesNotApplicable,
    PropertyFailures,
    RedactionSuite,
    RedactionTarget,
    check_redaction_rules,
    redacts_nothing,
)

settings.register_profile("kit-few", max_examples=4, deadline=None, database=None, derandomize=True)
EXTENDS_OPEN = {"name": "mine", "extends": "open", "roles": {}}


@pytest.mark.parametrize("policy", ["open", EXTENDS_OPEN], ids=["open", "extends-open"])
def test_a_policy_that_redacts_nothing_fails_with_a_clear_message(policy: object) -> None:
    with pytest.raises(PropertyFailures) as caught:
        check_redaction_rules(policy, profile="kit-few")
    assert list(caught.value.failures) == ["redacts_something"]
    message = str(caught.value)
    assert "redacts nothing" in message and "expect_no_redaction=True" in message


def test_expect_no_redaction_lets_it_pass_and_runs_what_still_applies() -> None:
    assert check_redaction_rules("open", profile="kit-few", expect_no_redaction=True) == ["decoys_survive"]
    assert redacts_nothing(RedactionTarget.load("open")) and not redacts_nothing(RedactionTarget.load("standard"))


def test_a_property_named_explicitly_that_cannot_hold_fails_up_front() -> None:
    suite = RedactionSuite(RedactionTarget.load("open"), "kit-few", expect_no_redaction=True)
    with pytest.raises(PropertyFailures) as caught:
        suite.run(["decoys_survive", "refuses_secret_arguments"])
    assert list(caught.value.failures) == ["refuses_secret_arguments"]
    assert "no guard_secrets input transform in reject mode" in str(caught.value)
    assert suite.ran == []  # up front: nothing ran before the answer


def test_properties_the_policy_cannot_satisfy_are_announced() -> None:
    """A policy that redacts results but guards no arguments: the guard property is named, with why, first."""
    redact = {"type": "redact", "strategies": {"secret": "redact"}, "key_rules": ["sensitive_key"]}
    only_output = {"transforms": [redact]}
    suite = RedactionSuite(RedactionTarget.load(only_output), "kit-few")
    with pytest.warns(PropertiesNotApplicable, match="refuses_secret_arguments cannot hold.*guard_secrets"):
        done = suite.run()
    assert "refuses_secret_arguments" in suite.skipped and "refuses_secret_arguments" not in done
    assert "no_leak" in done


def test_the_shipped_profile_has_nothing_announced() -> None:
    """On `standard` only `boundaries` does not apply (no custom detector), and that is not announced."""
    from interceptors.testing import STANDARD_PROPERTIES

    missing = RedactionSuite(RedactionTarget.load("standard")).not_applicable()
    assert list(missing) == ["boundaries"] and not STANDARD_PROPERTIES["boundaries"].announce
