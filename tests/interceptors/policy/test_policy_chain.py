"""The policy interceptors end to end through LocalChain, their handlers directly, and principals."""

from __future__ import annotations

import getpass
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from interceptors import Invocation, InvocationContext, Mode, Phase, Principal, RegisteredInterceptor
from interceptors.policy import (
    BearerTokens,
    PolicyEngine,
    PolicyError,
    PolicyRefusal,
    load_policy,
    policy_registry,
    principal_for_stdio,
    refusal_from_info,
)
from interceptors_chain import ExecutionResult
from interceptors_server import LocalChain
from tests.interceptors.policy.test_policy_catalog import PROMPTS, RESOURCES, TEMPLATES, TOOLS, VISIBLE, primed

pytestmark = pytest.mark.anyio


def context(who: str, *roles: str) -> InvocationContext:
    return InvocationContext(principal=Principal("user", who, {"roles": list(roles)}))


def refusal(outcome: ExecutionResult) -> dict[str, Any]:
    """What a gateway does: the policy validator's structured info carries the exact JSON-RPC error."""
    for record in outcome.results:
        info = (record.result or {}).get("info")
        if record.interceptor == "policy" and info:
            # The namespaced keys repeat the error for generic invokers (tested in test_policy_middleware).
            return {key: value for key, value in info.items() if not key.startswith("io.mcp-interceptors/")}
    raise AssertionError("no policy refusal")


def run(entry: RegisteredInterceptor, invocation: Invocation) -> Any:
    """Call a registered handler the way an inline host does (our handlers are synchronous)."""
    return entry.handler(invocation)


async def request(chain: Any, method: str, params: dict[str, Any], ctx: InvocationContext) -> ExecutionResult:
    payload = {"method": method, "params": params}
    result: ExecutionResult = await chain.execute(method, "request", payload, direction="receiving", context=ctx)
    return result


async def test_lists_are_filtered_per_principal_through_the_chain() -> None:
    engine = PolicyEngine("soc-analyst")
    async with LocalChain(policy_registry(engine)) as chain:
        for roles in ((), ("analyst",), ("lead",), ("collector",)):
            outcome = await chain.execute(
                "tools/list", "response", {"tools": TOOLS}, direction="sending", context=context("p", *roles)
            )
            listed = outcome.payload_or({"tools": TOOLS})["tools"]
            assert {t["name"] for t in listed} == VISIBLE[("soc-analyst", roles)]
            assert not any("outputSchema" in t for t in listed)  # soc-analyst transforms every output
        # Same list, another principal: nothing is cached across principals.
        lead = await chain.execute(
            "tools/list", "response", {"tools": TOOLS}, direction="sending", context=context("l", "lead")
        )
        analyst = await chain.execute(
            "tools/list", "response", {"tools": TOOLS}, direction="sending", context=context("a", "analyst")
        )
        assert len(lead.final_payload["tools"]) > len(analyst.final_payload["tools"])
        templates = await chain.execute(
            "resources/templates/list",
            "response",
            {"resourceTemplates": TEMPLATES},
            direction="sending",
            context=context("a"),
        )
        assert [t["name"] for t in templates.final_payload["resourceTemplates"]] == ["asset"]


async def test_calls_are_judged_with_exact_codes_through_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    engine = primed(load_policy("soc-analyst"))
    async with LocalChain(policy_registry(engine, audit_sink=str(path))) as chain:
        allowed = await request(
            chain, "tools/call", {"name": "get_asset", "arguments": {"id": "quokka-prod"}}, context("a", "analyst")
        )
        assert not allowed.blocked
        hidden = await request(chain, "tools/call", {"name": "export_csv", "arguments": {}}, context("a", "analyst"))
        missing = await request(chain, "tools/call", {"name": "nope", "arguments": {}}, context("a", "analyst"))
        assert hidden.blocked and missing.blocked
        assert refusal(hidden) == {"outcome": "not_found", "code": -32602, "message": "Unknown tool: export_csv"}
        assert refusal(missing) == {"outcome": "not_found", "code": -32602, "message": "Unknown tool: nope"}
        assert (await request(chain, "tools/call", {"name": "export_csv"}, context("l", "lead"))).blocked is False
        resource = await request(chain, "resources/read", {"uri": "cg://secrets/x"}, context("a", "analyst"))
        assert refusal(resource)["data"] == {"uri": "cg://secrets/x"}
        completion = await request(
            chain, "completion/complete", {"ref": {"type": "ref/prompt", "name": "incident_report"}}, context("a")
        )
        assert refusal(completion)["result"] == {"completion": {"values": [], "total": 0, "hasMore": False}}
        # What a gateway raises or returns:
        assert refusal_from_info(refusal(completion)) == {"completion": {"values": [], "total": 0, "hasMore": False}}
        error = refusal_from_info(refusal(resource))
        assert isinstance(error, PolicyRefusal)
        assert error.to_wire() == {
            "code": -32602,
            "message": "Unknown resource: cg://secrets/x",
            "data": {"uri": "cg://secrets/x"},
        }
        with pytest.raises(ValueError):
            refusal_from_info({"outcome": "odd"})
    decisions = [json.loads(line)["decision"] for line in path.read_text().splitlines()]
    assert decisions == ["allowed", "not_found", "not_found", "allowed", "not_found", "not_found"]  # audit: true
    assert "quokka" not in path.read_text()  # only a keyed fingerprint (hex) is logged


