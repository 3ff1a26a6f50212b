"""The policy document's shape, checked by hand so that every problem names a field path and never a value.

Documents are plain dicts (from YAML, JSON or Python). `check_document` returns the list of problems;
an empty list means the document is well formed. Transform sections are opaque here: the transforms
package validates them through `check_transform_sections` when it is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .safetext import path_key

CAPABILITIES = ("read_state", "write_state", "read_fs", "write_fs", "cloud_access", "exec", "reveal", "destructive")
SENSITIVITIES = ("public", "internal", "confidential", "restricted")
KINDS = ("tool", "resource", "resource_template", "prompt")
LIMIT_KINDS = (*KINDS, "completion")
PERIODS = {"second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0}
SCOPES = ("principal", "tool", "principal_tool", "global")
TRANSFORMS_MODES = ("append", "prepend", "replace")
VAULT_SCOPES = ("global", "principal")

FAMILIES = ("tools", "resources", "prompts")
ACCESS_LIST_KEYS = (
    *(f"{verb}_{family}" for family in FAMILIES for verb in ("allow", "deny")),
    "allow_categories",
    "deny_categories",
)
TRANSFORM_KEYS = ("transforms", "input_transforms", "transform_options", "detectors", "disabled_detectors")

Checker = Callable[[Any, str, list[str]], None]


def _at(path: str, key: object) -> str:
    return f"{path}.{path_key(key)}" if path else path_key(key)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _string(value: Any, path: str, problems: list[str]) -> None:
    if not isinstance(value, str):
        problems.append(f"{path}: must be a string")


def _opt_string(value: Any, path: str, problems: list[str]) -> None:
    if value is not None:
        _string(value, path, problems)


def _bool(value: Any, path: str, problems: list[str]) -> None:
    if not isinstance(value, bool):
        problems.append(f"{path}: must be true or false")


def _opt_bool(value: Any, path: str, problems: list[str]) -> None:
    if value is not None:
        _bool(value, path, problems)


def _count(value: Any, path: str, problems: list[str]) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(f"{path}: must be an integer >= 0")


def _one_of(choices: Iterable[str]) -> Checker:
    allowed = tuple(choices)

    def check(value: Any, path: str, problems: list[str]) -> None:
        if value not in allowed:
            problems.append(f"{path}: must be one of: {', '.join(allowed)}")

    return check


def _optional(checker: Checker) -> Checker:
    def check(value: Any, path: str, problems: list[str]) -> None:
        if value is not None:
            checker(value, path, problems)

    return check


def _list_of(item: Checker) -> Checker:
    def check(value: Any, path: str, problems: list[str]) -> None:
        if not isinstance(value, list):
            problems.append(f"{path}: must be a list")
            return
        for index, element in enumerate(value):
            item(element, f"{path}[{index}]", problems)

    return check


_strings = _list_of(_string)
_opt_strings = _optional(_strings)
_capabilities = _list_of(_one_of(CAPABILITIES))
_sensitivity = _optional(_one_of(SENSITIVITIES))


def _mapping(value: Any, path: str, problems: list[str]) -> bool:
    if not isinstance(value, Mapping):
        problems.append(f"{path}: must be a mapping")
        return False
    return True


def _opaque_list(value: Any, path: str, problems: list[str]) -> None:
    """A transform spec list: each item a name or a mapping; the transforms package checks the rest."""
    if not isinstance(value, list):
        problems.append(f"{path}: must be a list")
        return
    for index, item in enumerate(value):
        if not isinstance(item, str | Mapping):
            problems.append(f"{path}[{index}]: must be a transform name or a mapping")


def _opaque_mapping(value: Any, path: str, problems: list[str]) -> None:
    _mapping(value, path, problems)


def _mapping_list(value: Any, path: str, problems: list[str]) -> None:
    if not isinstance(value, list):
        problems.append(f"{path}: must be a list")
        return
    for index, item in enumerate(value):
        _mapping(item, f"{path}[{index}]", problems)


def _fields(fields: Mapping[str, Checker]) -> Checker:
    """A mapping with exactly these optional keys; unknown keys are refused by name."""

    def check(value: Any, path: str, problems: list[str]) -> None:
        if not _mapping(value, path or "policy", problems):
            return
        for key, item in value.items():
            checker = fields.get(key) if isinstance(key, str) else None
            if checker is None:
                problems.append(f"{_at(path, key)}: unknown key")
            else:
                checker(item, _at(path, key), problems)

    return check


def _positive_number(value: Any, path: str, problems: list[str]) -> None:
    if not _is_number(value) or not value > 0 or value != value or value == float("inf"):
        problems.append(f"{path}: must be a number > 0")


def _burst(value: Any, path: str, problems: list[str]) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        problems.append(f"{path}: must be an integer >= 1")


RATE_LIMIT = _fields(
    {
        "rate": _positive_number,
        "per": _one_of(PERIODS),
        "burst": _burst,
        "scope": _one_of(SCOPES),
        "tools": _strings,
        "kinds": _list_of(_one_of(LIMIT_KINDS)),
    }
)


def _rate_limit(value: Any, path: str, problems: list[str]) -> None:
    RATE_LIMIT(value, path, problems)
    if isinstance(value, Mapping) and "rate" not in value:
        problems.append(f"{path}.rate: is required")


_rate_limits = _list_of(_rate_limit)

MATCH = _fields(
    {
        "roles": _strings,
        "principals": _strings,
        "names": _strings,
        "categories": _strings,
        "tags": _strings,
        "kinds": _list_of(_one_of(KINDS)),
        "sensitivity": _list_of(_one_of(SENSITIVITIES)),
        "capabilities": _capabilities,
    }
)


def _access_fields() -> dict[str, Checker]:
    fields: dict[str, Checker] = {}
    for key in ACCESS_LIST_KEYS:
        # At policy level a null allow list means "everything"; in a rule, null means "no grant".
        fields[key] = _opt_strings if key.startswith("allow_") else _strings
    fields["allow_capabilities"] = _capabilities
    fields["deny_capabilities"] = _capabilities
    fields["max_sensitivity"] = _sensitivity
    return fields


RULE = _fields(
    {
        **_access_fields(),
        "name": _string,
        "description": _string,
        "match": MATCH,
        "transforms": _opaque_list,
        "transforms_mode": _one_of(TRANSFORMS_MODES),
        "transform_options": _opaque_mapping,
        "input_transforms": _opaque_list,
        "rate_limits": _rate_limits,
        "honor_hints": _opt_bool,
    }
)


def _roles(value: Any, path: str, problems: list[str]) -> None:
    if not _mapping(value, path, problems):
        return
    for role, body in value.items():
        if not isinstance(role, str) or not role:
            problems.append(f"{_at(path, role)}: role names must be non-empty strings")
            continue
        RULE(body, _at(path, role), problems)


_rules = _list_of(RULE)

VAULT = _fields(
    {
        "key": _opt_string,
        "key_env": _string,
        "scope": _one_of(VAULT_SCOPES),
        "ttl_seconds": _optional(_positive_number),
        "path": _opt_string,
        "autosave": _bool,
        "encrypt": _bool,
        "restore_to": _opt_strings,
        "restored_results": _one_of(("check", "withhold")),
    }
)

CATALOG_ENTRY = _fields(
    {
        "category": _opt_string,
        "tags": _strings,
        "sensitivity": _sensitivity,
        "capabilities": _capabilities,
        "kinds": _list_of(_one_of(KINDS)),
    }
)


def _pointer(value: Any, path: str, problems: list[str]) -> None:
    if not isinstance(value, str) or (value and not value.startswith("/")):
        problems.append(f'{path}: must be a JSON pointer ("/name", "/items/*")')


PATH_SECTION = _fields(
    {
        "roots": _strings,
        "deny": _strings,
        "base": _opt_string,
        "home": _opt_string,
        "resolve_symlinks": _bool,
        "case_insensitive": _opt_bool,
    }
)
"""Path semantics shared by every `type: path` argument rule and by `file:` resource URIs (case)."""

ARGUMENT_RULE = _fields(
    {
        "name": _string,
        "description": _string,
        "tools": _strings,
        "arguments": _list_of(_pointer),
        "type": _one_of(("text", "path")),
        "allow": _opt_strings,
        "deny": _strings,
        "roots": _opt_strings,
        "results": _one_of(("none", "filter", "refuse")),
        "required": _bool,
    }
)


def _argument_rule(value: Any, path: str, problems: list[str]) -> None:
    ARGUMENT_RULE(value, path, problems)
    if isinstance(value, Mapping):
        for key in ("tools", "arguments"):
            if not value.get(key):
                problems.append(f"{path}.{key}: is required (a non-empty list)")
        if value.get("type", "text") != "path":
            for key in ("roots", "results"):
                if key in value:
                    problems.append(f"{path}.{key}: only for type: path")


SHARED_STATE = _fields({"fail_open": _bool})
"""What `--redis` shares: `fail_open: true` skips rate limits and the guard's check while Redis is down."""


