"""Access decisions through PolicyEngine.check_call: the five steps, hiding, exact codes and data."""

from __future__ import annotations

from typing import Any

import pytest

from interceptors.policy import (
    ACCESS_DENIED,
    EMPTY_COMPLETION,
    NOT_FOUND,
    Globs,
    PolicyEngine,
    PolicyRefusal,
    load_policy,
)
from tests.interceptors.policy.test_policy_catalog import TOOL_NAMES, TOOLS, VISIBLE, primed, principal, tool


def call(engine: PolicyEngine, name: str, *roles: str, who: str = "alice", **arguments: Any) -> Any:
    return engine.check_call(principal(who, *roles), "tools/call", {"name": name, "arguments": arguments})


@pytest.mark.parametrize(("profile", "roles"), sorted(VISIBLE))
def test_each_profile_lets_call_exactly_what_it_lists(profile: str, roles: tuple[str, ...]) -> None:
    engine = primed(load_policy(profile))
    engine.reset_rate_limits()
    for name in sorted(TOOL_NAMES):
        decision = call(engine, name, *roles)
        if name in VISIBLE[(profile, roles)]:
            assert decision.allowed, (name, decision)
        else:
            assert (decision.outcome, decision.code, decision.message) == (
                "not_found",
                NOT_FOUND,
                f"Unknown tool: {name}",
            )
            assert decision.data is None


def test_hidden_and_nonexistent_tools_are_indistinguishable() -> None:
    engine = primed(load_policy("strict"))
    hidden = call(engine, "run_collector")
    missing = call(engine, "no_such_tool")
    assert hidden.error().to_wire() == {"code": -32602, "message": "Unknown tool: run_collector"}
    assert missing.error().to_wire() == {"code": -32602, "message": "Unknown tool: no_such_tool"}
    assert hidden.info().keys() == missing.info().keys()
    entries = engine.audit.entries()
    assert [e["decision"] for e in entries] == ["not_found", "not_found"]
    assert entries[0]["reason"].startswith("hidden: capability")
    assert entries[1]["reason"] == "unknown"


def test_without_hide_denied_everything_is_listed_and_calls_are_denied() -> None:
    engine = primed(load_policy("strict").derive({"hide_denied": False}))
    listed, changed = engine.filter_list(principal(), "tools/list", {"tools": TOOLS})
    assert {t["name"] for t in listed["tools"]} == TOOL_NAMES
    assert changed  # output schemas are withheld: strict has output transforms
    decision = call(engine, "run_collector")
    assert decision.outcome == "denied"
    assert decision.error().to_wire() == {
        "code": ACCESS_DENIED,
        "message": "Access denied: capability 'cloud_access' is denied by policy 'strict'",
        "data": {"reason": "capability 'cloud_access' is denied by policy 'strict'", "policy": "strict"},
    }
    assert call(engine, "reveal_token", "admin").data == {
        "reason": "capability 'reveal' denied by rule 'never-reveal'",
        "policy": "strict",
    }
    assert call(engine, "privacy_audit_log").reason == "sensitivity 'restricted' exceeds the allowed 'confidential'"
    assert engine.audit.counters["denied"] == 3


def test_reasons_for_each_step() -> None:
    doc = {
        "name": "P",
        "hide_denied": False,
        "deny_tools": ["delete_*"],
        "deny_categories": ["live"],
        "allow_tools": ["*", "!web_fetch"],
        "roles": {
            "ops": {"allow_tools": ["delete_view", "web_fetch"], "deny_categories": ["export"]},
            "auditor": {"deny_tools": ["get_*"], "name": "no-gets"},
        },
    }
    engine = primed(doc)
    assert call(engine, "delete_view").reason == "tool denied by policy 'P'"
    assert call(engine, "live_describe").reason == "category 'live' denied by policy 'P'"
    assert call(engine, "web_fetch").reason == "tool not in the allow list of policy 'P'"
    assert call(engine, "delete_view", "ops").allowed  # a grant skips the policy lists
    assert call(engine, "web_fetch", "ops").allowed
    assert call(engine, "export_csv", "ops").reason == "category 'export' denied by rule 'role:ops'"
    assert call(engine, "get_asset", "auditor", "ops").reason == "denied by rule 'no-gets'"  # any deny wins
    only_categories = primed({"name": "C", "hide_denied": False, "allow_categories": ["graph"]})
    assert call(only_categories, "search_findings").reason == "category 'findings' not allowed by policy 'C'"
    assert call(only_categories, "get_asset").allowed


