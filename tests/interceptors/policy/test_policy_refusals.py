"""Refusals say why, and the audit says so: any interceptor's refusal (the policy's own, or one loaded like
`--registry`) is audited as `denied` with its interceptor and reason, and the client gets the reason in the
JSON-RPC error, secrets masked. Also: path rules through the real chain (the response pass filters listings)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from integrations.gateway.inprocess import InProcessGateway
from integrations.gateway.stages import build_stages
from interceptors import Invocation, InvocationContext, Principal, Registry, Verdict
from interceptors.policy import PolicyEngine, policy_registry
from interceptors_server import LocalChain
from tests.conftest import ROOT
from tests.interceptors.policy.test_policy_paths import POLICY, READ_ONLY, listing, make_tree

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
UPSTREAM = [sys.executable, "-m", "tests.servers.files_server"]
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
"""A GitHub token the refusing validator quotes: it must reach neither the client nor the audit file."""


def no_echo() -> Registry:
    """What a user loads with `--registry`: a validator that refuses `echo_value`, quoting the value."""
    registry = Registry()

    @registry.validator(name="no-echo", events=["tools/call"], phase="request")
    def check(invocation: Invocation) -> Verdict:
        params = invocation.payload.get("params") or {}
        if params.get("name") == "echo_value":
            return Verdict.deny(f"echo_value is not allowed here (it was asked to echo {TOKEN})")
        return Verdict.allow()

    return registry


def policy_file(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "name: refusals\nextends: standard\naudit: true\n"
        "arguments:\n  - {tools: [encode_value], arguments: [/how], allow: [base64, hex]}\n"
    )
    return str(path)


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_every_refusal_is_audited_as_denied_with_its_interceptor_and_the_client_gets_the_reason(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.jsonl"
    stages = build_stages(policy_file(tmp_path), str(audit))
    with anyio.fail_after(60):
        async with (
            LocalChain(*stages.registries, no_echo()) as chain,
            InProcessGateway(UPSTREAM, chain, stages=stages, cwd=str(ROOT)) as gateway,
            Client(gateway.server, mode="legacy") as client,
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("echo_value", {"value": "x"})
            with pytest.raises(MCPError) as by_policy:
                await client.call_tool("encode_value", {"value": "x", "how": "reversed"})
            allowed = await client.call_tool("encode_value", {"value": "x", "how": "hex"})
    error = refused.value.error
    assert error.code == -32602
    assert error.message.startswith("blocked by interceptor 'no-echo': echo_value is not allowed here")
    assert error.data == {"interceptor": "no-echo", "reason": error.message.split(": ", 1)[1]}
    assert TOKEN not in json.dumps([error.message, error.data])  # the secret is masked, the reason kept
    assert "[REDACTED" in error.message
    own = by_policy.value.error
    assert own.code == -31001
    assert own.message == "Access denied: argument '/how' refused: not in the allowed patterns (rule 'arguments[0]')"
    assert not allowed.is_error
    lines = audit_lines(audit)
    assert TOKEN not in audit.read_text()
    echo = [line for line in lines if line["name"] == "echo_value"]
    assert echo[-1]["decision"] == "denied" and echo[-1]["interceptor"] == "no-echo"
    assert echo[-1]["reason"] == error.data["reason"]
    policy_refusals = [line for line in lines if line["name"] == "encode_value" and line["decision"] == "denied"]
    assert len(policy_refusals) == 1 and "interceptor" not in policy_refusals[0]  # the policy's own: once
    memory = [entry for entry in stages.engine.audit.entries() if entry["name"] == "echo_value"]
    assert [entry["decision"] for entry in memory] == ["denied"]  # the policy's `allowed` entry was amended
    assert stages.engine.audit.counters["denied"] == 2


async def test_a_refusal_with_a_chosen_error_keeps_it_and_is_audited() -> None:
    engine = PolicyEngine({"name": "p"})
    chosen = {"code": -32001, "message": "quota exhausted"}
    error = engine.record_refusal(None, "tools/call", {"name": "t", "arguments": {}}, "quota", "over quota", chosen)
    assert error == chosen
    entry = engine.audit.entries()[-1]
    assert (entry["decision"], entry["interceptor"], entry["reason"]) == ("denied", "quota", "over quota")
    other = engine.record_refusal(None, "tools/list", None, "lister", "no\nlists")
    assert other["message"] == "blocked by interceptor 'lister': no\\x0alists"  # one line, escaped
    assert engine.audit.entries()[-1]["reason"] == other["data"]["reason"]  # escaped once, the same text


async def test_path_rules_through_the_chain_refuse_off_the_event_loop_and_filter_listings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request pass refuses a protected path (the validator decides in a worker thread); the response pass
    of an allowed listing withholds protected entries; both audited."""
    proj = make_tree(tmp_path)
    monkeypatch.setenv("PROJECT_DIR", str(proj))
    engine = PolicyEngine(str(POLICY))
    engine.learn("tools/list", {"tools": [{"name": "list_directory", "annotations": READ_ONLY}]})
    principal = Principal("user", "ada", {"roles": []})
    with anyio.fail_after(30):
        async with LocalChain(policy_registry(engine)) as chain:
            context = InvocationContext(principal=principal, trace_id="call-1")
            request = {"method": "tools/call", "params": {"name": "list_directory", "arguments": {"path": str(proj)}}}
            passed = await chain.execute("tools/call", "request", request, direction="receiving", context=context)
            assert not passed.blocked
            response = await chain.execute(
                "tools/call", "response", listing(proj, "list_directory"), direction="sending", context=context
            )
            assert response.modified
            text = response.final_payload["content"][0]["text"]
            assert "README.md" in text and ".env" not in text and ".ssh" not in text and "keylink" not in text
            again = await chain.execute(  # nothing remembered for another call: its result is left alone
                "tools/call", "response", listing(proj, "list_directory"), direction="sending", context=context
            )
            assert not again.modified
            bad = {"method": "tools/call", "params": {"name": "list_directory", "arguments": {"path": f"{proj}/.ssh"}}}
            other = InvocationContext(principal=principal, trace_id="call-2")
            blocked = await chain.execute("tools/call", "request", bad, direction="receiving", context=other)
            assert blocked.blocked
    reasons = [(entry["decision"], entry.get("reason", "")) for entry in engine.audit.entries()]
    assert ("denied", "result filtered: 7 protected paths withheld") in reasons
    assert any(decision == "denied" and "'**/.ssh/**'" in reason for decision, reason in reasons)


