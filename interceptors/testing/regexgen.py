"""Hypothesis strategies for the strings a regular expression matches, written for detector formats.

`hypothesis.strategies.from_regex` draws every character through the engine, so runs of a character
class come out biased towards repeats (`AAAA…`), Unicode digits and whitespace satisfy `\\d` and `\\s`,
and a pattern that needs a trailing look-ahead can never be matched in full. This compiler walks the
parsed pattern instead and:

- draws the structure (alternatives, repetition counts, letter case) through Hypothesis, so it shrinks;
- fills runs of one character class from a seeded PRNG, so secrets look like secrets (high entropy);
- keeps to printable ASCII (`SAFE_UNIVERSE`) for negated classes, `.` and `\\S`, and to a space for `\\s`;
- caps unbounded or long repetitions at `min + max_extra` (separators and punctuation at `min + 2`);
- ignores anchors and look-arounds (callers check the result with the real pattern), except a trailing
  positive look-ahead, which is generated after the match as a `tail`;
- supports groups, back-references, conditionals, atomic groups, possessive and lazy repeats, and
  scoped flags (`(?i:…)`, `(?-i:…)`).

Anything else raises `UnsupportedPattern`; `interceptors.testing.formats` then falls back to `from_regex`.
"""

from __future__ import annotations

import importlib
import random
import re
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import strategies as st

from ..errors import InterceptorsError

_parser: Any = importlib.import_module("re._parser")
T = TypeVar("T")

SAFE_UNIVERSE = string.ascii_letters + string.digits + "!#$%&()*+,-./:;=?@[]^_{|}~ "
"""What negated classes, `.` and `\\S` draw from: printable ASCII without quotes, backslash, backquote and `<>`."""

_WORD = string.ascii_letters + string.digits + "_"
_SEEDS = st.integers(0, 2**64 - 1)


class UnsupportedPattern(InterceptorsError, ValueError):
    """The pattern uses a construct this compiler does not generate."""


@dataclass(frozen=True, slots=True)
class Generated:
    """One generated match: `text` matches the pattern; `tail` is what a trailing look-ahead wants after it."""

    text: str
    tail: str = ""


def _category_chars(category: Any, universe: str) -> str:
    digits = string.digits
    table = {
        _parser.CATEGORY_DIGIT: digits,
        _parser.CATEGORY_NOT_DIGIT: "".join(c for c in universe if c not in digits),
        _parser.CATEGORY_SPACE: " ",
        _parser.CATEGORY_NOT_SPACE: "".join(c for c in universe if c != " "),
        _parser.CATEGORY_WORD: _WORD,
        _parser.CATEGORY_NOT_WORD: "".join(c for c in universe if c not in _WORD),
        _parser.CATEGORY_LINEBREAK: "\n",
        _parser.CATEGORY_NOT_LINEBREAK: universe,
    }
    if category not in table:
        raise UnsupportedPattern(f"category {category}")
    return table[category]


