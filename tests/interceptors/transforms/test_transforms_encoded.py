"""`redact`'s `decode` step: values the payload marks as encoded (base64 and hex fields next to an `encoding`
marker, data URLs, Kubernetes Secret data, percent-encoded query values, `0x` runs) are decoded, redacted and
re-encoded the same way; nothing else is touched, bad input never raises, and hostile input stays linear."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote_to_bytes

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interceptors.policy import PolicyError, load_policy
from interceptors.testing import (
    CONTEXTS_BY_NAME,
    ENCODED_CONTEXTS,
    RedactionTarget,
    assert_no_leak,
    decoys,
    embedded,
)
from interceptors.testing.properties import no_leak
from interceptors.transforms import (
    META_KEY,
    STANDARD_TRANSFORMS,
    STRICT_TRANSFORMS,
    TransformContext,
    check_transform_sections,
)
from interceptors.transforms.encoded import (
    ENCODINGS,
    MAX_ENCODED_CHARS,
    decode_base64,
    decode_hex,
    decode_percent,
)

STANDARD = RedactionTarget.load("standard")  # the shipped profile files
STRICT = RedactionTarget.load("strict")


def _without_decoding(sections: dict[str, Any]) -> RedactionTarget:
    transforms = [
        {**spec, "decode": False} if isinstance(spec, dict) and spec.get("type") == "redact" else spec
        for spec in sections["transforms"]
    ]
    return RedactionTarget.load({**sections, "transforms": transforms})


UNDECODED = {"standard": _without_decoding(STANDARD_TRANSFORMS), "strict": _without_decoding(STRICT_TRANSFORMS)}
TOKEN = "ghp_9fK2mQ7rT4vX8zL1nB6cD3hJ5wY0aS2eR4tU"
REDACTED = "[REDACTED:api_token]"
EMAIL = "grace.hopper@navy-example.org"
PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n-----END PRIVATE KEY-----"
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def strict_b64(encoded: str) -> str:
    return base64.b64decode(encoded, validate=True).decode()


def strict_hex(encoded: str) -> str:
    assert re.fullmatch(r"(?:[0-9a-f]{2})+|(?:[0-9A-F]{2})+", encoded), "not hex in whole bytes"
    return bytes.fromhex(encoded).decode()


def strict_percent(encoded: str) -> str:
    assert "%" not in re.sub(r"%[0-9A-F]{2}", "", encoded), "a malformed escape"
    assert not set(encoded) & set(' &=#"<>'), "a character a query value must escape"  # (' is a sub-delim)
    return unquote_to_bytes(encoded).decode()


def wrapped(text: str, width: int = 60) -> str:
    flat = b64(text)
    return "\n".join(flat[i : i + width] for i in range(0, len(flat), width)) + "\n"


def unwrap(encoded: str) -> str:
    lines = encoded.rstrip("\n").split("\n")
    assert all(len(line) == 60 for line in lines[:-1]) and 0 < len(lines[-1]) <= 60 and encoded.endswith("\n")
    return strict_b64("".join(lines))


def urlsafe_unpadded(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def strict_urlsafe(encoded: str) -> str:
    assert "=" not in encoded and not set(encoded) & set("+/")
    return base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True).decode()


def group(pattern: str) -> Callable[[Any], str]:
    def extract(out: Any) -> str:
        match = re.search(pattern, out)
        assert match is not None, f"{pattern!r} not in the output"
        return match.group(1)

    return extract


def k8s_yaml(value: str, key: str = "note") -> str:
    return f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ntype: Opaque\ndata:\n  {key}: {value}\n"


def k8s_list(value: str) -> str:
    """A List: a ConfigMap (plain data) before the Secret; the Secret's `kind` after its `data`."""
    return (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: v1\n  kind: ConfigMap\n  data:\n    note: plain text\n"
        f"- apiVersion: v1\n  data:\n    note: {value}\n  kind: Secret\n"
    )