async def test_denied_and_rate_limited_codes_through_the_chain() -> None:
    policy = load_policy("strict").derive(
        {"hide_denied": False, "rate_limits": [{"rate": 1, "per": "hour", "tools": ["get_asset"]}]}
    )
    async with LocalChain(policy_registry(primed(policy))) as chain:
        denied = await request(chain, "tools/call", {"name": "web_fetch"}, context("a"))
        assert refusal(denied) == {
            "outcome": "denied",
            "code": -31001,
            "message": "Access denied: capability 'cloud_access' is denied by policy 'strict'",
            "data": {"reason": "capability 'cloud_access' is denied by policy 'strict'", "policy": "strict"},
        }
        assert not (await request(chain, "tools/call", {"name": "get_asset"}, context("a"))).blocked
        limited = await request(chain, "tools/call", {"name": "get_asset"}, context("a"))
        info = refusal(limited)
        assert (
            info["code"] == -31029 and info["data"]["limit"] == "1/hour" and info["data"]["scope"] == "principal_tool"
        )
        # An hour less the moments between the two calls (on a busy machine, more than a rounding step).
        assert 3540.0 < info["data"]["retry_after"] <= 3600.0


async def test_audit_mode_records_but_never_blocks_or_filters() -> None:
    engine = primed(load_policy("strict"))
    async with LocalChain(policy_registry(engine, mode="audit")) as chain:
        outcome = await request(chain, "tools/call", {"name": "web_fetch"}, context("a"))
        assert not outcome.blocked
        listed = await chain.execute(
            "tools/list", "response", {"tools": TOOLS}, direction="sending", context=context("a")
        )
        assert not listed.modified
    assert [e["decision"] for e in engine.audit.entries()] == ["not_found"]


async def test_registered_handlers_directly() -> None:
    engine = primed(load_policy("standard"))
    registry = policy_registry(engine, name="pol")
    with pytest.raises(ValueError, match="audit_key"):
        policy_registry(engine, audit_key=b"k")
    assert [entry.name for entry in registry] == ["pol", "pol-lists"]
    check, lists = registry.get("pol"), registry.get("pol-lists")
    assert check is not None and lists is not None and check.inline and lists.inline
    assert check.info.mode is Mode.ACTIVE
    payload = {"method": "tools/call", "params": {"name": "reveal_token"}}
    verdict = run(check, Invocation("pol", "tools/call", Phase.REQUEST, payload, None, context("a")))
    assert not verdict.valid and verdict.info == {
        "outcome": "not_found",
        "code": -32602,
        "message": "Unknown tool: reveal_token",
        "io.mcp-interceptors/error": {"code": -32602, "message": "Unknown tool: reveal_token"},
    }
    assert verdict.messages[0].message == "Unknown tool: reveal_token"
    admin = run(check, Invocation("pol", "tools/call", Phase.REQUEST, payload, None, context("r", "admin")))
    assert admin.valid
    anonymous = run(check, Invocation("pol", "tools/call", Phase.REQUEST, payload, None, None))
    assert not anonymous.valid
    mutation = run(
        lists, Invocation("pol-lists", "prompts/list", Phase.RESPONSE, {"prompts": PROMPTS}, None, context("a"))
    )
    assert mutation.modified is False
    resources = run(
        lists, Invocation("pol-lists", "resources/list", Phase.RESPONSE, {"resources": RESOURCES}, None, None)
    )
    assert resources.modified is False


