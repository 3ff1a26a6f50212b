"""Normalise before matching, redact in the original.

A token written with a zero-width space inside, with fullwidth letters, with `\\u0067` for its `g` or
`&#103;` for it, is still the token to whoever reads it. Detectors match the *normalised* text: NFKC per
character, format (Cf) and other invisible code points removed, the spaces that separate words (no-break,
ideographic, line and paragraph separators) read as a space and every other space character (figure, thin,
hair …) removed, Cyrillic and Greek homoglyphs of Latin letters read as those letters,
`\\uXXXX` escapes and HTML character references decoded. Each normalised character remembers the span of
the original it came from, so a finding maps back to the whole original span (escapes, invisible characters
and all) and the redaction removes all of it.
"""

from __future__ import annotations

import html.entities
import re
import unicodedata
from functools import lru_cache

# `\\x` escapes: a run of them that spells one UTF-8 character (`\\xec\\x95\\x94`, as Python writes bytes and C
# a UTF-8 string) is that character; four hex digits after `\\x` (C's wide strings read every hex digit:
# `L"\\xc554"`) are one character when they spell a letter beyond Latin-1, else a byte and two digits.
_ESCAPE = re.compile(
    r"((?:\\x[c-fC-F][0-9a-fA-F])(?:\\x[89abAB][0-9a-fA-F]){1,3})|\\x([0-9A-Fa-f]{4})(?![0-9A-Fa-f])"
    r"|\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})|\\x([0-9A-Fa-f]{2})|&#(\d{1,7});?|&#[xX]([0-9A-Fa-f]{1,6});?"
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
# Letters of other scripts that read as a Latin letter (a Cyrillic ha in front of `oxb-` still spells a Slack
# token): the Cyrillic and Greek homoglyphs of ASCII letters (by code point), read as those letters.
_CONFUSABLE_CODES = (
    0x0410,
    0x0412,
    0x0415,
    0x0405,
    0x0406,
    0x0408,
    0x041A,
    0x041C,
    0x041D,
    0x041E,
    0x0420,
    0x0421,
    0x0422,
    0x0425,
    0x0423,
    0x0430,
    0x0435,
    0x0455,
    0x0456,
    0x0458,
    0x043E,
    0x0440,
    0x0441,
    0x0445,
    0x0443,
    0x0501,
    0x04BB,
    0x04CF,
    0x051B,
    0x051D,
    0x0391,
    0x0392,
    0x0395,
    0x0396,
    0x0397,
    0x0399,
    0x039A,
    0x039C,
    0x039D,
    0x039F,
    0x03A1,
    0x03A4,
    0x03A5,
    0x03A7,
    0x03BF,
    0x03B1,
    0x03BD,
)
_CONFUSABLES = dict(zip(map(chr, _CONFUSABLE_CODES), "ABESIJKMHOPCTXYaesijopcxydhlqwABEZHIKMNOPTYXoav", strict=True))
# Space-like code points that separate words in running text: read as a space. Every other space character
# (figure, thin, hair, narrow no-break … spaces) is read as nothing, so one inside a token does not cut it.
_WORD_SPACES = frozenset({"\u00a0", "\u1680", "\u3000", "\u2028", "\u2029", "\u0085"})


def needs_normalizing(text: str) -> bool:
    """Whether normalising could change `text` (cheap: ASCII text without escapes never needs it)."""
    if not text.isascii():
        return True
    # Substring tests first (C speed): JSON text is full of `\n` and `\"`, which the search would stop at.
    if "&" not in text and ("\\" not in text or ("\\u" not in text and "\\x" not in text and "\\U" not in text)):
        return False
    return _MAYBE_ESCAPE.search(text) is not None


@lru_cache(maxsize=8192)
def _normal_char(char: str) -> str:
    """What one character reads as: "" for invisible ones, " " for any space, else its NFKC form."""
    code = ord(char)
    if code < 0x80:
        return char
    category = unicodedata.category(char)
    if category == "Cf" or code in _INVISIBLE:
        return ""
    if char in _WORD_SPACES:
        return " "
    if category == "Zs":
        return ""
    confusable = _CONFUSABLES.get(char)
    if confusable is not None:
        return confusable
    return unicodedata.normalize("NFKC", char)


def _decoded(match: re.Match[str]) -> str:
    utf8, x_wide, hexa, wide, byte, decimal, hex_ref, named = match.groups()
    if utf8:
        raw = bytes.fromhex(utf8.replace("\\x", ""))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("latin-1")
    if x_wide:
        char = chr(int(x_wide, 16))
        if ord(char) > 0xFF and unicodedata.category(char).startswith("L"):
            return char
        return chr(int(x_wide[:2], 16)) + x_wide[2:]
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