# (name, build(text) -> value, extract(output) -> encoded, decode(encoded) -> text), text holding a token.
Case = tuple[str, Callable[[str], Any], Callable[[Any], str], Callable[[str], str]]
CASES: list[Case] = [
    ("base64_field", lambda t: {"encoding": "base64", "content": b64(t)}, lambda o: o["content"], strict_b64),
    ("base64_field_in_json_text", lambda t: json.dumps({"encoding": "base64", "content": b64(t)}),
     lambda o: json.loads(o)["content"], strict_b64),
    ("base64_wrapped_lines", lambda t: {"content": wrapped(t), "encoding": "base64", "size": 42},
     lambda o: o["content"], unwrap),
    ("base64url_unpadded", lambda t: {"contentEncoding": "base64url", "data": urlsafe_unpadded(t)},
     lambda o: o["data"], strict_urlsafe),
    ("hex_field", lambda t: {"encoding": "hex", "data": t.encode().hex()}, lambda o: o["data"], strict_hex),
    ("hex_field_upper", lambda t: {"Encoding": "HEX", "data": t.encode().hex().upper()},
     lambda o: o["data"] if o["data"].isupper() else "not upper", strict_hex),
    ("hex_0x", lambda t: f"payload 0x{t.encode().hex()} end", group(r"0x([0-9a-f]+) end"), strict_hex),
    ("data_url", lambda t: f"see data:text/plain;charset=utf-8;base64,{b64(t)} here", group(r"base64,(\S+) here"),
     strict_b64),
    ("data_url_in_json_text", lambda t: json.dumps({"src": f"data:text/plain;base64,{b64(t)}"}),
     lambda o: json.loads(o)["src"].split(",", 1)[1], strict_b64),
    ("k8s_secret_yaml", lambda t: k8s_yaml(b64(t)), group(r"\n  note: (\S+)\n"), strict_b64),
    ("k8s_secret_yaml_quoted", lambda t: k8s_yaml(f'"{b64(t)}"'), group(r'\n  note: "(\S+)"\n'), strict_b64),
    ("k8s_secret_list", lambda t: k8s_list(b64(t)), group(r"\n    note: (\S+)\n  kind: Secret"), strict_b64),
    ("k8s_secret_json", lambda t: {"apiVersion": "v1", "kind": "Secret", "data": {"note": b64(t), "n": b64("ok")}},
     lambda o: o["data"]["note"], strict_b64),
    ("url_query", lambda t: f"https://api.example.com/cb?state=x&note={quote(t, safe='')}&page=2",
     group(r"[?&]note=([^&]*)&page=2$"), strict_percent),
    ("url_query_relative", lambda t: f"GET /v1/items?note={quote(t, safe='/:')} HTTP/1.1",
     group(r"note=(\S*) HTTP"), strict_percent),
]  # fmt: skip
IDS = [case[0] for case in CASES]
BENIGN = "retries: 3\nmode: fast ✓ résumé {ok}"


def apply(target: RedactionTarget, value: Any) -> Any:
    return target.apply(value)


def assert_untouched(value: Any) -> None:
    """Standard gives it back as it was; strict does what it does without decoding (it renames hosts in URLs)."""
    assert STANDARD.apply(value) == value
    assert STRICT.apply(value) == UNDECODED["strict"].apply(value)


@pytest.mark.parametrize(("name", "build", "extract", "decode"), CASES, ids=IDS)
def test_a_secret_inside_is_redacted_and_the_value_stays_well_formed(
    name: str, build: Callable[[str], Any], extract: Callable[[Any], str], decode: Callable[[str], str]
) -> None:
    text = f"deploy {TOKEN} & done=1" if "k8s" not in name else f"{TOKEN} done"
    value = build(text)
    assert decode(extract(value)) == text  # the table itself is right
    out = apply(STANDARD, value)
    assert_no_leak(out, [TOKEN])
    assert decode(extract(out)) == text.replace(TOKEN, REDACTED)


