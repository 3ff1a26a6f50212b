"""An encoded-secret corpus: the built-in families' spec samples written in every encoding a tool might use.

Each `EncodedCase` holds a text in which one secret is spelled in one encoding (bare base64, base64 twice,
hex, `%XX`, quoted-printable, wrapped at 40 columns, `\\u`/`\\x` escapes, HTML entities, gzip then base64,
fullwidth letters, a homoglyph, an invisible or space-like character inside it) and the `pieces` that must
not come out: the encoded run's lines (8 characters or more; of base64 wrapped in lines, those that carry some
of the value's bytes) and the plain value. Built at run time from the
format specs (`tokenspec`), never from a fixed file, with a fixed seed so a run is reproducible.
"""

from __future__ import annotations

import base64
import gzip
import quopri
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..transforms.catalog import BUILTIN_DETECTORS
from ..transforms.tokenspec import parse_spec

__all__ = ["ENCODERS", "EncodedCase", "encode_spelled", "encoded_cases", "leaked"]


@dataclass(frozen=True, slots=True)
class EncodedCase:
    family: str
    encoding: str
    text: str
    value: str
    pieces: tuple[str, ...]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


_WRAP_WIDTH = 40
"""The column the wrapped encodings break at (a multiple of 4: each line of base64 decodes on its own)."""


def _wrap(text: str, width: int = _WRAP_WIDTH) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _confusable(value: str) -> str:
    # Cyrillic look-alikes of a, e, o, p, c, x, y, s, i, j (by code point)
    swap = dict(
        zip("aeopcxysij", map(chr, (0x430, 0x435, 0x43E, 0x440, 0x441, 0x445, 0x443, 0x455, 0x456, 0x458)), strict=True)
    )
    for at, char in enumerate(value):
        if char in swap:
            return value[:at] + swap[char] + value[at + 1 :]
    return value


def _inside(value: str, char: str) -> str:
    middle = len(value) // 2
    return value[:middle] + char + value[middle:]


def _qp(text: str) -> str:
    return quopri.encodestring(text.encode()).decode()


# (name, encode the value, the line the encoded run sits in)
ENCODERS: dict[str, tuple[Callable[[str], str], str]] = {
    "base64_bare": (_b64, "{}"),
    "base64_labelled": (_b64, "the deploy token (base64): {}"),
    "base64_env": (lambda v: _b64(f"API_TOKEN={v}\n"), "CONFIG_B64={}"),
    "base64_twice": (lambda v: _b64(_b64(v)), "{}"),
    "hex_bare": (lambda v: v.encode().hex(), "{}"),
    "percent_bare": (lambda v: "".join(f"%{b:02X}" for b in v.encode()), "{}"),
    "quoted_printable": (
        lambda v: _qp(f"Subject: keys\nThe deploy key for the staging cluster is {v} and it rotates"),
        "{}",
    ),
    "base64_wrapped40": (lambda v: _wrap(_b64(v)), "{}"),
    "wrapped40": (_wrap, "key:\n{}"),
    "u_escape": (lambda v: "".join(f"\\u{ord(c):04x}" for c in v), '"{}"'),
    "x_escape": (lambda v: "".join(f"\\x{ord(c):02x}" for c in v), '"{}"'),
    "html_entities": (lambda v: "".join(f"&#{ord(c)};" for c in v), "<code>{}</code>"),
    "gzip_base64": (lambda v: base64.b64encode(gzip.compress(v.encode(), mtime=0)).decode(), "{}"),
    "fullwidth": (lambda v: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in v), "{}"),
    "confusable": (_confusable, "{}"),
    "figure_space": (lambda v: _inside(v, "\u2007"), "{}"),
    "hair_space": (lambda v: _inside(v, "\u200a"), "{}"),
    "zero_width": (lambda v: _inside(v, "\u200b"), "{}"),
}


_INLINE = frozenset({"wrapped40", "confusable", "figure_space", "hair_space", "zero_width"})
_CHARWISE = frozenset({"hex_bare", "percent_bare", "u_escape", "x_escape", "html_entities", "fullwidth"})


def _lines(encoded: str) -> tuple[str, ...]:
    return tuple(p for p in encoded.replace("\r", "").split("\n") if len(p) >= 8)


def _lines_holding(wrapped: str, spelled: str, value: str) -> tuple[str, ...]:
    """The lines of `spelled`'s wrapped base64 that carry some of `value`'s bytes: each line of 40 characters
    decodes to 30 bytes of its own, so a line before or after the value holds only its context."""
    raw, secret = spelled.encode(), value.encode()
    start = raw.find(secret)
    if start < 0:  # not spelled as such: every line may hold it
        return _lines(wrapped)
    end, per_line = start + len(secret), _WRAP_WIDTH * 3 // 4
    lines = wrapped.split("\n")
    held = [line for at, line in enumerate(lines) if at * per_line < end and start < (at + 1) * per_line]
    return tuple(line for line in held if len(line) >= 8)


def _families(names: Iterable[str] | None) -> list[tuple[str, str]]:
    chosen = [
        d for d in BUILTIN_DETECTORS if d.spec and d.category == "secret" and (names is None or d.name in set(names))
    ]
    return [(d.name, d.spec or "") for d in chosen]


def encoded_cases(families: Iterable[str] | None = None, *, seed: int = 29, per_family: int = 1) -> list[EncodedCase]:
    """Every family's spec sample (`per_family` each) in every encoding of `ENCODERS`."""
    rng = random.Random(seed)
    cases: list[EncodedCase] = []
    for family, spec in _families(families):
        parsed = parse_spec(spec)
        for _ in range(per_family):
            spelled, value = parsed.generate(rng)
            if "\n" in spelled or len(value) < 8:
                continue  # multi-line containers (PEM) have their own tests; short values carry no signal
            cases.extend(encode_spelled(family, spelled, value))
    return cases


def encode_spelled(family: str, spelled: str, value: str) -> list[EncodedCase]:
    """One secret (`value`, written in its context as `spelled`) in every encoding of `ENCODERS`: the kit's
    specs feed it, and so can secrets nobody here wrote (the public corpora's labelled lines)."""
    cases: list[EncodedCase] = []
    for name, (encode, line) in ENCODERS.items():
        if name in _INLINE:  # the value itself is spelled differently inside its context
            encoded = spelled.replace(value, encode(value))
            pieces: tuple[str, ...] = (value, *_lines(encode(value)))
        elif name == "base64_wrapped40":  # lines of the context alone are not the secret's and may stay as sent
            encoded = encode(spelled)
            pieces = (value, *_lines_holding(encoded, spelled, value))
        elif name == "quoted_printable":  # text with a soft line break: the value, spelled or decoded
            encoded = encode(spelled)
            pieces = (value, value.replace("=", "=3D"))
        else:
            encoded = encode(spelled)
            own = encode(value)
            pieces = (value, own) if name in _CHARWISE and own in encoded else (value, *_lines(encoded))
        text = f"tool output begins\n{line.format(encoded)}\nend of output"
        cases.append(EncodedCase(family, name, text, value, pieces))
    return cases


def leaked(case: EncodedCase, output: str) -> bool:
    """Whether any piece of the encoded secret (or the plain value) is still in `output` (for quoted-printable,
    also in its decoded form, where a soft line break no longer cuts the value)."""
    if any(piece in output for piece in case.pieces):
        return True
    if case.encoding == "quoted_printable":
        return case.value in quopri.decodestring(output.encode("utf-8", "replace")).decode("utf-8", "replace")
    return False
