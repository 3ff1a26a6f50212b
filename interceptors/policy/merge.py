"""How a child policy document combines with the one it extends: deny lists only ever grow."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

CONCATENATED = frozenset({"rules", "detectors", "rate_limits", "disabled_detectors", "arguments"})
"""Lists that add up along the chain, parent first."""
REPLACED = frozenset({"transforms", "input_transforms"})
"""Pipelines are replaced whole: a child that sets one means exactly that pipeline."""


def _union(parent: list[Any], child: list[Any]) -> list[Any]:
    out = list(parent)
    for item in child:
        if item not in out:
            out.append(item)
    return out


def merge_documents(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """Merge two documents by the `extends` rules; neither input is modified.

    Scalars and `allow_*` lists: the child's value replaces. Mappings (roles, role bodies, `match`,
    `transform_options`, `vault`, `catalog`): merged recursively. `deny_*` lists (and `paths.deny`) at any depth:
    union, parent order first. `rules`, `detectors`, `rate_limits`, `disabled_detectors`, `arguments`:
    concatenated.
    `transforms`, `input_transforms`: replaced. `extends` is never copied.
    """
    out: dict[str, Any] = {key: copy.deepcopy(value) for key, value in parent.items() if key != "extends"}
    for key, value in child.items():
        if key == "extends":
            continue
        previous = out.get(key)
        if key in out and isinstance(previous, list) and isinstance(value, list):
            if key.startswith("deny_") or key == "deny":
                out[key] = _union(previous, value)
            elif key in CONCATENATED:
                out[key] = previous + copy.deepcopy(value)
            else:
                out[key] = copy.deepcopy(value)
        elif isinstance(previous, Mapping) and isinstance(value, Mapping) and key not in REPLACED:
            out[key] = merge_documents(previous, value)
        else:
            out[key] = copy.deepcopy(value)
    return out