@pytest.mark.parametrize(("name", "build", "extract", "decode"), CASES, ids=IDS)
def test_the_report_counts_what_was_found_inside(
    name: str, build: Callable[[str], Any], extract: Callable[[Any], str], decode: Callable[[str], str]
) -> None:
    value = build(f"token {TOKEN} done")
    payload = {"content": [{"type": "text", "text": value if isinstance(value, str) else json.dumps(value)}]}
    out = STANDARD.transform("tools/call", payload)
    assert out["_meta"][META_KEY]["redacted"] == {"api_token": 1}


@pytest.mark.parametrize(("name", "build", "extract", "decode"), CASES, ids=IDS)
def test_without_a_secret_the_output_is_byte_identical(
    name: str, build: Callable[[str], Any], extract: Callable[[Any], str], decode: Callable[[str], str]
) -> None:
    value = build(BENIGN)
    assert STANDARD.redactor is not None
    assert STANDARD.redactor.apply(value, TransformContext()) == value
    assert_untouched(value)
    assert extract(apply(STRICT, value)) == extract(value)


def test_a_cache_hit_keeps_json_text_as_it_was_written() -> None:
    """A string the cache has seen comes back as the caller's own object, so JSON text around it is not
    re-serialised (`{"a": 1}` would otherwise come out as `{"a":1}` on the second call)."""
    assert STRICT.redactor is not None
    text = json.dumps({"encoding": "base64", "content": b64(BENIGN), "note": "retries: 3 mode fast"})
    for _ in range(3):
        assert STRICT.redactor.apply(text, TransformContext()) == text


def test_key_rules_apply_to_decoded_values() -> None:
    """A Secret's data is redacted under its own key; JSON inside a base64 field is data."""
    out = apply(STANDARD, k8s_yaml(b64("hunter2-but-longer"), key="password"))
    assert strict_b64(group(r"password: (\S+)\n")(out)) == "[REDACTED:sensitive_field]"
    inner = json.dumps({"db": {"password": "hunter2-but-longer", "host": "db.internal"}})
    out = apply(STANDARD, {"encoding": "base64", "data": b64(inner)})
    assert json.loads(strict_b64(out["data"])) == {
        "db": {"password": "[REDACTED:sensitive_field]", "host": "db.internal"}
    }


def test_a_query_value_is_redacted_with_its_name_as_context() -> None:
    url = f"https://db.example.com/connect?user=app&password={quote('s3cr3t!pass/word', safe='')}#top"
    out = apply(STANDARD, url)
    head, value = out.split("&password=")
    assert head == "https://db.example.com/connect?user=app" and value.endswith("#top")
    assert strict_percent(value.removesuffix("#top")).startswith("[REDACTED:")


def test_drop_applies_as_in_plain_text() -> None:
    """standard drops private keys: a marked field goes, a text holding one becomes the content marker."""
    out = apply(STANDARD, {"encoding": "base64", "data": b64(PEM), "name": "key.pem"})
    assert out == {"encoding": "base64", "name": "key.pem"}
    assert apply(STANDARD, f"data:application/x-pem-file;base64,{b64(PEM)}") == "[REDACTED:content]"
    out = apply(STANDARD, {"apiVersion": "v1", "kind": "Secret", "data": {"tls.key": b64(PEM), "n": b64("ok")}})
    assert out["data"] == {"n": b64("ok")}


def test_strict_pseudonymises_inside_and_re_encodes() -> None:
    out = apply(STRICT, {"encoding": "base64", "data": b64(f"owner {EMAIL}")})
    decoded = strict_b64(out["data"])
    assert EMAIL not in decoded and decoded.startswith("owner ")


def test_encodings_nest_up_to_the_depth_limit() -> None:
    layered: Any = {"encoding": "base64", "data": b64(f"token {TOKEN}")}
    for _ in range(2):
        layered = {"encoding": "base64", "data": b64(json.dumps(layered))}
    out = apply(STANDARD, layered)
    assert_no_leak(out, [TOKEN])
    inner = json.loads(strict_b64(json.loads(strict_b64(out["data"]))["data"]))
    assert strict_b64(inner["data"]) == f"token {REDACTED}"
    deeper: Any = layered
    for _ in range(8):  # past the limit: decoded three deep, the rest is left to the ordinary scan
        deeper = {"encoding": "base64", "data": b64(json.dumps(deeper))}
    out = apply(STANDARD, deeper)
    assert isinstance(strict_b64(out["data"]), str)


