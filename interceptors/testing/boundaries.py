"""What a token detector must catch, derived from the detector itself and its documented format, not its spec.

A custom detector usually has the shape *prefix + a run of one character class* (`acme_(?:live|test)_` then
`[0-9a-f]{32}`). Samples generated from the pattern agree with the pattern, so an off-by-one in it goes
unnoticed; the boundary draws here do not:

- the **shape** is read from the pattern (`token_shape`): its prefix variants, the body's alphabet and its
  length range;
- the **documented format** overrides it where the detector documents one apart from its pattern: its
  `examples:` (tokens as the vendor prints them: their body length and alphabet, the smallest usual alphabet
  holding their characters: digits, hex, alphanumerics, base64url, …) and its `hints:` (a hint that no prefix
  variant of the pattern contains documents a prefix the pattern lost);
- the **draws** (`boundary_samples`) are tokens of exactly the shortest and the longest documented length, one
  character shorter and one longer, whose last character and one other are edge characters of the alphabet
  (`0`, `9`, `a`, `f` for hex), with every documented prefix variant.

The `boundaries` standard property then asks the detector alone to find every exact-length draw whole, and
never to find only a part of a one-off draw (which would leave the token's last characters in the output).
"""

from __future__ import annotations

import importlib
import itertools
import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from ..transforms.detectors import Detector
from .formats import Secret
from .regexgen import SAFE_UNIVERSE, UnsupportedPattern, seeded, uniform
from .regexgen import _single_class as single_class

_parser: Any = importlib.import_module("re._parser")

MAX_PREFIXES = 64
ALPHABETS: tuple[tuple[str, str], ...] = (
    ("digits", string.digits),
    ("lower-case hex", string.digits + "abcdef"),
    ("upper-case hex", string.digits + "ABCDEF"),
    ("hex", string.digits + "abcdefABCDEF"),
    ("lower-case letters and digits", string.ascii_lowercase + string.digits),
    ("upper-case letters and digits", string.ascii_uppercase + string.digits),
    ("letters and digits", string.ascii_letters + string.digits),
    ("base64url", string.ascii_letters + string.digits + "-_"),
    ("base64", string.ascii_letters + string.digits + "+/"),
)
"""The usual token alphabets, narrowest first: a documented example's body is taken to be drawn from the first
one that holds all its characters."""


@dataclass(frozen=True, slots=True)
class TokenShape:
    """A token format: one of `prefixes`, then `low` to `high` characters of `alphabet`."""

    prefixes: tuple[str, ...]
    alphabet: str
    low: int
    high: int
    origin: str
    """Where each part comes from, for messages (`pattern`, `examples`, `hints`)."""
    alphabet_name: str = ""

    @property
    def edges(self) -> str:
        """The first and last character of each run of consecutive characters in the alphabet."""
        chars = sorted(set(self.alphabet))
        out: list[str] = []
        for index, char in enumerate(chars):
            first = index == 0 or ord(chars[index - 1]) != ord(char) - 1
            last = index == len(chars) - 1 or ord(chars[index + 1]) != ord(char) + 1
            if (first or last) and char not in out:
                out.append(char)
        return "".join(out)


def _literal_texts(nodes: Sequence[Any], ignore_case: bool) -> list[str] | None:
    """Every text a sequence of literals, literal classes, groups and alternations can spell (None: other)."""
    texts = [""]
    for op, av in nodes:
        if op is _parser.LITERAL:
            options = [chr(av)]
        elif op is _parser.SUBPATTERN:
            inner = _literal_texts(av[-1], ignore_case)
            if inner is None:
                return None
            options = inner
        elif op is _parser.BRANCH:
            options = []
            for branch in av[1]:
                inner = _literal_texts(branch, ignore_case)
                if inner is None:
                    return None
                options.extend(inner)
        elif op is _parser.IN and all(item[0] is _parser.LITERAL for item in av):
            options = [chr(item[1]) for item in av]
        elif op in (_parser.AT, _parser.ASSERT, _parser.ASSERT_NOT):
            continue
        else:
            return None
        texts = [head + option for head, option in itertools.product(texts, options)]
        if len(texts) > MAX_PREFIXES:
            return None
    return texts


def _flatten(nodes: Sequence[Any]) -> list[Any]:
    """The top-level items, with capturing and plain groups opened (the reported group does not matter here)."""
    out: list[Any] = []
    for op, av in nodes:
        if op is _parser.SUBPATTERN and av[-1] is not None:
            out.extend(_flatten(list(av[-1])))
        else:
            out.append((op, av))
    return out


def _repeat(node: Any, ignore_case: bool) -> tuple[str, int, int] | None:
    """`(alphabet, low, high)` of one body item: a one-character node, or a repeat of one."""
    op, av = node
    repeats = (_parser.MAX_REPEAT, _parser.MIN_REPEAT, getattr(_parser, "POSSESSIVE_REPEAT", _parser.MAX_REPEAT))
    if op in repeats:
        low, high, inner = av
        if len(inner) != 1 or high == _parser.MAXREPEAT:
            return None
        chars = single_class(inner[0], ignore_case, SAFE_UNIVERSE)
        return None if chars is None else (chars, low, high)
    chars = single_class(node, ignore_case, SAFE_UNIVERSE)
    return None if chars is None else (chars, 1, 1)