def _with_case(chars: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for char in chars:
        out.update((char, char.lower(), char.upper()))
    return {c for c in out if len(c) == 1}


def _set_chars(items: Any, ignore_case: bool, universe: str) -> str:
    """The characters an `IN` node (a `[...]` class) may produce, within `universe` when negated."""
    negate = False
    chars: set[str] = set()
    for op, av in items:
        if op is _parser.NEGATE:
            negate = True
        elif op is _parser.LITERAL:
            chars.add(chr(av))
        elif op is _parser.RANGE:
            low, high = av
            if high - low > 512:  # a huge range: keep to what a secret would use
                chars.update(c for c in universe if low <= ord(c) <= high)
            else:
                chars.update(chr(code) for code in range(low, high + 1))
        elif op is _parser.CATEGORY:
            chars.update(_category_chars(av, universe))
        else:
            raise UnsupportedPattern(f"class item {op}")
    if ignore_case:
        chars = _with_case(chars)
    if negate:
        chars = {c for c in universe if c not in chars}
    if not chars:
        raise UnsupportedPattern("an empty character class")
    # Printable first: a class like [\s\S] must not produce control characters.
    return "".join(sorted(chars))


def _single_class(node: Any, ignore_case: bool, universe: str) -> str | None:
    """The characters of a one-character node (literal, class, `.`, category), or None for anything else."""
    op, av = node
    if op is _parser.LITERAL:
        char = chr(av)
        return "".join(sorted(_with_case([char]))) if ignore_case else char
    if op is _parser.NOT_LITERAL:
        excluded = _with_case([chr(av)]) if ignore_case else {chr(av)}
        return "".join(c for c in universe if c not in excluded)
    if op is _parser.ANY:
        return universe
    if op is _parser.IN:
        return _set_chars(av, ignore_case, universe)
    return None


def _is_punctuation(chars: str) -> bool:
    return not any(c.isalnum() for c in chars)


class _Builder:
    """Generates one match, drawing structure from Hypothesis and character runs from a seeded PRNG."""

    def __init__(self, draw: st.DrawFn, universe: str, max_extra: int) -> None:
        self.draw = draw
        self.rng = random.Random(draw(_SEEDS))
        self.universe = universe
        self.max_extra = max_extra
        self.vary_case = draw(st.booleans())
        self.out: list[str] = []
        self.groups: dict[int, str] = {}

    def text(self) -> str:
        return "".join(self.out)

    def sequence(self, nodes: Iterable[Any], ignore_case: bool) -> None:
        for node in nodes:
            self.node(node, ignore_case)

    def literal(self, char: str, ignore_case: bool) -> str:
        if ignore_case and self.vary_case and char.isalpha():
            return char.upper() if self.rng.random() < 0.5 else char.lower()
        return char

    def node(self, node: Any, ignore_case: bool) -> None:
        op, av = node
        if op is _parser.LITERAL:
            self.out.append(self.literal(chr(av), ignore_case))
        elif op in (_parser.NOT_LITERAL, _parser.ANY, _parser.IN):
            chars = _single_class(node, ignore_case, self.universe)
            assert chars is not None
            self.out.append(self.rng.choice(chars))
        elif op is _parser.BRANCH:
            options = av[1]
            chosen = self.draw(st.integers(0, len(options) - 1))
            self.sequence(options[chosen], ignore_case)
        elif op is _parser.SUBPATTERN:
            group, add_flags, del_flags, sub = av
            scoped = (ignore_case or bool(add_flags & re.IGNORECASE)) and not del_flags & re.IGNORECASE
            start = len(self.out)
            self.sequence(sub, scoped)
            if group is not None:
                self.groups[group] = "".join(self.out[start:])
        elif op is _parser.ATOMIC_GROUP:
            self.sequence(av, ignore_case)
        elif op in (_parser.MAX_REPEAT, _parser.MIN_REPEAT, _parser.POSSESSIVE_REPEAT):
            self.repeat(av, ignore_case)
        elif op is _parser.GROUPREF:
            self.out.append(self.groups.get(av, ""))
        elif op is _parser.GROUPREF_EXISTS:
            group, yes, no = av
            branch = yes if group in self.groups else no
            if branch is not None:
                self.sequence(branch, ignore_case)
        elif op in (_parser.AT, _parser.ASSERT, _parser.ASSERT_NOT):
            return  # anchors and look-arounds: the caller checks the text with the real pattern
        else:
            raise UnsupportedPattern(f"opcode {op}")

    def repeat(self, av: Any, ignore_case: bool) -> None:
        low, high, sub = av
        items = list(sub)
        chars = _single_class(items[0], ignore_case, self.universe) if len(items) == 1 else None
        extra = 2 if chars is not None and _is_punctuation(chars) else self.max_extra
        cap = low + extra if high == _parser.MAXREPEAT else min(high, low + extra)
        count = self.draw(st.integers(low, max(low, cap)))
        if chars is not None and items[0][0] is not _parser.LITERAL:
            self.out.append("".join(self.rng.choice(chars) for _ in range(count)))
            return
        for _ in range(count):
            self.sequence(items, ignore_case)


def _check(nodes: Iterable[Any]) -> None:
    """Raise UnsupportedPattern early, so callers can fall back before drawing anything."""
    for op, av in nodes:
        if op is _parser.BRANCH:
            for option in av[1]:
                _check(option)
        elif op is _parser.SUBPATTERN:
            _check(av[3])
        elif op is _parser.ATOMIC_GROUP:
            _check(av)
        elif op in (_parser.MAX_REPEAT, _parser.MIN_REPEAT, _parser.POSSESSIVE_REPEAT):
            _check(av[2])
        elif op is _parser.GROUPREF_EXISTS:
            _check(av[1])
            if av[2] is not None:
                _check(av[2])
        elif op is _parser.IN:
            _set_chars(av, False, SAFE_UNIVERSE)
        elif op not in (
            _parser.LITERAL, _parser.NOT_LITERAL, _parser.ANY, _parser.GROUPREF, _parser.AT, _parser.ASSERT,
            _parser.ASSERT_NOT,
        ):  # fmt: skip
            raise UnsupportedPattern(f"opcode {op}")


def regex_strategy(
    pattern: str | re.Pattern[str], *, universe: str = SAFE_UNIVERSE, max_extra: int = 24
) -> st.SearchStrategy[Generated]:
    """Matches of `pattern` (checked by the caller: look-arounds and anchors are not enforced here).

    Raises UnsupportedPattern for constructs it cannot generate.
    """
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    try:
        parsed = _parser.parse(compiled.pattern, compiled.flags)
    except re.error as exc:
        raise UnsupportedPattern(f"cannot parse: {exc.msg}") from None
    nodes = list(parsed)
    _check(nodes)
    ignore_case = bool(parsed.state.flags & re.IGNORECASE)
    tail_nodes: list[Any] = []
    while nodes and nodes[-1][0] is _parser.ASSERT and nodes[-1][1][0] == 1:
        tail_nodes.insert(0, nodes.pop()[1][1])

    @st.composite
    def matches(draw: st.DrawFn) -> Generated:
        builder = _Builder(draw, universe, max_extra)
        builder.sequence(nodes, ignore_case)
        text = builder.text()
        tail = ""
        for sub in tail_nodes:
            after = _Builder(draw, universe, max_extra)
            after.sequence(sub, ignore_case)
            tail = tail or after.text()
        return Generated(text, tail)

    return matches()


def seeded_text(alphabet: str, low: int, high: int) -> st.SearchStrategy[str]:
    """Uniformly random text over `alphabet` with a drawn length: what a generated credential looks like."""
    return st.tuples(st.integers(low, high), _SEEDS).map(
        lambda pair: "".join(random.Random(pair[1]).choice(alphabet) for _ in range(pair[0]))
    )


def seeded(build: Callable[[random.Random], Any]) -> st.SearchStrategy[Any]:
    """`build(rng)` with a drawn seed: for values whose shape is easier to write than to express as strategies."""
    return _SEEDS.map(lambda seed: build(random.Random(seed)))


def uniform(options: Sequence[T]) -> st.SearchStrategy[T]:
    """One of `options`, evenly: `sampled_from` and `one_of` favour the first ones, which shrink best but
    leave the last ones rarely drawn. This still shrinks towards the first option."""
    items = list(options)
    if not items:
        raise ValueError("no options")
    return st.integers(0, 2**32 - 1).map(lambda index: items[index % len(items)])


def one_of_evenly(strategies: Sequence[st.SearchStrategy[T]]) -> st.SearchStrategy[T]:
    """`one_of` with every branch drawn equally often."""
    return uniform(strategies).flatmap(lambda chosen: chosen)
