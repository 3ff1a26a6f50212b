"""Verification where a format allows it (`interceptors.transforms.verify`): Luhn for card numbers, JWT structure,
the CRC32 of GitHub and npm tokens, and what a failed check changes (weaker evidence, never silence)."""

from __future__ import annotations

import base64
import json
import random
import string
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from interceptors.transforms import STANDARD_TRANSFORMS, STRICT_TRANSFORMS, TransformContext, assemble_output
from interceptors.transforms.catalog import BUILTIN_BY_NAME
from interceptors.transforms.channels import transform_tool_result
from interceptors.transforms.detectors import Scanner
from interceptors.transforms.tokenspec import BASE62, BECH32, bech32_checksum, bech32_valid, crc32_base62
from interceptors.transforms.verify import card_number, jwt_verdict, luhn_valid, verdict

CARDS = Scanner((BUILTIN_BY_NAME["payment_card"],))
STANDARD = assemble_output(STANDARD_TRANSFORMS)
STRICT = assemble_output(STRICT_TRANSFORMS)


def _check_digit(body: str) -> str:
    return next(d for d in "0123456789" if luhn_valid(body + d))


def _out(pipeline: Any, text: str) -> str:
    out, _ = transform_tool_result({"content": [{"type": "text", "text": text}]}, pipeline, TransformContext())
    return str(out["content"][0]["text"])


# --- Luhn and card numbers ------------------------------------------------------------------------------------


@given(st.text(alphabet=string.digits, min_size=1, max_size=30))
def test_exactly_one_check_digit_completes_a_run(body: str) -> None:
    assert sum(luhn_valid(body + d) for d in string.digits) == 1


@given(st.text(alphabet=string.digits, min_size=12, max_size=18), st.data())
def test_luhn_catches_every_single_digit_error(body: str, data: st.DataObject) -> None:
    number = body + _check_digit(body)
    at = data.draw(st.integers(0, len(number) - 1))
    wrong = data.draw(st.sampled_from([d for d in string.digits if d != number[at]]))
    assert not luhn_valid(number[:at] + wrong + number[at + 1 :])


def test_known_test_numbers_of_the_schemes_are_cards() -> None:
    for number in ("4111111111111111", "5555555555554444", "2223003122003222", "378282246310005",
                   "6011111111111117", "3530111333300000", "4222222222222"):  # fmt: skip
        assert card_number(number), number
    assert not card_number("1234567812345670")  # Luhn holds, but no issuer starts with 1
    assert not card_number("4111111111111112")


@given(st.sampled_from(["4", "51", "2221", "6011", "3530"]), st.data())
def test_a_digit_run_failing_luhn_is_never_a_card(prefix: str, data: st.DataObject) -> None:
    body = prefix + data.draw(st.text(alphabet=string.digits, min_size=15 - len(prefix), max_size=15 - len(prefix)))
    good = body + _check_digit(body)
    bad = body + str((int(_check_digit(body)) + data.draw(st.integers(1, 9))) % 10)
    grouped = data.draw(st.booleans())

    def shown(number: str) -> str:
        return " ".join(number[i : i + 4] for i in range(0, 16, 4)) if grouped else number

    assert [f.value for f in CARDS.scan(f"card {shown(good)} ok")] == [shown(good)]
    assert CARDS.scan(f"card {shown(bad)} ok") == []


def test_card_numbers_are_personal_data_the_strict_profile_hides() -> None:
    text = "paid with 4111 1111 1111 1111 today"
    assert _out(STANDARD, text) == text  # personal data is kept by the standard profile
    assert "4111 1111 1111 1111" not in _out(STRICT, text)
    assert _out(STRICT, "order 4111 1111 1111 1112") == "order 4111 1111 1111 1112"  # fails Luhn: not a card
    assert _out(STRICT, "version 1.4111111111111111") == "version 1.4111111111111111"


# --- JSON Web Tokens ------------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(alg: str, claims: dict[str, Any], signature_bytes: int, rng: random.Random) -> str:
    header = _b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    return f"{header}.{_b64(json.dumps(claims).encode())}.{_b64(rng.randbytes(signature_bytes))}"


SIZES = {"HS256": 32, "HS384": 48, "HS512": 64, "RS256": 256, "PS512": 512, "ES256": 64, "ES384": 96, "ES512": 132}


@given(st.sampled_from(sorted(SIZES)), st.dictionaries(st.text(min_size=1, max_size=8), st.integers(), max_size=4),
       st.randoms(use_true_random=False))  # fmt: skip
def test_a_well_formed_jwt_is_verified_and_a_wrong_signature_length_refutes_it(
    alg: str, claims: dict[str, Any], rng: random.Random
) -> None:
    assert jwt_verdict(_jwt(alg, claims, SIZES[alg], rng)) == "verified"
    assert jwt_verdict(_jwt(alg, claims, SIZES[alg] - 7, rng)) == "refuted"


def test_a_jwt_whose_parts_do_not_decode_is_refuted() -> None:
    good = _jwt("HS256", {"sub": "1"}, 32, random.Random(1))
    header, claims, signature = good.split(".")
    assert jwt_verdict(f"eyJhbGciOieeeiIsInR5cCI6IkpXVCJ9.{claims}.{signature}") == "refuted"  # header is not JSON
    no_alg, unsecured = _b64(b'{"typ":"JWT"}'), _b64(b'{"alg":"none"}')
    assert jwt_verdict(f"{no_alg}.{claims}.{signature}") == "refuted"  # no alg
    assert jwt_verdict(f"{header}.eyJub3Rqc29u.{signature}") == "refuted"  # claims are not JSON
    assert jwt_verdict(f"{unsecured}.{claims}.") == "verified"  # an unsecured JWT is a JWT
    assert jwt_verdict("a.b") == "unchecked"


