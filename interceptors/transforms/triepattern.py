"""A regex alternation of many literals, factored as a trie so matching does not try each one in turn."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_END = ""


def literal_alternation(words: Iterable[str]) -> str:
    """A pattern matching exactly the given literals, longest alternative first at every branch point."""
    trie: dict[str, Any] = {}
    for word in words:
        if not word:
            continue
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[_END] = True
    if not trie:
        return r"(?!)"
    return _pattern(trie)


def _pattern(node: dict[str, Any]) -> str:
    branches = []
    singles = []
    for char in sorted(k for k in node if k != _END):
        child = node[char]
        rest = _pattern(child) if any(k != _END for k in child) else ""
        optional = _END in child and rest
        if not rest:
            singles.append(char)
            continue
        body = re.escape(char) + (f"(?:{rest})?" if optional else rest)
        branches.append(body)
    if singles:
        if len(singles) == 1:
            branches.append(re.escape(singles[0]))
        else:
            branches.append("[" + "".join(_class_char(c) for c in singles) + "]")
    if len(branches) == 1:
        return branches[0]
    return "(?:" + "|".join(branches) + ")"


def _class_char(char: str) -> str:
    return "\\" + char if char in "\\]^-[" else char


class LiteralFinder:
    """Which of many literals occur anywhere in a text, overlapping occurrences included.

    One alternation of them all (`(?=(...))`, tried at every position) costs the regex engine a walk through
    every first character's branch at every position of the text. Grouped by first character instead, each
    group's pattern starts with that character, which the engine skips to in a tight loop, and only where one
    occurs is the rest of the group tried: several times faster on long prose and JSON, with the same answer.
    A short text (under `SHORT` characters) still gets the one alternation: a pass per group costs more there."""

    SHORT = 64

    __slots__ = ("_any", "_every", "_groups", "_prefixes")

    def __init__(self, words: Iterable[str]) -> None:
        unique = sorted({w for w in words if w})
        by_first: dict[str, list[str]] = {}
        for word in unique:
            by_first.setdefault(word[0], []).append(word)
        # (first character, the search for the group's longer literals, whether the character alone is one, how many
        # literals the group has): a character absent from the text skips its group at memchr speed; one that is a
        # literal itself (`/`, `@`) is known present from that test, so the search never stops at each occurrence
        self._groups = tuple(
            (
                c,
                re.compile(literal_alternation(longer)).search if (longer := [w for w in group if w != c]) else None,
                c in group,
                len(group),
            )
            for c, group in by_first.items()
        )
        alternation = literal_alternation(unique)
        self._any = re.compile(alternation).search
        self._every = re.compile("(?=(" + alternation + "))").findall
        # The longest literal found at a position stands for every literal that is a prefix of it there.
        self._prefixes = {w: tuple(p for p in unique if w.startswith(p)) for w in unique}

    def any_in(self, text: str) -> bool:
        """Whether any of the literals occurs in `text`."""
        if len(text) < self.SHORT:
            return self._any(text) is not None
        return any(
            first in text and (bare or (search is not None and search(text) is not None))
            for first, search, bare, _ in self._groups
        )

    def present(self, text: str) -> set[str]:
        """The literals that occur in `text`."""
        longest: set[str] = set()
        if len(text) < self.SHORT:
            longest.update(self._every(text))
        else:
            prefixes = self._prefixes
            for first, search, bare, size in self._groups:
                if first not in text:
                    continue
                if bare:
                    longest.add(first)
                if search is None:
                    continue
                known = {first} if bare else set()  # the group's literals known present: all of them, and it stops
                match = search(text)
                while match is not None:
                    word = match.group()
                    longest.add(word)
                    known.update(prefixes[word])
                    if len(known) == size:
                        break
                    match = search(text, match.start() + 1)
        found: set[str] = set()
        prefixes = self._prefixes
        for word in longest:
            found.update(prefixes[word])
        return found
