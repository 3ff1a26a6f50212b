"""What the kit found in the built-in detectors and the vault, one fixed example each (doc/TESTING.md, known
findings). Each is an expected failure: when a fix lands, the test passes unexpectedly and fails the run,
so whoever fixes it also moves the case out of `KNOWN_FALSE_POSITIVES` (or the excluded context) and the doc.
"""

from __future__ import annotations

import pytest

from interceptors.testing import RedactionTarget, assert_no_leak, assert_not_redacted
from interceptors.transforms import (
    STANDARD_TRANSFORMS,
    STRICT_TRANSFORMS,
    KeyedHasher,
    TransformContext,
    assemble_output,
)
from interceptors.vault import TokenVault

STANDARD = RedactionTarget.load(STANDARD_TRANSFORMS)
FINDING = "known finding {}: see doc/TESTING.md"


def standard_text(text: str) -> str:
    out = STANDARD.transform("tools/call", {"content": [{"type": "text", "text": text}]})
    return str(out["content"][0]["text"])


@pytest.mark.xfail(strict=True, reason=FINDING.format(1))
def test_a_placeholder_followed_by_a_full_stop_is_kept() -> None:
    assert_not_redacted(standard_text("The password: none. Ask the admin."), ["password: none."])


@pytest.mark.xfail(strict=True, reason=FINDING.format(2))
@pytest.mark.parametrize("text", ["password:=n/a", "password => ${DB_PASSWORD}"])
def test_a_separator_glued_to_a_placeholder_is_kept(text: str) -> None:
    assert_not_redacted(standard_text(f"config {text} end"), [text])


@pytest.mark.xfail(strict=True, reason=FINDING.format(3))
@pytest.mark.parametrize("text", ["1,Password=********,ok", "https://example.com/login?password=xxxx&next=/"])
def test_a_masked_placeholder_followed_by_punctuation_is_kept(text: str) -> None:
    assert_not_redacted(standard_text(text), [text])


@pytest.mark.xfail(strict=True, reason=FINDING.format(4))
def test_a_camel_case_identifier_is_not_a_secret() -> None:
    name = "HttpRequestHandlerFactoryBeanImpl42"
    assert_not_redacted(standard_text(f"class {name} extends Base"), [name])


@pytest.mark.xfail(strict=True, reason=FINDING.format(5))
def test_two_unterminated_quoted_values_on_one_line_are_both_redacted() -> None:
    out = standard_text('done clientsecret:=")-,R7{ processed. apikey:="UY&Egd9 request cache.')
    assert_no_leak(out, [")-,R7{ processed.", "UY&Egd9"])


@pytest.mark.xfail(strict=True, reason=FINDING.format(7))
def test_a_resource_name_in_a_query_string_does_not_carry_other_values_past_the_vault() -> None:
    address = "2600:1f18:0:0:0:4248:a5d:2f34"
    target = RedactionTarget.load("strict", pseudonymizer=TokenVault("findings-key-0123456789", key_env=None))
    text = f"https://api.example.com/items?a=projects/my-project-1/logs&b={address}&page=5"
    assert_no_leak(target.transform("tools/call", {"content": [{"type": "text", "text": text}]}), [address])


def test_a_shared_redactor_does_not_reuse_another_pseudonymizers_tokens() -> None:
    """Finding 8, fixed: pseudonyms are never served from the redactor's text cache."""
    pipeline = assemble_output(STRICT_TRANSFORMS)
    text = {"note": "host db-findings.example.com"}
    first = pipeline.apply(text, TransformContext(pseudonymizer=KeyedHasher(b"tenant-a")))
    second = pipeline.apply(text, TransformContext(pseudonymizer=KeyedHasher(b"tenant-b")))
    assert first != second