def test_grants_never_beat_capabilities_or_the_ceiling() -> None:
    doc = {
        "name": "P",
        "hide_denied": False,
        "max_sensitivity": "internal",
        "deny_capabilities": ["exec"],
        "roles": {
            "ops": {"allow_tools": ["*"]},
            "runner": {"allow_capabilities": ["exec", "cloud_access"]},
            "senior": {"max_sensitivity": "restricted"},
            "junior": {"max_sensitivity": "public"},
        },
    }
    engine = primed(doc)
    assert call(engine, "run_collector", "ops").reason == "sensitivity 'confidential' exceeds the allowed 'internal'"
    assert call(engine, "run_collector", "ops", "senior").reason == "capability 'exec' is denied by policy 'P'"
    assert call(engine, "run_collector", "senior", "runner").allowed
    assert call(engine, "blast_radius").allowed  # internal
    # The highest ceiling among matching rules wins, even above the policy's.
    assert call(engine, "reveal_token", "junior", "senior").allowed
    assert not call(engine, "blast_radius", "junior").allowed


def test_negation_globs() -> None:
    globs = Globs(["get_*", "!get_secret*"])
    assert globs.match("get_asset") and not globs.match("get_secret_x") and not globs.match("list")
    assert not Globs(["!x"]).match("y")  # only negations match nothing
    assert Globs(["a/*"]).match("a/b/c:d") and not Globs(["A*"]).match("abc")  # * crosses / and :; case kept
    engine = primed({"name": "N", "deny_tools": ["!get_asset", "get_*"]})
    assert not call(engine, "get_secret").allowed and call(engine, "get_asset").allowed


def test_rules_match_on_principals_tags_kinds_sensitivity_capabilities() -> None:
    doc: dict[str, Any] = {
        "name": "M",
        "hide_denied": False,
        "rules": [
            {"name": "bob-no-triage", "match": {"principals": ["bob*"], "tags": ["triage"]}, "deny_tools": ["*"]},
            {
                "name": "no-internal-tools",
                "match": {"kinds": ["tool"], "sensitivity": ["internal"]},
                "deny_tools": ["*"],
            },
            {"name": "no-writers", "match": {"roles": ["guest"], "capabilities": ["write_fs"]}, "deny_tools": ["*"]},
            {"name": "no-prompts", "match": {"kinds": ["prompt"], "roles": ["guest"]}, "deny_prompts": ["*"]},
            {"name": "everyone", "match": {"roles": ["*"], "names": ["save_*"]}, "deny_tools": ["*"]},
        ],
    }
    engine = primed(doc)
    assert call(engine, "search_findings", who="bobby").reason == "denied by rule 'bob-no-triage'"
    assert call(engine, "search_findings", who="alice").allowed
    assert call(engine, "blast_radius").reason == "denied by rule 'no-internal-tools'"
    assert call(engine, "export_csv", "guest").reason == "denied by rule 'no-writers'"
    assert call(engine, "export_csv").allowed
    assert call(engine, "save_view").reason == "denied by rule 'everyone'"
    guest_prompt = engine.check_call(principal("g", "guest"), "prompts/get", {"name": "triage"})
    assert guest_prompt.reason == "denied by rule 'no-prompts'"
    assert engine.check_call(principal(), "prompts/get", {"name": "triage"}).allowed


