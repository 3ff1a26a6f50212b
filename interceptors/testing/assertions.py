"""Assertions for what came out of a pipeline, a chain or a gateway: no leak, no false positive, a roundtrip.

Failure messages never print a secret: a short masked prefix and suffix, its length, where it was found
(a JSON path, plus how it was spelled there) and a masked window around it.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, unquote_plus

from ..errors import InterceptorsError
from ._mask import mask, masked_window

MAX_DEPTH = 3
"""How many layers of encoding (JSON in strings, base64, hex, URL-encoding) are peeled off, nested."""

_MIN_ENCODED_BYTES = 6
"""Encoded runs of 6 bytes or more are decoded (base64: 8 characters, padding included; hex: 12 digits), so the
shortest sample encoded alone (`://:p@h` in a data: URL or a Kubernetes Secret field) is still found."""
_B64_MIN_RUN = 4 * _MIN_ENCODED_BYTES // 3
_B64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{_B64_MIN_RUN - 2},}}={{0,2}}")
_HEX_RUN = re.compile(rf"(?:[0-9a-fA-F]{{2}}){{{_MIN_ENCODED_BYTES},}}")
_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt])")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class LeakError(InterceptorsError, AssertionError):
    """A planted secret came out (the message masks it)."""


class FalsePositiveError(InterceptorsError, AssertionError):
    """A value that had to come out unchanged did not (the message shows it: decoys are not secrets)."""


class RoundtripError(InterceptorsError, AssertionError):
    """A pseudonymizer did not give a value back (the message masks it)."""


@dataclass(frozen=True, slots=True)
class Haystack:
    """One string of the output, as spelled somewhere: `how` names the decodings applied to reach it."""

    path: str
    text: str
    how: str = "raw"


def _unescape_json_fragments(text: str) -> str:
    def swap(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "u":
            return chr(int(code[1:], 16))
        return _SIMPLE_ESCAPES[code]

    return _JSON_ESCAPE.sub(swap, text)


def _texty(decoded: str) -> bool:
    """Decoded bytes worth searching: mostly printable (misaligned or random runs decode to noise)."""
    if len(decoded) < 4:
        return False
    printable = sum(1 for c in decoded if c.isprintable() or c in "\n\r\t")
    return printable >= 0.9 * len(decoded)


def _b64_decodings(text: str) -> Iterator[tuple[int, str]]:
    for match in _B64_RUN.finditer(text):
        run = match.group(0)
        if len(run) < _B64_MIN_RUN:
            continue
        core = run.rstrip("=")
        for offset in range(4):
            piece = core[offset:]
            if len(piece) % 4 == 1:  # no base64 text has this length: the last character is not part of it
                piece = piece[:-1]
            if len(piece) < 8:
                continue
            padded = piece + "=" * (-len(piece) % 4)
            for altchars in (None, b"-_"):
                try:
                    raw = base64.b64decode(padded, altchars=altchars, validate=altchars is None)
                except (binascii.Error, ValueError):
                    continue
                decoded = raw.decode("utf-8", "ignore")
                if _texty(decoded):
                    yield match.start() + offset, decoded


def _hex_decodings(text: str) -> Iterator[tuple[int, str]]:
    for match in _HEX_RUN.finditer(text):
        for offset in (0, 1):
            piece = match.group(0)[offset:]
            piece = piece[: len(piece) - len(piece) % 2]
            try:
                decoded = bytes.fromhex(piece).decode("utf-8", "ignore")
            except ValueError:
                continue
            if _texty(decoded):
                yield match.start() + offset, decoded


def _decodings(text: str) -> Iterator[tuple[str, str]]:
    """Other spellings of `text`: URL-decoded, HTML-unescaped, JSON-unescaped, base64 and hex runs decoded."""
    if "%" in text or "+" in text:
        for name, decode in (("url-decoded", unquote), ("url-decoded(+)", unquote_plus)):
            decoded = decode(text)
            if decoded != text:
                yield name, decoded
    if "&" in text:
        unescaped = html.unescape(text)
        if unescaped != text:
            yield "html-unescaped", unescaped
    if "\\" in text:
        unescaped = _unescape_json_fragments(text)
        if unescaped != text:
            yield "json-unescaped", unescaped
    for at, decoded in _b64_decodings(text):
        yield f"base64 at {at}", decoded
    for at, decoded in _hex_decodings(text):
        yield f"hex at {at}", decoded


def _parse_json(text: str) -> Any:
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] not in '[{"':
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def haystacks(value: Any, path: str = "$", *, depth: int = MAX_DEPTH) -> Iterator[Haystack]:
    """Every string in `value` (keys, strings, numbers as text), then JSON inside strings and decodings."""
    if isinstance(value, dict):
        for key, item in value.items():
            label = f"{path}.{key}" if isinstance(key, str) and key.isidentifier() else f"{path}[{str(key)[:20]!r}]"
            yield from haystacks(str(key), f"{path}<key>", depth=depth)
            yield from haystacks(item, label, depth=depth)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from haystacks(item, f"{path}[{index}]", depth=depth)
    elif isinstance(value, bytes | bytearray):
        yield from haystacks(bytes(value).decode("utf-8", "replace"), path, depth=depth)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield Haystack(path, repr(value) if isinstance(value, float) else str(value))
    elif isinstance(value, str):
        yield Haystack(path, value)
        if depth <= 0:
            return
        parsed = _parse_json(value)
        if parsed is not None and not isinstance(parsed, str | int | float):
            for inner in haystacks(parsed, f"{path}<json>", depth=depth - 1):
                yield inner
        for how, decoded in _decodings(value):
            for inner in haystacks(decoded, path, depth=depth - 1):
                yield Haystack(inner.path, inner.text, how if inner.how == "raw" else f"{how}, {inner.how}")


def _needle(item: Any) -> str:
    value = getattr(item, "value", item)
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True, slots=True)
class Leak:
    index: int
    secret: str
    where: Haystack
    at: int

    def describe(self, needles: tuple[str, ...]) -> str:
        window = masked_window(self.where.text, self.at, self.at + len(self.secret), needles)
        return f"  secret #{self.index + 1} {mask(self.secret)} at {self.where.path} ({self.where.how}): {window}"


def _find(text: str, needle: str, bounded: bool) -> int:
    """The first occurrence; with `bounded`, one not glued to letters or digits on a side where the needle has one
    (a format-preserving pseudonym may start with a short original, as `arn:aws:s3:::r` in `arn:aws:s3:::res-1a2b`)."""
    at = text.find(needle)
    if not bounded:
        return at
    while at >= 0:
        before = text[at - 1] if at > 0 else ""
        after = text[at + len(needle) : at + len(needle) + 1]
        if not (needle[0].isalnum() and before.isalnum()) and not (needle[-1].isalnum() and after.isalnum()):
            return at
        at = text.find(needle, at + 1)
    return -1


def find_leaks(emitted: Any, secrets: Iterable[Any], *, bounded: bool = False) -> list[Leak]:
    """Where each secret (a string, or anything with a `value`) occurs in `emitted`, in any spelling.

    With `bounded`, an occurrence glued to a letter or digit does not count (for pseudonymised identifiers)."""
    needles = [n for n in (_needle(s) for s in secrets) if n]
    if not needles:
        return []
    leaks: list[Leak] = []
    seen: set[int] = set()
    for hay in haystacks(emitted):
        for index, needle in enumerate(needles):
            if index in seen:
                continue
            at = _find(hay.text, needle, bounded)
            if at >= 0:
                leaks.append(Leak(index, needle, hay, at))
                seen.add(index)
        if len(seen) == len(needles):
            break
    return sorted(leaks, key=lambda leak: leak.index)


def assert_no_leak(emitted: Any, secrets: Iterable[Any], *, what: str = "output", bounded: bool = False) -> None:
    """Fail if any secret occurs anywhere in `emitted`: any string or key, JSON inside strings, and the
    common re-spellings (JSON escapes, URL-encoding, HTML entities, base64, hex), nested up to 3 deep.

    `secrets` are strings or objects with a `value` (such as `interceptors.testing.Secret`). With `bounded`,
    an occurrence glued to a letter or digit is not a leak: format-preserving pseudonyms of identifiers may begin
    with a short original.
    """
    needles = tuple(_needle(s) for s in secrets)
    leaks = find_leaks(emitted, needles, bounded=bounded)
    if leaks:
        lines = "\n".join(leak.describe(needles) for leak in leaks)
        raise LeakError(f"{len(leaks)} of {len(needles)} planted secret(s) came out in the {what}:\n{lines}")


def assert_not_redacted(emitted: Any, values: Iterable[Any], *, what: str = "output") -> None:
    """Fail unless every value (a string, or anything with a `value`) occurs unchanged in `emitted`.

    For false positives: placeholders, near-misses and identifiers a policy keeps must survive.
    """
    wanted = [_needle(v) for v in values]
    texts = [hay.text for hay in haystacks(emitted)]
    missing = [value for value in wanted if value and not any(value in text for text in texts)]
    if missing:
        shown = "\n".join(f"  {value!r}" for value in missing[:10])
        more = f"\n  … and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise FalsePositiveError(
            f"{len(missing)} of {len(wanted)} value(s) that must pass unchanged were altered or removed in the "
            f"{what}:\n{shown}{more}"
        )


def assert_roundtrip(
    vault: Any,
    values: Iterable[Any],
    *,
    entity: str = "secret_value",
    namespace: str | None = None,
    other_namespace: str | None = None,
    embedded_min_length: int = 6,
    allow_passthrough: bool = True,
) -> None:
    """Fail unless `vault` gives every value back from its token, alone and inside text.

    Duck-typed on the transforms' `Pseudonymizer` protocol: `tokenize(value, entity, namespace)`,
    `detokenize(text, namespace) -> (text, pairs)`, optional `namespace_for(principal)` and `reversible`.
    `values` are strings, `(value, entity)` pairs, or objects with `value` and `entity` (`Secret`).
    Checked: the token does not contain the value; tokenizing again gives the same token; distinct values of
    one entity get distinct tokens; detokenizing the token restores the value, and so does detokenizing a
    sentence holding it (for tokens of `embedded_min_length` characters or more: a vault may reverse shorter
    ones only as whole strings); with `other_namespace`, the token is not reversed there. A value that comes
    back unchanged (a vault passes values that name nothing, such as special addresses) is accepted unless
    `allow_passthrough` is false.
    """
    for method in ("tokenize", "detokenize"):
        if not callable(getattr(vault, method, None)):
            raise TypeError(f"{type(vault).__name__} has no {method}(): not a pseudonymizer")
    if getattr(vault, "reversible", True) is False:
        raise RoundtripError(f"{type(vault).__name__} is not reversible")
    space = namespace
    if space is None:
        namespace_for = getattr(vault, "namespace_for", None)
        space = namespace_for(None) if callable(namespace_for) else "global"
    problems: list[str] = []
    issued: dict[tuple[str, str], str] = {}
    for item in values:
        if isinstance(item, tuple):
            value, kind = item
        else:
            value, kind = _needle(item), getattr(item, "entity", entity)
        token = vault.tokenize(value, kind, space)
        shown = mask(value)
        if not isinstance(token, str) or not token:
            problems.append(f"  {shown} as {kind}: tokenize gave {type(token).__name__}")
            continue
        if token == value:
            if not allow_passthrough:
                problems.append(f"  {shown} as {kind}: came back unchanged")
            continue
        if len(value) >= 4 and value in token:
            problems.append(f"  {shown} as {kind}: the token contains the value")
            continue
        if vault.tokenize(value, kind, space) != token:
            problems.append(f"  {shown} as {kind}: tokenizing twice gave two tokens")
        owner = next((v for (v, k), t in issued.items() if t == token and k == kind and v != value), None)
        if owner is not None:
            problems.append(f"  {shown} and {mask(owner)} as {kind}: one token for two values")
        issued[(value, kind)] = token
        restored, _ = vault.detokenize(token, space)
        if restored != value:
            problems.append(f"  {shown} as {kind}: detokenize(token) gave {mask(str(restored))}")
        if len(token) >= embedded_min_length:
            restored_text, _ = vault.detokenize(f"see {token} then reply", space)
            if restored_text != f"see {value} then reply":
                problems.append(f"  {shown} as {kind}: not restored inside text")
        if other_namespace is not None and other_namespace != space:
            elsewhere, _ = vault.detokenize(token, other_namespace)
            if elsewhere == value:
                problems.append(f"  {shown} as {kind}: reversed in another namespace")
    if problems:
        raise RoundtripError(f"{len(problems)} roundtrip problem(s):\n" + "\n".join(problems))
