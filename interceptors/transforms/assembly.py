"""Pipeline assembly from plain policy dicts: the policy's transforms, then each matching rule's.

The policy document loader lives elsewhere; this module only reads the transform-related keys of a
policy (`transforms`, `input_transforms`, `transform_options`, `detectors`, `disabled_detectors`,
`honor_hints`, `name`) and of its rules (the same, plus `transforms_mode`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .base import IDENTITY, Pipeline, Transform, safe_name
from .detectors import detector_from_config
from .specs import FACTORIES, PolicyContext, Spec, build_transform, canonical_type, normalize_spec

TRANSFORM_KEYS = (
    "transforms", "input_transforms", "transform_options", "detectors", "disabled_detectors", "honor_hints",
    "transforms_mode",
)  # fmt: skip
MODES = ("append", "prepend", "replace")
_REORDERED = ("alias", "substitute")
_CACHE_SIZE = 4096


def deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge recursively; anything else (lists included) is replaced by the later value."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# --- validation ---------------------------------------------------------------------------------------------


def _specs(doc: Mapping[str, Any], key: str, path: str) -> list[Spec]:
    items = doc.get(key)
    if items is None:
        return []
    if not isinstance(items, list | tuple):
        raise ValueError(f"{path}.{key}: must be a list of transforms")
    return [normalize_spec(item, f"{path}.{key}[{i}]") for i, item in enumerate(items)]


def _policy_context(doc: Mapping[str, Any], path: str) -> PolicyContext:
    detectors = doc.get("detectors") or []
    if not isinstance(detectors, list | tuple) or not all(isinstance(d, Mapping) for d in detectors):
        raise ValueError(f"{path}.detectors: must be a list of detector mappings")
    disabled = doc.get("disabled_detectors") or []
    if not isinstance(disabled, list | tuple) or not all(isinstance(n, str) for n in disabled):
        raise ValueError(f"{path}.disabled_detectors: must be a list of detector names")
    name = doc.get("name")
    return PolicyContext(tuple(detectors), tuple(disabled), name if isinstance(name, str) else None)


def check_transform_sections(doc: Mapping[str, Any], path: str) -> None:
    """Validate the transform keys of a policy or a rule; ValueError names the field, never a value."""
    if not isinstance(doc, Mapping):
        raise ValueError(f"{path}: must be a mapping")
    context = _policy_context(doc, path)
    names = []
    for index, config in enumerate(context.detectors):
        names.append(detector_from_config(config, f"{path}.detectors[{index}]").name)
    if len(set(names)) != len(names):
        raise ValueError(f"{path}.detectors: detector names must be unique")
    honor = doc.get("honor_hints")
    if honor is not None and not isinstance(honor, bool):
        raise ValueError(f"{path}.honor_hints: must be true, false or null")
    if "transforms_mode" in doc and doc["transforms_mode"] not in MODES:
        raise ValueError(f"{path}.transforms_mode: must be one of {', '.join(MODES)}")
    for key in ("transforms", "input_transforms"):
        for index, spec in enumerate(_specs(doc, key, path)):
            build_transform(spec, context, f"{path}.{key}[{index}]")
    options = doc.get("transform_options")
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise ValueError(f"{path}.transform_options: must map a transform type or id to options")
    for key, value in options.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{path}.transform_options: keys must be transform types or ids")
        where = f"{path}.transform_options.{key}" if safe_name(key) != "<unprintable>" else f"{path}.transform_options"
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: must be a mapping of options")
        kind = canonical_type(key)
        if kind in FACTORIES:
            build_transform(Spec(kind, kind, dict(value)), context, where)


# --- output ---------------------------------------------------------------------------------------------------


def _options_for(spec: Spec, options: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's own options, then those stored under its type (or an alias of it), then under its id."""
    merged = dict(spec.options)
    for key, value in options.items():
        if isinstance(key, str) and isinstance(value, Mapping) and canonical_type(key) == spec.type:
            merged = deep_merge(merged, value)
    if spec.id != spec.type and isinstance(options.get(spec.id), Mapping):
        merged = deep_merge(merged, options[spec.id])
    return merged


def _reorder_aliases(specs: list[Spec]) -> list[Spec]:
    """alias and substitute steps before the last redact move to just after it: redaction sees real values."""
    last = max((i for i, s in enumerate(specs) if s.type == "redact"), default=-1)
    if last < 0:
        return specs
    moved = [s for s in specs[:last] if s.type in _REORDERED]
    if not moved:
        return specs
    head = [s for s in specs[:last] if s.type not in _REORDERED]
    return [*head, specs[last], *moved, *specs[last + 1 :]]


def _hint_list(hints: Mapping[str, Any], key: str) -> list[str]:
    value = hints.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"transform_hints.{key}: must be a list of transform names")
    return list(value)


def _skip(specs: list[Spec], names: list[str]) -> list[Spec]:
    if not names:
        return specs
    if any(n in ("*", "all") for n in names):
        return []
    types = {canonical_type(n) for n in names}
    return [s for s in specs if s.type not in types and s.id not in names]


