"""What the policy knows about a primitive: kind, category, tags, sensitivity, capabilities.

Each field comes from the first source that says something:
1. the policy's `catalog` (the operator's word, so it wins over the server's);
2. the primitive's `_meta` keys `io.mcp-interceptors/category`, `/tags`, `/sensitivity`, `/capabilities`;
3. derived: tools from their MCP annotations (with the spec's pessimistic defaults for missing hints),
   resources read state, prompts declare nothing; sensitivity `confidential` (`internal` for prompts).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from .._fastinit import fast_init
from .globs import Globs
from .schema import CAPABILITIES, SENSITIVITIES
from .uris import UriRefused, normalize_uri, uri_idents

META_PREFIX = "io.mcp-interceptors/"
META_CATEGORY = META_PREFIX + "category"
META_TAGS = META_PREFIX + "tags"
META_SENSITIVITY = META_PREFIX + "sensitivity"
META_CAPABILITIES = META_PREFIX + "capabilities"

SENSITIVITY_RANK = {name: rank for rank, name in enumerate(SENSITIVITIES)}
FAMILY_OF_KIND = {"tool": "tools", "resource": "resources", "resource_template": "resources", "prompt": "prompts"}
DEFAULT_SENSITIVITY = {"tool": "confidential", "resource": "confidential", "resource_template": "confidential"}
MAX_ITEMS = 10_000
"""Per family: a server cannot grow the store without bound by listing more."""

_KNOWN_CAPABILITIES = frozenset(CAPABILITIES)


@dataclass(frozen=True, slots=True, eq=False)
class PrimitiveSpec:
    """One tool, prompt, resource or resource template as the policy sees it.

    Identity equality on purpose: specs key the decision cache, which keeps them alive.
    """

    kind: str
    name: str
    """Tool or prompt name, resource URI, or template text."""
    category: str | None = None
    tags: frozenset[str] = frozenset()
    sensitivity: str = "confidential"
    capabilities: frozenset[str] = frozenset()
    idents: tuple[str, ...] = ()
    """The name, and its percent-decoded form when that differs: what globs are matched against."""

    def __post_init__(self) -> None:
        if not self.idents:
            object.__setattr__(self, "idents", idents_of(self.name))

    @property
    def family(self) -> str:
        return FAMILY_OF_KIND[self.kind]

    @property
    def rank(self) -> int:
        return SENSITIVITY_RANK[self.sensitivity]

    @property
    def facts(self) -> tuple[Any, ...]:
        """Everything a decision depends on: equal facts, equal decisions."""
        return (self.kind, self.name, self.category, self.tags, self.sensitivity, self.capabilities)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "category": self.category,
            "tags": sorted(self.tags),
            "sensitivity": self.sensitivity,
            "capabilities": sorted(self.capabilities),
        }


class Catalog:
    """The policy's `catalog`: glob → fields. Entries apply in document order; a later match overrides a field."""

    __slots__ = ("_entries",)

    def __init__(self, section: Mapping[str, Mapping[str, Any]] | None) -> None:
        self._entries: list[tuple[Globs, frozenset[str] | None, Mapping[str, Any]]] = []
        for glob, entry in (section or {}).items():
            kinds = frozenset(entry.get("kinds") or ())
            covered = (kinds | {"resource_template"} if "resource" in kinds else kinds) or None
            self._entries.append((Globs([glob]), covered, entry))

    def lookup(self, kind: str, idents: Sequence[str]) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for globs, kinds, entry in self._entries:
            if (kinds is None or kind in kinds) and globs.match_any(idents):
                fields.update(entry)
        fields.pop("kinds", None)
        return fields


