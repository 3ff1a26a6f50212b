"""Hypothesis properties: deny lists only grow under merging; no principal ever sees another's view."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interceptors import Invocation, InvocationContext, Phase, Principal
from interceptors.policy import (
    CAPABILITIES,
    PolicyEngine,
    check_document,
    load_policy,
    merge_documents,
    policy_registry,
)
from tests.interceptors.policy.test_policy_catalog import TOOL_NAMES, TOOLS

NAMES = sorted(TOOL_NAMES)
DENY_KEYS = ("deny_tools", "deny_resources", "deny_prompts", "deny_categories")
ROLES = ("analyst", "lead", "ops", "guest")

globs = st.lists(st.sampled_from([*NAMES, "get_*", "*_export", "!get_asset", "*", "x*"]), max_size=4)
categories = st.lists(st.sampled_from(["graph", "live", "export", "privacy", "state", "*"]), max_size=3)
capabilities = st.lists(st.sampled_from(CAPABILITIES), max_size=3, unique=True)


@st.composite
def access_body(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for key in DENY_KEYS:
        if draw(st.booleans()):
            body[key] = draw(categories if key == "deny_categories" else globs)
    if draw(st.booleans()):
        body["deny_capabilities"] = draw(capabilities)
    if draw(st.booleans()):
        body["allow_tools"] = draw(globs)
    if draw(st.booleans()):
        body["allow_capabilities"] = draw(capabilities)
    if draw(st.booleans()):
        body["max_sensitivity"] = draw(st.sampled_from(["public", "internal", "confidential", "restricted"]))
    return body


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    doc = draw(access_body())
    doc["name"] = "random"
    roles = draw(st.lists(st.sampled_from(ROLES), max_size=3, unique=True))
    if roles:
        doc["roles"] = {role: draw(access_body()) for role in roles}
    if draw(st.booleans()):
        rule = draw(access_body())
        rule["match"] = {"principals": draw(st.lists(st.sampled_from(["alice", "b*", "!bob"]), min_size=1, max_size=2))}
        doc["rules"] = [rule]
    if draw(st.booleans()):
        doc["hide_denied"] = draw(st.booleans())
    return doc


def deny_paths(doc: dict[str, Any]) -> dict[tuple[str, ...], list[Any]]:
    out: dict[tuple[str, ...], list[Any]] = {}
    for key, value in doc.items():
        if key.startswith("deny_"):
            out[(key,)] = value
    for role, body in (doc.get("roles") or {}).items():
        for key, value in body.items():
            if key.startswith("deny_"):
                out[("roles", role, key)] = value
    return out


def at(doc: dict[str, Any], path: tuple[str, ...]) -> list[Any]:
    node: Any = doc
    for key in path:
        node = node.get(key, {}) if isinstance(node, dict) else {}
    return node if isinstance(node, list) else []


@given(parent=documents(), child=documents())
def test_merging_never_shrinks_a_deny_list(parent: dict[str, Any], child: dict[str, Any]) -> None:
    merged = merge_documents(parent, child)
    assert check_document(merged) == []
    for source in (parent, child):
        for path, values in deny_paths(source).items():
            assert set(values) <= set(at(merged, path)), path
    # Parent order first, duplicates removed.
    for path, values in deny_paths(parent).items():
        combined = at(merged, path)
        assert list(dict.fromkeys(combined))[: len(dict.fromkeys(values))] == list(dict.fromkeys(values))
    assert len(merged.get("rules", [])) == len(parent.get("rules", [])) + len(child.get("rules", []))


@settings(max_examples=30)
@given(child=documents(), parent=st.sampled_from(["standard", "strict", "read_only", "soc-analyst"]))
def test_extending_a_profile_keeps_every_parent_denial(child: dict[str, Any], parent: str) -> None:
    base = load_policy(parent)
    derived = load_policy({**child, "extends": parent})
    assert base.lists.deny_capabilities <= derived.lists.deny_capabilities
    # A policy-level allow_capabilities can un-deny only what the child names itself.
    undenied = base.deny_capabilities - derived.deny_capabilities
    assert undenied <= set(child.get("allow_capabilities", ()))


principals = st.tuples(
    st.sampled_from(["alice", "bob", "bert", "carol"]), st.lists(st.sampled_from(ROLES), max_size=2, unique=True)
)


def view(engine: PolicyEngine, who: Principal) -> frozenset[str]:
    listed, _ = engine.filter_list(who, "tools/list", {"tools": TOOLS})
    return frozenset(tool["name"] for tool in listed["tools"])


@settings(max_examples=40)
@given(doc=documents(), sequence=st.lists(principals, min_size=1, max_size=8))
def test_random_principals_never_see_another_principals_view(
    doc: dict[str, Any], sequence: list[tuple[str, list[str]]]
) -> None:
    doc["hide_denied"] = True
    shared = PolicyEngine(doc)
    shared.learn("tools/list", {"tools": TOOLS})
    lists = policy_registry(shared).get("policy-lists")
    if lists is None:  # a policy that permits everything registers no stage: everyone sees every tool
        assert shared.permits_everything
        assert all(view(shared, Principal("user", who, {"roles": roles})) == TOOL_NAMES for who, roles in sequence)
        return
    for who, roles in sequence:
        person = Principal("user", who, {"roles": roles})
        # What this principal would see with nobody else around: a fresh engine, an empty cache.
        alone = PolicyEngine(doc)
        alone.learn("tools/list", {"tools": TOOLS})
        expected = view(alone, person)
        invocation = Invocation(
            "policy-lists", "tools/list", Phase.RESPONSE, {"tools": TOOLS}, None, InvocationContext(principal=person)
        )
        mutation: Any = lists.handler(invocation)
        payload = {"tools": TOOLS} if mutation.modified is False else mutation.payload
        assert frozenset(tool["name"] for tool in payload["tools"]) == expected
        for name in TOOL_NAMES - expected:
            decision = shared.check_call(person, "tools/call", {"name": name})
            assert (decision.outcome, decision.message) == ("not_found", f"Unknown tool: {name}")
