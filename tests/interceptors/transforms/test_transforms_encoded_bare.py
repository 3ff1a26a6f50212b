"""Bare encodings (issue 29): a secret base64-encoded (bare, labelled, in a `.env` line, twice, wrapped, gzip'd),
hex, `%XX`, escaped, fullwidth, with a homoglyph or a space character inside is caught; binary base64 and
encoded text without a secret are left as they are."""

from __future__ import annotations

import base64
import collections
import gzip
import json
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.testing.encodings import encode_spelled, encoded_cases, leaked
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
FLOOR = {"wrapped40": 0.98}
"""Per-encoding floors (1.0 unless listed): a token wrapped at 40 columns is joined only when its first line has
no blank (`Authorization: Basic …` wrapped is read line by line)."""


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


def test_wrapped_base64_counts_only_the_lines_that_carry_the_value() -> None:
    """Each line of 40 base64 characters is 30 bytes of its own: the lines of the context alone may stay as sent
    (a redaction changes only what it must), and every line holding a byte of the value must change."""
    spelled = "c" * 70 + "ghp_" + "A" * 36 + " tail"  # the value is bytes 70..109: lines 2 and 3 hold it
    [case] = [c for c in encode_spelled("f", spelled, spelled[70:110]) if c.encoding == "base64_wrapped40"]
    encoded = base64.b64encode(spelled.encode()).decode()
    lines = [encoded[at : at + 40] for at in range(0, len(encoded), 40)]
    assert case.pieces == (spelled[70:110], lines[2], lines[3])
    assert not leaked(case, "\n".join([*lines[:2], "[REDACTED]"]))
    assert leaked(case, "\n".join([*lines[:3], "[REDACTED]"]))


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


# --- text in other scripts (UTF-8 beyond ASCII) ---------------------------------------------------------------

NOTES = [
    "암호:96jb#9j2D#J*^5N",
    "密码 : Fh^!zm9tbRkRMgSnMJq8M",
    "パスワード\uff1aQx7#mZ2!vB9pLw",  # a fullwidth colon
    "비밀번호: T4p#x9Lm2Qw8Z",
]


@pytest.mark.parametrize("note", NOTES)
def test_base64_and_hex_of_text_in_other_scripts_are_decoded(note: str) -> None:
    """Base64 (bare, in a `.env` line, twice, URL-safe) and hex of UTF-8 text beyond ASCII are read like ASCII text:
    a CJK prose password inside passed, since the gate only opened for runs of the shape of encoded ASCII."""
    value = next(f for f in SCANNER.scan(note) if f.detector.category == "secret").value
    raw = note.encode()
    for encoded in (
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        base64.b64encode(b"API_TOKEN=" + raw + b"\n").decode(),
        base64.b64encode(base64.b64encode(raw)).decode(),
        raw.hex(),
        raw.hex().upper(),
    ):
        out = _out(f"head {encoded} tail")
        assert encoded not in out and value not in out, encoded
        assert out.startswith("head ") and out.endswith(" tail")


@settings(max_examples=60, deadline=None)
@given(text=st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "Zs"]), min_size=6, max_size=60))
def test_a_decoded_view_of_text_in_any_script_never_changes_benign_text(text: str) -> None:
    """A run that decodes to text beyond ASCII holding no secret comes out as it would without decoded views."""
    if any(f.detector.category in ("secret", "credential") for f in SCANNER.scan(text)):
        return
    raw = text.encode()
    for encoded in (base64.b64encode(raw).decode(), raw.hex()):
        line = f"payload: {encoded} (end)"
        assert _out(line) == _out(line, NO_BARE)


