"""Glob lists: fnmatch patterns compiled to one anchored, case-sensitive regex; `!` negates."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence


def _compile(patterns: Sequence[str], fold_file_case: bool = False) -> re.Pattern[str] | None:
    if not patterns:
        return None
    # fnmatch.translate anchors with \Z and lets `*` cross `/` and `:`; re (not fnmatch.fnmatch) keeps case.
    return re.compile("|".join(_one(p, fold_file_case) for p in patterns))


def _one(pattern: str, fold_file_case: bool) -> str:
    flags = "i" if fold_file_case and pattern[:5].lower() == "file:" else ""
    return f"(?{flags}:{fnmatch.translate(pattern)})" if flags else f"(?:{fnmatch.translate(pattern)})"


class Globs:
    """Matches when at least one positive pattern matches and no negated one does.

    A list of only negations therefore matches nothing, which keeps `deny_tools: ["!safe"]` from
    silently denying everything else.
    """

    __slots__ = ("_negative", "_positive", "patterns")

    def __init__(self, patterns: Iterable[str], *, fold_file_case: bool = False) -> None:
        """`fold_file_case`: `file:` patterns match without regard to case (a file system that folds case)."""
        self.patterns = tuple(patterns)
        self._positive = _compile([p for p in self.patterns if not p.startswith("!")], fold_file_case)
        self._negative = _compile([p[1:] for p in self.patterns if p.startswith("!")], fold_file_case)

    def match(self, text: str) -> bool:
        if self._positive is None or self._positive.match(text) is None:
            return False
        return self._negative is None or self._negative.match(text) is None

    def match_any(self, texts: Iterable[str]) -> bool:
        """For a primitive known by several idents (template, concrete URI, decoded URI)."""
        return any(self.match(text) for text in texts)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def __repr__(self) -> str:
        return f"Globs({list(self.patterns)!r})"