# --- only where the payload says so ---------------------------------------------------------------------

UNMARKED = [
    {"id": b64(EMAIL)},
    {"encoding": "gzip", "data": b64(EMAIL)},
    {"encoding": "utf-8", "data": EMAIL.encode().hex()},
    f"blob {b64(EMAIL)} end",
    f"checksum {EMAIL.encode().hex()} end",
    {"apiVersion": "v1", "kind": "ConfigMap", "data": {"owner": b64(EMAIL)}},
    f"apiVersion: v1\nkind: ConfigMap\ndata:\n  owner: {b64(EMAIL)}\n",
    f"kind: Secret\nstringData:\n  owner: {b64(EMAIL)}\n",
    f"https://x.example/cb?owner={b64(EMAIL)}&page=2",
    f"query owner={quote(EMAIL, safe='')} (not in a URL)",
]


@pytest.mark.parametrize("value", UNMARKED, ids=range(len(UNMARKED)))
def test_base64_looking_values_that_are_not_marked_are_never_rewritten(value: Any) -> None:
    """strict pseudonymises e-mail addresses: each of these would change if it were decoded."""
    assert apply(STRICT, value) == UNDECODED["strict"].apply(value)


def test_the_same_values_marked_are_rewritten() -> None:
    for value in (
        {"encoding": "base64", "data": b64(EMAIL)},
        {"apiVersion": "v1", "kind": "Secret", "data": {"owner": b64(EMAIL)}},
        f"https://x.example/cb?owner={quote(EMAIL, safe='')}&page=2",
    ):
        assert apply(STRICT, value) != value
        assert_no_leak(apply(STRICT, value), [EMAIL])


# --- bad input: left alone, never an exception -----------------------------------------------------------

BAD_BASE64 = ["aGVsbG8===", "aGVs bG8=", "aGVsbG9=", "a", "abc=d===", "aGVs\nbG8gd29y\nbGQ=", "////", "AAECAwQ=",
              "iVBORw0KGgo=", "", "Zm9v-YmFy+YQ", "aGVsbG8=\n\n", "=", "aGVsbG8"[:5]]  # fmt: skip
BAD_HEX = ["abc", "zz11", "aBcD", "c328", "0001", "", "68 65"]
BAD_PERCENT = ["%zz%41", "%C3%28", "%00x", "100%", "%4", "a%2"]
BAD_TEXT = [
    "data:text/plain;base64,aGVsbG9=", "data:image/png;base64,iVBORw0KGgo=", "data:text/plain;base64,",
    "data:text/plain,hello%20world", "data:;base64,%%%", "0x41424", "0xzz41424344", "0x0001020304", "0X4142434",
    "https://x.example/cb?a=%zz%41&b=%C3%28&c=%00x&d=100%", "no url ?a=%41", "https://x.example/?=%41&&=",
    "kind: Secret\ndata:\n  a: aGVsbG9=\n  b: '!!'\n  c: |\n    aGVsbG8=\n", "kind: Secret\ndata: {a: aGVsbG8=}\n",
    "kind: Secret\n---\ndata:\n  a: aGVsbG8=\n", "kind: Secret\ndata:\n\t a: x\n- - :\n  - data:\n",
]  # fmt: skip


def test_strict_decoders_refuse_bad_input() -> None:
    assert all(decode_base64(v) is None for v in BAD_BASE64)
    assert all(decode_hex(v) is None for v in BAD_HEX)
    assert all(decode_percent(v) is None for v in BAD_PERCENT)
    assert decode_base64("A" * (MAX_ENCODED_CHARS + 4)) is None