def test_principal_rules_put_the_principal_in_the_cache_key() -> None:
    engine = primed({"name": "K", "rules": [{"match": {"principals": ["bob"]}, "deny_tools": ["get_asset"]}]})
    assert call(engine, "get_asset", who="alice").allowed
    assert not call(engine, "get_asset", who="bob").allowed
    assert call(engine, "get_asset", who="alice").allowed


def test_roles_come_from_claims_and_bad_claims_mean_no_roles() -> None:
    engine = primed(load_policy("standard"))
    from interceptors import Principal

    assert engine.check_call(Principal("user", "a", {"roles": "admin"}), "tools/call", {"name": "reveal_token"}).allowed
    for claims in ({"roles": 5}, {"roles": [3]}, None, {}):
        assert not engine.check_call(Principal("user", "a", claims), "tools/call", {"name": "reveal_token"}).allowed
    assert not engine.check_call(None, "tools/call", {"name": "reveal_token"}).allowed
    assert engine.check_call(None, "tools/call", {"name": "get_asset"}).allowed


def test_resources_prompts_and_templates() -> None:
    engine = primed(load_policy("strict"))
    alice = principal()
    assert engine.check_call(alice, "resources/read", {"uri": "cg://metrics"}).allowed
    assert engine.check_call(alice, "resources/read", {"uri": "cg://assets/db1"}).allowed
    hidden = engine.check_call(alice, "resources/read", {"uri": "cg://secrets/root"})
    missing = engine.check_call(alice, "resources/read", {"uri": "cg://nothing/here"})
    assert hidden.error().to_wire() == {
        "code": -32602,
        "message": "Unknown resource: cg://secrets/root",
        "data": {"uri": "cg://secrets/root"},
    }
    assert missing.error().to_wire()["message"] == "Unknown resource: cg://nothing/here"
    assert engine.check_call(alice, "prompts/get", {"name": "triage"}).allowed
    prompt = engine.check_call(alice, "prompts/get", {"name": "incident_report"})
    assert prompt.error().to_wire() == {"code": -32602, "message": "Unknown prompt: incident_report"}
    assert engine.check_call(alice, "ping", {}).allowed  # not judged


def test_concrete_and_percent_decoded_uris_are_matched() -> None:
    engine = primed({"name": "U", "deny_resources": ["cg://assets/bastion*"]})
    alice = principal()
    assert not engine.check_call(alice, "resources/read", {"uri": "cg://assets/bastion-1"}).allowed
    assert not engine.check_call(alice, "resources/read", {"uri": "cg://assets/%62astion"}).allowed
    assert engine.check_call(alice, "resources/read", {"uri": "cg://assets/db1"}).allowed
    listed, _ = engine.filter_list(
        alice, "resources/templates/list", {"resourceTemplates": [{"uriTemplate": "cg://assets/{name}", "name": "a"}]}
    )
    assert len(listed["resourceTemplates"]) == 1  # the template itself is not denied


def test_completions() -> None:
    engine = primed(
        load_policy("strict").derive({"rate_limits": [{"rate": 1, "per": "hour", "kinds": ["completion"]}]})
    )
    alice = principal()
    ok = engine.check_call(
        alice,
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "triage"}, "argument": {"name": "finding", "value": "x"}},
    )
    assert ok.allowed and ok.kind == "completion"
    hidden = engine.check_call(alice, "completion/complete", {"ref": {"type": "ref/prompt", "name": "incident_report"}})
    assert hidden.outcome == "not_found" and hidden.result == EMPTY_COMPLETION
    template = engine.check_call(
        alice, "completion/complete", {"ref": {"type": "ref/resource", "uri": "cg://secrets/{name}"}}
    )
    assert template.result == EMPTY_COMPLETION
    bad = engine.check_call(alice, "completion/complete", {"ref": "nonsense"})
    assert bad.result == EMPTY_COMPLETION
    limited = engine.check_call(alice, "completion/complete", {"ref": {"type": "ref/prompt", "name": "triage"}})
    assert limited.outcome == "rate_limited"
    denied = primed(load_policy("strict").derive({"hide_denied": False}))
    refused = denied.check_call(
        alice, "completion/complete", {"ref": {"type": "ref/prompt", "name": "incident_report"}}
    )
    assert refused.code == ACCESS_DENIED and refused.result is None