async def test_a_listing_whose_result_cannot_be_filtered_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: with no trace context the response pass could not find the call, so the call is refused."""
    proj = make_tree(tmp_path)
    monkeypatch.setenv("PROJECT_DIR", str(proj))
    engine = PolicyEngine(str(POLICY))
    engine.learn("tools/list", {"tools": [{"name": "list_directory", "annotations": READ_ONLY}]})
    request = {"method": "tools/call", "params": {"name": "list_directory", "arguments": {"path": str(proj)}}}
    with anyio.fail_after(30):
        async with LocalChain(policy_registry(engine)) as chain:
            blocked = await chain.execute("tools/call", "request", request, direction="receiving", context=None)
    assert blocked.blocked
    entry = engine.audit.entries()[-1]
    assert (entry["decision"], entry["reason"]) == ("denied", "its result cannot be filtered here")
    assert [e["decision"] for e in engine.audit.entries()] == ["denied"]  # the `allowed` entry was amended


def test_a_full_memo_forgets_only_stale_calls_and_otherwise_refuses() -> None:
    from interceptors.policy.interceptors import _Calls

    now = [0.0]
    calls = _Calls(size=2, max_age=10.0, clock=lambda: now[0])
    assert calls.put(("a", "", "1"), ("t", (), None)) and calls.put(("a", "", "2"), ("t", (), None))
    assert not calls.put(("a", "", "3"), ("t", (), None))  # full, nothing stale: refused
    now[0] = 11.0
    assert calls.put(("a", "", "3"), ("t", (), None))  # the stale ones make room
    assert calls.pop(("a", "", "1")) is None and calls.pop(("a", "", "3")) == ("t", (), None)
    per = _Calls(size=10, per_principal=1, clock=lambda: 0.0)
    assert per.put(("mallory", "", "1"), ("t", (), None)) and not per.put(("mallory", "", "2"), ("t", (), None))
    assert per.put(("ada", "", "1"), ("t", (), None))  # another principal is not refused by mallory's flood
    assert per.pop(("mallory", "", "1")) is not None and per.put(("mallory", "", "2"), ("t", (), None))
