"""Primitive metadata: catalog over `_meta` over annotations; plus the sample upstream the policy tests share."""

from __future__ import annotations

from typing import Any

import pytest

from interceptors import Principal
from interceptors.policy import (
    META_CAPABILITIES,
    META_CATEGORY,
    META_SENSITIVITY,
    META_TAGS,
    Catalog,
    MetadataStore,
    PolicyEngine,
    build_spec,
    derive_from_annotations,
    load_policy,
)

READ = {"readOnlyHint": True, "openWorldHint": False}
WRITE = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
DESTROY = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}
LIVE = {"readOnlyHint": True, "openWorldHint": True}


def tool(name: str, annotations: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A tools/list entry; `meta` keys are category, tags, sensitivity, capabilities."""
    out: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}
    if annotations is not None:
        out["annotations"] = annotations
    if meta:
        out["_meta"] = {f"io.mcp-interceptors/{key}": value for key, value in meta.items()}
    return out


# A catalog shaped like the reference's categories: graph, findings, export, state, live, privacy.
TOOLS: list[dict[str, Any]] = [
    tool("list_assets", READ, category="graph"),
    tool("get_asset", READ, category="graph"),
    tool("search_findings", READ, category="findings", tags=["triage"]),
    tool("blast_radius", READ, category="graph", sensitivity="internal"),
    tool("export_csv", WRITE, category="export", capabilities=["write_fs"]),
    tool("subgraph_export", WRITE, category="export", capabilities=["write_fs"]),
    tool("save_view", WRITE, category="state"),
    tool("delete_view", DESTROY, category="state"),
    tool("live_describe", LIVE, category="live"),
    tool("run_collector", None, category="live", capabilities=["cloud_access", "exec"]),
    tool("reveal_token", READ, category="privacy", capabilities=["reveal"], sensitivity="restricted"),
    tool("privacy_audit_log", READ, category="privacy", sensitivity="restricted"),
    tool("web_fetch"),  # no annotations at all: the spec's pessimistic defaults apply
]
TOOL_NAMES = frozenset(t["name"] for t in TOOLS)
PROMPTS: list[dict[str, Any]] = [
    {"name": "triage", "arguments": [{"name": "finding"}]},
    {"name": "incident_report", "_meta": {META_SENSITIVITY: "restricted", META_CATEGORY: "privacy"}},
]
RESOURCES: list[dict[str, Any]] = [
    {"uri": "cg://metrics", "name": "metrics", "_meta": {META_CATEGORY: "server", META_SENSITIVITY: "internal"}},
]
TEMPLATES: list[dict[str, Any]] = [
    {"uriTemplate": "cg://assets/{name}", "name": "asset", "_meta": {META_CATEGORY: "graph"}},
    {"uriTemplate": "cg://secrets/{name}", "name": "secret", "_meta": {META_SENSITIVITY: "restricted"}},
]

VISIBLE: dict[tuple[str, tuple[str, ...]], frozenset[str]] = {
    ("open", ()): TOOL_NAMES,
    ("standard", ()): TOOL_NAMES - {"reveal_token"},
    ("standard", ("admin",)): TOOL_NAMES,
    ("strict", ()): frozenset({"list_assets", "get_asset", "search_findings", "blast_radius", "save_view"}),
    ("strict", ("admin",)): frozenset({"list_assets", "get_asset", "search_findings", "blast_radius", "save_view"}),
    ("read_only", ()): frozenset({"list_assets", "get_asset", "search_findings", "blast_radius", "privacy_audit_log"}),
    ("airgapped", ()): TOOL_NAMES - {"live_describe", "run_collector", "web_fetch", "reveal_token"},
    ("audit", ()): frozenset({"list_assets", "get_asset", "search_findings", "blast_radius", "privacy_audit_log"}),
    ("soc-analyst", ()): frozenset(
        {"list_assets", "get_asset", "search_findings", "blast_radius", "save_view", "delete_view"}
    ),
    ("soc-analyst", ("analyst",)): frozenset(
        {"list_assets", "get_asset", "search_findings", "blast_radius", "save_view", "delete_view"}
    ),
    ("soc-analyst", ("lead",)): TOOL_NAMES - {"live_describe", "run_collector", "web_fetch"},
    ("soc-analyst", ("collector",)): TOOL_NAMES - {"reveal_token", "privacy_audit_log"},
}
"""Which tools each (profile, roles) sees: the intent of each profile on this catalog."""


def principal(name: str = "alice", *roles: str) -> Principal:
    return Principal("user", name, {"roles": list(roles)})


def primed(policy: Any, **options: Any) -> PolicyEngine:
    """An engine that has seen the upstream's lists, as a gateway's does after the first list calls."""
    engine = PolicyEngine(policy, **options)
    engine.learn("tools/list", {"tools": TOOLS})
    engine.learn("prompts/list", {"prompts": PROMPTS})
    engine.learn("resources/list", {"resources": RESOURCES})
    engine.learn("resources/templates/list", {"resourceTemplates": TEMPLATES})
    return engine


def test_annotations_derive_capabilities_and_tags() -> None:
    assert derive_from_annotations(READ) == {"capabilities": ["read_state"], "tags": ["read_only"]}
    assert derive_from_annotations(WRITE) == {"capabilities": ["write_state"], "tags": []}
    assert derive_from_annotations(DESTROY) == {"capabilities": ["destructive", "write_state"], "tags": ["destructive"]}
    assert derive_from_annotations(LIVE) == {
        "capabilities": ["cloud_access", "read_state"],
        "tags": ["open_world", "read_only"],
    }
    # Missing hints read as the MCP defaults: not read-only, destructive, open world.
    assert derive_from_annotations(None) == {
        "capabilities": ["cloud_access", "destructive", "write_state"],
        "tags": ["destructive", "open_world"],
    }
    idempotent = derive_from_annotations({**WRITE, "idempotentHint": True})
    assert idempotent["tags"] == ["idempotent"]


def test_catalog_beats_meta_beats_annotations() -> None:
    catalog = Catalog({"get_*": {"category": "graph"}, "get_secret": {"sensitivity": "restricted", "tags": ["x"]}})
    item = tool("get_secret", READ, category="server", sensitivity="public", capabilities=["reveal"])
    spec = build_spec("tool", "get_secret", item, catalog)
    assert spec.category == "graph"  # catalog
    assert spec.sensitivity == "restricted"  # later catalog entry
    assert spec.tags == {"x"}  # catalog replaces the derived tags
    assert spec.capabilities == {"reveal"}  # _meta, since the catalog says nothing
    plain = build_spec("tool", "other", item, catalog)
    assert (plain.category, plain.sensitivity) == ("server", "public")


def test_catalog_entries_can_be_limited_to_kinds() -> None:
    catalog = Catalog(
        {"triage": {"category": "t", "kinds": ["prompt"]}, "cg://*": {"category": "r", "kinds": ["resource"]}}
    )
    assert build_spec("prompt", "triage", None, catalog).category == "t"
    assert build_spec("tool", "triage", None, catalog).category is None
    assert build_spec("resource_template", "cg://a/{x}", None, catalog).category == "r"


def test_malformed_meta_is_ignored_field_by_field() -> None:
    item = {
        "name": "t",
        "annotations": READ,
        "_meta": {META_CATEGORY: 3, META_TAGS: "nope", META_SENSITIVITY: "top", META_CAPABILITIES: ["exec", "warp"]},
    }
    spec = build_spec("tool", "t", item, Catalog(None))
    assert spec.category is None
    assert spec.tags == {"read_only"}
    assert spec.sensitivity == "confidential"
    assert spec.capabilities == {"exec"}  # unknown capability names are dropped


def test_defaults_per_kind() -> None:
    catalog = Catalog(None)
    assert build_spec("prompt", "p", None, catalog).sensitivity == "internal"
    assert build_spec("prompt", "p", None, catalog).capabilities == frozenset()
    assert build_spec("resource", "x://y", None, catalog).capabilities == {"read_state"}
    assert build_spec("resource", "x://y", None, catalog).sensitivity == "confidential"


def test_store_learns_lists_and_knows_when_a_list_is_complete() -> None:
    store = MetadataStore(Catalog(None))
    resolved = store.tool("anything")
    assert resolved is not None and resolved.spec.capabilities == {"write_state", "destructive", "cloud_access"}
    store.learn("tools/list", {"tools": TOOLS})
    assert store.tool("nope") is None
    found = store.tool("get_asset")
    assert found is not None and found.spec.category == "graph"
    # A single-page server that drops a tool: the next list replaces the set.
    store.learn("tools/list", {"tools": TOOLS[:1]})
    assert store.tool("get_asset") is None


def test_paginated_lists_accumulate_and_complete_on_the_last_page() -> None:
    store = MetadataStore(Catalog(None))
    store.learn("tools/list", {"tools": TOOLS[:3], "nextCursor": "2"})
    assert store.tool("not-yet-listed") is not None  # incomplete: judged on defaults
    store.learn("tools/list", {"tools": TOOLS[3:]})
    assert store.tool("not-yet-listed") is None
    assert store.tool("list_assets") is not None and store.tool("web_fetch") is not None


def test_resources_resolve_static_then_longest_template_and_decoded_uris() -> None:
    store = MetadataStore(Catalog(None))
    store.learn("resources/list", {"resources": RESOURCES})
    store.learn(
        "resources/templates/list",
        {"resourceTemplates": [*TEMPLATES, {"uriTemplate": "cg://assets/{name}/edges", "name": "edges"}]},
    )
    static = store.resource("cg://metric%73")
    assert static is not None and static.spec.name == "cg://metrics"
    edges = store.resource("cg://assets/db1/edges")
    assert edges is not None and edges.spec.name == "cg://assets/{name}/edges"
    asset = store.resource("cg://assets/%62astion")
    assert asset is not None
    # Globs see the template and the URI's normal form, never the spelling as sent (see interceptors.policy.uris).
    assert asset.idents == ("cg://assets/{name}", "cg://assets/bastion")
    assert asset.variables == {"name": "bastion"}
    assert store.resource("cg://elsewhere/x") is None


@pytest.mark.parametrize(("profile", "roles"), sorted(VISIBLE))
def test_profile_listing_matches_its_intent(profile: str, roles: tuple[str, ...]) -> None:
    engine = primed(load_policy(profile))
    listed, _ = engine.filter_list(principal("alice", *roles), "tools/list", {"tools": TOOLS})
    assert {t["name"] for t in listed["tools"]} == VISIBLE[(profile, roles)]
