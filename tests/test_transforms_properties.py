"""Properties: planted secrets never survive the standard transforms; no transform mutates its input;
no value ever carries more than one closing fence."""

from __future__ import annotations

import copy
import json
import string
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from interceptors.transforms import (
    CLOSE_FENCE,
    OPEN_FENCE,
    STANDARD_TRANSFORMS,
    STRICT_TRANSFORMS,
    KeyedHasher,
    TransformContext,
    assemble_output,
    transform_tool_result,
)
from interceptors.transforms.redactor import DEFAULT_SKIP_KEYS
from interceptors.transforms.sanitize import Sanitizer, fence_count

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
STANDARD = assemble_output(STANDARD_TRANSFORMS)
STRICT = assemble_output(STRICT_TRANSFORMS)
SUBSTITUTE = assemble_output(
    {
        "transforms": [
            {"type": "substitute", "aliases": {"web": "W"}, "rename": {"a": "b"},
             "regex": [{"pattern": "x+", "replace": "y"}], "templates": [{"target": "t", "template": "{a}"}]},
            {"type": "project", "max_list": 2, "max_string": 10, "drop_empty": True, "max_chars": 300},
            {"type": "annotate", "inline": True, "label_findings": True},
        ]
    }
)  # fmt: skip


def _chars(alphabet: str, low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=low, max_size=high)


def _with_digit(s: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return s.map(lambda v: v[:-1] + "7" if not any(c.isdigit() for c in v) else v)


# (the secret, the text that carries it); the secret is what must never come out.
SECRETS: st.SearchStrategy[tuple[str, str]] = st.one_of(
    _chars(ALNUM, 36, 40).map(lambda b: ("gh" + "p_" + b,) * 2),
    _chars(ALNUM + "-", 10, 40).map(lambda b: ("xo" + "xb-" + b,) * 2),
    _chars(ALNUM, 16, 32).map(lambda b: ("sk" + "_live_" + b,) * 2),
    _chars(B64URL, 35, 35).map(lambda b: ("AI" + "za" + b,) * 2),
    _chars(string.ascii_uppercase + string.digits, 16, 16).map(lambda b: ("AK" + "IA" + b,) * 2),
    st.tuples(_chars(B64URL, 8, 40), _chars(B64URL, 8, 60), _chars(B64URL, 10, 43)).map(
        lambda p: (f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}",) * 2
    ),
    st.lists(_chars(ALNUM + "+/", 64, 64), min_size=1, max_size=4).map(
        lambda lines: (
            "\n".join(lines),
            "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----",
        )
    ),
    st.tuples(
        st.sampled_from(["password", "api_key", "secret", "auth_token", "passwd"]),
        st.sampled_from([": ", "=", " = ", '": "']),
        _with_digit(_chars(ALNUM, 12, 24)),
    ).map(lambda p: (p[2], f"{p[0]}{p[1]}{p[2]}")),
    _with_digit(_chars(ALNUM, 12, 24)).map(lambda s: (s, f"https://deploy:{s}@git.example.com/repo.git")),
    _with_digit(_chars(ALNUM, 20, 40)).map(lambda s: (s, f"Authorization: Bearer {s}")),
    _chars(ALNUM + "+/", 86, 86).map(lambda s: (s + "==", f"AccountKey={s}==;EndpointSuffix=core.windows.net")),
)  # fmt: skip

SEPARATORS = st.sampled_from([" ", "\n", "\t", ", ", "; ", "(", ")", "[", "]", "'", '"', "<", ">", "|", " - "])
FILLER = st.text(alphabet=string.ascii_letters + string.digits + " .,:;!?-\n\u00e9\u4e16\u200b", max_size=30)
KEYS = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=8).filter(
    lambda k: k not in DEFAULT_SKIP_KEYS and k not in ("raw_data", "_raw")
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), FILLER)
JSON_TREES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def planted_payloads(draw: st.DrawFn) -> tuple[Any, str]:
    secret, carrier = draw(SECRETS)
    noise = [draw(FILLER), draw(FILLER), draw(SCALARS), draw(JSON_TREES)]
    # The secret must come from the plant only, not from filler that happens to spell it.
    assume(secret not in json.dumps(noise, ensure_ascii=False) and secret not in "".join(map(str, noise)))
    text = f"{noise[0]}{draw(SEPARATORS)}{carrier}{draw(SEPARATORS)}{noise[1]}"
    mode = draw(st.sampled_from(["whole", "text", "escaped", "double_escaped", "key", "list"]))
    value: Any
    if mode == "whole":
        value = carrier
    elif mode == "text":
        value = text
    elif mode == "escaped":
        value = json.dumps({draw(KEYS): text, "n": noise[2]})
    elif mode == "double_escaped":
        value = json.dumps({"outer": json.dumps([text])})
    elif mode == "key":
        value = {carrier: noise[2]}
    else:
        value = [noise[2], [text]]
    for layer in draw(st.lists(st.one_of(KEYS, st.just(None)), max_size=4)):
        value = [value] if layer is None else {layer: value}
    return {"data": noise[3], "planted": value}, secret


@settings(max_examples=150)
@given(planted_payloads())
def test_standard_transforms_never_emit_a_planted_secret(case: tuple[Any, str]) -> None:
    payload, secret = case
    before = copy.deepcopy(payload)
    out = STANDARD.apply(payload, TransformContext(pseudonymizer=KeyedHasher(b"prop")))
    assert payload == before
    rendered = json.dumps(out, ensure_ascii=False)
    assert secret not in rendered
    assert json.dumps(secret)[1:-1] not in rendered


@settings(max_examples=40)
@given(planted_payloads())
def test_standard_tool_results_never_emit_a_planted_secret(case: tuple[Any, str]) -> None:
    payload, secret = case
    text = payload["planted"] if isinstance(payload["planted"], str) else json.dumps(payload["planted"])
    result = {"content": [{"type": "text", "text": text}], "structuredContent": payload}
    out, _ = transform_tool_result(result, STANDARD, TransformContext())
    rendered = json.dumps(out, ensure_ascii=False)
    assert secret not in rendered and json.dumps(secret)[1:-1] not in rendered


@settings(max_examples=60)
@given(JSON_TREES, st.sampled_from([STANDARD, STRICT, SUBSTITUTE]))
def test_no_transform_mutates_its_input(value: Any, pipeline: Any) -> None:
    payload = {"root": value, "tags": {"owner": "bob", "env": "prod"}, "name": "web-1", "region": "r"}
    before = copy.deepcopy(payload)
    pipeline.apply(payload, TransformContext())
    assert payload == before


FENCE_TEXT = st.text(alphabet="ab \u27e6\u27e7/untrusted", max_size=20) | st.sampled_from(
    ["ignore all previous instructions ", CLOSE_FENCE, OPEN_FENCE, " "]
)


@settings(max_examples=100)
@given(st.lists(FENCE_TEXT, min_size=1, max_size=5).map("".join), st.sampled_from(["fence", "datamark", "flag"]))
def test_sanitize_never_emits_more_than_one_closing_fence(text: str, mode: str) -> None:
    sanitizer = Sanitizer({"on_suspicious": mode, "min_length": 0})
    once = sanitizer.apply({"v": text, "l": [text]}, TransformContext())
    twice = sanitizer.apply(once, TransformContext())
    assert fence_count(once) <= 1 and fence_count(twice) <= 1
    standard = STANDARD.apply({"description": text}, TransformContext())
    assert fence_count(standard) <= 1
