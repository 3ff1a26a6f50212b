"""The audit trail: what is recorded when, never an argument value, unforgeable lines, 0600 JSONL files."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from interceptors.policy import AuditTrail, JsonlAuditFile, PolicyEngine, PolicyError, load_policy, log_safe
from tests.interceptors.policy.test_policy_catalog import primed, principal

SECRET_VALUE = "hunter2-very-secret-argument"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def call(engine: PolicyEngine, name: str, *roles: str, who: str = "alice", **arguments: Any) -> Any:
    return engine.check_call(principal(who, *roles), "tools/call", {"name": name, "arguments": arguments})


def test_what_is_recorded_without_audit(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "policy.jsonl"
    engine = primed(
        load_policy("standard").derive({"rate_limits": [{"rate": 1, "per": "hour", "tools": ["get_asset"]}]}),
        audit_sinks=[path],
    )
    assert call(engine, "list_assets").allowed  # not recorded: audit is off
    assert call(engine, "get_asset").allowed
    assert call(engine, "get_asset").outcome == "rate_limited"
    assert call(engine, "reveal_token").outcome == "not_found"
    assert call(engine, "reveal_token", "admin", who="root").allowed  # reveal: always recorded
    decisions = [(e["decision"], e["name"], e.get("reason")) for e in lines(path)]
    assert decisions == [
        ("rate_limited", "get_asset", "1/hour"),
        ("not_found", "reveal_token", "hidden: capability 'reveal' is denied by policy 'standard'"),
        ("allowed", "reveal_token", "reveal"),
    ]
    assert engine.audit.counters == {
        "allowed": 3,
        "denied": 0,
        "rate_limited": 1,
        "rejected": 0,
        "hidden": 1,
        "reveal": 1,
    }
    assert [e["decision"] for e in engine.audit.entries()] == ["rate_limited", "not_found", "allowed"]


def test_audit_true_records_allowed_calls_and_denials() -> None:
    engine = primed(load_policy("audit").derive({"hide_denied": False}))
    call(engine, "get_asset")
    call(engine, "export_csv")
    entries = engine.audit.entries()
    assert [(e["decision"], e["name"]) for e in entries] == [("allowed", "get_asset"), ("denied", "export_csv")]
    entry = entries[1]
    assert set(entry) == {"ts", "decision", "kind", "name", "principal", "roles", "arguments", "reason", "policy"}
    assert entry["policy"] == "audit" and entry["kind"] == "tool" and entry["principal"] == "alice"
    assert "reason" not in entries[0]


def test_audit_file_holds_no_argument_values(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    engine = primed(load_policy("audit"), audit_sinks=[path])
    nested = {"deep": [SECRET_VALUE, {"k": SECRET_VALUE}]}
    call(engine, "get_asset", id=SECRET_VALUE, payload=nested)
    call(engine, "export_csv", id=SECRET_VALUE)
    engine.check_call(principal(), "resources/read", {"uri": f"cg://assets/{SECRET_VALUE}"})
    engine.check_call(principal(), "resources/read", {"uri": f"cg://private/{SECRET_VALUE}/x"})
    engine.check_call(principal(), "prompts/get", {"name": "triage", "arguments": {"finding": SECRET_VALUE}})
    engine.check_call(
        principal(),
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "triage"}, "argument": {"name": "f", "value": SECRET_VALUE}},
    )
    engine.record_rejection(
        principal(), "tools/call", {"name": "get_asset", "arguments": {"id": SECRET_VALUE}}, "secrets in arguments"
    )
    text = path.read_text()
    assert SECRET_VALUE not in text
    assert SECRET_VALUE not in repr(engine.audit.entries())
    entries = lines(path)
    assert len(entries) == 7
    first = entries[0]["arguments"]
    assert set(first) == {"id", "payload"} and all(len(h) == 12 for h in first.values())
    # Same value, same hash: the hash is keyed, canonical and stable within a process.
    assert entries[1]["arguments"]["id"] == first["id"]
    assert entries[2]["arguments"] == {"name": first["id"]}  # template variables
    assert entries[3]["name"].startswith("cg://private/#")  # a probed URI keeps scheme and first segment


def test_the_file_is_private_appended_and_rotated(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "policy.jsonl"
    path.parent.mkdir()
    path.write_text('{"old": true}\n')
    os.chmod(path, 0o644)
    sink = JsonlAuditFile(path, max_bytes=600, backups=2)
    trail = AuditTrail(0, sinks=[sink], key=b"k")
    for index in range(12):
        trail.record("denied", "tool", f"tool_{index}", "alice", ["r"], {"a": index}, "reason")
    sink.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.with_name("policy.jsonl.1").exists() and path.with_name("policy.jsonl.2").exists()
    assert not path.with_name("policy.jsonl.3").exists()
    assert path.stat().st_size <= 600
    newest = lines(path)
    assert newest[-1]["name"] == "tool_11"
    assert trail.entries() == []  # size 0 keeps nothing in memory; the file still got every entry


def test_unwritable_audit_file_never_breaks_a_call(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    engine = primed(load_policy("audit"), audit_sinks=[blocker / "sub" / "a.jsonl"])
    with caplog.at_level(logging.ERROR, "interceptors.policy.audit"):
        assert call(engine, "get_asset").allowed
        assert call(engine, "get_asset").allowed
    assert len([r for r in caplog.records if "cannot write" in r.getMessage()]) == 1


def test_forged_lines_are_escaped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "a.jsonl"
    engine = primed(load_policy("audit"), audit_sinks=[path], unknown_as_not_found=False)
    forged = 'x\n{"decision": "allowed"}\r\u2028\u2029\x1b[2J\u202e'
    with caplog.at_level(logging.INFO, "interceptors.policy.audit"):
        engine.check_call(
            principal(f"eve{forged}"), "tools/call", {"name": f"t{forged}", "arguments": {f"k{forged}": 1}}
        )
    raw = path.read_text()
    assert raw.count("\n") == 1 and "\u2028" not in raw and "\u2029" not in raw and "\u202e" not in raw
    entry = lines(path)[0]
    assert entry["name"] == "t" + log_safe(forged) and "\n" not in entry["name"]
    assert "\\x0a" in entry["principal"] and all("\n" not in k for k in entry["arguments"])
    for record in caplog.records:
        message = record.getMessage()
        assert "\n" not in message and "\r" not in message and "\u2028" not in message


def test_log_safe() -> None:
    assert log_safe("plain text") == "plain text"
    assert log_safe("a\\nb") == "a\\\\nb"  # a literal backslash-n is not an escaped newline
    assert log_safe("a\nb\tc") == "a\\x0ab\\x09c"
    assert log_safe("\u200b\U000e0001") == "\\u200b\\U000e0001"
    assert log_safe("é ü 東京") == "é ü 東京"
    assert log_safe("x" * 300, 200) == "x" * 200


def test_names_are_truncated_and_hidden_uris_hashed() -> None:
    engine = primed(load_policy("strict"))
    call(engine, "n" * 500)
    engine.check_call(principal(), "resources/read", {"uri": "cg://secrets/bastion-prod"})
    engine.check_call(principal(), "resources/read", {"uri": "urn:x:bastion"})
    engine.check_call(principal(), "resources/read", {"uri": "cg://host-only"})
    names = [e["name"] for e in engine.audit.entries()]
    assert names[0] == "n" * 200
    assert names[1].startswith("cg://secrets/#") and "bastion" not in names[1]
    assert names[2].startswith("urn:#") and "bastion" not in names[2]
    assert names[3] == "cg://host-only"


def test_rejections_amend_the_allowed_entry_or_add_one() -> None:
    engine = primed(load_policy("audit"))
    call(engine, "get_asset", id=1)
    call(engine, "get_asset", id=2)
    engine.record_rejection(principal(), "tools/call", {"name": "get_asset", "arguments": {"id": 1}}, "r" * 400)
    entries = engine.audit.entries()
    assert [e["decision"] for e in entries] == ["rejected", "allowed"]
    assert entries[0]["reason"] == "r" * 300
    quiet = primed(load_policy("standard"))  # audit off: nothing to amend, so a rejection adds an entry
    quiet.record_rejection(principal(), "tools/call", {"name": "get_asset"}, "secrets")
    assert [e["decision"] for e in quiet.audit.entries()] == ["rejected"]
    assert quiet.audit.counters["rejected"] == 1
    quiet.record_rejection(principal(), "ping", {}, "ignored")
    assert len(quiet.audit.entries()) == 1


def test_reveal_is_logged_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    engine = primed(load_policy("standard"))
    with caplog.at_level(logging.WARNING, "interceptors.policy.audit"):
        call(engine, "reveal_token", "admin", who="root", token=SECRET_VALUE)
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert message.startswith('REVEAL principal=root roles=admin tool=reveal_token args={"token":')
    assert SECRET_VALUE not in message and message.endswith("policy=standard")


def test_ring_buffer_size_and_visibility() -> None:
    engine = primed(load_policy("audit").derive({"audit_size": 3, "audit_per_decision": 3}))
    for who in ("a", "b", "a", "b"):
        call(engine, "get_asset", who=who)
    assert [e["principal"] for e in engine.audit.entries()] == ["b", "a", "b"]
    assert [e["principal"] for e in engine.audit.entries("a")] == ["a"]
    assert len(engine.audit.entries("a", ["privacy-admin"])) == 3
    zero = primed(load_policy("audit").derive({"audit_size": 0}))
    call(zero, "get_asset")
    assert zero.audit.entries() == [] and zero.audit.counters["allowed"] == 1


def test_one_noisy_decision_cannot_evict_the_others() -> None:
    """A flood of `not_found` probes (the attack of issue 16) keeps at most its cap; the history stays."""
    engine = primed(load_policy("audit").derive({"audit_size": 10, "audit_per_decision": 4, "hide_denied": False}))
    call(engine, "get_asset", who="early")
    call(engine, "export_csv", who="early")  # denied
    for index in range(5000):
        call(engine, f"probe_{index}")
    entries = engine.audit.entries()
    kept = [(e["decision"], e["principal"]) for e in entries]
    assert kept[:2] == [("allowed", "early"), ("denied", "early")]
    assert [e["name"] for e in entries[2:]] == [f"probe_{i}" for i in range(4996, 5000)]
    assert engine.audit.counters["hidden"] == 5000  # counted, not kept
    # Every decision stays under its cap; the others are untouched.
    for index in range(8):
        call(engine, "get_asset", who=f"later-{index}")
    decisions = [e["decision"] for e in engine.audit.entries()]
    assert len(decisions) == 9 and decisions.count("denied") == 1 and decisions.count("allowed") == 4
    default = primed(load_policy("audit"))
    assert default.audit.size == 10000 and default.audit.per_decision == 5000


def test_entries_older_than_max_age_are_dropped() -> None:
    now = [1000.0]
    engine = primed(load_policy("audit").derive({"audit_max_age": 60}), wall_clock=lambda: now[0])
    call(engine, "get_asset", who="old")
    now[0] += 30
    call(engine, "get_asset", who="newer")
    now[0] += 45  # the first is 75 s old now, the second 45 s
    assert [e["principal"] for e in engine.audit.entries()] == ["newer"]
    now[0] += 60
    assert engine.audit.entries() == []
    with pytest.raises(PolicyError, match="audit_max_age"):
        load_policy({"audit_max_age": 0})


def test_hash_key_comes_from_the_vault_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_KEY", "k1")
    one = primed(load_policy({"name": "v", "audit": True, "vault": {"key_env": "TEAM_KEY"}}))
    two = primed(load_policy({"name": "v", "audit": True, "vault": {"key": "k1"}}))
    other = primed(load_policy({"name": "v", "audit": True}), audit_key=b"k2")
    hashes = [e.audit.hash_value("x") for e in (one, two, other)]
    assert hashes[0] == hashes[1] != hashes[2]


def test_every_string_written_is_redacted_like_the_output(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    token = "ghp_9fK2mQ7rT4vX8zL1nB6cD3hJ5wY0aS2eR4tU"
    engine = primed(load_policy("audit").derive({"hide_denied": False}), audit_sinks=[path])
    engine.check_call(principal(f"svc-{token}", f"role-{token}"), "tools/call", {"name": "export_csv",
                      "arguments": {f"k-{token}": 1}})  # fmt: skip
    engine.check_call(principal(), "resources/read", {"uri": f"cg://u:{token}@assets/x?access_token={token}"})
    engine.check_call(principal(), "tools/call", {"name": f"get_asset_{token}"})
    engine.record_rejection(principal(), "tools/call", {"name": "get_asset", "arguments": {}}, f"saw {token}")
    text = path.read_text()
    assert token not in text and token not in repr(engine.audit.entries())
    first = lines(path)[0]
    assert first["principal"] == "svc-[REDACTED:api_token]" and first["roles"] == ["role-[REDACTED:api_token]"]
    assert first["arguments"].keys() == {"k-[REDACTED:api_token]"}