def _meta_fields(item: Mapping[str, Any]) -> dict[str, Any]:
    """Our `_meta` keys, each kept only when well formed (a server's typo must not pass as a claim)."""
    meta = item.get("_meta")
    if not isinstance(meta, Mapping):
        return {}
    fields: dict[str, Any] = {}
    category = meta.get(META_CATEGORY)
    if isinstance(category, str):
        fields["category"] = category
    tags = meta.get(META_TAGS)
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        fields["tags"] = tags
    sensitivity = meta.get(META_SENSITIVITY)
    if sensitivity in SENSITIVITY_RANK:
        fields["sensitivity"] = sensitivity
    capabilities = meta.get(META_CAPABILITIES)
    if isinstance(capabilities, list) and all(isinstance(c, str) for c in capabilities):
        # Unknown names are dropped: no policy could deny them anyway.
        fields["capabilities"] = [c for c in capabilities if c in _KNOWN_CAPABILITIES]
    return fields


def derive_from_annotations(annotations: Any) -> dict[str, Any]:
    """Capabilities and tags from MCP tool annotations, reading a missing hint as the spec's default.

    readOnlyHint (default false) → `read_state`, else `write_state`, plus `destructive` unless
    destructiveHint is false; openWorldHint (default true) → `cloud_access`. Tags name the same facts:
    `read_only`, `destructive`, `idempotent`, `open_world`.
    """
    hints: Mapping[str, Any] = annotations if isinstance(annotations, Mapping) else {}
    read_only = hints.get("readOnlyHint") is True
    destructive = not read_only and hints.get("destructiveHint") is not False
    open_world = hints.get("openWorldHint") is not False
    idempotent = hints.get("idempotentHint") is True
    capabilities = {"read_state"} if read_only else {"write_state"}
    tags = {"read_only"} if read_only else set()
    if destructive:
        capabilities.add("destructive")
        tags.add("destructive")
    if open_world:
        capabilities.add("cloud_access")
        tags.add("open_world")
    if idempotent:
        tags.add("idempotent")
    return {"capabilities": sorted(capabilities), "tags": sorted(tags)}


def build_spec(kind: str, name: str, item: Mapping[str, Any] | None, catalog: Catalog) -> PrimitiveSpec:
    """Combine catalog, `_meta` and derived facts, field by field in that order of precedence."""
    item = item or {}
    if kind == "tool":
        derived = derive_from_annotations(item.get("annotations"))
    elif kind == "prompt":
        derived = {"capabilities": [], "tags": []}
    else:
        derived = {"capabilities": ["read_state"], "tags": []}
    derived["sensitivity"] = DEFAULT_SENSITIVITY.get(kind, "internal")
    derived["category"] = None
    fields = {**derived, **_meta_fields(item), **catalog.lookup(kind, idents_of(name))}
    return PrimitiveSpec(
        kind=kind,
        name=name,
        category=fields["category"],
        tags=frozenset(fields["tags"]),
        sensitivity=fields["sensitivity"] or DEFAULT_SENSITIVITY.get(kind, "internal"),
        capabilities=frozenset(fields["capabilities"]),
    )


def idents_of(name: str) -> tuple[str, ...]:
    decoded = unquote(name)
    return (name,) if decoded == name else (name, decoded)


# URI templates (RFC 6570) ---------------------------------------------------------------------------

_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")


class UriTemplate:
    """Enough of RFC 6570 to tell whether a concrete URI came from a template, and its simple variables."""

    __slots__ = ("_regex", "text", "variables")

    def __init__(self, text: str) -> None:
        self.text = text
        parts: list[str] = []
        names: list[str] = []
        position = 0
        for match in _EXPRESSION.finditer(text):
            parts.append(re.escape(text[position : match.start()]))
            operator, body = match.group(1), match.group(2)
            if operator == "" and re.fullmatch(r"[A-Za-z0-9_]+", body):
                parts.append(f"(?P<v{len(names)}>[^/?#]*)")
                names.append(body)
            elif operator in ("+", "#"):
                parts.append(f"{re.escape(operator) if operator == '#' else ''}.*")
            elif operator in ("?", "&"):
                parts.append(r"(?:[?&].*)?")
            elif operator == "/":
                parts.append(r"(?:/[^?#]*)?")
            else:
                parts.append(".*")
            position = match.end()
        parts.append(re.escape(text[position:]))
        self._regex = re.compile("".join(parts), re.DOTALL)
        self.variables = tuple(names)

    def match(self, uri: str) -> dict[str, str] | None:
        found = self._regex.fullmatch(uri)
        if found is None:
            return None
        return {name: found.group(f"v{index}") for index, name in enumerate(self.variables)}