def test_output_schema_is_withheld_only_when_output_transforms_apply() -> None:
    alice = principal()
    open_engine = primed(load_policy("open"))
    listed, changed = open_engine.filter_list(alice, "tools/list", {"tools": TOOLS})
    assert not changed and all("outputSchema" in t for t in listed["tools"])
    standard, _ = primed(load_policy("standard")).filter_list(alice, "tools/list", {"tools": TOOLS})
    assert not any("outputSchema" in t for t in standard["tools"])
    doc = {"name": "R", "rules": [{"match": {"categories": ["graph"]}, "transforms": ["redact"]}]}
    ruled, _ = primed(doc).filter_list(alice, "tools/list", {"tools": TOOLS})
    with_schema = {t["name"] for t in ruled["tools"] if "outputSchema" in t}
    assert with_schema == TOOL_NAMES - {"list_assets", "get_asset", "blast_radius"}
    replaced = {
        "name": "X",
        "transforms": ["redact"],
        "rules": [{"match": {"roles": ["raw"]}, "transforms_mode": "replace"}],
    }
    raw_list, _ = primed(replaced).filter_list(principal("r", "raw"), "tools/list", {"tools": TOOLS})
    assert all("outputSchema" in t for t in raw_list["tools"])


def test_output_transform_specs_follow_rule_modes() -> None:
    doc = {
        "name": "T",
        "transforms": ["redact"],
        "rules": [
            {"transforms": ["project"]},
            {"match": {"roles": ["p"]}, "transforms": ["sanitize"], "transforms_mode": "prepend"},
            {"match": {"roles": ["r"]}, "transforms": ["annotate"], "transforms_mode": "replace"},
        ],
    }
    engine = primed(doc)
    spec = engine.metadata.tool("get_asset")
    assert spec is not None
    assert engine.output_transform_specs(principal(), spec.spec) == ["redact", "project"]
    assert engine.output_transform_specs(principal("x", "p"), spec.spec) == ["sanitize", "redact", "project"]
    assert engine.output_transform_specs(principal("x", "p", "r"), spec.spec) == ["annotate"]
    assert engine.output_transform_specs(principal("x", "p"), None) == ["sanitize", "redact", "project"]


def test_list_filtering_drops_malformed_items_and_ignores_other_shapes() -> None:
    engine = primed(load_policy("open"))
    result, changed = engine.filter_list(principal(), "tools/list", {"tools": [{"nameless": 1}, tool("t")]})
    assert changed and [t["name"] for t in result["tools"]] == ["t"]
    assert engine.filter_list(principal(), "tools/list", {"tools": "x"}) == ({"tools": "x"}, False)
    assert engine.filter_list(principal(), "other/list", {}) == ({}, False)


def test_decision_cache_is_bounded() -> None:
    engine = PolicyEngine("standard", cache_size=16)
    for index in range(100):
        call(engine, f"tool_{index}")
    assert len(engine._cache) == 16


def test_unknown_names_are_judged_on_defaults_until_the_list_is_known() -> None:
    engine = PolicyEngine("standard")
    assert call(engine, "never_listed").allowed  # forwarded: the server answers for it
    strict = PolicyEngine("strict")
    assert call(strict, "never_listed").outcome == "not_found"  # defaults are open world: hidden
    lenient = primed(load_policy("standard"), unknown_as_not_found=False)
    assert call(lenient, "never_listed").allowed


def test_refusal_is_an_rpc_error() -> None:
    decision = call(primed(load_policy("strict")), "web_fetch")
    error = decision.error()
    assert isinstance(error, PolicyRefusal) and error.code == -32602
    with pytest.raises(ValueError):
        call(primed(load_policy("open")), "web_fetch").error()