@pytest.mark.parametrize(
    "value",
    [
        *({"encoding": "base64", "data": v} for v in BAD_BASE64),
        *({"encoding": "hex", "data": v} for v in BAD_HEX),
        *(f"https://x.example/cb?a={v}&page=2" for v in BAD_PERCENT),
        *BAD_TEXT,
        {"encoding": "base64", "data": 42, "more": None, "list": ["aGVsbG8="]},
        {"kind": "Secret", "data": {"a": 1, "b": None, "c": ["x"], "d": "%%"}},
        {"encoding": ["base64"], "data": "aGVsbG8="},
    ],
    ids=lambda v: repr(v)[:40],
)
def test_bad_input_is_left_untouched(value: Any) -> None:
    assert_untouched(value)


def test_a_value_that_does_not_decode_is_left_to_the_ordinary_scan() -> None:
    out = apply(STANDARD, {"encoding": "base64", "data": f"not base64: {TOKEN}"})
    assert out == {"encoding": "base64", "data": f"not base64: {REDACTED}"}
    out = apply(STANDARD, f"data:text/plain;base64,{TOKEN} end")  # decodes to bytes that are not text
    assert out == f"data:text/plain;base64,{REDACTED} end"


# --- configuration --------------------------------------------------------------------------------------


def pipeline(**options: Any) -> RedactionTarget:
    return RedactionTarget.load({"name": "t", "transforms": [{"type": "redact", "default": "redact", **options}]})


def test_the_profiles_and_their_request_guard_decode_every_encoding() -> None:
    for target in (
        STANDARD,
        STRICT,
        RedactionTarget.load(STANDARD_TRANSFORMS),
        RedactionTarget.load(STRICT_TRANSFORMS),
    ):
        assert target.redactor is not None and target.redactor.decoder is not None
        assert target.redactor.decoder.encodings == frozenset(ENCODINGS)
        assert {c.name for c in target.decoded_contexts()} == {c.name for c in ENCODED_CONTEXTS}
        assert target.guard is not None and target.guard._redactor.decoder is not None  # encoded arguments too


