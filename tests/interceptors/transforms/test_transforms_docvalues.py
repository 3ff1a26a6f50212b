"""Values in a secret's format that hold none (issue 29): documentation values, ciphertexts, anti-forgery tokens,
asset URLs, elided excerpts, empty key blocks. Each is spared with its reason in the report; the real secret of
the same shape beside it is still caught.

Every example here was written for this file from the formats' documentation (none is copied from another
scanner's test data); fake credentials are assembled from pieces so secret scanners do not flag this file.
"""

from __future__ import annotations

import base64
import random
import string
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.transforms import STANDARD_TRANSFORMS, TransformContext, assemble_output
from interceptors.transforms.channels import transform_tool_result
from interceptors.transforms.docvalues import ciphertext, documentation_value, sealed_secret, sequence_runs

PIPELINE = assemble_output(STANDARD_TRANSFORMS)
RNG = random.Random(2029)
B62 = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def _rand(alphabet: str, size: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(size))


def _run(text: str) -> tuple[str, dict[str, Any]]:
    ctx = TransformContext()
    out, _ = transform_tool_result({"content": [{"type": "text", "text": text}]}, PIPELINE, ctx)
    return str(out["content"][0]["text"]), ctx.report


def _sealed(size: int) -> str:
    """A Sealed Secrets value: 2-byte length, an RSA-OAEP ciphertext of that length, then AES-GCM data."""
    raw = size.to_bytes(2, "big") + bytes(RNG.randrange(256) for _ in range(size + 40))
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("gh" + "p_" + "0" * 36, "documentation_value"),
        ("aws_access_key: AK" + "IAIOSFODNN7" + "EXAMPLE", "documentation_value"),
        ('API_KEY="gl' + "c_" + "1" * 42 + '="', "documentation_value"),
        ("xo" + "xp-1234-1234-1234-" + _rand(HEX, 32), "documentation_value"),
        ("xo" + "xb-" + "0987654321-" + _rand(B62, 24), "documentation_value"),
        ("hf" + "_" + "3478658437658347638475687346587374", "documentation_value"),
        ('"token4": "xo' + 'xp-5723705293-5738073011-5723316911-####################"', "documentation_value"),
        ('const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"', "documentation_value"),
        ('password = "abc"', "documentation_value"),
        ("-----BEGIN " + "PRIVATE KEY-----\nanything\n-----END PRIVATE KEY-----", "empty_key_block"),
        ("    PASSWORD: " + _sealed(256), "ciphertext"),
        ("    TOKEN: " + _sealed(512), "ciphertext"),
        ("    KEY: " + _sealed(512)[:500] + "==" + _rand(B62 + "+/", 200), "ciphertext"),  # a `==` inside the run
        ('# encrypted: secretKey = "ENC(' + _rand(B62, 24) + '=)"', "ciphertext"),
        ("token: rubygems_1234567" + _rand(HEX, 41), "documentation_value"),
        ('<input type="hidden" name="authenticity_token" value="' + _rand(B62, 64) + '" />', "anti_forgery_token"),
        ("![](https://cdn.example.com/tos-cn/" + _rand(HEX, 32) + "~tplv-" + _rand(B62, 12) + "-mark.image)",
         "asset_url"),
        ("..." + _rand(B62, 60) + "...", "elided_excerpt"),
        ("#define PASSWORD 0x0" + _rand(HEX, 15), "code_identifier"),
        ('public_key = "' + _rand(B62, 43) + '"', "public_label"),
        ("xo" + "xb-" + "1234-my-bot-token", "documentation_value"),
        ("https://api.example.com/cgi-bin/create?access_token=ACCESS_TOKEN", "documentation_value"),
        ("snowflake.password=\njdbc.snowflake.url=", "code_identifier"),
        ("GITHUB_API_KEY=\nDYNATRACE_API_KEY=", "code_identifier"),  # the next key, cut at its own label
        ('<entry key="jetbrains.mps.v8_elimination" value="executed" />', "entry_name"),
        ("masked_password = *****1*****2;", "placeholder"),
        ("CREATE USER bob WITH LOGIN PASSWORD '$TEST_USER_PASS';", "placeholder"),
        ("pp" + "lx-" + _rand(B62, 42) + "654321", "documentation_value"),  # a run of 6 at the end
        ("DATABRICKS_TOKEN=dapi123456789012345678a9bc01234defg5", "documentation_value"),  # `…7890123…` runs on
        ("meraki: abdefghjk0123456789mnopqrstuvwx12345678", "documentation_value"),  # the fallback's value, too
        ("SONAR_TOKEN=sqp_abcdef" + _rand(HEX, 34), "documentation_value"),  # a labelled value like a token
        ("        return self.as_bytes(is_private=is_private, password=password)", "placeholder"),
        ("    def compat(self, token: Sequence[int | str]) -> None: ...", "code_identifier"),
        ("    const pubkey256 = '" + _rand(B62 + "+/", 43) + "=';", "public_label"),
        ('"path+file:///__w/pkg/tmpwheelhouse/.tmpKUZmhW/cryptography-50.0.2/src/rust"', "path_segment"),
        ('<li><a id="toc-EAX_002dAES128-interface" href="#EAX_002dAES128-interface">7.4</a>', "anchor_name"),
    ],
)  # fmt: skip
def test_values_without_a_secret_are_spared_with_their_reason(text: str, reason: str) -> None:
    out, report = _run(text)
    assert out == text
    assert report.get("spared", {}).get(reason, 0) >= 1, report


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("token: gh" + "p_" + (g := _rand(B62, 36)), g),
        ("id=AK" + "IA" + (a := "Z3QK7T2LMN4PXR6W"), a),
        ("xo" + "xb-" + (s := "58207316492-74018263591-" + _rand(B62, 24)), s),
        ('    PASSWORD: "' + (p := _rand(B62 + "+/", 88)) + '"', p),
        ("password = " + (w := "Xk9#mQ2$vB7w"), w),
        ("..." + (e := _rand(B62, 60)) + " and more", e),
        ('csrf_token_secret = "' + (c := _rand(B62, 40)) + '"', c),
        ('<add key="ApiKey" value="' + (k := _rand(B62, 40)) + '" />', k),  # the value attribute is still a value
        ('<entry key="' + (n := _rand(B62, 40)) + '" />', n),  # no value attribute: the key is not a name
        ("password = $Pa55w0rd!", "$Pa55w0rd!"),  # a password starting with `$` is no variable
        ("DB_PASSWORD=*" + (m := _rand(B62, 20)), m),  # one star is no mask
        ("sl" + "ack: xo" + "xb-" + (t := "58207316492-74018263591-" + _rand(B62, 24)), t),
        ("SONAR_TOKEN=sq" + "p_" + (q := _rand(HEX, 40)), q),
        ("conn = connect(user=bob, password=" + (h := "Xk9mQ2vB7w") + ")", h),
        ('<a href="https://x.example/cb?t=' + (r := _rand(B62, 40)) + '">', r),
    ],
)  # fmt: skip
def test_real_secrets_of_the_same_shapes_are_still_caught(text: str, secret: str) -> None:
    out, _ = _run(text)
    assert secret not in out


