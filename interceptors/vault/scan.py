"""Finding known tokens inside free text, in linear time and only as whole "words".

Text is cut into runs of identifier characters (letters, digits and `_-.:/@%+#~`). Inside a run, the
characters `.`, `:`, `/` and `@` separate parts, and a span may start or end only at a part boundary (the
edges of the run, or either side of a separator). From each boundary, spans of up to `MAX_PARTS` parts
and `MAX_SPAN` characters are candidates; the longest known one wins and scanning resumes after it.

So `web-1` is found in `cmr:web-1` and in `(web-1)`, never inside `web-10` or `xweb-1`; and an ARN that
was never issued whole is reversed component by component. Every boundary has a bounded number of
candidates of bounded length, so the work is linear in the text, whatever it holds: there is no
backtracking. All candidates of a text are looked up in one batch (one round trip to a shared store).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

RUN = re.compile(r"[A-Za-z0-9_\-.:/@%+#~]+")
SEPARATORS = frozenset(".:/@")
MAX_PARTS = 16
MAX_SPAN = 1024

T = TypeVar("T")


SEPARATOR = re.compile(r"[.:/@]")

Runs = list[list[int]]
"""Per run of identifier characters, its part boundaries (positions in the text), in order."""


def runs(text: str, min_length: int = 1) -> Runs:
    """The runs of `text` at least `min_length` long, each as its list of part boundaries."""
    found: Runs = []
    for match in RUN.finditer(text):
        start, end = match.span()
        if end - start < min_length:
            continue
        points = [start]
        for separator in SEPARATOR.finditer(text, start, end):
            at = separator.start()
            if points[-1] != at:
                points.append(at)
            points.append(at + 1)
        if points[-1] != end:
            points.append(end)
        found.append(points)
    return found


def _reach(max_length: int) -> int:
    return min(MAX_SPAN, max_length)


def candidates(text: str, *, min_length: int = 1, max_length: int = MAX_SPAN, parts: Runs | None = None) -> set[str]:
    """Every span the scanner could replace (to look up in one batch)."""
    found: set[str] = set()
    reach = _reach(max_length)
    for points in runs(text, min_length) if parts is None else parts:
        last = len(points) - 1
        for i in range(last):
            begin = points[i]
            for j in range(i + 1, min(last, i + 2 * MAX_PARTS) + 1):
                size = points[j] - begin
                if size > reach:
                    break
                if size >= min_length:
                    found.add(text[begin : points[j]])
    return found


def replace(
    text: str,
    known: Mapping[str, T],
    render: Callable[[str, T], str],
    *,
    min_length: int = 1,
    max_length: int = MAX_SPAN,
    parts: Runs | None = None,
) -> tuple[str, list[tuple[str, T]]]:
    """Replace the longest known span at each boundary, left to right. Returns the text and the hits."""
    if not known:
        return text, []
    reach = _reach(max_length)
    pieces: list[str] = []
    hits: list[tuple[str, T]] = []
    cursor = 0
    for points in runs(text, min_length) if parts is None else parts:
        last = len(points) - 1
        i = 0
        while i < last:
            begin = points[i]
            top = min(last, i + 2 * MAX_PARTS)
            while top > i and points[top] - begin > reach:
                top -= 1
            chosen = -1
            for j in range(top, i, -1):
                if points[j] - begin < min_length:
                    break
                span = text[begin : points[j]]
                if span in known:
                    chosen = j
                    break
            if chosen < 0:
                i += 1
                continue
            span = text[begin : points[chosen]]
            item = known[span]
            pieces.append(text[cursor:begin])
            pieces.append(render(span, item))
            hits.append((span, item))
            cursor = points[chosen]
            i = chosen
    if not hits:
        return text, []
    pieces.append(text[cursor:])
    return "".join(pieces), hits


def scan(
    text: str,
    lookup: Callable[[Collection[str]], Mapping[str, T]],
    render: Callable[[str, T], str],
    *,
    min_length: int = 1,
    max_length: int = MAX_SPAN,
) -> tuple[str, list[tuple[str, T]]]:
    """`candidates` → one `lookup` → `replace`."""
    parts = runs(text, min_length)
    spans = candidates(text, min_length=min_length, max_length=max_length, parts=parts)
    if not spans:
        return text, []
    known = lookup(spans)
    return replace(text, known, render, min_length=min_length, max_length=max_length, parts=parts)