def test_decode_can_be_switched_off_or_narrowed() -> None:
    blob = {"encoding": "base64", "data": b64(f"token {TOKEN}")}
    url = f"data:text/plain;base64,{b64(f'token {TOKEN}')}"
    off = pipeline(decode=False)
    # Not decoded in place: the run is judged as it stands, and a run whose text holds a random key is one.
    assert off.apply(blob) == {"encoding": "base64", "data": "[REDACTED:secret_value]"}
    assert off.apply(url) == "data:text/plain;base64,[REDACTED:secret_value]" and off.decoded_contexts() == ()
    only_urls = pipeline(decode=["data_url"])
    assert only_urls.apply(blob) == {"encoding": "base64", "data": "[REDACTED:secret_value]"}
    assert_no_leak(only_urls.apply(url), [TOKEN])
    assert [c.name for c in only_urls.decoded_contexts()] == ["data_url"]
    assert pipeline(decode=[]).redactor.decoder is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"decode": "yes"}, "policy.transforms[0].decode: must be true, false or a list of encodings"),
        ({"decode": ["rot13"]}, "policy.transforms[0].decode: unknown encoding(s) 'rot13'"),
        ({"decode": [1]}, "policy.transforms[0].decode: must be true, false or a list"),
        ({"decode": True, "decodes": True}, "policy.transforms[0]: bad options for transform 'redact'"),
    ],
)
def test_bad_decode_options_name_the_field(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_transform_sections({"transforms": [{"type": "redact", **options}]}, "policy")
    assert str(caught.value).startswith(problem)


def test_policy_documents_refuse_bad_decode_options_with_a_field_path() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy({"name": "p", "transforms": [{"type": "redact", "decode": ["rot13"]}]})
    assert caught.value.problems[0].startswith("transforms[0]") and ".decode" in caught.value.problems[0]
    with pytest.raises(PolicyError) as caught:
        load_policy({"name": "p", "extends": "standard", "transform_options": {"redact": {"decode": {"on": 1}}}})
    assert any("transform_options.redact" in p and "decode" in p for p in caught.value.problems)
    assert load_policy({"name": "p", "transforms": [{"type": "redact", "decode": ["hex", "url_query"]}]})


# --- properties with the kit ----------------------------------------------------------------------------

TEXTS = st.text(st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from("\t\n\r"), min_size=1, max_size=40)


@given(TEXTS, st.booleans(), st.booleans(), st.sampled_from([0, 4, 8, 60, 76]))
def test_base64_round_trips_in_its_own_style(text: str, urlsafe: bool, padded: bool, width: int) -> None:
    flat = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(text.encode()).decode()
    if not padded:
        flat = flat.rstrip("=")
    encoded = "\n".join(flat[i : i + width] for i in range(0, len(flat), width)) if width else flat
    decoded = decode_base64(encoded)
    assert decoded is not None and decoded[0] == text
    assert decoded[1](text) == encoded
    again = decode_base64(decoded[1]("other " + text))
    assert again is not None and again[0] == "other " + text


@given(TEXTS, st.booleans(), st.sets(st.sampled_from("!$'()*+,;:@/?~-._")))
def test_hex_and_percent_round_trip(text: str, upper: bool, safe: set[str]) -> None:
    hexed = text.encode().hex().upper() if upper else text.encode().hex()
    assert decode_hex(hexed) is not None and decode_hex(hexed)[0] == text  # type: ignore[index]
    assert decode_hex(hexed)[1](text) == hexed  # type: ignore[index]
    quoted = quote("%" + text, safe="".join(safe))
    decoded = decode_percent(quoted)
    assert decoded is not None and decoded[0] == "%" + text
    assert strict_percent(decoded[1]("a=b&c d#" + text)) == "a=b&c d#" + text


MARKER_SOUP = st.lists(
    st.sampled_from(
        [*"data:;base64,0xX%?&=/ \n-\"'{}kindSecretgh_p+AQ9=aGVsbG8", "kind: Secret\n", "data:\n  ", "%41"]
    ),
    max_size=120,
).map("".join)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(MARKER_SOUP, MARKER_SOUP.map(lambda s: {"encoding": "base64", "data": s, "kind": "Secret"})))
def test_any_text_is_handled_without_an_exception(value: Any) -> None:
    for target in (STANDARD, STRICT):
        target.apply(value)
        assert target.redactor is not None
        target.redactor.apply(value, TransformContext())


ENCODED_NO_LEAK = {name: no_leak(target, contexts=ENCODED_CONTEXTS) for name, target in
                   (("standard", STANDARD), ("strict", STRICT))}  # fmt: skip


@pytest.mark.parametrize("name", ["standard", "strict"])
def test_planted_secrets_in_encoded_syntaxes_never_come_out(name: str) -> None:
    strategy, check = ENCODED_NO_LEAK[name]

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def prop(case: Any) -> None:
        check(case)

    prop()


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(embedded(STANDARD.secret_samples(), contexts=ENCODED_CONTEXTS))
def test_redacted_encodings_still_decode(case: Any) -> None:
    out = STANDARD.redactor.apply(case.value, TransformContext())  # type: ignore[union-attr]
    assert_no_leak(out, case.secrets)
    if out == "[REDACTED:content]":  # a private key: the whole text is dropped, as in plain text
        assert isinstance(case.value, str)
    elif case.context == "base64_blob":
        if "config" in out:
            strict_b64(out["config"])
    elif case.context == "hex_blob":
        if "data" in out:
            strict_hex(out["data"])
    elif case.context == "data_url":
        strict_b64(out.split(",", 1)[1])
    elif case.context == "url_encoded":
        for piece in out.split("?", 1)[1].split("&"):
            strict_percent(piece.split("=", 1)[1])
    elif case.context == "k8s_secret":
        for value in re.findall(r"\n  \w+: (\S+)", out.split("\ndata:", 1)[1]):
            strict_b64(value)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(embedded(decoys(), contexts=ENCODED_CONTEXTS))
