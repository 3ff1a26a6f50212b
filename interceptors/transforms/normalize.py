"""Normalise before matching, redact in the original.

A token written with a zero-width space inside, with fullwidth letters, with `\\u0067` for its `g` or
`&#103;` for it, is still the token to whoever reads it. Detectors match the *normalised* text: NFKC per
character, format (Cf) and other invisible code points removed, every kind of space read as a space,
`\\uXXXX` escapes and HTML character references decoded. Each normalised character remembers the span of
the original it came from, so a finding maps back to the whole original span (escapes, invisible characters
and all) and the redaction removes all of it.
"""

from __future__ import annotations

import html.entities
import re
import unicodedata
from functools import lru_cache

_ESCAPE = re.compile(
    r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})|\\x([0-9A-Fa-f]{2})|&#(\d{1,7});?|&#[xX]([0-9A-Fa-f]{1,6});?"
    r"|&([A-Za-z][A-Za-z0-9]{1,31};)"
)
_MAYBE_ESCAPE = re.compile(r"\\[uUx][0-9A-Fa-f]{2}|&#|&[A-Za-z][A-Za-z0-9]{1,31};")
# Invisible code points that are not Cf: fillers, the combining grapheme joiner, variation selectors, braille blank.
_INVISIBLE = frozenset(
    [
        0x034F,
        0x115F,
        0x1160,
        0x17B4,
        0x17B5,
        0x180B,
        0x180C,
        0x180D,
        0x180F,
        0x2800,
        0x3164,
        0xFFA0,
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)
_HTML5 = html.entities.html5


def needs_normalizing(text: str) -> bool:
    """Whether normalising could change `text` (cheap: ASCII text without escapes never needs it)."""
    if not text.isascii():
        return True
    return ("\\" in text or "&" in text) and _MAYBE_ESCAPE.search(text) is not None


@lru_cache(maxsize=8192)
def _normal_char(char: str) -> str:
    """What one character reads as: "" for invisible ones, " " for any space, else its NFKC form."""
    code = ord(char)
    if code < 0x80:
        return char
    category = unicodedata.category(char)
    if category == "Cf" or code in _INVISIBLE:
        return ""
    if category == "Zs" or char in "\u2028\u2029\u0085":
        return " "
    return unicodedata.normalize("NFKC", char)


def _decoded(match: re.Match[str]) -> str:
    hexa, wide, byte, decimal, hex_ref, named = match.groups()
    try:
        if hexa or wide or byte:
            return chr(int(hexa or wide or byte, 16))
        if decimal or hex_ref:
            code = int(decimal) if decimal else int(hex_ref, 16)
            return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else match.group(0)
    except ValueError:
        return match.group(0)
    return _HTML5.get(named, match.group(0))


class _Normal(dict[int, str]):
    """`str.translate` table: each code point to what it reads as (filled on first use)."""

    def __missing__(self, code: int) -> str:
        normal = self[code] = _normal_char(chr(code))
        return normal


class _Width(dict[int, str]):
    """`str.translate` table: each code point to the number of characters it reads as, as a digit."""

    def __missing__(self, code: int) -> str:
        width = self[code] = str(min(len(_normal_char(chr(code))), 9))
        return width


_NORMAL = _Normal({code: chr(code) for code in range(128)})
_WIDTH = _Width({code: "1" for code in range(128)})


def _plain(text: str, begin: int, end: int, out: list[str], starts: list[int], ends: list[int]) -> None:
    """Append the normalised form of `text[begin:end]` with the original span of every character."""
    segment = text[begin:end]
    if segment.isascii():
        out.append(segment)
        starts.extend(range(begin, end))
        ends.extend(range(begin + 1, end + 1))
        return
    normal = segment.translate(_NORMAL)
    out.append(normal)
    widths = segment.translate(_WIDTH)
    if len(normal) == len(segment) and widths.count("1") == len(segment):
        starts.extend(range(begin, end))
        ends.extend(range(begin + 1, end + 1))
        return
    if len(normal) == widths.count("1"):  # only removals: every kept character maps to one
        kept = [begin + offset for offset, width in enumerate(widths) if width == "1"]
        starts.extend(kept)
        ends.extend([at + 1 for at in kept])
        return
    for offset, width in enumerate(widths):
        at = begin + offset
        for _ in range(int(width)):
            starts.append(at)
            ends.append(at + 1)


def normalize_for_matching(text: str) -> tuple[str, list[int], list[int]]:
    """(normalised text, starts, ends): normalised character `i` came from `text[starts[i]:ends[i]]`."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    last = 0
    if "\\" in text or "&" in text:
        seen: dict[str, str | None] = {}
        for match in _ESCAPE.finditer(text):
            raw = match.group(0)
            if raw in seen:
                normal = seen[raw]
            else:
                decoded = _decoded(match)
                normal = seen[raw] = None if decoded == raw else "".join(_normal_char(c) for c in decoded)
            if normal is None:
                continue
            begin, end = match.span()
            if begin > last:
                _plain(text, last, begin, out, starts, ends)
            out.append(normal)
            starts.extend([begin] * len(normal))
            ends.extend([end] * len(normal))
            last = end
    _plain(text, last, len(text), out, starts, ends)
    return "".join(out), starts, ends


__all__ = ["needs_normalizing", "normalize_for_matching"]