def token_shape(detector: Detector) -> TokenShape | None:
    """The detector's token shape as its pattern writes it (None: not *prefix + one bounded class run*)."""
    pattern = detector.pattern
    ignore_case = bool(pattern.flags & re.IGNORECASE)
    try:
        items = _flatten(list(_parser.parse(pattern.pattern, pattern.flags)))
    except (re.error, UnsupportedPattern, TypeError, ValueError):
        return None
    while items and items[-1][0] in (_parser.AT, _parser.ASSERT, _parser.ASSERT_NOT):
        items.pop()
    alphabet: str | None = None
    low = high = 0
    try:
        while items:
            part = _repeat(items[-1], ignore_case)
            if part is None or (alphabet is not None and part[0] != alphabet):
                break
            alphabet, low, high = part[0], low + part[1], high + part[2]
            items.pop()
    except UnsupportedPattern:
        return None
    if alphabet is None or high < 8:
        return None
    prefixes = _literal_texts(items, ignore_case)
    if not prefixes or any(not p for p in prefixes):
        return None
    return TokenShape(tuple(dict.fromkeys(prefixes)), alphabet, low, high, "pattern")


def _alphabet_of(text: str) -> tuple[str, str] | None:
    chars = set(text)
    return next(((name, alphabet) for name, alphabet in ALPHABETS if chars <= set(alphabet)), None)


def _split(example: str, prefixes: Sequence[str], hints: Sequence[str]) -> tuple[str, str]:
    """An example token's prefix and body: after the longest known prefix (or hint) it starts with, else after
    its last character that is not a letter or a digit."""
    known = [p for p in prefixes if example.startswith(p)]
    known += [example[: len(h)] for h in hints if example.lower().startswith(h)]
    if known:
        head = max(known, key=len)
        return head, example[len(head) :]
    cut = max((i + 1 for i, c in enumerate(example) if not c.isalnum()), default=0)
    return example[:cut], example[cut:]


def documented_shape(detector: Detector) -> TokenShape | None:
    """The detector's token shape with its documented format laid over the pattern's: the examples' lengths,
    alphabet and prefixes, and the hints as prefixes where no prefix variant of the pattern contains them."""
    shape = token_shape(detector)
    if shape is None:
        return None
    prefixes = list(shape.prefixes)
    origin = ["pattern"]
    lowered = [p.lower() for p in prefixes]
    hinted = [h for h in detector.hints if not any(h.lower() in p for p in lowered)]
    if hinted and all(p == p.upper() for p in prefixes) and not all(p == p.lower() for p in prefixes):
        hinted = [h.upper() for h in hinted]
    if hinted:
        prefixes += hinted
        origin.append("hints")
    alphabet, alphabet_name, low, high = shape.alphabet, "", shape.low, shape.high
    bodies = []
    for example in detector.examples:
        head, body = _split(example, shape.prefixes, detector.hints)
        if head and body:
            bodies.append(body)
            if head not in prefixes:
                prefixes.append(head)
    documented = _alphabet_of("".join(bodies)) if bodies else None
    if documented is not None:
        alphabet_name, alphabet = documented
        low, high = min(map(len, bodies)), max(map(len, bodies))
        origin.append("examples")
    return TokenShape(tuple(dict.fromkeys(prefixes)), alphabet, low, high, "+".join(origin), alphabet_name)


@dataclass(frozen=True, slots=True)
class BoundaryDraw:
    """One boundary token: `exact` ones must be found whole; the others (one character off the documented
    length) must be found whole or not at all."""

    secret: Secret
    exact: bool
    what: str

    def __repr__(self) -> str:
        return f"BoundaryDraw({self.what}, {self.secret!r})"


def boundary_samples(detector: Detector, shape: TokenShape) -> st.SearchStrategy[BoundaryDraw]:
    """Tokens at the edges of the shape: every prefix variant, the shortest and longest length and one off each,
    the last character and one other an edge character of the alphabet, the rest drawn at random."""
    lengths = sorted({shape.low, shape.high})
    variants = [(n, True) for n in lengths] + [(n, False) for n in (shape.low - 1, shape.high + 1) if n > 0]
    alphabet, edges = sorted(set(shape.alphabet)), shape.edges

    def build(choice: tuple[str, tuple[int, bool], str, str], rng: random.Random) -> BoundaryDraw:
        prefix, (length, exact), last, other = choice
        body = [rng.choice(alphabet) for _ in range(length)]
        body[-1] = last
        if length > 1:
            body[rng.randrange(length - 1)] = other
        token = prefix + "".join(body)
        kind = "exact" if exact else ("one shorter" if length < shape.low else "one longer")
        what = f"{kind}: {prefix!r} + {length} characters ending in {last!r}"
        return BoundaryDraw(Secret(detector.name, token, token, detector.entity, detector.category), exact, what)

    choices = st.tuples(uniform(shape.prefixes), uniform(variants), uniform(list(edges)), uniform(list(edges)))
    return st.tuples(choices, seeded(lambda rng: rng)).map(lambda pair: build(pair[0], pair[1]))
