"""Is a restored value still in a tainted result, in any spelling we can think of? (A detector, not a rewriter.)

The response stage first swaps restored values back to their tokens where it can do so in place (`echoes`,
`stages.Repseudonymizer`). This module is the backstop it runs afterwards on the whole result of a call that
received real values: when it still finds a value, the result is withheld rather than sent. It is a judge
with many views and no repair, so it can look further than the rewriter:

- the text as it is, case-folded, and reversed;
- the text *squeezed* to its letters and digits (drops spaces, separators, quotes, commas and brackets): a
  value spelled out, cut into chunks, or listed character by character (`["a","d","a"]`) reads whole again;
  any run of `FRAGMENT` squeezed characters of the value counts (slices), and so do its every-other and
  every-third characters (even + odd);
- runs of character codes (`97,100,97`, `0x61 0x64`), decoded;
- hex runs with or without separators (`61:64:61`, `\\x61`), decoded as UTF-8, UTF-16 (both byte orders) and
  Latin-1;
- base64 (both alphabets, any alignment), base32, base85 and Ascii85 runs, decoded, and gzip or zlib inside
  them decompressed (bounded);
- percent-encoding, JSON and HTML escapes, decoded;
- the MD5, SHA-1, SHA-256 and SHA-512 digests of the value (hex or base64) anywhere in the text.

Decoded text is judged again, up to `MAX_DEPTH` layers. What no finite list can catch is a function of the
value the list does not know (a keyed hash, one character per call, a yes/no oracle): doc/VAULT.md says so,
and why `restore_to` is empty by default.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import html
import re
import zlib
from collections.abc import Iterable, Iterator
from urllib.parse import unquote_plus

MAX_DEPTH = 3
FRAGMENT = 6
"""Squeezed characters of a value that count as a piece of it (a slice, a chunk). Shorter values count whole."""
MAX_INFLATE = 1 << 20
"""Compressed layers are inflated up to this many bytes (a zip bomb costs nothing more)."""

_ALNUM = re.compile(r"[\W_]+")
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_B32_RUN = re.compile(r"[A-Za-z2-7]{8,}={0,6}")
_B85_RUN = re.compile(r"[0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]{10,}")
_A85_RUN = re.compile(r"[!-u]{10,}")
_HEX_SEP = r"(?:[\s:,;.\-]|\\+x|0x|\\+)"
_HEX_RUN = re.compile(r"(?:\\+x|0x)?[0-9a-fA-F]{2}(?:" + _HEX_SEP + r"{0,3}[0-9a-fA-F]{2}){2,}")
_NOT_HEX = re.compile(r"\\+x|0x|[^0-9a-fA-F]")
_CODES_RUN = re.compile(r"(?:0x[0-9a-fA-F]{1,6}|\d{1,7})(?:[^\w]{1,4}(?:0x[0-9a-fA-F]{1,6}|\d{1,7})){2,}")
_CODE = re.compile(r"0x[0-9a-fA-F]{1,6}|\d{1,7}")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def squeeze(text: str) -> str:
    """Letters and digits only, case-folded: how chunks, lists and spelled-out values compare."""
    return _ALNUM.sub("", text.casefold())


def _grams(text: str, size: int) -> set[str]:
    if len(text) <= size:
        return {text} if text else set()
    return {text[i : i + size] for i in range(len(text) - size + 1)}


class Taint:
    """The restored values of one operation (with their tokens, which are allowed out) and the needles to find."""

    def __init__(self, pairs: Iterable[tuple[str, str]], min_length: int = 3) -> None:
        tokens = {t.casefold() for r, t in pairs if t and r != t}
        self.tokens = sorted(tokens | {t[::-1] for t in tokens}, key=len, reverse=True)
        values = [r for r, t in pairs if len(r) >= min_length and r != t]
        self.plain: set[str] = set()
        self.squeezed: set[str] = set()
        self.digests: set[str] = set()
        for value in values:
            self.plain.update((value.casefold(), value[::-1].casefold()))
            for spelling in {value, value.casefold(), value.strip()}:
                raw = spelling.encode("utf-8", "surrogatepass")
                for name in ("md5", "sha1", "sha256", "sha512"):
                    digest = hashlib.new(name, raw).digest()
                    self.digests.update((digest.hex(), base64.b64encode(digest).decode().rstrip("=").casefold()))
            strides = [value] + [value[k::s] for s in (2, 3) for k in range(s)]
            for piece in strides:
                squeezed = squeeze(piece)
                if len(squeezed) >= min_length:
                    self.squeezed.update(_grams(squeezed, FRAGMENT))
                    self.squeezed.update(_grams(squeezed[::-1], FRAGMENT))
        self._squeezed_sizes = sorted({len(n) for n in self.squeezed})

    def __bool__(self) -> bool:
        return bool(self.plain)

    def found(self, text: str) -> bool:
        """Whether `text` holds a restored value in any view this module knows (tokens excepted)."""
        return bool(self.plain) and self._found(text, 0)

    def _found(self, text: str, depth: int) -> bool:
        folded = text.casefold()
        for token in self.tokens:  # a token is what the client may read: never evidence
            if token in folded:
                folded = folded.replace(token, " ")
        if any(p in folded for p in self.plain) or any(d in folded for d in self.digests):
            return True
        if any(d in squeeze(folded) for d in self.digests) or self._squeezed_hit(squeeze(folded)):
            return True
        if depth >= MAX_DEPTH:
            return False
        return any(self._found(layer, depth + 1) for layer in _layers(text))

    def _squeezed_hit(self, squeezed: str) -> bool:
        for size in self._squeezed_sizes:
            for i in range(len(squeezed) - size + 1):
                if squeezed[i : i + size] in self.squeezed:
                    return True
        return False


# --- decoded views -------------------------------------------------------------------------------------------


def _texts(raw: bytes) -> Iterator[str]:
    """What bytes may spell: UTF-8, UTF-16 either way when it has NULs, Latin-1; and inflated gzip or zlib."""
    if raw[:2] == b"\x1f\x8b" or (len(raw) > 2 and raw[0] == 0x78 and (raw[0] * 256 + raw[1]) % 31 == 0):
        inflated = _inflate(raw)
        if inflated is not None:
            yield from _texts(inflated)
    yield raw.decode("utf-8", "ignore")
    if b"\x00" in raw:
        for codec in ("utf-16-le", "utf-16-be"):
            yield raw[: len(raw) - len(raw) % 2].decode(codec, "ignore")
    yield raw.decode("latin-1")


def _inflate(raw: bytes) -> bytes | None:
    wbits = 31 if raw[:2] == b"\x1f\x8b" else 15
    try:
        inflater = zlib.decompressobj(wbits)
        return inflater.decompress(raw, MAX_INFLATE)
    except zlib.error:
        return None


def _worth(text: str) -> bool:
    return len(text) >= 3


def _layers(text: str) -> Iterator[str]:
    """Every decoded view of `text` one layer down."""
    for match in _B64_RUN.finditer(text):
        core = match.group(0).rstrip("=")
        for offset in range(4):
            piece = core[offset:]
            piece = piece[: len(piece) - len(piece) % 4] if len(piece) % 4 == 1 else piece
            if len(piece) < 4:
                continue
            padded = piece + "=" * (-len(piece) % 4)
            for altchars in (None, b"-_"):
                try:
                    raw = base64.b64decode(padded, altchars=altchars, validate=False)
                except (binascii.Error, ValueError):
                    continue
                yield from filter(_worth, _texts(raw))
    for match in _B32_RUN.finditer(text):
        core = match.group(0).rstrip("=").upper()
        for offset in range(8):
            piece = core[offset:]
            whole = piece[: len(piece) // 8 * 8]
            for candidate in {whole, piece + "=" * (-len(piece) % 8)}:
                if len(candidate) < 8:
                    continue
                try:
                    raw = base64.b32decode(candidate)
                except (binascii.Error, ValueError):
                    continue
                yield from filter(_worth, _texts(raw))
    for pattern, decode in ((_B85_RUN, base64.b85decode), (_A85_RUN, _a85)):
        for match in pattern.finditer(text):
            run = match.group(0)
            for offset in range(5):
                piece = run[offset:]
                try:
                    raw = decode(piece[: len(piece) // 5 * 5] if len(piece) % 5 == 1 else piece)
                except (ValueError, binascii.Error):
                    continue
                yield from filter(_worth, _texts(raw))
    for match in _HEX_RUN.finditer(text):
        digits = _NOT_HEX.sub("", match.group(0))
        for offset in (0, 1):
            piece = digits[offset:]
            piece = piece[: len(piece) - len(piece) % 2]
            if len(piece) >= 6:
                yield from filter(_worth, _texts(bytes.fromhex(piece)))
    for match in _CODES_RUN.finditer(text):
        codes = [int(c, 16) if c.startswith("0x") else int(c) for c in _CODE.findall(match.group(0))]
        yield "".join(chr(c) for c in codes if 0 < c < 0x110000 and not 0xD800 <= c < 0xE000)
    if "%" in text or "+" in text:
        yield unquote_plus(text, errors="ignore")
    if "\\u" in text:
        yield _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    if "&" in text:
        yield html.unescape(text)


def _a85(text: str) -> bytes:
    core = text[2:] if text.startswith("<~") else text
    core = core[:-2] if core.endswith("~>") else core
    return base64.a85decode(core)