def _output_specs(
    policy: Mapping[str, Any], rules: Sequence[Mapping[str, Any]], hints: Mapping[str, Any] | None
) -> list[Spec]:
    specs = _specs(policy, "transforms", "policy")
    options: dict[str, Any] = dict(policy.get("transform_options") or {})
    honor = policy.get("honor_hints", True)
    for index, rule in enumerate(rules):
        where = f"rules[{index}]"
        mode = rule.get("transforms_mode", "append") or "append"
        if mode not in MODES:
            raise ValueError(f"{where}.transforms_mode: must be one of {', '.join(MODES)}")
        extra = _specs(rule, "transforms", where)
        specs = [*specs, *extra] if mode == "append" else [*extra, *specs] if mode == "prepend" else extra
        rule_options = rule.get("transform_options")
        if rule_options:
            if not isinstance(rule_options, Mapping):
                raise ValueError(f"{where}.transform_options: must be a mapping")
            options = deep_merge(options, rule_options)
        if rule.get("honor_hints") is not None:
            honor = rule["honor_hints"]
    specs = _reorder_aliases(specs)
    specs = [s.with_options(_options_for(s, options)) for s in specs]
    if hints:
        if not isinstance(hints, Mapping):
            raise ValueError("transform_hints: must be a mapping")
        if honor is not False:
            specs = _skip(specs, _hint_list(hints, "skip"))
            if hints.get("pseudonymize", hints.get("pseudonymise", True)) is False:
                specs = [
                    s.with_options({**s.options, "allow_pseudonymize": False}) if s.type == "redact" else s
                    for s in specs
                ]
            projection = hints.get("project", hints.get("projection"))
            if isinstance(projection, Mapping):
                specs = [s.with_options(deep_merge(s.options, projection)) if s.type == "project" else s for s in specs]
        extra_hints = hints.get("transforms", hints.get("extra")) or []
        if not isinstance(extra_hints, list | tuple):
            raise ValueError("transform_hints.transforms: must be a list of transforms")
        specs.extend(normalize_spec(item, f"transform_hints.transforms[{i}]") for i, item in enumerate(extra_hints))
    return specs


def _key(policy: Mapping[str, Any], rules: Sequence[Mapping[str, Any]], hints: Mapping[str, Any] | None) -> bytes:
    def part(doc: Mapping[str, Any]) -> dict[str, Any]:
        return {k: doc[k] for k in (*TRANSFORM_KEYS, "name") if k in doc}

    try:
        return orjson.dumps(
            [part(policy), [part(r) for r in rules], hints or {}], option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
        )
    except TypeError:
        raise ValueError("policy sections must be plain JSON-like data") from None


class _Lru:
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[bytes, Pipeline] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: bytes) -> Pipeline | None:
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
            return found

    def put(self, key: bytes, pipeline: Pipeline) -> None:
        with self.lock:
            self.items[key] = pipeline
            if len(self.items) > self.size:
                self.items.popitem(last=False)


_OUTPUT = _Lru(_CACHE_SIZE)
_INPUT = _Lru(_CACHE_SIZE)


def assemble_output(
    policy_sections: Mapping[str, Any],
    matching_rules: Sequence[Mapping[str, Any]] = (),
    hints: Mapping[str, Any] | None = None,
) -> Pipeline:
    """The output pipeline for a call: policy transforms, rules by transforms_mode, options, hints."""
    key = _key(policy_sections, matching_rules, hints)
    found = _OUTPUT.get(key)
    if found is not None:
        return found
    context = _policy_context(policy_sections, "policy")
    specs = _output_specs(policy_sections, matching_rules, hints)
    transforms = tuple(build_transform(s, context, f"pipeline[{i}] ({s.id})") for i, s in enumerate(specs))
    pipeline = Pipeline(transforms) if transforms else IDENTITY
    _OUTPUT.put(key, pipeline)
    return pipeline


def _alias_maps(pipeline: Pipeline) -> dict[str, str]:
    reverse: dict[str, str] = {}
    for transform in pipeline.transforms:
        table = getattr(transform, "reverse_map", None)
        if isinstance(table, dict):
            reverse.update(table)
    return reverse


def assemble_input(
    policy_sections: Mapping[str, Any],
    matching_rules: Sequence[Mapping[str, Any]] = (),
    hints: Mapping[str, Any] | None = None,
) -> Pipeline:
    """The argument pipeline: policy then rule input transforms, then a depseudonymizer if output is reversible."""
    key = _key(policy_sections, matching_rules, hints)
    found = _INPUT.get(key)
    if found is not None:
        return found
    context = _policy_context(policy_sections, "policy")
    specs = _specs(policy_sections, "input_transforms", "policy")
    for index, rule in enumerate(matching_rules):
        specs.extend(_specs(rule, "input_transforms", f"rules[{index}]"))
    hints = hints or {}
    if not isinstance(hints, Mapping):
        raise ValueError("transform_hints: must be a mapping")
    specs = _skip(specs, _hint_list(hints, "skip_input"))
    if hints.get("input_guard", True) is False:
        specs = [s for s in specs if s.type != "guard_secrets"]
    transforms: list[Transform] = [
        build_transform(s, context, f"input_pipeline[{i}] ({s.id})") for i, s in enumerate(specs)
    ]
    output = assemble_output(policy_sections, matching_rules, hints)
    if output.reversible and hints.get("depseudonymize", True) is not False:
        aliases = _alias_maps(output)
        options = {"aliases": aliases, "strip_fences": True}
        transforms.append(build_transform(Spec("depseudonymize", "depseudonymize", options), context, "input_pipeline"))
    pipeline = Pipeline(tuple(transforms)) if transforms else IDENTITY
    _INPUT.put(key, pipeline)
    return pipeline
