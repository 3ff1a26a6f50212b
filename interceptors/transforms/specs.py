"""Transform specs (`"redact"` or `{type: redact, id: ..., options...}`), type aliases, and the factories.

Built transforms are cached by the canonical JSON of their spec and the policy context injected into it,
so every pipeline that names the same spec shares one instance.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from .annotate import Annotator
from .base import Transform, safe_name
from .depseudonymize import Depseudonymizer
from .guard import SecretGuard
from .project import Projection
from .redactor import Redactor
from .sanitize import Sanitizer
from .substitute import AliasMap, RegexReplace, RenameKeys, Substitute, Templates

TYPE_ALIASES = {
    "redaction": "redact",
    "redactor": "redact",
    "dlp": "redact",
    "sanitise": "sanitize",
    "untrusted": "sanitize",
    "untrusted_text": "sanitize",
    "projection": "project",
    "shape": "project",
    "annotation": "annotate",
    "annotations": "annotate",
    "annotator": "annotate",
    "substitution": "substitute",
    "aliases": "alias",
    "rename": "rename_keys",
    "templates": "template",
    "depseudonymise": "depseudonymize",
    "depseudonymizer": "depseudonymize",
    "secret_guard": "guard_secrets",
    "reject_secrets": "guard_secrets",
}

Factory = Callable[[Mapping[str, Any], str, str], Transform]
"""`(options, error path, transform id) -> transform`; raises ValueError naming fields, never values."""

FACTORIES: dict[str, Factory] = {
    "redact": lambda o, p, i: Redactor(o, p, i),
    "sanitize": lambda o, p, i: Sanitizer(o, p, i),
    "project": lambda o, p, i: Projection(o, p, i),
    "annotate": lambda o, p, i: Annotator(o, p, i),
    "substitute": lambda o, p, i: Substitute(o, p, i),
    "alias": lambda o, p, i: AliasMap(o, p, i),
    "regex_replace": lambda o, p, i: RegexReplace(o, p, i),
    "rename_keys": lambda o, p, i: RenameKeys(o, p, i),
    "template": lambda o, p, i: Templates(o, p, i),
    "depseudonymize": lambda o, p, i: Depseudonymizer(o, p, i),
    "guard_secrets": lambda o, p, i: SecretGuard(o, p, i),
}
_HEADS = ("type", "transform", "name")


def register_transform(name: str, factory: Factory) -> None:
    """Add a transform type (or replace one): policies can then name it like a built-in."""
    canonical = canonical_type(name)
    FACTORIES[canonical] = factory
    _INSTANCES.clear()


def canonical_type(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    return TYPE_ALIASES.get(key, key)


@dataclass(frozen=True, slots=True)
class Spec:
    """A normalised spec: the canonical type, the id (defaults to the type) and the options."""

    type: str
    id: str
    options: Mapping[str, Any]

    def with_options(self, options: Mapping[str, Any]) -> Spec:
        return Spec(self.type, self.id, options)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "id": self.id, **self.options}


def normalize_spec(spec: Any, path: str) -> Spec:
    """A bare name or a mapping; the type under `type`, `transform` or `name`; options under `options` or inline."""
    options: dict[str, Any]
    if isinstance(spec, str):
        name, raw_id, options = spec, None, {}
    elif isinstance(spec, Mapping):
        heads = [h for h in _HEADS if h in spec]
        if len(heads) != 1 or not isinstance(spec[heads[0]], str) or not spec[heads[0]]:
            raise ValueError(f"{path}: a transform needs exactly one of type, transform or name (a string)")
        name = spec[heads[0]]
        raw_id = spec.get("id")
        if raw_id is not None and (not isinstance(raw_id, str) or not raw_id):
            raise ValueError(f"{path}.id: must be a non-empty string")
        inline = {str(k): v for k, v in spec.items() if k not in (*_HEADS, "id", "options")}
        nested = spec.get("options")
        if nested is not None and not isinstance(nested, Mapping):
            raise ValueError(f"{path}.options: must be a mapping")
        if nested and inline:
            raise ValueError(f"{path}: put options either under 'options' or inline, not both")
        options = dict(nested) if nested else inline
    else:
        raise ValueError(f"{path}: a transform is a name or a mapping")
    kind = canonical_type(name)
    if kind not in FACTORIES:
        raise ValueError(f"{path}: unknown transform type {safe_name(name)}")
    return Spec(kind, raw_id or kind, options)


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy injects into the transforms it builds."""

    detectors: tuple[Mapping[str, Any], ...] = ()
    disabled_detectors: tuple[str, ...] = ()
    profile: str | None = None


_INSTANCES: dict[bytes, Transform] = {}
_LOCK = threading.Lock()


def _inject(spec: Spec, policy: PolicyContext) -> dict[str, Any]:
    options = dict(spec.options)
    if spec.type in ("redact", "guard_secrets"):
        if policy.detectors:
            options["custom_detectors"] = [*policy.detectors, *list(options.get("custom_detectors") or [])]
        if policy.disabled_detectors:
            own = options.get("disabled_detectors") or []
            options["disabled_detectors"] = [*policy.disabled_detectors, *(own if isinstance(own, list) else [own])]
    elif spec.type == "annotate" and policy.profile is not None and "profile" not in options:
        options["profile"] = policy.profile
    return options


def build_transform(spec: Spec, policy: PolicyContext, path: str) -> Transform:
    """Build (or reuse) the transform a spec describes, with the policy context injected."""
    options = _inject(spec, policy)
    try:
        key = orjson.dumps({"t": spec.type, "i": spec.id, "o": options}, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        raise ValueError(f"{path}: options must be plain JSON-like data") from None
    found = _INSTANCES.get(key)
    if found is not None:
        return found
    transform = FACTORIES[spec.type](options, path, spec.id)
    with _LOCK:
        if len(_INSTANCES) > 4096:
            _INSTANCES.clear()
        _INSTANCES.setdefault(key, transform)
    return _INSTANCES.get(key, transform)
