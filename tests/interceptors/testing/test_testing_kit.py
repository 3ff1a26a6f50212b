"""The testing kit itself: its strategies generate what they promise, its assertions see through encodings and
never print a secret, and importing it pulls in neither pytest nor the MCP SDK."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from integrations.testing import run_plan
from interceptors.testing import (
    BUILTIN_FORMATS,
    CONTEXTS,
    ENCODED_CONTEXTS,
    KINDS,
    NEAR_MISS_FAMILIES,
    NEUTRAL_KEYS,
    ChainPlan,
    Decoy,
    Embedded,
    FalsePositiveError,
    InterceptorSpec,
    LeakError,
    McpCase,
    RedactionTarget,
    RoundtripError,
    Secret,
    assert_no_leak,
    assert_not_redacted,
    assert_roundtrip,
    decoys,
    derived_near_misses,
    embedded,
    expected_outcome,
    find_leaks,
    format_for,
    identifiers,
    mcp_payloads,
    near_misses,
    placeholders,
    regex_strategy,
    secrets,
)
from interceptors.transforms import STANDARD_TRANSFORMS, KeyedHasher, transform_payload
from interceptors.transforms.catalog import BUILTIN_DETECTORS
from interceptors.transforms.detectors import Scanner, detector_from_config
from tests.conftest import ROOT

EVERY_FORMAT = st.one_of(secrets(), identifiers())
STANDARD = RedactionTarget.load(STANDARD_TRANSFORMS)
REDACT_ALL = RedactionTarget.load({"transforms": [{"type": "redact", "default": "redact"}]})
GHP = "gh" + "p_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"
ODD = "Zq9/Xw+8Yv=7_long-secret"
"""Characters URL-encoding, JSON escapes and HTML entities all re-spell."""


def test_importing_the_kit_pulls_in_neither_pytest_nor_the_sdk() -> None:
    code = (
        "import sys, interceptors\n"
        "assert not {'hypothesis', 'pytest', 'mcp'} & set(sys.modules), 'interceptors imports dev dependencies'\n"
        "import interceptors.testing\n"
        "assert 'pytest' not in sys.modules and 'mcp' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_there_is_a_format_for_every_built_in_detector() -> None:
    assert set(BUILTIN_FORMATS) == {d.name for d in BUILTIN_DETECTORS}
    assert {f.origin for f in BUILTIN_FORMATS.values()} == {"spec", "pattern", "curated"}
    assert len(CONTEXTS) >= 20 and len(ENCODED_CONTEXTS) >= 5
    assert {c.name for c in CONTEXTS} >= {
        "json", "json_escaped", "json_in_string", "yaml", "ini", "dotenv", "toml", "shell_export", "url_query",
        "http_headers", "csv", "log_line", "xml", "html", "markdown_code", "python_source", "go_source", "js_source",
        "sql", "stack_trace",
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(BUILTIN_FORMATS))
def test_every_sample_is_reported_by_its_own_detector(name: str) -> None:
    fmt = BUILTIN_FORMATS[name]
    scanner = Scanner((fmt.detector,))

    @settings(max_examples=15)
    @given(fmt.samples)
    def check(sample: Secret) -> None:
        assert sample.family == name and sample.value in sample.text
        assert any(f.value == sample.value for f in scanner.scan(sample.text))

    check()


@settings(max_examples=150)
@given(embedded(st.one_of(EVERY_FORMAT, decoys()), contexts=CONTEXTS))
def test_supported_contexts_keep_every_token_verbatim(case: Any) -> None:
    assert not case.encoded
    for sample in case.samples:
        assert find_leaks(case.value, [sample.text]), f"{case.context} re-spelled a token"


@settings(max_examples=80)
@given(embedded(secrets(), contexts=ENCODED_CONTEXTS))
@example(  # CI flake: 8 bytes encode to 11 base64 characters and their padding, a run the assertion skipped
    Embedded(
        "data_url",
        "data:text/plain;base64,Oi8vOlhdQGs=",
        (Secret("url_credentials", "://:X]@k", "X]", "password", "secret"),),
        "data:text/plain;base64,",
        encoded=True,
    )
)
def test_the_leak_assertion_sees_through_encoded_contexts(case: Any) -> None:
    assert case.encoded
    with pytest.raises(LeakError):
        assert_no_leak(case.value, case.secrets)


@pytest.mark.parametrize(
    ("spelling", "how"),
    [
        (lambda s: {"a": [{"b": f"x {s} y"}]}, "raw"),
        (lambda s: json.dumps({"outer": json.dumps({"inner": s})}), "raw"),
        (lambda s: "prefix " + json.dumps(s)[1:-1].replace("_", "\\u005f") + " suffix", "json-unescaped"),
        (lambda s: "https://x.example/cb?t=" + quote(s, safe=""), "url-decoded"),
        (lambda s: "blob " + base64.b64encode(f"TOKEN={s}\n".encode()).decode(), "base64"),
        (lambda s: "data:text/plain;base64," + base64.urlsafe_b64encode(s.encode()).decode(), "base64"),
        (lambda s: {"hex": ("k=" + s).encode().hex()}, "hex"),
        (lambda s: "&lt;t&gt;" + s.replace("_", "&#95;"), "html-unescaped"),
        (lambda s: {s: 1}, "raw"),
    ],
)
def test_leaks_are_found_in_every_spelling_and_never_printed(spelling: Any, how: str) -> None:
    emitted = spelling(ODD)
    with pytest.raises(LeakError) as caught:
        assert_no_leak(emitted, [ODD, "not-there-at-all"])
    message = str(caught.value)
    assert ODD not in message and ODD[4:-2] not in message
    assert "1 of 2 planted secret(s)" in message and "'Zq9/…et' (24 chars)" in message
    assert f"({how}" in message


@settings(max_examples=100)
@given(st.data())
def test_leak_messages_never_contain_a_secret(data: st.DataObject) -> None:
    case = data.draw(embedded(secrets(), contexts=CONTEXTS))
    assume_long = [s for s in case.secrets if len(s.value) >= 8]
    if not assume_long:
        return
    try:
        assert_no_leak(case.value, assume_long)
    except LeakError as exc:
        for sample in assume_long:
            assert sample.value not in str(exc)
    else:
        raise AssertionError("planted secrets were not found")


def test_not_redacted_names_what_was_altered() -> None:
    assert_not_redacted({"a": "password: ${DB_PASSWORD} ok"}, ["password: ${DB_PASSWORD}"])
    with pytest.raises(FalsePositiveError, match=r"(?s)1 of 2 value\(s\).*'report\.pdf'"):
        assert_not_redacted({"a": "password: ${X}", "b": "[REDACTED:hostname]"}, ["password: ${X}", "report.pdf"])


class _Vault:
    """A reversible toy pseudonymizer (dictionary-backed), the shape of the transforms' Pseudonymizer."""

    reversible = True

    def __init__(self, broken: bool = False) -> None:
        self.tokens: dict[tuple[str, str], str] = {}
        self.broken = broken

    def namespace_for(self, principal: str | None) -> str:
        return "global"

    def tokenize(self, value: str, entity: str, namespace: str) -> str:
        key = (namespace, value)
        if key not in self.tokens:
            self.tokens[key] = f"{entity}_{len(self.tokens):04d}"
        return self.tokens[key]

    def detokenize(self, text: str, namespace: str) -> tuple[str, list[tuple[str, str]]]:
        pairs = []
        for (space, value), token in self.tokens.items():
            if space == namespace and token in text:
                text = text.replace(token, value[:-1] if self.broken else value)
                pairs.append((value, token))
        return text, pairs


