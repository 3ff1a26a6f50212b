"""The transform contract: a transform returns a new value and never mutates its input.

Transforms are built once and shared by every call (they may cache, but hold no per-call state);
what a call needs travels in a `TransformContext`, including the report the transforms write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from .strategies import KeyedHasher, Pseudonymizer

META_KEY = "io.mcp-interceptors/transforms"
"""Where the transform report goes in a result's `_meta`."""

_DEFAULT_HASHER: KeyedHasher | None = None


def default_pseudonymizer() -> Pseudonymizer:
    """One process-wide keyed hasher, so results of one process agree with each other."""
    global _DEFAULT_HASHER
    if _DEFAULT_HASHER is None:
        _DEFAULT_HASHER = KeyedHasher()
    return _DEFAULT_HASHER


@dataclass(slots=True)
class TransformContext:
    """Facts about the call, the pseudonymizer, and the report the transforms fill in."""

    kind: str = "tool"
    """tool, resource, prompt or completion."""
    name: str | None = None
    direction: str = "output"
    principal: str | None = None
    roles: tuple[str, ...] = ()
    sensitivity: str | None = None
    category: str | None = None
    pseudonymizer: Pseudonymizer = field(default_factory=default_pseudonymizer)
    report: dict[str, Any] = field(default_factory=dict)
    restored: list[tuple[str, str]] = field(default_factory=list)
    """`(real, token)` pairs the input side gave back (never reported)."""

    @property
    def namespace(self) -> str:
        return self.pseudonymizer.namespace_for(self.principal)


class Transform:
    """Base class: override `apply` (one value) or `apply_all` (a bundle that must agree, e.g. redact)."""

    type: ClassVar[str] = ""
    direction: ClassVar[str] = "output"

    def __init__(self, transform_id: str | None = None) -> None:
        self.id = transform_id or self.type

    @property
    def reversible(self) -> bool:
        """Whether its output holds something the input side can turn back (pseudonyms, aliases, fences)."""
        return False

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        raise NotImplementedError

    def for_metadata(self) -> Transform | None:
        """This step as it applies to catalog and server metadata (list items, the initialize result, task
        records, requests to the client), or None when it has no place there. Only scrubbing steps do:
        fencing, projecting or annotating a tool description would change what a client relies on."""
        return None

    def apply_all(self, values: Sequence[Any], ctx: TransformContext, labels: Sequence[str]) -> list[Any]:
        """Transform the parts of one result together (the default treats each part on its own)."""
        return [self.apply(value, ctx, label) for value, label in zip(values, labels, strict=True)]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Transforms applied in order. The empty pipeline is `IDENTITY`."""

    transforms: tuple[Transform, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.transforms

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(t.type for t in self.transforms)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(t.id for t in self.transforms)

    @property
    def reversible(self) -> bool:
        return any(t.reversible for t in self.transforms)

    def run(self, values: Sequence[Any], ctx: TransformContext, labels: Sequence[str] | None = None) -> list[Any]:
        """Transform the parts of one result in one run, so the same value gets the same replacement."""
        names = list(labels) if labels is not None else ["$"] * len(values)
        current = list(values)
        for transform in self.transforms:
            current = transform.apply_all(current, ctx, names)
        return current

    def apply(self, value: Any, ctx: TransformContext) -> Any:
        return self.run([value], ctx)[0]


IDENTITY = Pipeline()


# --- reports -----------------------------------------------------------------------------------------


def count(report: dict[str, Any], section: str, entity: str, amount: int = 1) -> None:
    bucket = report.setdefault(section, {})
    bucket[entity] = bucket.get(entity, 0) + amount


def merge_report(into: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers add up, mappings merge, anything else keeps the first value seen."""
    for key, value in new.items():
        if key not in into:
            into[key] = _copy(value)
        elif isinstance(value, bool) or isinstance(into[key], bool):
            continue
        elif isinstance(value, int | float) and isinstance(into[key], int | float):
            into[key] += value
        elif isinstance(value, Mapping) and isinstance(into[key], dict):
            merge_report(into[key], value)
    return into


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def render_json(value: Any) -> str:
    """The indented JSON text a model reads; budgets are measured on it."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str).decode()
    except TypeError:  # an integer beyond 64 bits (exact JSON allows it; orjson does not)
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)


# --- options -------------------------------------------------------------------------------------------

_OPTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,40}")


def safe_name(name: Any) -> str:
    """A key to put into an error message: itself when it looks like a name, else a placeholder."""
    return repr(name) if isinstance(name, str) and _OPTION_NAME.fullmatch(name) else "<unprintable>"


class Options:
    """Reads one transform's options; every error names the field path, never the offending value."""

    def __init__(self, type_: str, options: Mapping[str, Any], allowed: Iterable[str], path: str) -> None:
        self.type = type_
        self.raw = options
        self.path = path
        unknown = [k for k in options if k not in set(allowed)]
        if unknown:
            names = ", ".join(safe_name(k) for k in unknown)
            raise ValueError(f"{path}: bad options for transform '{type_}': unknown option(s) {names}")

    def _where(self, name: str) -> str:
        return f"{self.path}.{name}"

    def flag(self, name: str, default: bool) -> bool:
        value = self.raw.get(name, default)
        if not isinstance(value, bool):
            raise ValueError(f"{self._where(name)}: must be true or false")
        return value

    def integer(self, name: str, default: int | None, low: int = 0, high: int | None = None) -> int | None:
        value = self.raw.get(name, default)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ValueError(f"{self._where(name)}: must be an integer {bound}")
        return value

    def number(self, name: str, default: float, low: float, high: float) -> float:
        value = self.raw.get(name, default)
        if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"{self._where(name)}: must be a number between {low} and {high}")
        return float(value)

    def text(self, name: str, default: str | None) -> str | None:
        value = self.raw.get(name, default)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{self._where(name)}: must be a string")
        return value

    def choice(self, name: str, default: str, choices: Iterable[str]) -> str:
        options = tuple(choices)
        value = self.raw.get(name, default)
        if value not in options:
            raise ValueError(f"{self._where(name)}: must be one of {', '.join(options)}")
        return str(value)

    def strings(self, name: str, default: Sequence[str]) -> tuple[str, ...]:
        value = self.raw.get(name, default)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{self._where(name)}: must be a list of strings")
        return tuple(value)

    def mapping(self, name: str) -> Mapping[str, Any] | None:
        value = self.raw.get(name)
        if value is not None and not isinstance(value, Mapping):
            raise ValueError(f"{self._where(name)}: must be a mapping")
        return value

    def items(self, name: str) -> list[Any]:
        value = self.raw.get(name, [])
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise ValueError(f"{self._where(name)}: must be a list")
        return list(value)
