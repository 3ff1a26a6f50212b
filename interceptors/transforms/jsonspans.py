"""Write a redacted JSON value back into the JSON text it came from, changing only what changed.

A string holding a JSON document is parsed, redacted as data, and written back. Serialising the redacted value
anew would change every byte of layout (4-space indentation becomes 2, `": "` becomes `":"`, escapes change);
`rewrite` instead locates each value of the original text and replaces only the spans whose value changed: a
redacted string, a dropped member (with its comma), a renamed key. What cannot be aligned (a list that lost
elements, duplicate keys) is written anew, that sub-value only.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..errors import InterceptorsError

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: one step per run, not per character
_SPLIT = re.compile("(" + _STRING.pattern + ")", re.DOTALL)
"""Splits a JSON text into what lies between string literals (even items) and the literals (odd items)."""
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


class _Node:
    """A value's span in the text; for objects and arrays, the spans of their members."""

    __slots__ = ("end", "keys", "members", "start")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end
        self.members: list[_Node] = []
        self.keys: list[tuple[int, int]] = []  # objects: each member's key span, in order


class _Unaligned(InterceptorsError):
    """The text does not parse the way the value says (should not happen: the caller parsed it)."""


def _parse(text: str, at: int, depth: int = 0) -> _Node:
    if depth > 512:
        raise _Unaligned
    at = _WS.match(text, at).end()  # type: ignore[union-attr]
    char = text[at : at + 1]
    if char == "{":
        node = _Node(at, at)
        at = _WS.match(text, at + 1).end()  # type: ignore[union-attr]
        if text[at : at + 1] == "}":
            node.end = at + 1
            return node
        while True:
            key = _STRING.match(text, at)
            if key is None:
                raise _Unaligned
            at = _WS.match(text, key.end()).end()  # type: ignore[union-attr]
            if text[at : at + 1] != ":":
                raise _Unaligned
            value = _parse(text, at + 1, depth + 1)
            node.keys.append(key.span())
            node.members.append(value)
            at = _WS.match(text, value.end).end()  # type: ignore[union-attr]
            char = text[at : at + 1]
            if char == "}":
                node.end = at + 1
                return node
            if char != ",":
                raise _Unaligned
            at = _WS.match(text, at + 1).end()  # type: ignore[union-attr]
    if char == "[":
        node = _Node(at, at)
        at = _WS.match(text, at + 1).end()  # type: ignore[union-attr]
        if text[at : at + 1] == "]":
            node.end = at + 1
            return node
        while True:
            value = _parse(text, at, depth + 1)
            node.members.append(value)
            at = _WS.match(text, value.end).end()  # type: ignore[union-attr]
            char = text[at : at + 1]
            if char == "]":
                node.end = at + 1
                return node
            if char != ",":
                raise _Unaligned
            at += 1
    match = _STRING.match(text, at) if char == '"' else _SCALAR.match(text, at)
    if match is None:
        raise _Unaligned
    return _Node(at, match.end())


def _dump(value: Any, multiline: bool) -> str:
    return orjson.dumps(value, option=(orjson.OPT_INDENT_2 if multiline else 0) | orjson.OPT_NON_STR_KEYS).decode()


def _edits(text: str, node: _Node, old: Any, new: Any, out: list[tuple[int, int, str]]) -> None:
    if new is old:
        return
    if isinstance(old, dict) and isinstance(new, dict) and len(node.keys) == len(old):
        _object_edits(text, node, old, new, out)
        return
    if isinstance(old, list) and isinstance(new, list) and len(new) == len(old) == len(node.members):
        for member, before, after in zip(node.members, old, new, strict=True):
            _edits(text, member, before, after, out)
        return
    if type(old) is type(new) and old == new and not isinstance(old, dict | list):
        return
    out.append((node.start, node.end, _dump(new, "\n" in text[node.start : node.end])))


