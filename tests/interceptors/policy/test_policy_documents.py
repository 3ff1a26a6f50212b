"""Policy documents: every load form, strict shapes with path-only errors, extends and merging, show/check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from interceptors.policy import (
    PROFILES,
    PolicyError,
    check_document,
    load_policy,
    mask_secrets,
    merge_documents,
    policy_check,
    policy_show,
)
from interceptors.policy.schema import TRANSFORM_KEYS, _transform_checker

FAKE_KEY = "vault-key-0123456789-SECRET"


def test_core_policy_package_never_imports_mcp() -> None:
    code = "import interceptors.policy, sys; assert 'mcp' not in sys.modules, 'mcp was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
    # Loading every profile also runs the transforms package's checks: still no MCP SDK.
    code = (
        "import sys; from interceptors.policy import PROFILES, PolicyEngine, policy_registry\n"
        "for name in PROFILES: policy_registry(PolicyEngine(name))\n"
        "assert 'mcp' not in sys.modules, 'mcp was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_loads_and_shows(name: str) -> None:
    policy = load_policy(name)
    assert policy.name == name
    shown = policy_show(name)
    assert shown.startswith(f"# policy: {name}")
    assert yaml.safe_load(shown)["name"] == name
    assert policy_check(name) == []


def test_profile_names_accept_hyphens_and_underscores() -> None:
    assert load_policy("soc_analyst").name == "soc-analyst"
    assert load_policy("read-only").name == "read_only"


def test_default_is_standard_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_INTERCEPTORS_POLICY", raising=False)
    assert load_policy().name == "standard"
    monkeypatch.setenv("MCP_INTERCEPTORS_POLICY", "strict")
    assert load_policy().name == "strict"
    monkeypatch.setenv("MCP_INTERCEPTORS_POLICY", "")
    assert load_policy().name == "standard"


def test_load_forms(tmp_path: Path) -> None:
    assert load_policy({"name": "d", "deny_tools": ["x"]}).name == "d"
    assert load_policy('{"name": "inline", "audit": true}').audit is True
    assert load_policy({"policy": {"name": "wrapped"}}).name == "wrapped"
    (tmp_path / "p.yaml").write_text("policy:\n  name: from-yaml\n  deny_tools: [a]\n")
    (tmp_path / "p.json").write_text(json.dumps({"name": "from-json"}))
    assert load_policy(str(tmp_path / "p.yaml")).name == "from-yaml"
    assert load_policy(tmp_path / "p.json").name == "from-json"
    assert load_policy({}).name == "custom"
    same = load_policy("open")
    assert load_policy(same) is same


def test_missing_files_raise_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_policy(str(tmp_path / "absent.yaml"))
    with pytest.raises(FileNotFoundError, match="profiles: open"):
        load_policy("no-such-profile")
    assert policy_check(str(tmp_path / "absent.json"))[0].startswith("no built-in profile or policy file")


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"nme": "typo"}, "nme: unknown key"),
        ({"deny_tools": "x"}, "deny_tools: must be a list"),
        ({"deny_tools": ["ok", 3]}, "deny_tools[1]: must be a string"),
        ({"deny_capabilities": ["teleport"]}, "deny_capabilities[0]: must be one of: read_state"),
        ({"max_sensitivity": "secret"}, "max_sensitivity: must be one of: public, internal"),
        ({"audit_size": -1}, "audit_size: must be an integer >= 0"),
        ({"hide_denied": "yes"}, "hide_denied: must be true or false"),
        ({"roles": {"analyst": {"deny_toolz": []}}}, "roles.analyst.deny_toolz: unknown key"),
        ({"roles": {"analyst": {"match": {"kinds": ["widget"]}}}}, "roles.analyst.match.kinds[0]: must be one of"),
        ({"rules": [{}, {"match": {"colour": []}}]}, "rules[1].match.colour: unknown key"),
        ({"rules": [{"transforms_mode": "merge"}]}, "rules[0].transforms_mode: must be one of: append"),
        ({"rate_limits": [{"per": "minute"}]}, "rate_limits[0].rate: is required"),
        ({"rate_limits": [{"rate": 0}]}, "rate_limits[0].rate: must be a number > 0"),
        ({"rate_limits": [{"rate": 1, "scope": "team"}]}, "rate_limits[0].scope: must be one of"),
        ({"rate_limits": [{"rate": 1, "burst": 0}]}, "rate_limits[0].burst: must be an integer >= 1"),
        ({"vault": {"scope": "room"}}, "vault.scope: must be one of: global, principal"),
        ({"catalog": {"x": {"sensitivity": "top"}}}, "catalog.x.sensitivity: must be one of"),
        ({"catalog": {"x": {"colour": "red"}}}, "catalog.x.colour: unknown key"),
        ({"transforms": "redact"}, "transforms: must be a list"),
        ({"transforms": [3]}, "transforms[0]: must be a transform name or a mapping"),
        ({"transform_options": []}, "transform_options: must be a mapping"),
        ({"detectors": ["x"]}, "detectors[0]: must be a mapping"),
    ],
)
def test_invalid_documents_name_the_field_path(doc: dict[str, Any], problem: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(doc)
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_every_problem_is_reported_at_once() -> None:
    problems = check_document({"deny_tools": 1, "audit": 2, "bogus": 3})
    assert problems == ["deny_tools: must be a list", "audit: must be true or false", "bogus: unknown key"]


def test_transform_sections_load() -> None:
    doc: dict[str, Any] = {
        "transforms": ["redact", {"type": "project", "max_chars": 1000}],
        "input_transforms": [{"type": "guard_secrets"}],
        "transform_options": {"redact": {"strategies": {"pii": "drop"}}},
        "detectors": [{"name": "ticket", "pattern": "T-[0-9]+"}],
        "disabled_detectors": ["email"],
        "rules": [
            {"transforms": ["annotate"], "transforms_mode": "prepend", "input_transforms": [], "honor_hints": False}
        ],
    }
    assert set(TRANSFORM_KEYS) <= set(doc)
    assert load_policy(doc).transforms == ("redact", {"type": "project", "max_chars": 1000})


@pytest.mark.skipif(_transform_checker() is None, reason="interceptors.transforms has no check_transform_sections yet")
def test_transform_sections_are_checked_by_the_transforms_package() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy({"transforms": [{"type": "no-such-transform"}]})
    assert caught.value.problems[0].startswith("transforms[0]")
    with pytest.raises(PolicyError) as caught:
        load_policy({"roles": {"r": {"transforms": [{"type": "project", "max_chars": "many"}]}}})
    assert caught.value.problems[0].startswith("roles.r.transforms[0]")
    with pytest.raises(PolicyError) as caught:
        load_policy({"transform_options": {"redact": {"strategies": {"pii": {"strategy": "mask", "char": FAKE_KEY}}}}})
    assert FAKE_KEY not in str(caught.value)


@pytest.mark.parametrize(
    "doc",
    [
        {"vault": {"key": FAKE_KEY, "colour": 1}},
        {"vault": {"key": [FAKE_KEY]}},
        {"vault": {"key": FAKE_KEY, "ttl_seconds": -5}},
        {"vault": {"key_env": {FAKE_KEY: 1}}},
        {"roles": {"r": {"deny_tools": [FAKE_KEY, 5]}}, "max_sensitivity": FAKE_KEY},
        {"rules": [{"name": 5, "description": FAKE_KEY, "match": {"tags": FAKE_KEY}}]},
    ],
)
def test_invalid_policy_errors_never_show_values(doc: dict[str, Any]) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(doc)
    assert FAKE_KEY not in str(caught.value)
    assert FAKE_KEY not in repr(caught.value.problems)


def test_parse_errors_give_a_position_not_the_text(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text(f"vault:\n  key: {FAKE_KEY}\n   broken: [\n")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"vault": {"key": "' + FAKE_KEY + '"},}')
    for path in (bad_yaml, bad_json):
        problems = policy_check(path)
        assert problems and "line" in problems[0]
        assert FAKE_KEY not in " ".join(problems)
    with pytest.raises(PolicyError, match="invalid JSON"):
        load_policy('{"vault": {"key": "' + FAKE_KEY + '"')


def test_yaml_values_that_are_not_json_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dates.yaml"
    path.write_text(
        "transform_options:\n  substitute:\n    aliases: {111111111111: prod}\n  when: 2024-01-01\n  ratio: .nan\n"
    )
    problems = policy_check(path)
    assert any("transform_options.ratio: must be a finite number" in p for p in problems)
    assert any("transform_options.substitute.aliases: keys must be strings" in p for p in problems)
    assert any("transform_options.when: must hold only JSON values" in p for p in problems)


def test_a_top_level_list_is_refused() -> None:
    with pytest.raises(PolicyError, match="policy: must be a mapping"):
        load_policy({"policy": [1]})


# Extends and merging -------------------------------------------------------------------------


def test_extends_chain_and_names() -> None:
    audit = load_policy("audit")
    assert audit.extends_chain == ("read_only", "standard")
    child = load_policy({"extends": "strict"})
    assert child.name == "custom(strict)"
    assert child.extends_chain == ("strict", "standard")


def test_merge_rules() -> None:
    parent = {
        "name": "p",
        "deny_tools": ["a", "b"],
        "allow_tools": ["x"],
        "rules": [{"name": "r1"}],
        "rate_limits": [{"rate": 1}],
        "transforms": ["redact", "annotate"],
        "roles": {"analyst": {"deny_tools": ["t1"], "allow_capabilities": ["exec"], "match": {"tags": ["a"]}}},
        "transform_options": {"redact": {"strategies": {"pii": "drop", "secret": "redact"}, "list": [1, 2]}},
        "extends": "standard",
    }
    child = {
        "deny_tools": ["b", "c"],
        "allow_tools": ["y"],
        "rules": [{"name": "r2"}],
        "rate_limits": [{"rate": 2}],
        "transforms": ["project"],
        "roles": {"analyst": {"deny_tools": ["t2"], "match": {"kinds": ["tool"]}}, "lead": {}},
        "transform_options": {"redact": {"strategies": {"pii": "keep"}, "list": [3]}},
    }
    merged = merge_documents(parent, child)
    assert merged["deny_tools"] == ["a", "b", "c"]
    assert merged["allow_tools"] == ["y"]
    assert [r["name"] for r in merged["rules"]] == ["r1", "r2"]
    assert [r["rate"] for r in merged["rate_limits"]] == [1, 2]
    assert merged["transforms"] == ["project"]
    assert merged["roles"]["analyst"] == {
        "deny_tools": ["t1", "t2"],
        "allow_capabilities": ["exec"],
        "match": {"tags": ["a"], "kinds": ["tool"]},
    }
    assert merged["transform_options"]["redact"] == {"strategies": {"pii": "keep", "secret": "redact"}, "list": [3]}
    assert "extends" not in merged
    assert parent["deny_tools"] == ["a", "b"]  # inputs untouched


def test_children_inherit_and_only_set_fields_override() -> None:
    strict = load_policy("strict")
    assert strict.document["input_transforms"] == load_policy("standard").document["input_transforms"]
    assert strict.document["transforms"] != load_policy("standard").document["transforms"]
    child = load_policy({"extends": "strict", "audit": True, "deny_capabilities": ["read_fs"]})
    assert child.audit is True
    assert child.document["max_sensitivity"] == "confidential"
    assert child.document["deny_capabilities"][-1] == "read_fs"
    assert set(strict.document["deny_capabilities"]) < set(child.document["deny_capabilities"])


def test_policy_level_allow_capabilities_undeny_after_the_merge() -> None:
    policy = load_policy({"extends": "read_only", "allow_capabilities": ["write_state"]})
    assert "write_state" in policy.document["deny_capabilities"]
    assert "write_state" not in policy.deny_capabilities


def test_relative_extends_and_cycles(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "base.yaml").write_text("name: base\nextends: strict\ndeny_tools: [b]\n")
    (tmp_path / "team.yaml").write_text("name: team\nextends: sub/base.yaml\ndeny_tools: [t]\n")
    team = load_policy(str(tmp_path / "team.yaml"))
    assert team.extends_chain == ("base", "strict", "standard")
    assert team.document["deny_tools"] == ["b", "t"]

    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: ./a.yaml\n")
    with pytest.raises(PolicyError, match="Policy 'extends' cycle"):
        load_policy(str(tmp_path / "a.yaml"))
    (tmp_path / "self.yaml").write_text("extends: self.yaml\n")
    assert "cycle" in policy_check(tmp_path / "self.yaml")[0]
    (tmp_path / "orphan.yaml").write_text("extends: missing.yaml\n")
    with pytest.raises(FileNotFoundError):
        load_policy(str(tmp_path / "orphan.yaml"))


def test_parent_errors_are_reported_with_the_parent_source(tmp_path: Path) -> None:
    (tmp_path / "parent.yaml").write_text("deny_tools: 1\n")
    (tmp_path / "child.yaml").write_text("extends: parent.yaml\n")
    problems = policy_check(tmp_path / "child.yaml")
    assert problems == [f"{tmp_path / 'parent.yaml'}: deny_tools: must be a list"]


def test_derive_merges_by_the_same_rules() -> None:
    base = load_policy("standard")
    derived = base.derive({"deny_tools": ["x"], "deny_capabilities": ["exec"]})
    assert derived.extends_chain == base.extends_chain
    assert set(derived.deny_capabilities) == {"reveal", "exec"}
    with pytest.raises(PolicyError):
        base.derive({"bogus": 1})


def test_fingerprint_ignores_the_vault() -> None:
    one = load_policy({"name": "n", "vault": {"key": "a"}})
    two = load_policy({"name": "n", "vault": {"key": "b"}})
    assert one.fingerprint == two.fingerprint != load_policy({"name": "m"}).fingerprint
    assert len(one.fingerprint) == 16


# Show and check ------------------------------------------------------------------------------


def test_show_masks_secrets_but_keeps_names_readable(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    doc = {
        "extends": "standard",
        "vault": {"key": FAKE_KEY, "key_env": "MY_KEY"},
        "roles": {"monkey": {"deny_tools": ["reveal_token"]}},
    }
    path.write_text(yaml.safe_dump(doc))
    shown = policy_show(str(path))
    assert FAKE_KEY not in shown
    data = yaml.safe_load(shown)
    assert data["vault"] == {"key": "***", "key_env": "MY_KEY"}
    assert data["roles"]["monkey"] == {"deny_tools": ["reveal_token"]}  # a mapping under a "key"-like name
    assert data["deny_capabilities"] == ["reveal"]  # merged with the parent
    assert data["transforms"][1]["type"] == "redact"


def test_mask_secrets() -> None:
    options = {"webhook": {"api_token": FAKE_KEY, "Password": "pw", "max_tokens": 5, "secrets": ["a"], "key": None}}
    assert mask_secrets({"transform_options": options}) == {
        "transform_options": {
            "webhook": {"api_token": "***", "Password": "***", "max_tokens": 5, "secrets": ["a"], "key": None}
        }
    }
    assert mask_secrets([{"client_secret": 1}]) == [{"client_secret": "***"}]


def test_show_masks_real_secrets_only_never_strategy_names(tmp_path: Path) -> None:
    """`policy show` through the CLI: `secret: redact` and `private_key: drop` are strategies and stay readable;
    a real key or token (the vault key, a transform option's token) is masked."""
    path = tmp_path / "p.yaml"
    doc = {
        "extends": "strict",
        "vault": {"key": FAKE_KEY},
        "transform_options": {"redact": {"strategies": {"api_token": "hash", "password": {"strategy": "mask"}}}},
        "detectors": [{"name": "internal_token", "entity": "api_token", "category": "secret", "pattern": "itk_[a-z]+"}],
    }
    path.write_text(yaml.safe_dump(doc))
    run = subprocess.run(
        [sys.executable, "-m", "integrations.cli", "policy", "show", str(path)],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[3],
    )  # fmt: skip
    assert FAKE_KEY not in run.stdout and "***" in run.stdout
    shown = yaml.safe_load(run.stdout)
    assert shown["vault"]["key"] == "***"
    redact = next(t for t in shown["transforms"] if isinstance(t, dict) and t.get("type") == "redact")
    assert redact["strategies"]["secret"] == "redact"
    assert redact["strategies"]["private_key"] == "drop"
    assert redact["strategies"]["credential"] == "redact"
    assert shown["transform_options"]["redact"]["strategies"] == {"api_token": "hash", "password": {"strategy": "mask"}}
    assert "***" not in json.dumps(shown["transforms"])
    assert mask_secrets({"webhook": {"token": "redact-me-not", "secret": "drop"}}) == {
        "webhook": {"token": "***", "secret": "drop"}
    }


def test_check_reports_problems_with_source(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: x\nroles:\n  a: {deny_tools: [1]}\n")
    assert policy_check(path) == [f"{path}: roles.a.deny_tools[0]: must be a string"]
    path.write_text("name: fine\nextends: soc-analyst\n")
    assert policy_check(path) == []
