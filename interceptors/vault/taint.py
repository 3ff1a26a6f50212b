"""Is a restored value still in a tainted result, in any spelling we can think of? (A detector, not a rewriter.)

The response stage first swaps restored values back to their tokens where it can do so in place (`echoes`,
`stages.Repseudonymizer`). This module is the backstop it runs afterwards on the whole result of a call that
received real values: when it still finds a value, the result is withheld rather than sent. It is a judge
with many views and no repair, so it can look further than the rewriter:

- the text as it is, case-folded, and reversed; the value's base64, base32, base85 and Ascii85 spellings at
  every byte alignment (the characters that depend on the value alone), found as they are;
- the text *squeezed* to its letters and digits (drops spaces, separators, quotes, commas and brackets): a
  value spelled out, cut into chunks, or listed character by character (`["a","d","a"]`) reads whole again,
  and so do its hex (UTF-8 or UTF-16, with or without `:` or `\\x`) and its decimal character codes; any run
  of `FRAGMENT` squeezed characters of the value counts (slices), and so do its every-other and every-third
  characters (even + odd);
- the MD5, SHA-1, SHA-256 and SHA-512 digests of the value (hex or base64);
- decoded layers: base64 runs (both alphabets, any alignment; gzip or zlib inside inflated, bounded), hex
  runs, percent-encoding, JSON and HTML escapes.

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
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote_plus

MAX_DEPTH = 3
FRAGMENT = 6
"""Squeezed characters of a value that count as a piece of it (a slice, a chunk); half a shorter value."""
MIN_CORE = 5
"""A base-N core this long (one base85 group: 4 bytes of the value) is specific enough to count, case-sensitive."""
MEMO_SIZE = 4096
MAX_INFLATE = 1 << 20
"""Compressed layers are inflated up to this many bytes (a zip bomb costs nothing more)."""

_ALNUM = re.compile(r"[\W_]+")
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_HEX_SEP = r"(?:[\s:,;.\-]|\\+x|0x|\\+)"
_HEX_RUN = re.compile(r"(?:\\+x|0x)?[0-9a-fA-F]{2}(?:" + _HEX_SEP + r"{0,3}[0-9a-fA-F]{2}){2,}")
_WORDLIKE = re.compile(r"[a-z]+(?:-[a-z]+)*|[A-Z][a-z]+|[A-Z]+|\d+")
"""Runs that read as a word or a number: base64 of text almost never looks like this past a few characters."""
MIN_RUN = 12
"""Shorter base64 and hex runs are not decoded backwards (their bytes hold less than a fragment and a margin)."""
_NOT_HEX = re.compile(r"\\+x|0x|[^0-9a-fA-F]")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


_TOKEN_WORDS = re.compile(r"\.example\b|\b(?:person|secret)-(?=[0-9a-f]{10}\b)")
"""The fixed words of other tokens (the `.example` domain of e-mail and host tokens, generic prefixes long enough
to be a fragment), left out of the squeezed view: a value's own `example` must not make every token evidence."""


def squeeze(text: str) -> str:
    """Letters and digits only, case-folded: how chunks, lists and spelled-out values compare."""
    return _ALNUM.sub("", text.casefold())