def test_registry_from_a_profile_name_with_a_file_sink(tmp_path: Path) -> None:
    registry = policy_registry("audit", audit_sink=tmp_path / "a.jsonl")
    check = registry.get("policy")
    assert check is not None
    check.handler(
        Invocation("policy", "tools/call", Phase.REQUEST, {"method": "tools/call", "params": {"name": "t"}}, None, None)
    )
    assert (tmp_path / "a.jsonl").read_text().count("\n") == 1


# Principals ----------------------------------------------------------------------------------


def test_stdio_principal_is_the_os_user() -> None:
    local = principal_for_stdio(["analyst"])
    assert local.type == "user" and local.id == getpass.getuser()
    assert local.claims == {"roles": ["analyst"]}


def test_bearer_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = BearerTokens({"tok-alice-123": ("alice", ["analyst", "analyst"]), "tok-bob-456": ("bob", [])})
    alice = tokens.authenticate("Bearer tok-alice-123")
    assert alice == Principal("user", "alice", {"roles": ["analyst"]})
    assert tokens.authenticate("bearer  tok-bob-456 ") is not None
    for header in (None, "", "Bearer", "Basic tok-alice-123", "Bearer tok-alice-12", "tok-alice-123"):
        assert tokens.authenticate(header) is None
    assert "tok-alice" not in repr(tokens) and "tok-alice" not in repr(tokens._grants)
    monkeypatch.setenv("SVC_TOKEN", "svc-secret")
    path = tmp_path / "tokens.yaml"
    digest = hashlib.sha256(b"hashed-secret").hexdigest()
    path.write_text(
        "tokens:\n"
        "  - {id: svc, type: service, roles: [collector], token_env: SVC_TOKEN}\n"
        f"  - {{id: carol, token_sha256: {digest}}}\n"
        "  - {id: dave, token: plain-secret}\n"
    )
    loaded = BearerTokens.from_file(path)
    assert len(loaded) == 3
    svc = loaded.authenticate("Bearer svc-secret")
    assert svc is not None and svc.type == "service" and svc.claims == {"roles": ["collector"]}
    assert loaded.principal_for("hashed-secret") == Principal("user", "carol", {"roles": []})
    with pytest.raises(ValueError):
        tokens.add("", "x")


def test_bad_token_files_never_show_tokens(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    entries = [
        {"id": "a", "token": "leaky-token-value", "colour": 1},
        {"id": 3, "token": "t2"},
        {"token_sha256": "zz", "id": "c"},
        {"id": "d", "token_env": "UNSET_VAR_XYZ"},
        {"id": "e"},
    ]
    path.write_text(json.dumps(entries))
    with pytest.raises(PolicyError) as caught:
        BearerTokens.from_file(path)
    message = str(caught.value)
    assert "leaky-token-value" not in message
    assert caught.value.problems == [
        "tokens[0]: unknown key 'colour'; the keys are: id, roles, type, token, token_env, token_sha256",
        "tokens[1].id: must be a non-empty string",
        "tokens[2].token_sha256: must be 64 hex digits",
        "tokens[3].token_env: the variable is not set",
        "tokens[4]: needs exactly one of token, token_env, token_sha256",
    ]


def test_each_authentication_gets_its_own_principal() -> None:
    tokens = BearerTokens({"tok": ("alice", ["analyst"])})
    first = tokens.principal_for("tok")
    assert first is not None and first.claims is not None
    first.claims["roles"].append("admin")
    assert tokens.principal_for("tok") == Principal("user", "alice", {"roles": ["analyst"]})


def test_transforms_selector_hands_over_the_matching_rules() -> None:
    transforms = pytest.importorskip("interceptors.transforms")
    from interceptors.policy import transforms_selector

    select = transforms_selector(primed(load_policy("soc-analyst")))
    analyst = select(transforms.CallFacts("tools/call", "search_findings", None, "a", ("analyst",)))
    names = [rule.get("name") for rule in analyst.rules]
    assert names == [None, "label-findings", "friendly-account-names"]  # role:analyst, then the two rules
    assert analyst.rules[0]["deny_categories"] == ["live", "export"]
    assert (analyst.sensitivity, analyst.category) == ("confidential", "findings")
    unknown = select(transforms.CallFacts("tools/call", "nope", None, None, ()))
    assert [rule.get("name") for rule in unknown.rules] == ["friendly-account-names"]
    assert unknown.category is None
    completion = select(transforms.CallFacts("completion/complete", "cg://assets/{name}", "name", "a", ()))
    assert completion.category == "graph"
