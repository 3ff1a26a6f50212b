"""The token vault under the kit: every detector format round-trips through a `TokenVault`, and the strict
profile with the vault as its pseudonymizer passes the standard properties (no real value in a token)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from interceptors.testing import (
    RedactionSuite,
    RedactionTarget,
    Secret,
    assert_roundtrip,
    identifiers,
    secrets,
)
from interceptors.vault import TokenVault

KEY = "testing-kit-vault-key-0123456789"


@settings(max_examples=max(20, settings.default.max_examples))  # type: ignore[union-attr]
@given(st.lists(st.one_of(identifiers(), secrets()), min_size=1, max_size=4), st.sampled_from(["global", "p:alice"]))
def test_every_detector_format_round_trips_through_the_vault(values: list[Secret], namespace: str) -> None:
    vault = TokenVault(KEY, key_env=None, scope="principal")
    other = "p:mallory" if namespace != "p:mallory" else "p:bob"
    assert_roundtrip(vault, values, namespace=namespace, other_namespace=other)


def test_strict_with_the_vault_passes_the_standard_properties() -> None:
    target = RedactionTarget.load("strict", pseudonymizer=TokenVault(KEY, key_env=None))
    RedactionSuite(target).run(["no_leak", "decoys_survive"])
