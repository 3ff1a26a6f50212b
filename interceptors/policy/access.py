"""The access decision: rules first (explicit denials win), then the ceiling, grants, lists, capabilities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .globs import Globs
from .metadata import SENSITIVITY_RANK, PrimitiveSpec
from .ratelimit import RateLimit
from .schema import FAMILIES, SENSITIVITIES
from .uris import normalize_pattern, parent_patterns

_KIND_WORD = {"tool": "tool", "resource": "resource", "resource_template": "resource", "prompt": "prompt"}


def _globs(values: Any, family: str = "", fold: bool = False) -> Globs | None:
    return None if values is None else Globs(_patterns(values, family), fold_file_case=fold and family == "resources")


def _patterns(values: Any, family: str, deny: bool = False) -> list[str]:
    """Resource globs are spelled like the normal form of the URIs they judge (see `uris`). A denied `file:`
    resource also denies its directory (reading it would list the file)."""
    patterns = list(values or ())
    if family != "resources":
        return patterns
    normal = [normalize_pattern(p) for p in patterns]
    if deny:
        normal.extend(parent for p in list(normal) for parent in parent_patterns(p) if parent not in normal)
    return list(dict.fromkeys(normal))


@dataclass(frozen=True, slots=True)
class AccessLists:
    """The access fields shared by a policy and its rules. `None` allow lists mean "not set"."""

    allow: Mapping[str, Globs | None]
    deny: Mapping[str, Globs]
    allow_categories: Globs | None
    deny_categories: Globs
    allow_capabilities: frozenset[str]
    deny_capabilities: frozenset[str]
    max_sensitivity: int | None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], fold_file_case: bool = False) -> AccessLists:
        """`fold_file_case`: `file:` resource globs ignore case (`paths.case_insensitive`)."""
        ceiling = doc.get("max_sensitivity")
        fold = fold_file_case
        return cls(
            allow={family: _globs(doc.get(f"allow_{family}"), family, fold) for family in FAMILIES},
            deny={
                family: Globs(
                    _patterns(doc.get(f"deny_{family}"), family, deny=True),
                    fold_file_case=fold and family == "resources",
                )
                for family in FAMILIES
            },
            allow_categories=_globs(doc.get("allow_categories")),
            deny_categories=Globs(doc.get("deny_categories") or ()),
            allow_capabilities=frozenset(doc.get("allow_capabilities") or ()),
            deny_capabilities=frozenset(doc.get("deny_capabilities") or ()),
            max_sensitivity=None if ceiling is None else SENSITIVITY_RANK[ceiling],
        )


def _set(values: Any) -> frozenset[str] | None:
    return frozenset(values) if values else None


@dataclass(frozen=True, slots=True)
class Match:
    """A rule's selector. Every condition must hold; an absent or empty one holds for anything."""

    roles: frozenset[str] | None = None
    principals: Globs | None = None
    names: Globs | None = None
    categories: Globs | None = None
    tags: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    sensitivity: frozenset[str] | None = None
    capabilities: frozenset[str] | None = None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any] | None, role: str | None = None) -> Match:
        doc = doc or {}
        roles = list(doc.get("roles") or ())
        if role is not None:
            roles.insert(0, role)
        kinds = _set(doc.get("kinds"))
        if kinds is not None and "resource" in kinds:
            kinds = kinds | {"resource_template"}
        return cls(
            roles=_set(roles),
            principals=Globs(doc["principals"]) if doc.get("principals") else None,
            names=Globs(doc["names"]) if doc.get("names") else None,
            categories=Globs(doc["categories"]) if doc.get("categories") else None,
            tags=_set(doc.get("tags")),
            kinds=kinds,
            sensitivity=_set(doc.get("sensitivity")),
            capabilities=_set(doc.get("capabilities")),
        )

    @property
    def primitive_free(self) -> bool:
        """Only roles and principals: the rule also applies when no primitive is involved."""
        return not (self.names or self.categories or self.tags or self.kinds or self.sensitivity or self.capabilities)

    def applies(
        self, spec: PrimitiveSpec | None, roles: frozenset[str], principal_id: str, idents: Sequence[str]
    ) -> bool:
        if self.roles is not None and "*" not in self.roles and self.roles.isdisjoint(roles):
            return False
        if self.principals is not None and not self.principals.match(principal_id):
            return False
        if spec is None:
            return self.primitive_free
        if self.names is not None and not self.names.match_any(idents):
            return False
        if self.categories is not None and not self.categories.match(spec.category or ""):
            return False
        if self.tags is not None and self.tags.isdisjoint(spec.tags):
            return False
        if self.kinds is not None and spec.kind not in self.kinds:
            return False
        if self.sensitivity is not None and spec.sensitivity not in self.sensitivity:
            return False
        return self.capabilities is None or not self.capabilities.isdisjoint(spec.capabilities)


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """A role body or a `rules[]` item, ready to match."""

    name: str
    match: Match
    lists: AccessLists
    rate_limits: tuple[RateLimit, ...]
    body: Mapping[str, Any]
    """The document form, for the transform keys the transforms package reads."""

    @classmethod
    def from_document(
        cls, body: Mapping[str, Any], default_name: str, role: str | None = None, fold_file_case: bool = False
    ) -> CompiledRule:
        return cls(
            name=body.get("name") or default_name,
            match=Match.from_document(body.get("match"), role),
            lists=AccessLists.from_document(body, fold_file_case),
            rate_limits=tuple(RateLimit.from_document(limit) for limit in body.get("rate_limits") or ()),
            body=body,
        )

    @property
    def uses_principals(self) -> bool:
        return self.match.principals is not None


