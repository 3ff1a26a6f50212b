"""Bare encodings (issue 29): a secret base64-encoded (bare, labelled, in a `.env` line, twice, wrapped, gzip'd),
hex, `%XX`, escaped, fullwidth, with a homoglyph or a space character inside is caught; binary base64 and
encoded text without a secret are left as they are."""

from __future__ import annotations

import base64
import collections

from interceptors.testing.encodings import encoded_cases, leaked
from interceptors.testing.properties import RedactionTarget

STANDARD = RedactionTarget.load("standard")
FLOOR = {"wrapped40": 0.6, "base64_wrapped40": 0.9}
"""Per-encoding floors (1.0 unless listed): a token wrapped at 40 columns is not joined across lines yet, and
base64 wrapped in lines decodes only when its lines have one width."""


def _out(text: str) -> str:
    result = STANDARD.transform("tools/call", {"content": [{"type": "text", "text": text}]})
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
