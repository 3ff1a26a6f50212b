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