def compile_rules(doc: Mapping[str, Any], fold_file_case: bool = False) -> tuple[CompiledRule, ...]:
    """Roles first, in mapping order (each a rule whose `match.roles` starts with the role), then `rules`."""
    fold = fold_file_case
    roles = (doc.get("roles") or {}).items()
    rules = [CompiledRule.from_document(body, f"role:{role}", role, fold) for role, body in roles]
    rules.extend(
        CompiledRule.from_document(body, f"rule[{i}]", None, fold) for i, body in enumerate(doc.get("rules") or ())
    )
    return tuple(rules)


def decide(
    policy_name: str,
    lists: AccessLists,
    deny_set: frozenset[str],
    rules: Sequence[CompiledRule],
    spec: PrimitiveSpec,
    idents: Sequence[str],
) -> tuple[bool, str]:
    """`(allowed, reason)` for a primitive, given the rules that match the caller (see doc/POLICY.md)."""
    family = spec.family
    category = spec.category or ""
    # 1-2. Explicit rule denials: nothing overrides them.
    for rule in rules:
        own = rule.lists
        if own.deny[family].match_any(idents):
            return False, f"denied by rule '{rule.name}'"
        if own.deny_categories.match(category):
            return False, f"category '{category}' denied by rule '{rule.name}'"
        refused = own.deny_capabilities & spec.capabilities
        if refused:
            return False, f"capability '{min(refused)}' denied by rule '{rule.name}'"
    # 3. Sensitivity ceiling: the highest any matching rule sets, else the policy's.
    ceilings = [rule.lists.max_sensitivity for rule in rules if rule.lists.max_sensitivity is not None]
    ceiling = max(ceilings) if ceilings else lists.max_sensitivity
    if ceiling is not None and spec.rank > ceiling:
        return False, f"sensitivity '{spec.sensitivity}' exceeds the allowed '{SENSITIVITIES[ceiling]}'"
    # 4. Grants skip the policy-level lists.
    granted = False
    for rule in rules:
        allow = rule.lists.allow[family]
        categories = rule.lists.allow_categories
        if (allow is not None and allow.match_any(idents)) or (categories is not None and categories.match(category)):
            granted = True
            break
    if not granted:
        word = _KIND_WORD[spec.kind]
        if lists.deny[family].match_any(idents):
            return False, f"{word} denied by policy '{policy_name}'"
        if lists.deny_categories.match(category):
            return False, f"category '{category}' denied by policy '{policy_name}'"
        allow = lists.allow[family]
        if allow is not None and not allow.match_any(idents):
            return False, f"{word} not in the allow list of policy '{policy_name}'"
        if lists.allow_categories is not None and not lists.allow_categories.match(category):
            return False, f"category '{category}' not allowed by policy '{policy_name}'"
    # 5. Capabilities in the policy's deny set need a grant from a matching rule.
    for capability in sorted(deny_set & spec.capabilities):
        if not any(capability in rule.lists.allow_capabilities for rule in rules):
            return False, f"capability '{capability}' is denied by policy '{policy_name}'"
    return True, ""
