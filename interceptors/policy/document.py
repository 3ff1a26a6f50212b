"""Reading policy documents: YAML, JSON or dicts, `extends` chains with cycle detection, one merged result.

Every failure names a source and field paths only. Parser messages are rewritten to a line and column,
because YAML and JSON errors quote the offending text, which could be a vault key.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from .errors import PolicyError
from .merge import merge_documents
from .profiles import DEFAULT_PROFILE, PROFILES, profile_name, profile_path
from .safetext import log_safe, path_key
from .schema import check_document

ENV_POLICY = "MCP_INTERCEPTORS_POLICY"
"""Names the policy (profile or file) used when none is given."""
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024

DocumentSource = str | os.PathLike[str] | Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class LoadedDocument:
    """An effective document: validated, with every parent merged in."""

    document: dict[str, Any]
    source: str
    extends_chain: tuple[str, ...]
    """Parent names, nearest first (e.g. `("read_only", "standard")` for the audit profile)."""


def _json_problems(value: Any, path: str, problems: list[str]) -> None:
    """Documents must be plain JSON data: YAML dates, sets or integer keys are refused by path."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                problems.append(f"{path or 'policy'}: keys must be strings ({path_key(key)})")
                continue
            _json_problems(item, f"{path}.{path_key(key)}" if path else path_key(key), problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _json_problems(item, f"{path}[{index}]", problems)
    elif isinstance(value, float) and not math.isfinite(value):
        problems.append(f"{path or 'policy'}: must be a finite number")
    elif not (value is None or isinstance(value, str | bool | int | float)):
        problems.append(f"{path or 'policy'}: must hold only JSON values (strings, numbers, booleans, lists, maps)")


def parse_text(text: str, source: str, *, json_only: bool = False) -> Any:
    """YAML (a superset of JSON) unless `json_only`; errors carry a position, never the text."""
    if json_only:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise PolicyError(source, [f"invalid JSON at line {exc.lineno}, column {exc.colno}"]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise PolicyError(source, [f"invalid YAML{where}"]) from None


def _read_file(path: Path) -> Any:
    source = log_safe(str(path))
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except IsADirectoryError:
        raise PolicyError(source, ["is a directory, not a policy file"]) from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise PolicyError(source, [f"larger than {MAX_DOCUMENT_BYTES} bytes"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(source, ["is not UTF-8 text"]) from None
    return parse_text(text, source, json_only=path.suffix.lower() == ".json")


def _unwrap(raw: Any, source: str) -> dict[str, Any]:
    if isinstance(raw, Mapping) and set(raw) == {"policy"}:
        raw = raw["policy"]
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise PolicyError(source, ["policy: must be a mapping"])
    problems: list[str] = []
    _json_problems(raw, "", problems)
    if not problems:
        problems = check_document(raw)
    if problems:
        raise PolicyError(source, problems)
    return dict(raw)


@dataclass(frozen=True, slots=True)
class _Origin:
    identity: str  # "profile:<name>" or an absolute path: what cycle detection compares
    label: str  # what the chain and messages show
    base: Path  # where a relative `extends` is resolved


def _locate(reference: str, base: Path, *, profiles: bool = True) -> _Origin:
    """A profile name first (`-` and `_` interchangeable), then a file relative to `base`."""
    canonical = profile_name(reference) if profiles else None
    if canonical is not None:
        return _Origin(f"profile:{canonical}", canonical, profile_path(canonical).parent)
    path = Path(reference).expanduser()
    if not path.is_absolute():
        path = base / path
    path = path.resolve()
    if not path.exists():
        raise FileNotFoundError(
            f"no built-in profile or policy file named {log_safe(reference, 200)!r} (profiles: {', '.join(PROFILES)})"
        )
    return _Origin(str(path), str(path), path.parent)


def _read_origin(origin: _Origin) -> dict[str, Any]:
    path = profile_path(origin.label) if origin.identity.startswith("profile:") else Path(origin.identity)
    return _unwrap(_read_file(path), origin.label)


def _resolve(doc: dict[str, Any], origin: _Origin, seen: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
    parent_ref = doc.get("extends")
    if parent_ref is None:
        return doc, ()
    parent = _locate(parent_ref, origin.base)
    if parent.identity in seen:
        loop = " -> ".join((*(_label(s) for s in seen), _label(parent.identity)))
        raise PolicyError(origin.label, [f"Policy 'extends' cycle: {loop}"])
    parent_doc, parent_chain = _resolve(_read_origin(parent), parent, (*seen, parent.identity))
    merged = merge_documents(parent_doc, doc)
    if "name" not in doc:
        merged["name"] = f"custom({parent_doc.get('name', parent.label)})"
    problems = check_document(merged)
    if problems:
        raise PolicyError(origin.label, problems)
    return merged, (str(parent_doc.get("name", parent.label)), *parent_chain)


def _label(identity: str) -> str:
    return identity.removeprefix("profile:")


def load_document(source: DocumentSource = None) -> LoadedDocument:
    """Read a policy from a profile name, a file, inline JSON (a string starting with `{`) or a mapping.

    None means `$MCP_INTERCEPTORS_POLICY` when set, else the `standard` profile. A document whose only
    key is `policy` is unwrapped. Relative `extends` are resolved against the containing file's folder
    (the working directory for dicts and inline JSON).
    """
    if source is None:
        source = os.environ.get(ENV_POLICY) or DEFAULT_PROFILE
    cwd = Path.cwd()
    if isinstance(source, Mapping):
        origin = _Origin("<dict>", "<dict>", cwd)
        doc = _unwrap(source, origin.label)
    elif isinstance(source, str) and source.lstrip().startswith("{"):
        origin = _Origin("<inline JSON>", "<inline JSON>", cwd)
        doc = _unwrap(parse_text(source, origin.label, json_only=True), origin.label)
    else:
        origin = _locate(os.fspath(source), cwd, profiles=isinstance(source, str))
        doc = _read_origin(origin)
    merged, chain = _resolve(doc, origin, (origin.identity,))
    if "name" not in merged:
        merged["name"] = "custom"
    return LoadedDocument(merged, origin.label, chain)