def test_binary_base64_and_hex_are_not_decoded() -> None:
    """Binary payloads (an image header, random bytes, digests) stay as they are: the gate reads their first bytes
    and finds no UTF-8 text, or what they decode to holds C1 controls."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3).decode()
    c1 = base64.b64encode("\u0085\u0091 ü 密码 : Fh^!zm9tbRkRMgSnMJq8M".encode()).decode()
    for text in (f"image {png} end", f"sha512 {bytes(range(0, 256, 4)).hex()} end", f"bytes {c1} end"):
        assert _out(text) == _out(text, NO_BARE)


def test_the_gate_reads_the_first_bytes_of_a_run_as_utf8() -> None:
    from interceptors.transforms.encoded import _utf8_head

    assert _utf8_head(base64.b64encode("암호:96jb#9j2D#J*^5N".encode()).decode(), 0)
    assert _utf8_head("ec9594ed98b83a39366a6223", 0)
    assert not _utf8_head(base64.b64encode(b"\x89PNG\r\n\x1a\n0123456789").decode(), 0)
    assert not _utf8_head("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", 0)
    assert not _utf8_head(base64.b64encode(b"plain ASCII text only").decode(), 0)  # the ASCII shape's business


def test_a_token_filling_its_line_is_joined_with_the_rest_it_runs_on_into() -> None:
    """A variable-length token that fills its first line (so that line alone is a token) is read joined when the
    joined token runs on to the end of the last line: the rest of it came out before (a Square token)."""
    token = "sq0csp-T70ikHZSBc55ZTKEjDC_YCMmlAn4yMq-Ngle10rBIKV"
    wrapped = token[:40] + "\n" + token[40:]
    out = _out(f"key:\n{wrapped}\nend of output")
    assert out.startswith("key:\n") and out.endswith("\nend of output")
    assert token[40:] not in out and token[:40] not in out


def test_x_escapes_of_a_utf8_character_or_a_c_wide_character_read_as_it() -> None:
    """`\\xec\\x95\\x94` (bytes as Python and C write UTF-8) and `\\xc554` (a C wide string reads every hex digit) spell
    암; a byte escape followed by two hex digits that make no letter stays a byte and two digits."""
    from interceptors.transforms.normalize import normalize_for_matching

    assert normalize_for_matching("\\xec\\x95\\x94\\xed\\x98\\xb8:")[0] == "암호:"
    assert normalize_for_matching("\\xc554\\xd638:")[0] == "암호:"
    assert normalize_for_matching("\\xe9t\\xe9 \\x20ac \\xff\\xfe")[0] == "été  ac ÿþ"
    for spelled in ("\\xec\\x95\\x94\\xed\\x98\\xb8", "\\xc554\\xd638"):
        out = _out(f'"{spelled}: 96jb#9j2D#J*^5N"')
        assert "96jb#9j2D#J*^5N" not in out and out.startswith(f'"{spelled}: ')


def test_a_label_escaped_in_json_text_inside_json_text_is_still_read() -> None:
    """Found by the kit's `no_leak` property: `\\\\u5bc6\\\\u7801` (密码 in JSON text inside JSON text) hid the CJK
    label's hint from the payload's narrowing, the note passed, and its unchanged result was cached, so the same
    note in a later payload passed too."""
    note = "密码 : Fh^!zm9tb%RkRMg+SnMJq8M"
    inner = json.dumps({"note": note})  # \u5bc6\u7801
    outer = json.dumps({"payload": inner, "kind": "event"})  # \\u5bc6\\u7801
    target = RedactionTarget.load("standard")
    for text in (outer, inner, note):
        result = target.transform("tools/call", {"content": [{"type": "text", "text": text}]})
        assert "Fh^!zm9tb%RkRMg+SnMJq8M" not in json.dumps(result), text


def test_a_labelled_value_filling_its_line_is_not_joined_with_the_next_setting() -> None:
    """Found by the redaction digest: a labelled key's value ended its line, the next line was a setting of its own;
    read joined, the value ran on to the end and took `BACKUP_ENABLED=true` with it."""
    key = "SG.me=_wafnn-dn=32sdellx693c2l3atj6gaqcaramigkwa3=_vnzaekh7-v5lctkdms"
    text = f"SENGRIDAPITOKEN_TOKEN={key}\nBACKUP_ENABLED=true"
    out = _out(text)
    assert out.endswith("\nBACKUP_ENABLED=true") and "_vnzaekh7-v5lctkdms" not in out
