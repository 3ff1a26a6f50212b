"""Format specs: a small generator language for what a vendor documents about its tokens.

A detector's regex says what it *matches*; its spec says what the vendor *issues*, written separately from
the vendor's documentation. The testing kit and the quality bench draw samples from the spec, so a detector
broken on purpose (`{31}` for `{32}`, a narrowed class) fails against it instead of agreeing with itself.

The language, one space-separated sequence of parts:

- `'literal'` or `"literal"`: the text as written (`\\'` inside for a quote);
- `[class]{n}` or `[class]{m,n}`: `n` (or between `m` and `n`) characters of a regex-style class
  (`A-Z`, `a-z0-9_-`; `\\]`, `\\-`, `\\\\` escape);
- `( a | b | … )`: one of the alternatives, each a sequence;
- `<` … `>`: the planted value, when the spec also writes its surroundings (`'db_pass: ' <[a-z]{12}>`);
  without it the whole output is the value;
- `@crc32b62`: six base62 characters, the CRC32 of the characters generated since the last literal
  (GitHub's and npm's token checksum);
- `@bech32`: six Bech32 characters, the checksum (BIP 173) of the characters generated since the last literal
  under the human-readable part that literal ends with (`'AGE-SECRET-KEY-1'`: `age-secret-key-`), in the case of
  the data.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import Union

from ..errors import InterceptorsError

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
BASE62_INVERTED = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def base62(number: int, width: int, alphabet: str = BASE62) -> str:
    digits = []
    while number:
        number, rest = divmod(number, 62)
        digits.append(alphabet[rest])
    return "".join(reversed(digits)).rjust(width, alphabet[0])


def crc32_base62(payload: str, alphabet: str = BASE62) -> str:
    """The six-character checksum GitHub and npm append to a token's random part."""
    return base62(zlib.crc32(payload.encode()), 6, alphabet)


def crc32_token_valid(payload_and_checksum: str) -> bool:
    """Whether the last six characters are the CRC32 of the rest (either published base62 alphabet order)."""
    if len(payload_and_checksum) < 7:
        return False
    payload, checksum = payload_and_checksum[:-6], payload_and_checksum[-6:]
    return checksum in (crc32_base62(payload, BASE62), crc32_base62(payload, BASE62_INVERTED))


BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def _bech32_polymod(values: list[int]) -> int:
    check = 1
    for value in values:
        top = check >> 25
        check = (check & 0x1FFFFFF) << 5 ^ value
        for i, generator in enumerate(_BECH32_GENERATOR):
            if (top >> i) & 1:
                check ^= generator
    return check


def _bech32_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def bech32_checksum(hrp: str, data: str, upper: bool = False) -> str:
    """The six checksum characters Bech32 (BIP 173) appends to `data` under the human-readable part `hrp`."""
    values = _bech32_expand(hrp.lower()) + [BECH32.index(c) for c in data.lower()]
    mod = _bech32_polymod([*values, 0, 0, 0, 0, 0, 0]) ^ 1
    out = "".join(BECH32[(mod >> 5 * (5 - i)) & 31] for i in range(6))
    return out.upper() if upper else out


def bech32_valid(text: str) -> bool:
    """Whether a Bech32 string (`hrp` `1` data and checksum, one case) carries a valid checksum."""
    if text != text.lower() and text != text.upper():
        return False
    lowered = text.lower()
    cut = lowered.rfind("1")
    if cut < 1 or len(lowered) - cut < 7 or any(c not in BECH32 for c in lowered[cut + 1 :]):
        return False
    values = _bech32_expand(lowered[:cut]) + [BECH32.index(c) for c in lowered[cut + 1 :]]
    return _bech32_polymod(values) == 1


@dataclass(frozen=True, slots=True)
class _Literal:
    text: str


@dataclass(frozen=True, slots=True)
class _Chars:
    alphabet: str
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class _Choice:
    options: tuple[tuple[_Part, ...], ...]


@dataclass(frozen=True, slots=True)
class _Value:
    parts: tuple[_Part, ...]


@dataclass(frozen=True, slots=True)
class _Checksum:
    kind: str


_Part = Union[_Literal, _Chars, _Choice, _Value, _Checksum]  # noqa: UP007 (a forward-referenced alias)


