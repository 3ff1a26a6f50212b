"""Signals that explain why public labellers call a match "not a secret" (issue 29, precision on held-out data):
a Freenet request key (a content address, published to be fetched), a line of uuencoded data, a labelled value
that is an e-mail address, and a verified token written as a run of consecutive characters. Each spares its case
with its reason in the report; the real secret of the same shape beside it is still caught, and random
real-looking secrets are never spared by these signals (seeded, derandomised draws).

Every example was written for this file from the formats' documentation; fake credentials are assembled from
pieces so secret scanners do not flag this file.
"""

from __future__ import annotations

import base64
import binascii
import random
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interceptors.transforms import STANDARD_TRANSFORMS, TransformContext, assemble_output
from interceptors.transforms.channels import transform_tool_result
from interceptors.transforms.context import freenet_request_key, uuencoded_line

PIPELINE = assemble_output(STANDARD_TRANSFORMS)
RNG = random.Random(2929)
B62 = string.ascii_letters + string.digits
FREENET_B64 = B62 + "~-"
PASSWORD_CHARS = B62 + "!#$%&*+-./:=?@^_~"


def _rand(alphabet: str, size: int, rng: random.Random = RNG) -> str:
    return "".join(rng.choice(alphabet) for _ in range(size))


def _run(text: str) -> tuple[str, dict[str, Any]]:
    ctx = TransformContext()
    out, _ = transform_tool_result({"content": [{"type": "text", "text": text}]}, PIPELINE, ctx)
    return str(out["content"][0]["text"]), ctx.report


def _freenet(kind: str, insert: bool, rng: random.Random = RNG) -> str:
    extra = base64.b64encode(bytes([1, 1 if insert else 0, 2, 0, 1])).decode().rstrip("=")
    extra = extra.translate(str.maketrans("+/", "~-"))
    return f"{kind}@{_rand(FREENET_B64, 43, rng)},{_rand(FREENET_B64, 43, rng)},{extra}"


def _uu_line(rng: random.Random = RNG) -> str:
    return binascii.b2a_uu(bytes(rng.randrange(256) for _ in range(45))).decode().rstrip("\n")


def _anthropic(body: str) -> str:
    return "sk-" + "ant-api03-" + body + "AA"


# --- each signal spares its case, with its reason -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('<Trust Identity="' + _freenet("USK", insert=False) + '/WebOfTrust/2" Value="100"/>', "public_id"),
        ("fetch " + _freenet("SSK", insert=False) + "/site-3/index.html", "public_id"),
        ('// "url": "ftp://files.example/", "key": "q7Xk2mVp9Lw4' + '@mail.example.com"', "email_value"),
        (_anthropic("abc123xyz-456def789ghij-klmnopqrstuvwx-" + _rand(B62, 54)), "documentation_value"),
    ],
)
def test_signal_spares_and_reports_its_reason(text: str, reason: str) -> None:
    out, report = _run(text)
    assert out == text
    assert report.get("spared", {}).get(reason, 0) >= 1, report


def test_a_uuencoded_password_label_is_spared() -> None:
    """A uuencoded line can hold `PW:` or `key=` by chance; it is data, not a labelled value. Random uuencoded
    lines are recognised as such."""
    assert all(uuencoded_line(_uu_line()) for _ in range(50))
    line = "M" + "[@%]PW:2Z.Q?2M^S;`4G?E0C.@V&?0KY]]" + '"H3Y@6$#I4V*R^"+B,2P6`A)UL'
    assert uuencoded_line(line)
    out, report = _run(line)
    assert out == line
    assert report["spared"] == {"uuencoded": 1}


# --- the real secret of the same shape is still caught --------------------------------------------------------


def test_a_freenet_insert_key_is_not_a_public_address() -> None:
    """An insert URI (its extra field's second byte 1: `AQECAAE`) carries the private key: never spared."""
    insert = _freenet("SSK", insert=True)
    assert not freenet_request_key(insert)
    assert freenet_request_key(_freenet("SSK", insert=False))
    assert freenet_request_key(_freenet("CHK", insert=True))  # a content hash key is public whatever its extra
    out, report = _run("insert to " + insert + "/site/")
    assert "public_id" not in report.get("spared", {})
    assert out != "insert to " + insert + "/site/"


def test_an_upper_case_config_line_of_uuencode_length_is_still_read() -> None:
    """61 characters starting `M` without a lower-case letter is not enough: encoded bytes are a third signs."""
    password = "7QK2" + "XW9R4T"
    line = "MARIADB_DATABASE_USER=ADMIN;MARIADB_ROOT_PASSWORD=" + password + ";"
    assert len(line) == 61 and not uuencoded_line(line)
    out, _ = _run(line)
    assert password not in out


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('password = "Xk9#mQ2@vB7w"', "Xk9#mQ2@vB7w"),  # an @ alone does not make an address
        ("DATABASE_URL=postgres://app:" + "Tr0ub4dor-3x@db.internal:5432/app", "Tr0ub4dor-3x"),
        ("token: " + "Zq8vK2mX9pL4rT7w@B3nF6hJ1cD5sG0aYQk8", "Zq8vK2mX9pL4rT7w@B3nF6hJ1cD5sG0aYQk8"),
    ],
)
def test_secrets_with_an_at_sign_are_still_caught(text: str, secret: str) -> None:
    assert secret not in _run(text)[0]


def test_a_random_verified_key_is_still_caught() -> None:
    key = _anthropic(_rand(B62 + "_-", 93))
    out, report = _run("ANTHROPIC_API_KEY=" + key)
    assert key not in out
    assert report.get("verified", {}).get("anthropic_api_key") == 1


# --- properties: random real-looking secrets are never spared by the new signals ------------------------------


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_random_secrets_are_never_spared_by_the_new_signals(seed: int) -> None:
    """A random labelled password (with `@`, `.` and signs) and a random Anthropic key are redacted and none of
    the new signals spares anything in them; a random Freenet insert key is never a public address; a random
    upper-case config line of uuencode length is never uuencoded data."""
    rng = random.Random(seed)
    password = _rand(PASSWORD_CHARS, rng.randrange(10, 28), rng)
    key = _anthropic(_rand(B62 + "_-", 93, rng))
    insert = _freenet(rng.choice(["SSK", "USK"]), insert=True, rng=rng)
    upper = _rand(string.ascii_uppercase + string.digits, 12, rng)
    config = "MYAPP_SERVICE_ACCOUNT=ROOT;MYAPP_SERVICE_SECRET=" + upper
    config = (config + "_" * 61)[:60] + ";"
    for text, secret in ((f'password = "{password}"', password), (f"key: {key}", key)):
        out, report = _run(text)
        assert secret not in out, text
        assert not {"uuencoded", "email_value", "public_id"} & set(report.get("spared", {})), report
    # (an insert key's pieces between `~` may be too short for the entropy fallback: what this signal adds is
    # only that it never calls one public)
    assert not freenet_request_key(insert)
    assert "public_id" not in _run(f"insert {insert}/")[1].get("spared", {})
    assert not uuencoded_line(config)
    assert not uuencoded_line(f"M{password}" + "=" * 60)