def _object_edits(
    text: str, node: _Node, old: dict[Any, Any], new: dict[Any, Any], out: list[tuple[int, int, str]]
) -> None:
    old_items = list(old.items())
    new_items = list(new.items())
    if len(new_items) == len(old_items):
        pairs = list(zip(range(len(old_items)), new_items, strict=True))
    else:  # members were dropped: the kept ones keep their keys (a renamed key cannot be aligned, see below)
        kept_keys = {k for k, _ in new_items}
        if not kept_keys <= {k for k, _ in old_items}:
            out.append((node.start, node.end, _dump(new, "\n" in text[node.start : node.end])))
            return
        index = {k: i for i, (k, _) in enumerate(old_items)}
        pairs = [(index[k], (k, v)) for k, v in new_items]
        if [i for i, _ in pairs] != sorted(i for i, _ in pairs):
            out.append((node.start, node.end, _dump(new, "\n" in text[node.start : node.end])))
            return
    kept = {i for i, _ in pairs}
    for i, (new_key, new_value) in pairs:
        old_key, old_value = old_items[i]
        if new_key != old_key:
            start, end = node.keys[i]
            out.append((start, end, _dump(str(new_key), False)))
        _edits(text, node.members[i], old_value, new_value, out)
    if len(kept) == len(old_items):
        return
    if not kept:
        first, last = node.keys[0][0], node.members[-1].end
        out.append((first, last, ""))
        return
    count = len(old_items)
    i = 0
    while i < count:
        if i in kept:
            i += 1
            continue
        j = i
        while j + 1 < count and j + 1 not in kept:
            j += 1
        if j + 1 < count:  # a kept member follows: cut from this run's first key to that member's key
            out.append((node.keys[i][0], node.keys[j + 1][0], ""))
        else:  # the run ends the object: cut from the last kept member's end (its comma) to the run's end
            out.append((node.members[i - 1].end, node.members[j].end, ""))
        i = j + 1


def _strings_only(text: str, old: Any, new: Any) -> str | None:
    """The fast path, at C speed but for a loop over the changed strings: when only strings changed, the compact
    JSON of `old` and of `new` have the same skeleton (what lies between string literals), and their n-th literals
    are the n-th literal of the text; the differing ones are written in place. None when the value changed
    otherwise or the literals do not line up (duplicate keys)."""
    try:
        compact_old = orjson.dumps(old).decode()
        compact_new = orjson.dumps(new).decode()
    except TypeError:
        return None
    # With no escaped quote in any of the three, every `"` delimits a literal: `str.split` finds them all, several
    # times faster than the literal pattern (the literals then come without their quotes, put back by the join).
    bare = '\\"' not in text and '\\"' not in compact_old and '\\"' not in compact_new
    split = _split_at_quotes if bare else _SPLIT.split
    before = split(compact_old)
    after = split(compact_new)
    if len(before) != len(after) or before[::2] != after[::2]:
        return None
    changed: list[int] = []
    for start in range(1, len(before), 1024):  # lists compared in C, a slice at a time; only unequal ones walked
        if before[start : start + 1024] != after[start : start + 1024]:
            changed += (i for i in range(start, min(start + 1024, len(before)), 2) if before[i] != after[i])
    if not changed:
        return text
    parts = split(text)
    if len(parts) != len(before):
        return None
    for index in changed:
        parts[index] = after[index]
    return ('"' if bare else "").join(parts)


def _split_at_quotes(text: str) -> list[str]:
    return text.split('"')


def rewrite(text: str, old: Any, new: Any) -> str:
    """`text` (which parses to `old`) with the changes that turned `old` into `new`, and nothing else changed."""
    fast = _strings_only(text, old, new)
    if fast is not None:
        return fast
    try:
        root = _parse(text, 0)
        edits: list[tuple[int, int, str]] = []
        _edits(text, root, old, new, edits)
    except (_Unaligned, RecursionError, IndexError, KeyError):
        return _dump(new, "\n" in text)
    edits.sort(key=lambda e: (e[0], e[1]))
    parts: list[str] = []
    last = 0
    for start, end, replacement in edits:
        if start < last:  # overlapping edits cannot both hold: fall back to writing the value anew
            return _dump(new, "\n" in text)
        parts += (text[last:start], replacement)
        last = end
    parts.append(text[last:])
    return "".join(parts)


__all__ = ["rewrite"]
