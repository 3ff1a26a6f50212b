"""`depseudonymize`: what the model passes back (pseudonyms, aliases, fenced text) becomes real again.

It runs on the input side after `guard_secrets`. Without a reversible pseudonymizer (the vault, a later
issue) only aliases and fences are reversed; tokens from the keyed-hash stand-in stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from .base import Options, Transform, TransformContext
from .sanitize import strip_fences
from .triepattern import literal_alternation


class Depseudonymizer(Transform):
    type = "depseudonymize"
    direction = "input"
    OPTIONS = ("aliases", "strip_fences", "keys")

    def __init__(
        self, options: Mapping[str, Any], path: str = "depseudonymize", transform_id: str | None = None
    ) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        aliases = opts.mapping("aliases") or {}
        if not all(isinstance(k, str) and isinstance(v, str) and k for k, v in aliases.items()):
            raise ValueError(f"{path}.aliases: must map alias text to real text")
        self.reverse: dict[str, str] = {str(k): str(v) for k, v in aliases.items()}
        self.strip = opts.flag("strip_fences", True)
        self.keys = opts.flag("keys", False)
        self._finder = (
            re.compile(
                r"(?<![\w-])(?:" + literal_alternation(sorted(self.reverse, key=len, reverse=True)) + r")(?![\w-])"
            )
            if self.reverse
            else None
        )

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        if not self.reverse and not ctx.pseudonymizer.reversible and not _may_hold_fence(value):
            return value  # no alias, nothing to detokenize, and no fence anywhere: nothing to turn back
        counter = [0]
        result = self._value(value, ctx, counter)
        if counter[0]:
            ctx.report["depseudonymized"] = ctx.report.get("depseudonymized", 0) + counter[0]
        return result

    def _value(self, value: Any, ctx: TransformContext, counter: list[int]) -> Any:
        if isinstance(value, str):
            return self._text(value, ctx, counter)
        if isinstance(value, dict):
            return {
                (self._text(k, ctx, counter) if self.keys and isinstance(k, str) else k): self._value(v, ctx, counter)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._value(v, ctx, counter) for v in value]
        return value

    def _text(self, text: str, ctx: TransformContext, counter: list[int]) -> str:
        current = strip_fences(text) if self.strip else text
        if self.reverse:
            exact: str | None = self.reverse.get(current)
            if exact is not None:
                ctx.restored.append((exact, current))
                counter[0] += 1
                current = exact
            elif self._finder is not None:

                def swap(match: re.Match[str]) -> str:
                    real = self.reverse[match.group(0)]
                    ctx.restored.append((real, match.group(0)))
                    counter[0] += 1
                    return real

                current = self._finder.sub(swap, current)
        restores = getattr(ctx.pseudonymizer, "restores", None)  # the vault's `restore_to`
        if ctx.pseudonymizer.reversible and (restores is None or restores(ctx.name)):
            restored, pairs = ctx.pseudonymizer.detokenize(current, ctx.namespace)
            if pairs:
                ctx.restored.extend(pairs)
                counter[0] += len(pairs)
                current = strip_fences(str(restored)) if self.strip else str(restored)
        return text if current == text else current


def _may_hold_fence(value: Any) -> bool:
    """Whether any string of `value` (key or value) could hold a fence: one look at its JSON text, where both
    fences' first character appears unescaped. A value JSON cannot carry is walked, as before."""
    if value.__class__ is str:
        return _FENCE_CHAR in value
    try:
        return _FENCE_CHAR in orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return True


_FENCE_CHAR = "\u27e6"
"""The first character of both fences (`sanitize.OPEN_FENCE`, `CLOSE_FENCE`)."""
