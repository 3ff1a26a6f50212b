"""`alias`, `regex_replace`, `rename_keys`, `template` and `substitute` (all four in that order).

Aliases give real values friendly names (account 111111111111 → prod-payments); they run after the
last `redact` so the redactor sees real values, and the input side turns aliases back.
"""

from __future__ import annotations

import fnmatch
import re
import string
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from .base import Options, Transform, TransformContext
from .detectors import compile_pattern
from .triepattern import literal_alternation

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


def _walk_strings(value: Any, fn: Callable[[str, str | None], str], key: str | None = None) -> Any:
    """A copy of `value` with `fn(text, immediate key)` applied to every string value (list items inherit)."""
    if isinstance(value, str):
        return fn(value, key)
    if isinstance(value, dict):
        return {k: _walk_strings(v, fn, k if isinstance(k, str) else None) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk_strings(v, fn, key) for v in value]
    return value


# --- alias ------------------------------------------------------------------------------------------------


def _flatten_aliases(table: Any, path: str) -> dict[str, str]:
    """`{real: alias}` or, grouped for reading only, `{entity: {real: alias}}`."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{path}: must be a mapping of real value to alias")
    out: dict[str, str] = {}
    for real, alias in table.items():
        if isinstance(alias, Mapping):
            out.update(_flatten_aliases(alias, path))
            continue
        if isinstance(real, int) and not isinstance(real, bool):
            real = str(real)
        if not isinstance(real, str) or not real or not isinstance(alias, str | int) or isinstance(alias, bool):
            raise ValueError(f"{path}: real values and aliases must be non-empty strings")
        out[real] = str(alias)
    return out


def load_alias_file(file: Any, path: str) -> dict[str, str]:
    """A YAML or JSON file of the same shape, optionally under an `aliases:` key."""
    if not isinstance(file, str) or not file:
        raise ValueError(f"{path}: must be a file path")
    try:
        text = Path(file).read_text(encoding="utf-8")
        data = orjson.loads(text) if file.endswith(".json") else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, orjson.JSONDecodeError, yaml.YAMLError):
        raise ValueError(f"{path}: cannot be read as a YAML or JSON alias table") from None
    if isinstance(data, Mapping) and set(data) == {"aliases"}:
        data = data["aliases"]
    return _flatten_aliases(data or {}, path)


class AliasMap(Transform):
    type = "alias"
    OPTIONS = ("aliases", "files", "substring", "case_sensitive", "pseudonym_aware")

    def __init__(self, options: Mapping[str, Any], path: str = "alias", transform_id: str | None = None) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        table: dict[str, str] = {}
        for index, file in enumerate(opts.items("files")):
            table.update(load_alias_file(file, f"{path}.files[{index}]"))
        if opts.raw.get("aliases") is not None:
            table.update(_flatten_aliases(opts.raw["aliases"], f"{path}.aliases"))
        self.substring = opts.flag("substring", True)
        self.case_sensitive = opts.flag("case_sensitive", True)
        self.pseudonym_aware = opts.flag("pseudonym_aware", True)
        self._setup(table)

    def _setup(self, table: dict[str, str]) -> None:
        self.table = table
        fold: Callable[[str], str] = (lambda s: s) if self.case_sensitive else str.casefold
        self._fold = fold
        self._exact = {fold(k): v for k, v in table.items()}
        self._finder: re.Pattern[str] | None = None
        if table and self.substring:
            body = literal_alternation(sorted(table, key=len, reverse=True))
            flags = 0 if self.case_sensitive else re.IGNORECASE
            self._finder = re.compile(r"(?<![\w-])(?:" + body + r")(?![\w-])", flags)

    @property
    def reversible(self) -> bool:
        return bool(self.table)

    @property
    def reverse_map(self) -> dict[str, str]:
        """alias → real; when two real values share an alias the last one wins."""
        return {alias: real for real, alias in self.table.items()}

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        if not self.table:
            return value
        counter = [0]
        result = self._value(value, counter)
        if counter[0]:
            ctx.report["aliased"] = ctx.report.get("aliased", 0) + counter[0]
        return result

    def _value(self, value: Any, counter: list[int]) -> Any:
        if isinstance(value, str):
            return self.text(value, counter)
        if isinstance(value, dict):
            return {
                (self.text(k, counter) if isinstance(k, str) else k): self._value(v, counter) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._value(v, counter) for v in value]
        return value

    def text(self, text: str, counter: list[int]) -> str:
        exact = self._exact.get(self._fold(text))
        if exact is not None:
            counter[0] += 1
            return exact
        if self._finder is None:
            return text

        def swap(match: re.Match[str]) -> str:
            counter[0] += 1
            return self._exact[self._fold(match.group(0))]

        return self._finder.sub(swap, text)


# --- regex_replace ---------------------------------------------------------------------------------------

_GROUP_REF = re.compile(r"\\(\d{1,2})|\\g<([^>]*)>")


class RegexReplace(Transform):
    type = "regex_replace"
    OPTIONS = ("rules",)
    RULE_FIELDS = frozenset({"pattern", "replace", "replacement", "keys", "flags", "count"})

    def __init__(
        self, options: Mapping[str, Any], path: str = "regex_replace", transform_id: str | None = None
    ) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        self.rules = [self._rule(rule, f"{path}.rules[{i}]") for i, rule in enumerate(opts.items("rules"))]

    def _rule(self, rule: Any, path: str) -> tuple[re.Pattern[str], str, re.Pattern[str] | None, int]:
        if not isinstance(rule, Mapping):
            raise ValueError(f"{path}: must be a mapping")
        if any(k not in self.RULE_FIELDS for k in rule):
            raise ValueError(f"{path}: unknown field(s); allowed: {', '.join(sorted(self.RULE_FIELDS))}")
        flags = 0
        for letter in rule.get("flags", "") or "":
            if letter not in _FLAGS:
                raise ValueError(f"{path}.flags: letters from 'imsx' only")
            flags |= _FLAGS[letter]
        pattern = compile_pattern(rule.get("pattern"), flags, f"{path}.pattern")
        replacement = rule.get("replace", rule.get("replacement", ""))
        if not isinstance(replacement, str):
            raise ValueError(f"{path}.replace: must be a string")
        for number, name in _GROUP_REF.findall(replacement):
            if (number and int(number) > pattern.groups) or (
                name and name not in pattern.groupindex and not (name.isdigit() and int(name) <= pattern.groups)
            ):
                raise ValueError(f"{path}.replace: refers to a group the pattern does not have")
        keys = rule.get("keys")
        key_pattern = None
        if keys is not None:
            if isinstance(keys, str):
                keys = [keys]
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError(f"{path}.keys: must be a list of key globs")
            key_pattern = re.compile("|".join(fnmatch.translate(k) for k in keys)) if keys else re.compile(r"(?!)")
        limit = rule.get("count", 0)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ValueError(f"{path}.count: must be a non-negative integer")
        return pattern, replacement, key_pattern, limit

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        if not self.rules:
            return value
        counter = [0]

        def rewrite(text: str, key: str | None) -> str:
            for pattern, replacement, keys, limit in self.rules:
                if keys is not None and (key is None or not keys.match(key)):
                    continue
                try:
                    text, done = pattern.subn(replacement, text, count=limit)
                except (re.error, IndexError):
                    continue
                counter[0] += done
            return text

        result = _walk_strings(value, rewrite)
        if counter[0]:
            ctx.report["regex_replaced"] = ctx.report.get("regex_replaced", 0) + counter[0]
        return result


# --- rename_keys -------------------------------------------------------------------------------------------


class RenameKeys(Transform):
    type = "rename_keys"
    OPTIONS = ("renames",)

    def __init__(self, options: Mapping[str, Any], path: str = "rename_keys", transform_id: str | None = None) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        renames = opts.mapping("renames") or {}
        if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in renames.items()):
            raise ValueError(f"{path}.renames: must map key names to new key names")
        self.renames = dict(renames)

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        if not self.renames:
            return value
        counter = [0]
        result = self._value(value, counter)
        if counter[0]:
            ctx.report["keys_renamed"] = ctx.report.get("keys_renamed", 0) + counter[0]
        return result

    def _value(self, value: Any, counter: list[int]) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                new_key = self.renames.get(key, key) if isinstance(key, str) else key
                if new_key != key:
                    counter[0] += 1
                out[new_key] = self._value(item, counter)
            return out
        if isinstance(value, list | tuple):
            return [self._value(v, counter) for v in value]
        return value


# --- template ---------------------------------------------------------------------------------------------


class Templates(Transform):
    type = "template"
    OPTIONS = ("templates",)

    def __init__(self, options: Mapping[str, Any], path: str = "template", transform_id: str | None = None) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        self.templates: list[tuple[str, str, frozenset[str], bool]] = []
        for index, item in enumerate(opts.items("templates")):
            where = f"{path}.templates[{index}]"
            if not isinstance(item, Mapping) or any(k not in ("target", "template", "overwrite") for k in item):
                raise ValueError(f"{where}: must be a mapping of target, template and overwrite")
            target, template = item.get("target"), item.get("template")
            overwrite = item.get("overwrite", False)
            if not isinstance(target, str) or not target or not isinstance(template, str):
                raise ValueError(f"{where}: target and template must be strings")
            if not isinstance(overwrite, bool):
                raise ValueError(f"{where}.overwrite: must be true or false")
            try:
                fields = {
                    re.split(r"[.\[]", name, maxsplit=1)[0]
                    for _, name, _, _ in string.Formatter().parse(template)
                    if name
                }
            except ValueError:
                raise ValueError(f"{where}.template: not a valid format template") from None
            self.templates.append((target, template, frozenset(fields), overwrite))

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        if not self.templates:
            return value
        counter = [0]
        result = self._value(value, counter)
        if counter[0]:
            ctx.report["templated"] = ctx.report.get("templated", 0) + counter[0]
        return result

    def _value(self, value: Any, counter: list[int]) -> Any:
        if isinstance(value, dict):
            out = {k: self._value(v, counter) for k, v in value.items()}
            for target, template, fields, overwrite in self.templates:
                if (target in out and not overwrite) or not fields <= out.keys():
                    continue
                try:
                    out[target] = template.format(**{f: out[f] for f in fields})
                except (KeyError, IndexError, AttributeError, ValueError, TypeError):
                    continue
                counter[0] += 1
            return out
        if isinstance(value, list | tuple):
            return [self._value(v, counter) for v in value]
        return value


# --- substitute -------------------------------------------------------------------------------------------


class Substitute(Transform):
    """alias, regex_replace, rename_keys and template in one step (only the aliases are reversible)."""

    type = "substitute"
    OPTIONS = ("aliases", "alias_files", "substring", "case_sensitive", "regex", "rename", "templates")

    def __init__(self, options: Mapping[str, Any], path: str = "substitute", transform_id: str | None = None) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        alias_options: dict[str, Any] = {"aliases": opts.raw.get("aliases"), "files": opts.items("alias_files")}
        for name in ("substring", "case_sensitive"):
            if name in opts.raw:
                alias_options[name] = opts.raw[name]
        self.alias = AliasMap(alias_options, path)
        self.regex = RegexReplace({"rules": opts.items("regex")}, path)
        self.rename = RenameKeys({"renames": opts.raw.get("rename") or {}}, path)
        self.template = Templates({"templates": opts.items("templates")}, path)

    @property
    def reversible(self) -> bool:
        return self.alias.reversible

    @property
    def reverse_map(self) -> dict[str, str]:
        return self.alias.reverse_map

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        for step in (self.alias, self.regex, self.rename, self.template):
            value = step.apply(value, ctx, label)
        return value