def test_roundtrip_holds_for_a_reversible_pseudonymizer_and_fails_otherwise() -> None:
    values = [
        GHP,
        ("10.0.0.7", "private_ip"),
        Secret("x", "pw: hunter2hunter2", "hunter2hunter2", "secret_value", "secret"),
    ]
    assert_roundtrip(_Vault(), values, other_namespace="tenant-b")
    with pytest.raises(RoundtripError) as caught:
        assert_roundtrip(_Vault(broken=True), values)
    assert GHP not in str(caught.value) and "detokenize(token) gave" in str(caught.value)
    assert "(42 chars)" in str(caught.value)
    with pytest.raises(RoundtripError, match="not reversible"):
        assert_roundtrip(KeyedHasher(b"k"), values)
    with pytest.raises(TypeError):
        assert_roundtrip(object(), values)


def test_a_custom_detector_gets_a_format_from_its_pattern() -> None:
    detector = detector_from_config(
        {"name": "acme", "pattern": r"(?<![\w])ACME-(?:[A-F0-9]{4}-){2}([A-Za-z0-9]{12})(?!\w)", "group": 1,
         "category": "secret", "validator": "entropy:3", "hints": ["acme-"]},
        "detectors[0]",
    )  # fmt: skip
    fmt = format_for(detector)
    assert fmt.origin == "pattern"

    @settings(max_examples=40)
    @given(fmt.samples, derived_near_misses(detector, fmt.samples))
    def check(sample: Secret, decoy: Decoy) -> None:
        assert sample.text.startswith("ACME-") and len(sample.value) == 12
        assert not Scanner((detector,)).scan(decoy.text)

    check()