def test_a_refuted_jwt_is_still_redacted_but_context_may_spare_it() -> None:
    good = _jwt("HS256", {"sub": "1234567890", "name": "Ada"}, 32, random.Random(2))
    _, claims, signature = good.split(".")
    broken = f"eyJhbGciOieeeiIsInR5cCI6IkpXVCJ9.{claims}.{signature}"
    for token in (good, broken):
        assert token not in _out(STANDARD, f"Authorization: Bearer {token}")
        assert token not in _out(STANDARD, f"token={token}")
    # a value after a request id's label is an id to every generic detector; a refuted JWT is no stronger
    assert _out(STANDARD, f"x-request-id: {broken}") == f"x-request-id: {broken}"
    assert good not in _out(STANDARD, f"x-request-id: {good}")
    # where only a random run is judged by its place (an image's URL), a JWT is still a JWT, refuted or not
    for token in (good, broken):
        assert token not in _out(STANDARD, f"https://cdn.example.org/{token}/logo.png")


# --- CRC32 tokens -----------------------------------------------------------------------------------------------


def _github(rng: random.Random, valid: bool) -> str:
    payload = "".join(rng.choice(BASE62) for _ in range(30))
    checksum = crc32_base62(payload)
    if not valid:
        checksum = checksum[:-1] + ("A" if checksum[-1] != "A" else "B")
    return "ghp_" + payload + checksum


@given(st.randoms(use_true_random=False))
def test_github_tokens_are_verified_by_their_crc32(rng: random.Random) -> None:
    assert verdict("github_token", _github(rng, True)) == "verified"
    assert verdict("github_token", _github(rng, False)) == "refuted"
    assert verdict("github_token", "github_pat_" + "A" * 82) == "unchecked"


def test_a_token_failing_its_checksum_is_a_candidate_but_weaker() -> None:
    rng = random.Random(7)
    valid, invalid = _github(rng, True), _github(rng, False)
    for token in (valid, invalid):  # either way a token on its own is redacted
        assert token not in _out(STANDARD, f"export GITHUB_TOKEN={token}")
        assert token not in _out(STANDARD, f"push with {token} now")
    # after a request id's label, only the token whose checksum holds is still taken for a token
    assert _out(STANDARD, f"x-request-id: {invalid}") == f"x-request-id: {invalid}"
    assert valid not in _out(STANDARD, f"x-request-id: {valid}")
    # a hand-made token planted in an icon's URL is still redacted
    assert invalid not in _out(STANDARD, f"https://cdn.example.org/{invalid}.png")


# --- Bech32 (age keys) ------------------------------------------------------------------------------------------

AGE = Scanner((BUILTIN_BY_NAME["age_secret_key"],))


def test_bech32_matches_the_published_test_vectors() -> None:
    for valid in ("A12UEL5L", "a12uel5l", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
                  "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw"):  # fmt: skip
        assert bech32_valid(valid), valid
    for invalid in ("A12UeL5L", "a12uel5m", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", "1qzzfhee"):
        assert not bech32_valid(invalid), invalid


@given(st.text(alphabet=BECH32.upper(), min_size=52, max_size=52), st.data())
def test_an_age_key_is_reported_only_when_its_checksum_holds(data: str, draw: st.DataObject) -> None:
    key = "AGE-SECRET-KEY-1" + data + bech32_checksum("age-secret-key-", data, upper=True)
    assert verdict("age_secret_key", key) == "verified"
    assert [f.value for f in AGE.scan(f"key: {key}")] == [key]
    at = draw.draw(st.integers(16, len(key) - 1))
    changed = key[:at] + draw.draw(st.sampled_from([c for c in BECH32.upper() if c != key[at]])) + key[at + 1 :]
    assert verdict("age_secret_key", changed) == "refuted"
    assert AGE.scan(f"key: {changed}") == []  # one character changed: age refuses it, so it is no key


def test_an_age_key_with_a_wrong_checksum_passes_the_whole_pipeline_unchanged() -> None:
    data = "KZYHJJGJ5DEC3RXGPEUA97WG99HU4Z3Z9ZK69GHAFZWJ08SFVF0Q"
    key = "AGE-SECRET-KEY-1" + data + bech32_checksum("age-secret-key-", data, upper=True)
    wrong = key[:-1] + ("Q" if key[-1] != "Q" else "P")
    assert key not in _out(STANDARD, f"{key} - a key")
    assert _out(STANDARD, f"{wrong} - a key") == f"{wrong} - a key"  # not even the entropy fallback takes it


def test_the_report_says_which_checks_held() -> None:
    rng = random.Random(11)
    valid, invalid = _github(rng, True), _github(rng, False)
    jwt = _jwt("HS256", {"sub": "1"}, 32, rng)
    ctx = TransformContext()
    transform_tool_result({"content": [{"type": "text", "text": f"{valid} {invalid} {jwt}"}]}, STANDARD, ctx)
    assert ctx.report["verified"] == {"github_token": 1, "jwt": 1}
    assert ctx.report["refuted"] == {"github_token": 1}
    assert ctx.report["redacted"] == {"api_token": 2, "jwt": 1}
