"""Bare encodings (issue 29): a secret base64-encoded (bare, labelled, in a `.env` line, twice, wrapped, gzip'd),
hex, `%XX`, escaped, fullwidth, with a homoglyph or a space character inside is caught; binary base64 and
encoded text without a secret are left as they are."""

from __future__ import annotations

import base64
import collections
import gzip
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.testing.encodings import encoded_cases, leaked
from interceptors.testing.formats import secrets
from interceptors.testing.properties import RedactionTarget
from interceptors.transforms import STANDARD_TRANSFORMS
from interceptors.transforms.catalog import BUILTIN_DETECTORS
from interceptors.transforms.detectors import Scanner
from interceptors.transforms.encoded import ENCODINGS

STANDARD = RedactionTarget.load("standard")
NO_BARE = RedactionTarget.load(
    {
        **STANDARD_TRANSFORMS,
        "transforms": [
            {**spec, "decode": [e for e in ENCODINGS if e != "bare"]}
            if isinstance(spec, dict) and spec.get("type") == "redact"
            else spec
            for spec in STANDARD_TRANSFORMS["transforms"]
        ],
    }
)
SCANNER = Scanner(tuple(d for d in BUILTIN_DETECTORS if not d.fallback))
FLOOR = {"wrapped40": 0.98, "base64_wrapped40": 0.9}
"""Per-encoding floors (1.0 unless listed): a token wrapped at 40 columns is joined only when its first line has
no blank (`Authorization: Basic …` wrapped is read line by line); base64 wrapped in lines is counted caught only
when none of its lines comes out, and a re-encoded run keeps the lines before the secret as they were."""


def _out(text: str, target: RedactionTarget = STANDARD) -> str:
    result = target.transform("tools/call", {"content": [{"type": "text", "text": text}]})
    return str(result["content"][0]["text"])


def test_encoded_corpus_is_caught_per_encoding() -> None:
    caught: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for case in encoded_cases():
        caught[case.encoding][0] += not leaked(case, _out(case.text))
        caught[case.encoding][1] += 1
    for encoding, (hit, total) in caught.items():
        assert hit / total >= FLOOR.get(encoding, 1.0), encoding
    assert sum(h for h, _ in caught.values()) / sum(t for _, t in caught.values()) >= 0.95


def test_benign_encodings_are_left_as_they_are() -> None:
    png = base64.b64encode(bytes(range(256)) * 4).decode()
    texts = [
        base64.b64encode(b"just a plain sentence with nothing secret in it at all").decode(),
        "48656c6c6f2c20776f726c642120746869732069732068657820746578742e",
        "%48%65%6C%6C%6F%20%77%6F%72%6C%64",
        f"image: {png}",
        "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ]
    for text in texts:
        assert _out(text) == text


def test_only_the_encoded_run_changes() -> None:
    token = "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"
    encoded = base64.b64encode(f"TOKEN={token}\n".encode()).decode()
    text = f"before {encoded} after"
    out = _out(text)
    assert out.startswith("before ") and out.endswith(" after") and encoded not in out
    inner = base64.b64decode(out[len("before ") : -len(" after")]).decode()
    assert token not in inner and inner.startswith("TOKEN=")


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(st.sampled_from(string.ascii_letters + string.digits + " .,:;-_/=+\n"), min_size=15, max_size=120),
    how=st.sampled_from(["base64", "hex", "percent", "gzip"]),
)
@example(text="password reset link sent to the user", how="base64")
def test_a_decoded_view_never_changes_benign_text(text: str, how: str) -> None:
    """A run that decodes to text holding no secret comes out as it would without decoded views (the ordinary
    scan may still judge the encoded run itself: that is the entropy fallback's business, not the view's)."""
    raw = text.encode()
    encoded = {
        "base64": lambda: base64.b64encode(raw).decode(),
        "hex": raw.hex,
        "percent": lambda: "".join(f"%{b:02X}" for b in raw),
        "gzip": lambda: base64.b64encode(gzip.compress(raw, mtime=0)).decode(),
    }[how]()
    if any(f.detector.category in ("secret", "credential") for f in SCANNER.scan(text)):
        return  # the text itself reads as a credential: then its view is rewritten, as it should be
    line = f"payload: {encoded} (end)"
    assert _out(line) == _out(line, NO_BARE)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), how=st.sampled_from(["base64", "hex", "gzip"]))
def test_a_secret_in_a_decoded_view_is_redacted_and_only_the_run_changes(data: st.DataObject, how: str) -> None:
    secret = data.draw(secrets())
    raw = f"config:\n{secret.text}\n".encode()
    encoded = {
        "base64": lambda: base64.b64encode(raw).decode(),
        "hex": raw.hex,
        "gzip": lambda: base64.b64encode(gzip.compress(raw, mtime=0)).decode(),
    }[how]()
    out = _out(f"head {encoded} tail")
    assert encoded not in out and secret.value not in out
    if out != "[REDACTED:content]":  # a `drop` inside drops the string, as it would in plain text (private keys)
        assert out.startswith("head ") and out.endswith(" tail")