@settings(max_examples=60)
@given(regex_strategy(r"(?i)(?P<q>['\"])?key(?::|=)(?(q)[a-z]{3}|\d{3})(?P=q)?\b(?=;)"))
def test_the_regex_compiler_handles_groups_conditionals_and_lookaheads(generated: Any) -> None:
    import re

    assert generated.tail == ";"
    assert re.search(r"(?i)key[:=]", generated.text)


@settings(max_examples=60)
@given(mcp_payloads(embedded(secrets()), kinds=KINDS))
def test_payloads_have_the_shapes_interceptors_see(case: McpCase) -> None:
    out, changed = transform_payload(case.event, case.payload, STANDARD.output, STANDARD.context())
    if case.kind == "list":  # metadata: scrubbed by the redaction steps only, its shape kept
        assert [tool["name"] for tool in out["tools"]] == [tool["name"] for tool in case.payload["tools"]]
        assert changed or out == case.payload
    else:
        assert isinstance(out, dict) and (
            "content" in out or "contents" in out or "messages" in out or "completion" in out
        )


@settings(max_examples=100)
@given(embedded(st.one_of(placeholders(), near_misses(NEAR_MISS_FAMILIES)), contexts=CONTEXTS))
def test_neutral_keys_and_decoys_trigger_no_rule_even_when_everything_is_redacted(case: Any) -> None:
    red = REDACT_ALL.redactor
    assert red is not None
    for key in NEUTRAL_KEYS:
        assert red.rule_for(key, key, frozenset()) is None, key
    assert_not_redacted(REDACT_ALL.apply(case.value), case.decoys)


def test_a_slow_interceptor_is_a_timeout_in_the_model_and_in_the_chain() -> None:
    spec = InterceptorSpec(0, "a", "validation", "active", False, (0, 0), "request", "slow", True, ("*",))
    plan = ChainPlan(1, (spec,))
    expected = expected_outcome(plan, "tools/call", "request", "receiving")
    assert expected.status == "timeout" and expected.aborts == [("local-0:a", "timeout")]

    async def run() -> Any:
        return await run_plan(plan, "tools/call", "request", "receiving", {"trail": []})

    result, log = anyio.run(run)
    assert result.status.value == "timeout" and log.validator_saw == {"local-0:a": ()}
