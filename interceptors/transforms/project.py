"""`project`: keep what the model needs — path include/exclude, key allowlists, caps, and a size budget.

Paths are dotted (`a.b.0.c`); `*` matches one segment, `**` any number, other globs one segment. Matching
is an automaton carried down the walk, so its cost stays linear in the size of the value.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .base import Options, Transform, TransformContext, render_json
from .sanitize import CLOSE_FENCE, ELLIPSIS, OPEN_FENCE

_DOUBLE = object()
_ANY = object()
_PRUNED = object()
_BUDGET_PASSES = 24
_INDEX = "\x00index"
"""The segment every list index steps as when no glob can tell indexes apart (`PathGlobs.index_blind`)."""


class PathGlobs:
    """A set of dotted path globs run as one automaton: a state is the set of (pattern, position) reached."""

    def __init__(self, globs: tuple[str, ...]) -> None:
        self.patterns = [tuple(self._segment(s) for s in glob.split(".")) for glob in globs]
        self.start = self._closure({(i, 0) for i in range(len(self.patterns))})
        # Where no segment is a number or a glob with a class, every list index steps alike: one memo entry
        # stands for all of them (a million-item list would otherwise fill the memo and redo the closure).
        self.index_blind = not any(
            isinstance(part, re.Pattern) or (isinstance(part, str) and part.isdigit())
            for pattern in self.patterns
            for part in pattern
        )
        self._memo: dict[tuple[frozenset[tuple[int, int]], str], frozenset[tuple[int, int]]] = {}
        self._accepting: dict[frozenset[tuple[int, int]], bool] = {}

    @staticmethod
    def _segment(text: str) -> Any:
        if text == "**":
            return _DOUBLE
        if text == "*":
            return _ANY
        if any(c in text for c in "*?["):
            return re.compile(fnmatch.translate(text))
        return text

    def _closure(self, states: set[tuple[int, int]]) -> frozenset[tuple[int, int]]:
        todo = list(states)
        while todo:
            index, pos = todo.pop()
            pattern = self.patterns[index]
            if pos < len(pattern) and pattern[pos] is _DOUBLE and (index, pos + 1) not in states:
                states.add((index, pos + 1))
                todo.append((index, pos + 1))
        return frozenset(states)

    def step(self, states: frozenset[tuple[int, int]], segment: str) -> frozenset[tuple[int, int]]:
        if not states:
            return states
        if self.index_blind and segment.isdigit():
            segment = _INDEX
        key = (states, segment)
        found = self._memo.get(key)
        if found is not None:
            return found
        reached: set[tuple[int, int]] = set()
        for index, pos in states:
            pattern = self.patterns[index]
            if pos >= len(pattern):
                continue
            part = pattern[pos]
            if part is _DOUBLE:
                reached.add((index, pos))
            elif part is _ANY or part == segment or (isinstance(part, re.Pattern) and part.match(segment)):
                reached.add((index, pos + 1))
        found = self._closure(reached)
        if len(self._memo) > 65_536:
            self._memo.clear()
        self._memo[key] = found
        return found

    def accepts(self, states: frozenset[tuple[int, int]]) -> bool:
        known = self._accepting.get(states)  # asked at every node of the walk, of the few states `step` makes
        if known is None:
            if len(self._accepting) > 65_536:
                self._accepting.clear()
            known = self._accepting[states] = any(pos == len(self.patterns[index]) for index, pos in states)
        return known


@dataclass(slots=True)
class _Caps:
    max_list: int | None
    max_string: int | None
    max_depth: int | None


class Projection(Transform):
    type = "project"
    OPTIONS = (
        "include", "exclude", "allow_keys", "allow_keys_by_sensitivity", "max_depth", "max_list", "max_string",
        "drop_nulls", "drop_empty", "max_chars", "list_marker", "min_list", "min_string",
    )  # fmt: skip

    def __init__(self, options: Mapping[str, Any], path: str = "project", transform_id: str | None = None) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        include = opts.strings("include", ())
        exclude = opts.strings("exclude", ())
        self.include = PathGlobs(include) if include else None
        self.exclude = PathGlobs(exclude) if exclude else None
        allow = opts.raw.get("allow_keys")
        self.allow_keys = None if allow is None else self._globs(opts.strings("allow_keys", ()))
        by_sensitivity = opts.mapping("allow_keys_by_sensitivity")
        self.allow_by_sensitivity: dict[str, re.Pattern[str]] = {}
        for level, globs in (by_sensitivity or {}).items():
            if not isinstance(globs, list) or not all(isinstance(g, str) for g in globs):
                raise ValueError(f"{path}.allow_keys_by_sensitivity: each level maps to a list of key globs")
            self.allow_by_sensitivity[str(level)] = self._globs(tuple(globs))
        self.caps = _Caps(
            opts.integer("max_list", None, 0), opts.integer("max_string", None, 0), opts.integer("max_depth", None, 1)
        )
        self.drop_nulls = opts.flag("drop_nulls", False)
        self.drop_empty = opts.flag("drop_empty", False)
        self.max_chars = opts.integer("max_chars", None, 100)
        self.list_marker = opts.flag("list_marker", True)
        self.min_list = opts.integer("min_list", 1, 0) or 0
        self.min_string = max(8, opts.integer("min_string", 64, 0) or 0)

    @staticmethod
    def _globs(globs: tuple[str, ...]) -> re.Pattern[str]:
        return re.compile("|".join(fnmatch.translate(g) for g in globs) or r"(?!)")

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        if value.__class__ is str and self.include is None and value.isascii():
            # A text block within both caps comes back as it is: its JSON is at most 6 characters per character.
            cap = self.caps.max_string
            if (cap is None or len(value) <= cap) and (self.max_chars is None or 6 * len(value) + 2 <= self.max_chars):
                return value
        allow = self.allow_keys
        if ctx.sensitivity is not None and ctx.sensitivity in self.allow_by_sensitivity:
            allow = self.allow_by_sensitivity[ctx.sensitivity]
        counts: dict[str, int] = {}
        shaped = self._shape(value, self.caps, allow, counts)
        report: dict[str, Any] = {k: v for k, v in counts.items() if v}
        if self.max_chars is not None:
            shaped = self._budget(value, shaped, allow, report, ctx)
        if report:
            section = ctx.report.setdefault("projection", {})
            for key, amount in report.items():
                if isinstance(amount, int) and not isinstance(amount, bool):
                    section[key] = section.get(key, 0) + amount
                else:
                    section.setdefault(key, amount)
        return shaped

    # --- one shaping pass ----------------------------------------------------------------------------

    def _shape(self, value: Any, caps: _Caps, allow: re.Pattern[str] | None, counts: dict[str, int]) -> Any:
        shaper = _Shaper(self, caps, allow, counts)
        ex = self.exclude.start if self.exclude else frozenset()
        inc = self.include.start if self.include else None
        result = shaper.value(value, 0, ex, inc)
        if result is _PRUNED:
            return {} if isinstance(value, dict) else [] if isinstance(value, list | tuple) else None
        return result

    # --- the budget loop -----------------------------------------------------------------------------

    def _budget(
        self, original: Any, shaped: Any, allow: re.Pattern[str] | None, report: dict[str, Any], ctx: TransformContext
    ) -> Any:
        limit = self.max_chars
        assert limit is not None
        size = len(render_json(shaped))
        if size <= limit:
            return shaped
        original_chars = size
        if isinstance(shaped, str):
            keep = max(0, limit - 40)
            report["budget"] = {"max_chars": limit, "original_chars": original_chars, "final_chars": keep}
            return f"{shaped[:keep]}{ELLIPSIS} [+{len(shaped) - keep} chars]"
        longest_list, longest_string, depth = _extent(shaped)
        caps = _Caps(
            self.caps.max_list if self.caps.max_list is not None else max(longest_list, self.min_list),
            self.caps.max_string if self.caps.max_string is not None else max(longest_string, self.min_string),
            self.caps.max_depth if self.caps.max_depth is not None else max(depth, 1),
        )
        counts: dict[str, int] = {}
        for _ in range(_BUDGET_PASSES):
            ratio = limit / size
            assert caps.max_list is not None and caps.max_string is not None and caps.max_depth is not None
            list_floor = caps.max_list <= self.min_list
            if size > 4 * limit or list_floor:
                caps.max_string = max(self.min_string, int(caps.max_string * ratio * 0.9))
            caps.max_list = max(self.min_list, int(caps.max_list * ratio * 0.9))
            if caps.max_list <= self.min_list and caps.max_string <= self.min_string and list_floor:
                caps.max_depth = max(1, caps.max_depth - 1)
            counts = {}
            shaped = self._shape(original, caps, allow, counts)
            size = len(render_json(shaped))
            if size <= limit or (caps.max_depth <= 1 and caps.max_list <= self.min_list):
                break
        for key, amount in counts.items():
            if amount:
                report[key] = amount
        budget = {
            "max_chars": limit,
            "original_chars": original_chars,
            "final_chars": size,
            "max_list": caps.max_list,
            "max_string": caps.max_string,
        }
        if caps.max_depth is not None and caps.max_depth < depth:
            budget["max_depth"] = caps.max_depth
        report["budget"] = budget
        if size > limit:
            ctx.report["truncated"] = True
        return shaped


def _extent(value: Any) -> tuple[int, int, int]:
    """(longest list, longest string, depth) of a value: an empty container counts as one level, like a full
    one. Iterative: a wide or deep value costs one visit per node and no recursion."""
    longest_list = longest_string = deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            longest_string = max(longest_string, len(node))
            deepest = max(deepest, depth)
        elif isinstance(node, dict):
            deepest = max(deepest, depth + 1) if not node else deepest
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list | tuple):
            longest_list = max(longest_list, len(node))
            deepest = max(deepest, depth + 1) if not node else deepest
            stack.extend((child, depth + 1) for child in node)
        else:
            deepest = max(deepest, depth)
    return longest_list, longest_string, deepest


class _Shaper:
    __slots__ = ("allow", "caps", "counts", "proj")

    def __init__(self, proj: Projection, caps: _Caps, allow: re.Pattern[str] | None, counts: dict[str, int]) -> None:
        self.proj = proj
        self.caps = caps
        self.allow = allow
        self.counts = counts

    def bump(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def value(
        self, value: Any, depth: int, ex: frozenset[tuple[int, int]], inc: frozenset[tuple[int, int]] | None
    ) -> Any:
        """`inc` None: everything below is included; an empty set would mean nothing can match any more."""
        if isinstance(value, dict | list | tuple):
            max_depth = self.caps.max_depth
            if max_depth is not None and depth >= max_depth:
                self.bump("depth_limited")
                size = len(value)
                return f"<dict: {size} keys>" if isinstance(value, dict) else f"<list: {size} items>"
            return self.mapping(value, depth, ex, inc) if isinstance(value, dict) else self.items(value, depth, ex, inc)
        if inc is not None:
            return _PRUNED  # a leaf that no include pattern reached
        if isinstance(value, str):
            return self.string(value)
        return value

    def child(
        self,
        segment: str,
        item: Any,
        depth: int,
        ex: frozenset[tuple[int, int]],
        inc: frozenset[tuple[int, int]] | None,
    ) -> Any:
        proj = self.proj
        child_ex = ex
        if proj.exclude is not None and ex:
            child_ex = proj.exclude.step(ex, segment)
            if proj.exclude.accepts(child_ex):
                self.bump("excluded")
                return _PRUNED
        child_inc = inc
        if inc is not None and proj.include is not None:
            child_inc = proj.include.step(inc, segment)
            if proj.include.accepts(child_inc):
                child_inc = None
            elif not child_inc:
                return _PRUNED
        new = self.value(item, depth + 1, child_ex, child_inc)
        if new is _PRUNED:
            return _PRUNED
        if (new is None and proj.drop_nulls) or (proj.drop_empty and new in ("", [], {})):
            return _PRUNED
        return new

    def mapping(
        self, data: dict[Any, Any], depth: int, ex: frozenset[tuple[int, int]], inc: frozenset[tuple[int, int]] | None
    ) -> Any:
        out = {}
        for key, item in data.items():
            segment = key if isinstance(key, str) else str(key)
            if self.allow is not None and not self.allow.match(segment):
                self.bump("keys_dropped")
                continue
            new = self.child(segment, item, depth, ex, inc)
            if new is not _PRUNED:
                out[key] = new
        if inc is not None and not out:
            return _PRUNED
        return out

    def items(
        self,
        items: list[Any] | tuple[Any, ...],
        depth: int,
        ex: frozenset[tuple[int, int]],
        inc: frozenset[tuple[int, int]] | None,
    ) -> Any:
        cap = self.caps.max_list
        if cap is not None and len(items) > cap and self._keeps_every_item(ex, inc):
            # Nothing can drop an item, so the items past the cap are cut whatever they hold: they are not walked.
            kept = [self.child("0", item, depth, ex, inc) for item in items[:cap]]
            if self.proj.list_marker:
                kept.append(f"{ELLIPSIS} {len(items) - cap} more items")
            self.bump("lists_truncated")
            return kept
        out = []
        for index, item in enumerate(items):
            new = self.child(str(index), item, depth, ex, inc)
            if new is not _PRUNED:
                out.append(new)
        if inc is not None and not out:
            return _PRUNED
        if cap is not None and len(out) > cap:
            more = len(out) - cap
            out = out[:cap]
            if self.proj.list_marker:
                out.append(f"{ELLIPSIS} {more} more items")
            self.bump("lists_truncated")
        return out

    def _keeps_every_item(self, ex: frozenset[tuple[int, int]], inc: frozenset[tuple[int, int]] | None) -> bool:
        """No item of a list here can be pruned: no include, no dropping of nulls or empties, and no exclude glob
        that can match an index (`index_blind`, so item 0 stands for every item)."""
        proj = self.proj
        if inc is not None or proj.drop_nulls or proj.drop_empty:
            return False
        exclude = proj.exclude
        if exclude is None or not ex:
            return True
        return exclude.index_blind and not exclude.accepts(exclude.step(ex, "0"))

    def string(self, text: str) -> str:
        cap = self.caps.max_string
        if cap is None or len(text) <= cap:
            return text
        self.bump("strings_truncated")
        cut = f"{text[:cap]}{ELLIPSIS} [+{len(text) - cap} chars]"
        if text.startswith(OPEN_FENCE) and text.endswith(CLOSE_FENCE):
            cut = f"{cut} {CLOSE_FENCE}"  # a cut fenced value stays closed
        return cut