def fragment_size(squeezed: str) -> int:
    """How many squeezed characters of a value count as a piece of it: `FRAGMENT`, or half a short value (at
    least 4), so a short value cannot be handed out in two halves."""
    return max(4, min(FRAGMENT, len(squeezed) // 2))


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
            whole = squeeze(value)
            if len(whole) < min_length:
                continue
            size = fragment_size(whole)
            self.squeezed.update(_grams(whole, size) | _grams(whole[::-1], size))
            for piece in (value[k::s] for s in (2, 3) for k in range(s)):  # every other (third) character
                squeezed = squeeze(piece)
                if len(squeezed) >= size:
                    self.squeezed.update(_grams(squeezed, size) | _grams(squeezed[::-1], size))
        self.exact: set[str] = set()
        """Case-sensitive spellings found as they are: the value in base32 and base85 at every byte alignment."""
        self.codes: set[str] = set()
        """The value's character codes and hex digits (UTF-8, UTF-16) run together: found in the squeezed text."""
        for value in values:
            raw = value.encode("utf-8", "surrogatepass")
            self.exact.update(_aligned_cores(raw))
            self.codes.add("".join(str(ord(c)) for c in value))
            for codec in ("utf-8", "utf-16-le", "utf-16-be"):
                self.codes.add(value.encode(codec, "surrogatepass").hex())
        self.codes = {c for c in self.codes if len(c) >= 2 * FRAGMENT}
        self._squeezed_sizes = sorted({len(n) for n in self.squeezed})
        self._memo: dict[str, bool] = {}
        """Strings already judged (results repeat their strings): bounded, cleared when full."""

    def __bool__(self) -> bool:
        return bool(self.plain)

    def found(self, text: str) -> bool:
        """Whether `text` holds a restored value in any view this module knows (tokens excepted)."""
        if not self.plain or len(text) < 3:
            return False
        known = self._memo.get(text)
        if known is None:
            known = self._found(text, 0)
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[text] = known
        return known

    def found_in(self, payload: Any) -> bool:
        """Whether any string of `payload` (keys too) holds a restored value, or any list of its characters or
        character codes does once joined."""
        return any(self.found(text) for text in _texts_of(payload))

    def _found(self, text: str, depth: int) -> bool:
        folded = text.casefold()
        for token in self.tokens:  # a token is what the client may read: never evidence
            if token in folded:
                folded = folded.replace(token, " ")
        if any(p in folded for p in self.plain) or any(e in text for e in self.exact):
            return True
        squeezed = squeeze(_TOKEN_WORDS.sub(" ", folded))
        if any(d in squeezed for d in self.digests) or any(c in squeezed for c in self.codes):
            return True
        if self._squeezed_hit(squeezed):
            return True
        if depth >= MAX_DEPTH or (depth and not _texty(text)):
            return False  # noise (a misaligned or binary decoding) is judged as it is, never decoded further
        return any(self._found(layer, depth + 1) for layer in _layers(text))

    def _squeezed_hit(self, squeezed: str) -> bool:
        for size in self._squeezed_sizes:
            for i in range(len(squeezed) - size + 1):
                if squeezed[i : i + size] in self.squeezed:
                    return True
        return False


def _texts_of(payload: Any) -> Iterator[str]:
    """Every string of a payload (dict keys too); a list's scalars also joined (characters with nothing between
    them, numbers with commas) so a value handed out one character or code at a time reads whole."""
    if isinstance(payload, str):
        yield payload
    elif isinstance(payload, Mapping):
        for key, item in payload.items():
            if isinstance(key, str):
                yield key
            yield from _texts_of(item)
    elif isinstance(payload, list | tuple):
        strings = [x for x in payload if isinstance(x, str)]
        if len(strings) > 1:
            yield "".join(strings)
        numbers = [str(x) for x in payload if isinstance(x, int) and not isinstance(x, bool)]
        if len(numbers) > 2:
            yield ",".join(numbers)
        for item in payload:
            yield from _texts_of(item)


def _aligned_cores(raw: bytes) -> set[str]:
    """The characters of base64, base32, base85 and Ascii85 texts that depend only on `raw`, whatever bytes surround it
    (every alignment): found as they are, they give the value away. Cores shorter than `FRAGMENT` are left out."""
    cores: set[str] = set()
    for pad in range(5):  # base32: 5-bit characters over 40-bit groups
        encoded = base64.b32encode(b"\0" * pad + raw).decode()
        start, end = -(-8 * pad // 5), (8 * pad + 8 * len(raw)) // 5
        cores.add(encoded[start:end])
    for pad in range(3):  # base64, both alphabets: 6-bit characters over 24-bit groups
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * pad + raw).decode()
            cores.add(encoded[-(-8 * pad // 6) : (8 * pad + 8 * len(raw)) // 6])
    for pad in range(4):  # base85 and Ascii85: 5 characters per 4-byte group
        first, last = -(-pad // 4), (pad + len(raw)) // 4
        for text85 in (base64.b85encode(b"\0" * pad + raw), base64.a85encode(b"\0" * pad + raw)):
            cores.add(text85.decode()[5 * first : 5 * last])
    return {c for c in cores if len(c) >= MIN_CORE}


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
    if any(b >= 0x80 for b in raw):
        yield raw.decode("latin-1")


def _inflate(raw: bytes) -> bytes | None:
    wbits = 31 if raw[:2] == b"\x1f\x8b" else 15
    try:
        inflater = zlib.decompressobj(wbits)
        return inflater.decompress(raw, MAX_INFLATE)
    except zlib.error:
        return None


def _texty(text: str) -> bool:
    """Mostly printable: worth decoding further (as the rewriter and the leak checks require)."""
    printable = sum(1 for c in text if c.isprintable() or c in "\n\r\t")
    return printable >= 0.9 * len(text)


def _worth(text: str) -> bool:
    return len(text) >= 3


def _layers(text: str) -> Iterator[str]:
    """Every decoded view of `text` one layer down."""
    for match in _B64_RUN.finditer(text):
        core = match.group(0).rstrip("=")
        if len(core) < MIN_RUN or _WORDLIKE.fullmatch(core):
            continue  # an ordinary word; the value's own base64 is found forward (`exact`), whatever surrounds it
        alphabets = (None, b"-_") if ("-" in core or "_" in core) else (None,)
        for offset in range(4):
            piece = core[offset:]
            piece = piece[: len(piece) - len(piece) % 4] if len(piece) % 4 == 1 else piece
            if len(piece) < 4:
                continue
            padded = piece + "=" * (-len(piece) % 4)
            for altchars in alphabets:
                try:
                    raw = base64.b64decode(padded, altchars=altchars, validate=False)
                except (binascii.Error, ValueError):
                    continue
                yield from filter(_worth, _texts(raw))
    for match in _HEX_RUN.finditer(text):
        digits = _NOT_HEX.sub("", match.group(0))
        for offset in (0, 1):
            piece = digits[offset:]
            piece = piece[: len(piece) - len(piece) % 2]
            if len(piece) >= MIN_RUN:
                yield from filter(_worth, _texts(bytes.fromhex(piece)))
    if "%" in text or "+" in text:
        yield unquote_plus(text, errors="ignore")
    if "\\u" in text:
        yield _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    if "&" in text:
        yield html.unescape(text)