class SpecError(InterceptorsError, ValueError):
    """A spec that does not parse; the message names the position, never the spec's text."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def fail(self, why: str) -> SpecError:
        return SpecError(f"{why} at position {self.at}")

    def blanks(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in " \t\n":
            self.at += 1

    def sequence(self, stops: str) -> tuple[_Part, ...]:
        parts: list[_Part] = []
        while True:
            self.blanks()
            if self.at >= len(self.text) or self.text[self.at] in stops:
                return tuple(parts)
            parts.append(self.part())

    def part(self) -> _Part:
        char = self.text[self.at]
        if char in "'\"":
            return self.literal(char)
        if char == "[":
            return self.chars()
        if char == "(":
            self.at += 1
            options = [self.sequence("|)")]
            while self.at < len(self.text) and self.text[self.at] == "|":
                self.at += 1
                options.append(self.sequence("|)"))
            if self.at >= len(self.text):
                raise self.fail("an unclosed (")
            self.at += 1
            return _Choice(tuple(options))
        if char == "<":
            self.at += 1
            inner = self.sequence(">")
            if self.at >= len(self.text):
                raise self.fail("an unclosed <")
            self.at += 1
            return _Value(inner)
        if self.text.startswith("@crc32b62", self.at):
            self.at += len("@crc32b62")
            return _Checksum("crc32b62")
        if self.text.startswith("@bech32", self.at):
            self.at += len("@bech32")
            return _Checksum("bech32")
        raise self.fail("an unexpected character")

    def literal(self, quote: str) -> _Literal:
        self.at += 1
        out = []
        while self.at < len(self.text) and self.text[self.at] != quote:
            if self.text[self.at] == "\\" and self.at + 1 < len(self.text):
                self.at += 1
            out.append(self.text[self.at])
            self.at += 1
        if self.at >= len(self.text):
            raise self.fail("an unclosed literal")
        self.at += 1
        return _Literal("".join(out))

    def chars(self) -> _Chars:
        self.at += 1
        items: list[str] = []
        while self.at < len(self.text) and self.text[self.at] != "]":
            char = self.text[self.at]
            if char == "\\" and self.at + 1 < len(self.text):
                self.at += 1
                char = self.text[self.at]
            elif char == "-" and items and self.at + 1 < len(self.text) and self.text[self.at + 1] != "]":
                self.at += 1
                end = self.text[self.at]
                if end == "\\":
                    self.at += 1
                    end = self.text[self.at]
                start = items.pop()
                if ord(end) < ord(start):
                    raise self.fail("a reversed range")
                items.extend(chr(c) for c in range(ord(start), ord(end) + 1))
                self.at += 1
                continue
            items.append(char)
            self.at += 1
        if self.at >= len(self.text) or not items:
            raise self.fail("an unclosed or empty class")
        self.at += 1
        low = high = 1
        if self.text.startswith("{", self.at):
            close = self.text.find("}", self.at)
            if close < 0:
                raise self.fail("an unclosed count")
            body = self.text[self.at + 1 : close]
            first, _, rest = body.partition(",")
            try:
                low_n = int(first)
                high_n = int(rest) if rest else low_n
            except ValueError:
                raise self.fail("a count that is not a number") from None
            if not 0 <= low_n <= high_n <= 100_000:
                raise self.fail("a count out of order")
            low, high = low_n, high_n
            self.at = close + 1
        return _Chars("".join(dict.fromkeys(items)), low, high)


@dataclass(frozen=True, slots=True)
class TokenSpec:
    """A parsed spec; `generate(rng)` gives `(text, value)`: the text to plant and the part that is secret."""

    source: str
    parts: tuple[_Part, ...]

    @classmethod
    def parse(cls, text: str) -> TokenSpec:
        if not isinstance(text, str) or not text.strip():
            raise SpecError("a spec must be a non-empty string")
        parser = _Parser(text)
        parts = parser.sequence("")
        if not parts:
            raise SpecError("a spec must have at least one part")
        return cls(text, parts)

    def generate(self, rng: random.Random) -> tuple[str, str]:
        out: list[str] = []
        value: list[int] = []
        since = [0]  # where the characters a checksum covers start

        def emit(parts: tuple[_Part, ...]) -> None:
            for part in parts:
                if isinstance(part, _Literal):
                    out.append(part.text)
                    since[0] = sum(len(p) for p in out)
                elif isinstance(part, _Chars):
                    size = rng.randint(part.low, part.high)
                    out.append("".join(rng.choice(part.alphabet) for _ in range(size)))
                elif isinstance(part, _Choice):
                    emit(rng.choice(part.options))
                elif isinstance(part, _Value):
                    value.append(sum(len(p) for p in out))
                    emit(part.parts)
                    value.append(sum(len(p) for p in out))
                else:
                    covered = "".join(out)[since[0] :]
                    if part.kind == "bech32":
                        hrp = "".join(out)[: since[0]].rpartition("1")[0]
                        out.append(bech32_checksum(hrp, covered, upper=(hrp + covered).upper() == hrp + covered))
                    else:
                        out.append(crc32_base62(covered))

        emit(self.parts)
        text = "".join(out)
        if len(value) >= 2:
            return text, text[value[0] : value[1]]
        return text, text


def parse_spec(text: str) -> TokenSpec:
    return TokenSpec.parse(text)


__all__ = [
    "BASE62",
    "BECH32",
    "SpecError",
    "TokenSpec",
    "bech32_checksum",
    "bech32_valid",
    "crc32_base62",
    "crc32_token_valid",
    "parse_spec",
]
