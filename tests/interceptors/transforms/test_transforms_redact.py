"""The redactor: strategies, key rules, tags, mentions, JSON inside strings, reports, no mutation."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from interceptors.transforms import KeyedHasher, Redactor, TransformContext, secretless_handler
from interceptors.transforms.strategies import DROP, Env, parse_strategy

AKIA = "AK" + "IA" + "Z3QK7T2LMN4PXR6W"
GHP = "gh" + "p_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\n-----END RSA PRIVATE KEY-----"
ARN = "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc123def4567890"
STANDARD = {
    "strategies": {
        "secret": "redact",
        "private_key": "drop",
        "credential": {"strategy": "mask", "keep_first": 4, "keep_last": 4},
    }
}


def run(options: dict[str, Any], value: Any, ctx: TransformContext | None = None) -> tuple[Any, dict[str, Any]]:
    ctx = ctx or TransformContext(pseudonymizer=KeyedHasher(b"k1"))
    before = copy.deepcopy(value)
    out = Redactor(options).apply(value, ctx)
    assert value == before, "the input was mutated"
    return out, ctx.report


def test_redact_mask_drop_with_counts_per_entity() -> None:
    value = {"notes": [f"id {AKIA}", f"tok {GHP}", PEM, "plain"], "x": f"{GHP} and {GHP}"}
    out, report = run(STANDARD, value)
    assert out["notes"][0] == "id AKIA************6W".replace("6W", "PXR6W"[-4:]) or out["notes"][0].startswith(
        "id AKIA"
    )
    assert out["notes"][0] == f"id {AKIA[:4]}{'*' * 12}{AKIA[-4:]}"
    assert out["notes"][1] == "tok [REDACTED:api_token]"
    assert out["notes"][2:] == ["plain"]  # the private key's list element is gone
    assert out["x"] == "[REDACTED:api_token] and [REDACTED:api_token]"
    assert report["redacted"] == {"api_token": 3}
    assert report["masked"] == {"aws_access_key_id": 1}
    assert report["dropped"] == {"private_key": 1}


def test_sensitive_subtree_numbers_and_none() -> None:
    value = {"config": {"password": {"db": "hunter22", "pin": 1234, "unset": None, "on": True}, "password_policy": "x"}}
    out, report = run(STANDARD, value)
    assert out["config"]["password"] == {
        "db": "[REDACTED:sensitive_field]",
        "pin": "[REDACTED:sensitive_field]",
        "unset": None,
        "on": True,
    }
    assert out["config"]["password_policy"] == "x"
    assert report["redacted"] == {"sensitive_field": 2}


@pytest.mark.parametrize(
    "key", ["password", "dbPassword", "SecretAccessKey", "api_key", "X-Api-Key", "client_secret", "Authorization"]
)
def test_sensitive_keys(key: str) -> None:
    out, _ = run(STANDARD, {key: "opaque-but-not-detected"})
    assert out[key] == "[REDACTED:sensitive_field]"


@pytest.mark.parametrize(
    "key", ["password_last_used", "secret_arn", "token_type", "has_password", "max_tokens", "input_tokens", "key_id"]
)
def test_safe_keys(key: str) -> None:
    out, _ = run(STANDARD, {key: "kept-value"})
    assert out[key] == "kept-value"


def test_hash_is_keyed_stable_and_irreversible() -> None:
    options = {"strategies": {"email": {"strategy": "hash", "length": 8}}}
    a1, _ = run(options, "mail bob@example.com", TransformContext(pseudonymizer=KeyedHasher(b"one")))
    a2, _ = run(options, "mail bob@example.com", TransformContext(pseudonymizer=KeyedHasher(b"one")))
    b, _ = run(options, "mail bob@example.com", TransformContext(pseudonymizer=KeyedHasher(b"two")))
    assert a1 == a2 != b
    assert a1.startswith("mail email:") and len(a1.split(":")[1]) == 8
    assert KeyedHasher(b"one").detokenize(a1, "global") == (a1, [])
    templated, _ = run({"strategies": {"email": {"strategy": "hash", "template": "<{digest}>"}}}, "bob@example.com")
    assert templated.startswith("<") and len(templated) == 14


def test_pseudonymize_falls_back_to_keyed_hash_and_can_be_switched_off() -> None:
    out, report = run({"strategies": {"email": "pseudonymize"}}, "bob@example.com")
    assert out.startswith("email:") and report["pseudonymized"] == {"email": 1}
    kept, report = run({"strategies": {"email": "tokenise"}, "allow_pseudonymize": False}, "bob@example.com")
    assert kept == "bob@example.com" and report == {}
    renamed, _ = run({"strategies": {"email": {"strategy": "pseudonymize", "as": "person"}}}, "bob@example.com")
    assert renamed.startswith("person:")


@pytest.mark.parametrize(
    ("entity", "value", "options", "expected"),
    [
        ("private_ip", "10.1.2.3", {}, "10.1.2.0/24"),
        ("private_ip", "10.1.2.3", {"ipv4_prefix": 16}, "10.1.0.0/16"),
        ("public_cidr", "8.8.0.0/16", {}, "8.8.0.0/16"),
        ("special_ip", "127.0.0.1", {}, "127.0.0.1"),
        ("public_ip", "2600:1f18:1:2::1", {}, "2600:1f18:1::/48"),
        ("timestamp", "2024-05-06T13:45:00Z", {}, "2024-05-06"),
        ("timestamp", "2024-05-06T13:45:00Z", {"granularity": "month"}, "2024-05"),
        ("timestamp", "2024-05-06T13:45:00Z", {"granularity": "hour"}, "2024-05-06T13"),
        ("email", "bob@example.com", {}, "*@example.com"),
        ("hostname", "web-1.prod.example.com", {}, "*.example.com"),
        ("hostname", "web-1.prod.example.com", {"keep_labels": 3}, "*.prod.example.com"),
        ("aws_arn", ARN, {}, "arn:aws:ec2:us-east-1:*:instance/*"),
        ("azure_resource_id", "/subscriptions/3f2504e0-4f89-11d3-9a0c-0305e82c3301/resourceGroups/rg/providers/"
         "Microsoft.Compute/virtualMachines/vm1", {},
         "/subscriptions/*/resourceGroups/*/providers/Microsoft.Compute/virtualMachines/*"),
        ("gcp_resource_name", "projects/p-123456/zones/us-central1-a/instances/i1", {},
         "projects/*/zones/us-central1-a/instances/*"),
        ("number", "37", {"bucket": 10}, "30-39"),
        ("mac_address", "00:1a:2b:3c:4d:5e", {}, "<mac_address>"),
    ],
)  # fmt: skip
def test_generalize(entity: str, value: str, options: dict[str, Any], expected: str) -> None:
    strategy = parse_strategy({"strategy": "generalise", **options}, "s")
    assert strategy.apply(value, entity, Env(KeyedHasher(b"k"))) == expected


@pytest.mark.parametrize(
    ("options", "value", "expected"),
    [
        ({}, "abcdefghijkl", "********ijkl"),
        ({"keep_first": 2, "keep_last": 2}, "abcdefghijkl", "ab********kl"),
        ({"keep_first": 4, "keep_last": 4}, "abcdefghij", "********ij"),  # too much kept: nothing first, len//4 last
        ({"char": "#"}, "abcd", "####"),
        ({"preserve": "-"}, "ab-cd-ef-gh-ij", "**-**-**-*h-ij"),
        ({"max_length": 6}, "abcdefghijkl", "**ijkl"),
    ],
)
def test_mask_options(options: dict[str, Any], value: str, expected: str) -> None:
    assert parse_strategy({"strategy": "mask", **options}, "s").apply(value, "e", Env(KeyedHasher(b"k"))) == expected


def test_strategy_aliases_and_errors() -> None:
    assert parse_strategy("remove", "s").kind == "drop"
    assert parse_strategy(True, "s").kind == "redact"
    assert parse_strategy(None, "s").kind == "keep"
    assert parse_strategy({"kind": "replace", "text": "X"}, "s").apply("v", "e", Env(KeyedHasher())) == "X"
    with pytest.raises(ValueError, match="unknown strategy"):
        parse_strategy("obliterate", "s")
    with pytest.raises(ValueError, match="unknown option"):
        parse_strategy({"strategy": "mask", "colour": "red"}, "s")
    with pytest.raises(ValueError, match="template"):
        parse_strategy({"strategy": "redact", "template": "{secret}"}, "s")


def test_default_strategy_and_resolution_order() -> None:
    # entity beats its parent, the parent beats the detector, the detector beats the category.
    options = {"strategies": {"ip_address": "redact", "private_ip": "keep", "network": "hash"}, "default": "keep"}
    out, _ = run(options, "10.0.0.1 8.8.8.8 00:1a:2b:3c:4d:5e")
    parts = out.split(" ")
    assert parts[0] == "10.0.0.1" and parts[1] == "[REDACTED:public_ip]" and parts[2].startswith("mac_address:")
    out, _ = run({"default": "redact", "key_rules": False}, "bob@example.com")
    assert out == "[REDACTED:email]"


def test_inactive_detectors_are_not_compiled_and_confidence_floor() -> None:
    assert {d.category for d in Redactor(STANDARD).detectors} == {"secret", "credential"}
    assert "high_entropy_secret" not in [d.name for d in Redactor({**STANDARD, "min_confidence": 0.8}).detectors]
    assert Redactor({}).detectors == ()


def test_keys_are_scanned_and_dropped_keys_disappear() -> None:
    value = {GHP: 1, "ok": 2, PEM: 3, f"{AKIA}": 4}
    out, _ = run(STANDARD, value)
    assert out == {"[REDACTED:api_token]": 1, "ok": 2, f"{AKIA[:4]}{'*' * 12}{AKIA[-4:]}": 4}
    same, _ = run({**STANDARD, "scan_keys": False}, {GHP: 1})
    assert same == {GHP: 1}


def test_meta_and_cursors_are_scanned_and_skip_keys_are_untouched() -> None:
    """`_meta` is scanned like any field; a cursor only by real detectors (an opaque cursor stays as it is);
    `skip_keys` still leaves what it names alone."""
    cursor = "eyJvZmZzZXQiOjQwfQ-Zx8Kq2Lm9Np4Rt7Vw1Yb3Cd6Fg0Hj5Ks"
    value = {"_meta": {"t": GHP}, "cursor": GHP, "nextPageToken": cursor, "v": GHP}
    out, _ = run(STANDARD, value)
    assert out["_meta"] == {"t": "[REDACTED:api_token]"} and out["cursor"] == "[REDACTED:api_token]"
    assert out["nextPageToken"] == cursor and out["v"] == "[REDACTED:api_token]"
    out, _ = run({**STANDARD, "skip_keys": ["cursor"]}, value)
    assert out["cursor"] == GHP


def test_top_level_drop() -> None:
    out, _ = run(STANDARD, PEM)
    assert out == "[REDACTED:content]"


def test_tags_person_tag_value_allowlist_and_aws_form() -> None:
    options = {"strategies": {"person": "redact", "tag_value": "hash", "email": "redact"}}
    tags = {"owner": "bob", "env": "prod", "Team": "core", "contact": "x"}
    out, _ = run(options, {"tags": tags})
    assert out["tags"]["owner"] == "[REDACTED:person]"
    assert out["tags"]["env"] == "prod"
    assert out["tags"]["Team"].startswith("tag_value:")
    aws = {"Tags": [{"Key": "Owner", "Value": "alice"}, {"Key": "Environment", "Value": "mail bob@example.com"}]}
    out, _ = run(options, aws)
    assert out["Tags"][0]["Value"] == "[REDACTED:person]"
    assert out["Tags"][1]["Value"] == "mail [REDACTED:email]"  # allow-listed keys are still scanned


def test_key_rules_defer_shape_and_siblings() -> None:
    options = {"strategies": {"identifier": "hash", "special_cidr": "keep", "uuid": "keep"}}
    value = {
        "target": "0.0.0.0/0",
        "source": ARN,
        "account_id": "123456789012",
        "name": "web-1",
        "region": "us-east-1",
        "id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    }
    out, _ = run({**options, "strategies": {**options["strategies"], "network": "redact"}}, value)
    assert out["target"] == "0.0.0.0/0"  # deferred to ipv4 → special_cidr → keep
    assert out["source"].startswith("aws_arn:")  # deferred to the ARN detector
    assert out["account_id"].startswith("aws_account_id:")  # typed by shape
    assert out["name"].startswith("resource_name:")  # asset_name_key: a sibling (region) is present
    assert out["id"] == value["id"]  # a GUID id is a uuid, and uuids are kept
    alone, _ = run(options, {"name": "web-1"})
    assert alone == {"name": "web-1"}


def test_account_arrow_and_account_map_keys() -> None:
    options = {"strategies": {"aws_account_id": "redact"}}
    out, _ = run(options, {"accounts_affected": "123456789012 -> 210987654321", "by_account": {"123456789012": 3}})
    assert out["accounts_affected"] == "[REDACTED:aws_account_id] -> [REDACTED:aws_account_id]"
    assert out["by_account"] == {"[REDACTED:aws_account_id]": 3}


def test_name_mentions_follow_replaced_values_across_the_payload() -> None:
    options = {"strategies": {"resource_name": "hash"}}
    value = {
        "asset": {"name": "payments-db", "region": "us-east-1"},
        "summary": "payments-db has 3 findings, payments-dbx is unrelated",
        "type": "payments-db",
    }
    out, report = run(options, value)
    token = out["asset"]["name"]
    assert token.startswith("resource_name:")
    assert out["summary"] == f"{token} has 3 findings, payments-dbx is unrelated"
    assert out["type"] == "payments-db"  # enum-ish keys are left alone
    assert report["hashed"]["identifier_mention"] == 1


def test_json_inside_strings_is_data() -> None:
    text = json.dumps({"password": "hunter22", "list": [GHP]}, indent=2)
    out, _ = run(STANDARD, {"body": text})
    parsed = json.loads(out["body"])
    assert parsed == {"password": "[REDACTED:sensitive_field]", "list": ["[REDACTED:api_token]"]}
    assert "\n" in out["body"]
    untouched = json.dumps({"a": 1})
    assert run(STANDARD, untouched)[0] is untouched or run(STANDARD, untouched)[0] == untouched


def test_cache_still_counts_repeats_and_unchanged_input_is_returned_as_is() -> None:
    _, report = run(STANDARD, [GHP, GHP, GHP])
    assert report["redacted"] == {"api_token": 3}
    clean = {"a": ["x", {"b": "y"}]}
    redactor = Redactor(STANDARD)
    assert redactor.apply(clean, TransformContext()) is clean


def test_custom_key_rules_can_defer_and_bucket_numbers() -> None:
    options = {
        "strategies": {"port_no": {"strategy": "generalize", "bucket": 1000}, "private_ip": "redact"},
        "extra_key_rules": [
            {"name": "ports", "entity": "port_no", "pattern": "^port$", "category": "identifier", "scalars": True},
            {"name": "addr", "entity": "addr", "pattern": "^addr$", "category": "identifier", "defer": True},
        ],
    }
    out, _ = run(options, {"port": 8443, "addr": "10.0.0.1"})
    assert out == {"port": "8000-8999", "addr": "[REDACTED:private_ip]"}


def test_exempt_keys() -> None:
    out, _ = run({**STANDARD, "exempt_keys": ["SECRET"]}, {"SECRET": 3, "TOKEN": 4})
    assert out == {"SECRET": 3, "TOKEN": "[REDACTED:sensitive_field]"}


def test_drop_strategy_removes_fields_and_elements() -> None:
    out, _ = run({"strategies": {"email": "drop"}}, {"a": "x bob@example.com", "b": ["bob@example.com", "y"], "c": 1})
    assert out == {"b": ["y"], "c": 1}
    assert DROP is not None


def test_bad_redact_options() -> None:
    with pytest.raises(ValueError, match="unknown option"):
        Redactor({"strategy": {"secret": "redact"}})
    with pytest.raises(ValueError, match="key_rules"):
        Redactor({"key_rules": ["no_such_rule"]})
    with pytest.raises(ValueError, match="min_confidence"):
        Redactor({"min_confidence": 2})


# --- the conformance secretless redactor ------------------------------------------------------------------


def test_secretless_handler_matches_the_security_redactor() -> None:
    from interceptors import Invocation, Phase
    from interceptors.security import SecretlessRedactor

    secret = "sk" + "_live_" + "4eC7aRm9Kx2bNw5pQj8sYd"
    payload = {
        "method": "tools/call",
        "params": {"name": "write_query", "arguments": {"query": f"INSERT '{secret}' '{GHP}'", secret: [AKIA, 3]}},
    }
    invocation = Invocation("r", "tools/call", Phase.REQUEST, payload)
    ours = secretless_handler()(invocation)
    theirs = SecretlessRedactor()(invocation)
    assert ours.payload == theirs.payload
    assert ours.info == theirs.info
    assert secret not in json.dumps(ours.payload["params"]["arguments"]["query"])
    clean = Invocation("r", "tools/call", Phase.REQUEST, {"method": "tools/call", "params": {"name": "x"}})
    assert secretless_handler()(clean).modified is False


def test_keys_inside_sensitive_subtrees_are_scanned_too() -> None:
    out, _ = run(STANDARD, {"password": {GHP: None, "plain": "x"}})
    assert out == {"password": {"[REDACTED:api_token]": None, "plain": "[REDACTED:sensitive_field]"}}