@fast_init
@dataclass(frozen=True, slots=True)
class Resolved:
    """A requested primitive: its spec, every ident globs may match, and template variables (for audit)."""

    spec: PrimitiveSpec
    idents: tuple[str, ...]
    variables: Mapping[str, str] | None = None


LIST_KEYS = {
    "tools/list": ("tools", "tool", "name"),
    "prompts/list": ("prompts", "prompt", "name"),
    "resources/list": ("resources", "resource", "uri"),
    "resources/templates/list": ("resourceTemplates", "resource_template", "uriTemplate"),
}


_HINTS = ("readOnlyHint", "destructiveHint", "openWorldHint", "idempotentHint")
_META_KEYS = (META_CATEGORY, META_TAGS, META_SENSITIVITY, META_CAPABILITIES)


def _item_print(item: Mapping[str, Any]) -> tuple[Any, ...]:
    """The parts of a list item that metadata depends on, cheap to compare: unchanged items skip the rebuild."""
    annotations, meta = item.get("annotations"), item.get("_meta")
    hints = tuple(annotations.get(h) for h in _HINTS) if isinstance(annotations, Mapping) else None
    ours = tuple(repr(meta.get(k)) for k in _META_KEYS) if isinstance(meta, Mapping) else None
    return hints, ours


class _Family:
    """Known primitives of one list method, and whether the server's whole list has been seen."""

    __slots__ = ("complete", "items", "normal", "paginated", "prints")

    def __init__(self) -> None:
        self.items: dict[str, PrimitiveSpec] = {}
        self.normal: dict[str, PrimitiveSpec] = {}
        """For static resources: the listed URIs in their normal form (see `uris`)."""
        self.prints: dict[str, tuple[Any, ...]] = {}
        self.complete = False
        self.paginated = False


