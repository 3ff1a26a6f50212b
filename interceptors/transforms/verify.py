"""Verification where a format allows it: a token that carries its own check is judged by that check.

A shape (a prefix, an alphabet, a length) says a string *could* be a token; some formats say more. GitHub's and
npm's tokens end in a CRC32 of their random part, an age key in a Bech32 checksum; a JSON Web Token's header is
base64url JSON naming its `alg`, and the signature's length follows from it; a payment card number passes the
Luhn check and starts with an issuer prefix. Each check gives one of three verdicts:

- **verified**: the check holds. The finding is reported even when it reads like a sequence (only the marker
  words of `documentation_value`, such as `EXAMPLE`, still count);
- **refuted**: the format has a check and it fails. The value is still a candidate (hand-made test tokens and
  tokens cut short in a log are real findings), but weaker evidence: every context signal that may overrule the
  entropy fallback or a labelled value may overrule it too (`context.py`);
- **unchecked**: the format has no check (most formats), or the value is not of a checked format.

A payment card number that fails Luhn is not a card at all, and an age key whose Bech32 checksum fails is no key
(age refuses it; the code catches any error of up to four characters): their detectors reject them outright.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Literal

import orjson

from .tokenspec import bech32_valid, crc32_token_valid

Verdict = Literal["verified", "refuted", "unchecked"]

# --- Luhn (ISO/IEC 7812-1 annex B) ---------------------------------------------------------------------------

_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def luhn_valid(digits: str) -> bool:
    """Whether a run of ASCII digits passes the Luhn check (the last digit is the check digit)."""
    if not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        total += _DOUBLED[value] if position % 2 else value
    return total % 10 == 0


# Issuer prefixes and lengths of the card schemes in public use (ISO/IEC 7812 IINs as the schemes publish them):
# Visa 4 (13, 16, 19); Mastercard 51-55 and 2221-2720 (16); American Express 34, 37 (15); Discover 6011, 644-649,
# 65 (16-19); JCB 3528-3589 (16-19); Diners Club 300-305, 36, 38, 39 (14-19); UnionPay 62 (16-19); Maestro 50,
# 56-58, 6 (12-19, here 13-19).
_ISSUER = re.compile(
    r"4\d{12}(?:\d{3}(?:\d{3})?)?|5[1-5]\d{14}|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)\d{12}|3[47]\d{13}"
    r"|6(?:011|4[4-9]\d|5\d\d)\d{12,15}|35(?:2[89]|[3-8]\d)\d{12,15}|3(?:0[0-5]|[689]\d)\d{11,16}|62\d{14,17}"
    r"|(?:50|5[6-8])\d{11,17}"
)


def card_number(digits: str) -> bool:
    """Whether a 13-19 digit run is a payment card number: an issuer's prefix and length, and Luhn."""
    return 13 <= len(digits) <= 19 and _ISSUER.fullmatch(digits) is not None and luhn_valid(digits)


# --- JSON Web Tokens (RFC 7519, RFC 7515 compact serialisation, RFC 7518 algorithms) ---------------------------

# The signature's length in base64url characters (no padding) for each JWS algorithm of fixed size: HMAC by its
# hash, ECDSA by its curve, EdDSA; RSA by the key size (1024 to 8192 bits in steps of 1024).
_RSA_SIZES = frozenset((bits // 8 * 4 + 2) // 3 for bits in range(1024, 8193, 1024))
_SIGNATURE_CHARS: dict[str, frozenset[int]] = {
    "HS256": frozenset({43}), "HS384": frozenset({64}), "HS512": frozenset({86}),
    "ES256": frozenset({86}), "ES256K": frozenset({86}), "ES384": frozenset({128}), "ES512": frozenset({176}),
    "EdDSA": frozenset({86, 152}), "Ed25519": frozenset({86}), "Ed448": frozenset({152}),
    **{f"{family}{bits}": _RSA_SIZES for family in ("RS", "PS") for bits in (256, 384, 512)},
    "none": frozenset({0}),
}  # fmt: skip


def _json_object(part: str) -> dict[str, object] | None:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = orjson.loads(raw)
    except (binascii.Error, ValueError):
        return None
    return value if isinstance(value, dict) else None


def jwt_verdict(token: str) -> Verdict:
    """A JWS in compact form is verified when its header is base64url JSON with a string `alg`, its claims are
    base64url JSON, and the signature has the length its algorithm gives (any length for an algorithm not listed);
    refuted when a part does not decode or the signature's length contradicts the algorithm."""
    parts = token.split(".")
    if len(parts) != 3:
        return "unchecked"
    header = _json_object(parts[0])
    if header is None or not isinstance(header.get("alg"), str) or _json_object(parts[1]) is None:
        return "refuted"
    sizes = _SIGNATURE_CHARS.get(str(header["alg"]))
    return "verified" if sizes is None or len(parts[2]) in sizes else "refuted"


# --- per detector -----------------------------------------------------------------------------------------

# An Anthropic key: `sk-ant-api03-` (or `admin01-`), 93 characters, `AA`.
_ANTHROPIC_EXACT = re.compile(r"sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{93}AA")
_CRC32_TOKENS = frozenset({"github_token", "npm_token"})


def verdict(detector: str, value: str) -> Verdict:
    """The verdict of the format's own check on a finding of a built-in detector."""
    if detector in _CRC32_TOKENS:
        if value.startswith("github_pat_"):
            return "unchecked"  # fine-grained tokens carry no published checksum
        payload = value.partition("_")[2]
        return "verified" if len(payload) == 36 and crc32_token_valid(payload) else "refuted"
    if detector == "jwt":
        return jwt_verdict(value)
    if detector == "age_secret_key":
        return "verified" if bech32_valid(value) else "refuted"
    if detector == "anthropic_api_key":
        return "verified" if _ANTHROPIC_EXACT.fullmatch(value) is not None else "unchecked"
    return "unchecked"


CHECKED = frozenset({*_CRC32_TOKENS, "jwt", "anthropic_api_key", "age_secret_key"})
"""Detectors whose findings `verdict` can judge."""

__all__ = ["CHECKED", "Verdict", "card_number", "jwt_verdict", "luhn_valid", "verdict"]
