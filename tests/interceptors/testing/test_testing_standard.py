"""The kit's standard properties against the shipped profiles, and the chain model property.

This is the suite CI runs on every change (the `default` or `ci` Hypothesis profile: well under 120 s on two
cores); `--hypothesis-profile=thorough` runs it ten times longer before a release.
"""

from __future__ import annotations

import pytest

from integrations.testing import check_chain_model
from interceptors.testing import STANDARD_PROPERTIES, RedactionSuite, RedactionTarget

STANDARD = RedactionTarget.load("standard")
STRICT = RedactionTarget.load("strict")


@pytest.mark.parametrize("name", [n for n in STANDARD_PROPERTIES if n != "boundaries"])
def test_standard_profile(name: str) -> None:
    """Every standard property but `boundaries` (custom detectors only:
    tests/interceptors/testing/test_testing_boundaries.py)."""
    assert name in RedactionSuite(STANDARD).applicable()
    RedactionSuite(STANDARD).check(name)


@pytest.mark.parametrize("name", ["no_leak", "whole_values", "decoys_survive"])
def test_strict_profile(name: str) -> None:
    """Strict also pseudonymises identifiers, addresses and personal data: their formats join the leak check."""
    assert {"email", "aws_arn", "ipv4", "hostname"} <= {f.name for f in STRICT.formats()}
    RedactionSuite(STRICT).check(name, weight=1.0)


def test_chains_agree_with_the_reference_model() -> None:
    check_chain_model()