def _guard(value: Any, path: str, problems: list[str]) -> None:
    """`cross_boundary_guard: true`, or a mapping `{enabled?, roster?: {tool: server}}`."""
    if isinstance(value, bool):
        return
    if not _mapping(value, path, problems):
        return
    for key, item in value.items():
        where = _at(path, key)
        if key == "enabled":
            _bool(item, where, problems)
        elif key == "roster":
            if not _mapping(item, where, problems):
                continue
            for tool, server in item.items():
                if not isinstance(tool, str) or not isinstance(server, str) or not tool or not server:
                    problems.append(f"{_at(where, tool)}: roster entries map a tool name to a server name")
        else:
            problems.append(f"{where}: unknown key")


def _catalog(value: Any, path: str, problems: list[str]) -> None:
    if not _mapping(value, path, problems):
        return
    for glob, entry in value.items():
        if not isinstance(glob, str) or not glob:
            problems.append(f"{_at(path, glob)}: catalog keys must be non-empty glob strings")
            continue
        CATALOG_ENTRY(entry, _at(path, glob), problems)


POLICY = _fields(
    {
        **_access_fields(),
        "name": _string,
        "description": _string,
        "extends": _opt_string,
        "hide_denied": _bool,
        "honor_hints": _bool,
        "audit": _bool,
        "audit_size": _count,
        "audit_max_age": _optional(_positive_number),
        "audit_per_decision": _optional(_count),
        "transforms": _opaque_list,
        "input_transforms": _opaque_list,
        "transform_options": _opaque_mapping,
        "detectors": _mapping_list,
        "disabled_detectors": _strings,
        "roles": _roles,
        "rules": _rules,
        "rate_limits": _rate_limits,
        "vault": VAULT,
        "catalog": _catalog,
        "shared_state": SHARED_STATE,
        "cross_boundary_guard": _guard,
        "paths": PATH_SECTION,
        "arguments": _list_of(_argument_rule),
    }
)


