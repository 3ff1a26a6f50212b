"""Restored values echoed back in another spelling: found and swapped back to their tokens.

A tool that receives a real value can hand it back transformed: base64 or hex of a text holding it,
percent-encoded byte by byte, JSON `\\uXXXX` escapes, HTML character references, reversed, or spelled out
with spaces. The redactor and the leak checks of `interceptors.testing` decode every one of these (base64 and
hex runs at any alignment, URL-decoding, HTML and JSON unescaping, nested up to three layers), so the response
stage must too: each layer is decoded, the restored values are swapped inside it, and the layer is encoded
again the way it was (alphabet, padding, letter case).

Work happens only for an operation that restored something, and every scan is a linear regular expression
over the text; a layer is decoded further only when it reads as text, as the leak checks require.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from collections.abc import Callable
from urllib.parse import quote, unquote, unquote_plus

import orjson

MAX_DEPTH = 3
"""Layers of encoding peeled off, nested (as many as the leak checks peel)."""
MEMO_SIZE = 4096
MAX_SPACED = 64
"""Longer values are not looked for spelled out: the pattern would grow with no real gain."""

_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_HEX_RUN = re.compile(r"(?:[0-9a-fA-F]{2}){3,}[0-9a-fA-F]?")
# Runs of escapes and plain characters (linear: no nested quantifier); a run is decoded only when it holds
# an escape, which `Layers` checks before decoding.
_URL_CHAR = r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]"
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2}|" + _URL_CHAR + r")+")
_JSON_RUN = re.compile(r'(?:\\u[0-9a-fA-F]{4}|\\["\\/bfnrt]|[^"\\\r\n])+')
_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt])")
_HTML_RUN = re.compile(r"(?:&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?|[^\s<>&])+")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
SEPARATOR_CLASS = r"[\s\-_.,:;|/·]"
_SEPARATORS = SEPARATOR_CLASS + "{1,3}"
_SQUEEZE = re.compile(SEPARATOR_CLASS)

Rewrite = Callable[[str], str]


def texty(decoded: str) -> bool:
    """Decoded bytes worth decoding further: mostly printable (misaligned or binary runs decode to noise)."""
    if len(decoded) < 4:
        return False
    printable = sum(1 for c in decoded if c.isprintable() or c in "\n\r\t")
    return printable >= 0.9 * len(decoded)


def squeeze(text: str) -> str:
    """`text` without separators, case-folded: how a spelled-out value and the value compare."""
    return _SQUEEZE.sub("", text).casefold()


def spaced_pattern(values: list[str]) -> re.Pattern[str] | None:
    """Values spelled out with separators between their characters (`g r a c e`, `g-r-a-c-e`), any case."""
    alternatives = []
    for value in sorted(values, key=len, reverse=True):
        chars = [c for c in value if not c.isspace()]
        if 3 <= len(chars) <= MAX_SPACED:
            alternatives.append(_SEPARATORS.join(re.escape(c) for c in chars))
    return re.compile("|".join(alternatives), re.IGNORECASE) if alternatives else None


class Layers:
    """Decode each spelling in `text`, apply `inner` to the decoded layer, and encode it back when it changed.

    `inner(decoded, depth)` is the whole echo check again, one layer down (so encodings nest)."""

    def __init__(self, inner: Callable[[str, int], str], needles: list[str]) -> None:
        self.inner = inner
        self._needles = [n.casefold() for n in needles]
        self._memo: dict[tuple[str, str, int], str | None] = {}
        """Runs already judged (words repeat across the strings of a result): bounded, cleared when full."""

    def _memoised(self, how: str, run: str, depth: int, fix: Callable[[str, int], str | None]) -> str | None:
        key = (how, run, depth)
        if key in self._memo:
            return self._memo[key]
        found = fix(run, depth)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = found
        return found

    def _holds(self, text: str) -> bool:
        folded = text.casefold()
        return any(n in folded for n in self._needles)

    def _layer(self, decoded: str, depth: int) -> str | None:
        """The decoded layer rewritten, or None when it needs no change."""
        if texty(decoded) or self._holds(decoded):
            new = self.inner(decoded, depth + 1)
            if new != decoded:
                return new
        return None

    def rewrite(self, text: str, depth: int) -> str:
        if depth >= MAX_DEPTH:
            return text
        text = _runs(_B64_RUN, text, lambda run: self._memoised("b64", run, depth, self._base64))
        text = _runs(_HEX_RUN, text, lambda run: self._memoised("hex", run, depth, self._hex))
        if "%" in text:
            text = _runs(_PERCENT_RUN, text, lambda run: self._percent(run, depth))
        if "\\" in text:
            text = _runs(_JSON_RUN, text, lambda run: self._json(run, depth))
        if "&" in text:
            text = _runs(_HTML_RUN, text, lambda run: self._html(run, depth))
        return text

    def _base64(self, run: str, depth: int) -> str | None:
        core = run.rstrip("=")
        padding = run[len(core) :]
        for offset in range(4):
            piece = core[offset:]
            rest = ""
            if len(piece) % 4 == 1:  # no base64 text has this length: the last character is not part of it
                piece, rest = piece[:-1], piece[-1:]
            if len(piece) < 4:
                continue
            padded = piece + "=" * (-len(piece) % 4)
            # The URL-safe alphabet differs only where the run has `-` or `_`: otherwise both decode alike.
            for altchars in (None, b"-_") if ("-" in piece or "_" in piece) else (None,):
                try:  # as the leak checks decode: the URL-safe alphabet leniently
                    raw = base64.b64decode(padded, altchars=altchars, validate=altchars is None)
                except (binascii.Error, ValueError):
                    continue
                decoded = raw.decode("utf-8", "ignore")  # bytes that are not text are lost only if a value is found
                new = self._layer(decoded, depth)
                if new is None:
                    continue
                encoded = base64.b64encode(new.encode("utf-8", "surrogateescape"), altchars=altchars).decode()
                if not padding:
                    encoded = encoded.rstrip("=")
                return core[:offset] + encoded + rest
        return None

    def _hex(self, run: str, depth: int) -> str | None:
        for offset in (0, 1):
            piece = run[offset:]
            rest = piece[len(piece) - len(piece) % 2 :]
            piece = piece[: len(piece) - len(piece) % 2]
            if len(piece) < 6:
                continue
            decoded = bytes.fromhex(piece).decode("utf-8", "ignore")
            new = self._layer(decoded, depth)
            if new is None:
                continue
            encoded = new.encode("utf-8", "surrogateescape").hex()
            if piece.isupper() or (any(c.isupper() for c in piece) and not any(c.islower() for c in piece)):
                encoded = encoded.upper()
            return run[:offset] + encoded + rest
        return None

    def _percent(self, run: str, depth: int) -> str | None:
        if "%" not in run:
            return None
        for decode in (unquote, unquote_plus):
            decoded = decode(run, errors="surrogateescape")
            if decoded == run:
                continue
            new = self._layer(decoded, depth)
            if new is not None:
                return quote(new, safe="/:?&=@,;", errors="surrogateescape")
        return None

    def _json(self, run: str, depth: int) -> str | None:
        if "\\" not in run:
            return None
        decoded = _JSON_ESCAPE.sub(_unescape_json, run)
        if decoded == run:
            return None
        new = self._layer(decoded, depth)
        if new is None:
            return None
        return orjson.dumps(new.encode("utf-8", "surrogatepass").decode("utf-8", "replace")).decode()[1:-1]

    def _html(self, run: str, depth: int) -> str | None:
        if "&" not in run:
            return None
        decoded = html.unescape(run)
        if decoded == run:
            return None
        new = self._layer(decoded, depth)
        return None if new is None else html.escape(new, quote=False)


def _unescape_json(match: re.Match[str]) -> str:
    code = match.group(1)
    return chr(int(code[1:], 16)) if code[0] == "u" else _SIMPLE_ESCAPES[code]


def _runs(pattern: re.Pattern[str], text: str, fix: Callable[[str], str | None]) -> str:
    """`text` with every run of `pattern` that `fix` rewrites replaced (the same object when none is)."""
    pieces: list[str] = []
    position = 0
    for match in pattern.finditer(text):
        new = fix(match.group(0))
        if new is None:
            continue
        pieces.append(text[position : match.start()])
        pieces.append(new)
        position = match.end()
    if not pieces:
        return text
    pieces.append(text[position:])
    return "".join(pieces)