def test_decoys_in_encoded_syntaxes_come_out_byte_for_byte(case: Any) -> None:
    """Byte for byte where the ordinary scan may not (the entropy heuristic reads a base64 blob as a secret)."""
    value = case.value
    assert STANDARD.redactor is not None and STRICT.redactor is not None
    assert STANDARD.redactor.apply(value, TransformContext()) == value
    out = STRICT.redactor.apply(value, TransformContext())
    if case.context == "url_encoded":  # strict renames the host; the query stays
        out, value = out.split("?", 1)[1], value.split("?", 1)[1]
    assert out == value


def test_every_encoded_context_is_decoded_by_name() -> None:
    # `bare` (runs nothing marks) has its own corpus: tests/interceptors/transforms/test_transforms_encoded_bare.py
    assert {c.encoding for c in ENCODED_CONTEXTS} == set(ENCODINGS) - {"bare"}
    assert CONTEXTS_BY_NAME["url_encoded"].encoding == "url_query"


# --- linear time, bounded memory on hostile input -------------------------------------------------------

MIB = 1 << 20


def _hostile() -> dict[str, Any]:
    text = ("deploy queue ok " * 45_000)[:700_000] + f" token {TOKEN}"
    layered: Any = {"encoding": "base64", "data": b64(f"token {TOKEN}")}
    for _ in range(12):
        layered = {"encoding": "base64", "data": b64(json.dumps(layered))}
    deep: Any = {"note": "x"}
    for _ in range(200):
        deep = {"encoding": "base64", "inner": deep, "data": "aGVsbG8="}
    return {
        "one data URL near the size limit": f"data:text/plain;base64,{b64(text)}",
        "one blob over the size limit": {"encoding": "base64", "data": b64(text + text[:200_000])},
        "data URL prefixes": "data:;base64," * (MIB // 13),
        "many small data URLs": "data:text/plain;base64,QUFB " * (MIB // 28),
        "many data URLs of control bytes": "data:text/plain;base64,AAAA " * (MIB // 28),
        "a long 0x run": "0x" + ("deploy ok " * 50_000).encode().hex(),
        "many 0x runs": "0x41424344 " * (MIB // 11),
        "odd 0x runs": "0x4142434 " * (MIB // 10),
        "question marks": "?" * MIB,
        "many query values": "https://x.example/?" + "a=%41&" * (MIB // 6),
        "many URL-ish tokens": "/?a=%41" * (MIB // 7),
        "percent signs": "https://x.example/?a=" + "%" * MIB,
        "a Secret with many entries": "kind: Secret\ndata:\n" + "  k: QUFBQQ==\n" * (MIB // 14),
        "a Secret nested deep": "kind: Secret\ndata:\n" + "".join(" " * i + "k: x\n" for i in range(1, 1400)),
        "a Secret block scalar": "kind: Secret\ndata:\n  k: |\n" + "    QUFBQQ==\n" * (MIB // 13),
        "invalid padding": {"encoding": "base64", "data": "A" * (MIB - 3) + "==="},
        "marker words": "Secret data: " * (MIB // 13),
        "twelve layers": layered,
        "markers 200 objects deep": deep,
    }


def test_the_decoder_is_linear_on_one_mebibyte_of_hostile_input() -> None:
    """CPU time, not wall time (a busy machine must not fail it), with wide bounds: each input takes well under
    a second here, while a quadratic step on one MiB would take minutes. The bench reports the real numbers."""
    import tracemalloc

    assert STANDARD.redactor is not None
    started = time.process_time()
    for name, value in _hostile().items():
        begun = time.process_time()
        out = STANDARD.redactor.apply(value, TransformContext())
        assert time.process_time() - begun < 20.0, name
        if name == "one data URL near the size limit":
            assert strict_b64(out.split(",", 1)[1]).endswith(f"token {REDACTED}")
    assert time.process_time() - started < 120.0
    tracemalloc.start()
    try:
        STANDARD.redactor.apply(_hostile()["one data URL near the size limit"], TransformContext())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 * MIB  # a few copies of one MiB of text, not a blow-up