class MetadataStore:
    """Specs learned from list results that pass through the policy, plus the catalog for the rest.

    A name the server never listed gets a spec from the catalog and the pessimistic derivation (not
    read-only, destructive, open world) once and is judged on that. When the server's whole list is
    known, such a name is reported exactly like a hidden one (`unknown_as_not_found`).
    """

    def __init__(self, catalog: Catalog, *, unknown_as_not_found: bool = True) -> None:
        self.catalog = catalog
        self.unknown_as_not_found = unknown_as_not_found
        self._families = {method: _Family() for method in LIST_KEYS}
        self._templates: list[tuple[UriTemplate, PrimitiveSpec]] = []
        self._defaults: dict[tuple[str, str], PrimitiveSpec] = {}
        self._lock = threading.Lock()

    def learn(self, method: str, result: Any) -> list[tuple[Mapping[str, Any], PrimitiveSpec] | None]:
        """Record a list result page; returns each item's spec (None for malformed items), in order."""
        list_key, kind, ident_key = LIST_KEYS[method]
        items = result.get(list_key) if isinstance(result, Mapping) else None
        if not isinstance(items, list):
            return []
        out: list[tuple[Mapping[str, Any], PrimitiveSpec] | None] = []
        learned: dict[str, PrimitiveSpec] = {}
        prints: dict[str, tuple[Any, ...]] = {}
        family = self._families[method]
        for item in items:
            ident = item.get(ident_key) if isinstance(item, Mapping) else None
            if not isinstance(ident, str):
                out.append(None)
                continue
            fingerprint = prints[ident] = _item_print(item)
            previous = family.items.get(ident)
            if previous is None or family.prints.get(ident) != fingerprint:
                spec = build_spec(kind, ident, item, self.catalog)
                if previous is not None and previous.facts == spec.facts:
                    spec = previous  # keep the identity, so cached decisions keep hitting
            else:
                spec = previous
            learned[ident] = spec
            out.append((item, spec))
        more = isinstance(result, Mapping) and result.get("nextCursor") is not None
        with self._lock:
            family.paginated = family.paginated or more
            if family.paginated:
                merged = {**family.items, **learned}
                family.items = dict(list(merged.items())[-MAX_ITEMS:])
                family.prints = {
                    key: value for key, value in {**family.prints, **prints}.items() if key in family.items
                }
            else:
                family.items = dict(list(learned.items())[:MAX_ITEMS])
                family.prints = {key: prints[key] for key in family.items}
            family.complete = family.complete or not more
            if method == "resources/list":
                family.normal = {}
                for uri, spec in family.items.items():
                    try:
                        family.normal.setdefault(normalize_uri(uri), spec)
                    except UriRefused:
                        continue
            if method == "resources/templates/list":
                templates = [(UriTemplate(text), spec) for text, spec in family.items.items()]
                templates.sort(key=lambda pair: len(pair[0].text), reverse=True)
                self._templates = templates
        return out

    def specs(self, method: str) -> Iterable[PrimitiveSpec]:
        return tuple(self._families[method].items.values())

    def _complete(self, *methods: str) -> bool:
        if not self.unknown_as_not_found:
            return False
        families = self._families
        if len(methods) == 1:  # tools and prompts, twice per call: no generator
            return families[methods[0]].complete
        return all(families[method].complete for method in methods)

    def _default(self, kind: str, name: str) -> PrimitiveSpec:
        """Specs for never-listed names are memoised (bounded), so the decision cache can hit on them."""
        key = (kind, name)
        spec = self._defaults.get(key)
        if spec is None:
            spec = build_spec(kind, name, None, self.catalog)
            if len(self._defaults) >= MAX_ITEMS:
                self._defaults.clear()
            self._defaults[key] = spec
        return spec

    def tool(self, name: str) -> Resolved | None:
        """None: unknown, and the whole tool list is known (so the caller answers "Unknown tool")."""
        spec = self._families["tools/list"].items.get(name)
        if spec is None:
            if self._complete("tools/list"):
                return None
            spec = self._default("tool", name)
        return Resolved(spec, spec.idents)

    def prompt(self, name: str) -> Resolved | None:
        spec = self._families["prompts/list"].items.get(name)
        if spec is None:
            if self._complete("prompts/list"):
                return None
            spec = self._default("prompt", name)
        return Resolved(spec, spec.idents)

    def resource(self, uri: str) -> Resolved | None:
        """Static URI (as sent, then in its normal form), else the longest template matching the normal form,
        else a default spec. Globs see the listed URI or template text and the normal form only, never the
        spelling as sent. Raises `UriRefused` for a URI that cannot be read one way only."""
        idents = uri_idents(uri)
        normal = idents[0]
        static = self._families["resources/list"]
        spec = static.items.get(uri) or static.normal.get(normal)
        if spec is not None:
            return Resolved(spec, tuple(dict.fromkeys((spec.name, *idents))))
        for template, template_spec in self._templates:
            variables = template.match(normal)
            if variables is not None:
                return Resolved(template_spec, (template.text, *idents), variables)
        if self._complete("resources/list", "resources/templates/list"):
            return None
        return Resolved(self._default("resource", normal), idents)

    def reference(self, ref: Any) -> tuple[str, Resolved | None]:
        """A completion's `ref`: ("prompt"|"resource", resolved). Template text is looked up as a template."""
        if not isinstance(ref, Mapping):
            return "prompt", None
        if ref.get("type") == "ref/resource":
            uri = ref.get("uri")
            if not isinstance(uri, str):
                return "resource", None
            spec = self._families["resources/templates/list"].items.get(uri)
            if spec is not None:
                return "resource", Resolved(spec, spec.idents)
            return "resource", self.resource(uri)
        name = ref.get("name")
        return "prompt", self.prompt(name) if isinstance(name, str) else None
