"""Regression cases of the kit's `refuses_secret_arguments` property against the shipped profiles."""

from __future__ import annotations

import pytest

from interceptors.testing import RedactionTarget, assert_no_leak
from interceptors.testing.properties import REGRESSIONS
from interceptors.transforms.guard import guarded_key_rules


@pytest.mark.parametrize("profile", ["standard", "strict"])
def test_a_json_web_key_in_json_arguments_is_refused(profile: str) -> None:
    """It passed the guard at random on plain `standard`: the JSON argument is parsed, and `d` beside `kty` is
    found by the `jwk_private_key` key rule, which the guard did not apply (only `sensitive_key`)."""
    target = RedactionTarget.load(profile)
    cases = REGRESSIONS["refuses_secret_arguments"](target, {})
    assert [c.embedded[0].context for c in cases] == ["structured", "json", "json_in_string"]
    for case in cases:
        verdict = target.request_verdict(case.payload)
        assert not verdict.valid, case
        assert_no_leak([[m.message for m in verdict.messages or ()], dict(verdict.info or {})], case.secrets)


def test_the_guard_applies_the_key_rules_of_its_categories() -> None:
    assert guarded_key_rules(["secret"]) == ["sensitive_key", "jwk_private_key"]
    assert "account_id_key" in guarded_key_rules(["secret", "identifier"])
    assert guarded_key_rules(["personal"])[0] == "sensitive_key"


def test_the_jwk_rule_runs_only_where_a_kty_key_could_be() -> None:
    """Without a `kty` anywhere in the arguments' text the guard keeps its sensitive-key shortcut (arguments with
    no sensitive key word are not walked); with one, spelled in any case or escaped, the full rules run."""
    from interceptors.transforms.guard import SecretGuard

    guard = SecretGuard({})
    assert guard._redactor_for({"query": "select 1", "options": {"d": "2024-01-01"}}) is guard._plain
    for spelled in ({"KTY": "EC", "d": "x"}, '{"kty": "EC"}', '{"\\u006bty": "EC"}'):
        assert guard._redactor_for({"body": spelled}) is guard._redactor, spelled
    assert guard._plain is not guard._redactor