def test_sequence_runs_count_consecutive_characters_both_ways() -> None:
    assert sequence_runs("abc123xyz-klmnopqrstuvwx") == (14, 14, 3)
    assert sequence_runs("76543210") == (8, 8, 8)
    assert sequence_runs("0123456789abcdef") == (16, 16, 16)
    assert sequence_runs("AbCdEfGh") == (1, 0, 1)  # case changes break a run: a mixed-case token is not a sequence
    assert sequence_runs("123456789012") == (12, 12, 12)  # digits in keyboard order run on from 9 to 0
    assert sequence_runs("3210987") == (7, 7, 7)


def test_sealed_secret_needs_its_length_prefix_and_more_bytes() -> None:
    assert sealed_secret(_sealed(256)) and sealed_secret(_sealed(512))
    assert not sealed_secret(_sealed(300))  # no RSA key gives a 300-byte ciphertext
    assert not sealed_secret(_sealed(256)[:300])  # too short to hold the ciphertext and data
    assert ciphertext("gAAAAA" + _rand(B62 + "_-", 100), "")
    assert not ciphertext(_rand(B62, 100), "")


@settings(max_examples=400, derandomize=True, deadline=None)
@given(
    st.sampled_from([(B62, 36), (B62, 40), (HEX, 32), (HEX, 40), (HEX, 64), (B62 + "_-", 43), (string.digits, 24)]),
    st.integers(min_value=0, max_value=2**32),
)
@example((HEX, 64), 0)
def test_random_tokens_are_not_documentation_values(shape: tuple[str, int], seed: int) -> None:
    """A token drawn uniformly at random from a vendor alphabet trips none of the tests (their false-alarm rate
    is about 1e-5 or less at these lengths; a derandomised draw of seeds keeps the test deterministic)."""
    alphabet, size = shape
    rng = random.Random(seed)
    token = "".join(rng.choice(alphabet) for _ in range(size))
    assert not documentation_value(token, "")
    assert not documentation_value(token, "", strict=False)