@pytest.mark.parametrize("how", ["base64", "hex", "gzip"])
def test_a_random_key_known_only_by_its_entropy_is_redacted_inside_its_encoding(how: str) -> None:
    """Found by the `thorough` profile: base64, hex or gzip+base64 of `config:\\n<random key>\\n` passed, because a
    run that decodes to text was judged never random; now it is judged by the text it decodes to."""
    key = "Mw7qG7zY-tE5Ln8is2Wg9Zq8TZ9jt1Ue-Rv7Jg5Bu9On8EC-Hq0ZJ0fU"
    raw = f"config:\n{key}\n".encode()
    encoded = {
        "base64": lambda: base64.b64encode(raw).decode(),
        "hex": raw.hex,
        "gzip": lambda: base64.b64encode(gzip.compress(raw, mtime=0)).decode(),
    }[how]()
    out = _out(f"head {encoded} tail")
    assert encoded not in out and key not in out
    assert out.startswith("head ") and out.endswith(" tail")


@pytest.mark.parametrize(
    "text", ["config:\nlisten: 8080\nname: web-frontend\n", "password reset link sent to the user"]
)
def test_an_encoding_of_text_without_a_random_run_is_not_random(text: str) -> None:
    raw = text.encode()
    for encoded in (base64.b64encode(raw).decode(), raw.hex(), base64.b64encode(gzip.compress(raw, mtime=0)).decode()):
        line = f"payload: {encoded} (end)"
        assert _out(line) == line


@settings(max_examples=80, deadline=None)
@given(data=st.data(), width=st.integers(32, 80))
def test_a_token_wrapped_in_lines_of_one_width_is_redacted(data: st.DataObject, width: int) -> None:
    """A token a terminal or a log wrapped (lines of one width, the last shorter) is read with its lines joined;
    the run is rewritten wrapped at the same width, and the text around it stays."""
    secret = data.draw(secrets())
    value = secret.value
    if len(value) <= width or any(c.isspace() for c in value):
        return  # fits on one line, or a blank inside: nothing to join
    found = {f.detector.name for f in SCANNER.scan(value) if (f.start, f.end) == (0, len(value))}
    if not found or found & {f.detector.name for f in SCANNER.scan(value[:width]) if f.start == 0}:
        return  # not a token on its own (a JWK member), or its first line is one already (a variable length)
    wrapped = "\n".join(value[i : i + width] for i in range(0, len(value), width))
    out = _out(f"key:\n{wrapped}\nend of output")
    assert out.startswith("key:\n") and out.endswith("\nend of output")
    for line in wrapped.split("\n"):
        if len(line) >= 12:
            assert line not in out


def test_lines_of_one_width_without_a_token_across_them_are_left_as_they_are() -> None:
    digests = "\n".join(f"{i:064x}"[::-1].replace("0", "7") for i in range(1, 6)) + "\nabc"
    lines = [
        digests,  # a checksum list: each line is the ordinary scan's
        "\n".join(["https://example.org/docs/getting-started/install"[:40]] * 3) + "\nend",
        base64.b64encode(bytes(range(256))).decode()[:160].replace("+", "a"),
    ]
    for text in lines:
        assert _out(text) == _out(text, NO_BARE)


def test_a_token_that_ends_its_line_is_not_glued_to_the_next_line() -> None:
    """Found by the encoded-syntax property: a Fly.io token (variable length) ending a line, then a pwdump line;
    joined, the token ran on into the next line and hid its NT hash."""
    token = "fm2_" + "lJPEFh+zm9tbRkRMgSnMJq8Mt3oa94hHBLzA/qfpIYceS5LKo+NmlPqak4LxoelXYXEh8ILQTEKyjeb1j5" * 2
    nt_hash = "384932af3bda6fe8102c0fa7a26774e2"
    out = _out(f"{token}\nmynbiqpmzj:6824:aad3b435b51404eeaad3b435b51404ee:{nt_hash}:::")
    assert token not in out and nt_hash not in out


def test_a_wrapped_nats_seed_is_redacted_in_place() -> None:
    """A one-line seed is a token, not a key block: redacted where it stands, wrapped or not, the text around it
    kept (it was the `private_key` entity, whose `drop` replaced the whole text; the property above found it)."""
    seed = "SUAM" + "".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"[(i * 7 + 3) % 32] for i in range(54))
    wrapped = seed[:32] + "\n" + seed[32:]
    assert _out(f"key:\n{wrapped}\nend of output") == "key:\n[REDACTED:api_token]\nend of output"
    assert _out(f"seed {seed} end") == "seed [REDACTED:api_token] end"