def _transform_checker() -> Callable[[Mapping[str, Any], str], Any] | None:
    """The transforms package's validator, once it exists; until then transform sections stay opaque."""
    try:
        from ..transforms import check_transform_sections  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return None
    checker: Callable[[Mapping[str, Any], str], Any] = check_transform_sections
    return checker


def _transform_hosts(doc: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """Every mapping that may hold transform keys, with its field path: the policy, each role, each rule."""
    yield "", doc
    roles = doc.get("roles")
    if isinstance(roles, Mapping):
        for role, body in roles.items():
            if isinstance(body, Mapping):
                yield f"roles.{path_key(role)}", body
    rules = doc.get("rules")
    if isinstance(rules, list):
        for index, body in enumerate(rules):
            if isinstance(body, Mapping):
                yield f"rules[{index}]", body


def _check_transforms(doc: Mapping[str, Any], problems: list[str]) -> None:
    """Hand each section host to the transforms package. Rules see the policy's detectors, as at run time."""
    checker = _transform_checker()
    if checker is None:
        return
    shared = {key: doc[key] for key in ("detectors", "disabled_detectors") if key in doc}
    for path, host in _transform_hosts(doc):
        section = {key: host[key] for key in TRANSFORM_KEYS if key in host}
        if not section:
            continue
        if path:
            section = {**shared, **section}
        try:
            found = checker(section, path)
        except ValueError as exc:  # the transforms package promises messages without values
            found = [str(exc)]
        # Its paths are built as f"{path}.{key}", so the policy level comes out with a leading dot.
        problems.extend(str(problem).removeprefix(".") for problem in found or ())
        if problems and not path:
            return  # the policy's own sections are broken: every rule would repeat it


def check_document(doc: Any) -> list[str]:
    """Every problem with a policy document, as `field.path: problem`; values are never included."""
    problems: list[str] = []
    POLICY(doc, "", problems)
    if not problems and isinstance(doc, Mapping):
        _check_transforms(doc, problems)
    return problems
