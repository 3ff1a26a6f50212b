"""The router gateway's spec check (integrations/gateway/spec_check.py): the SDK's result models, per version."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types.methods import SERVER_RESULTS
from pydantic import TypeAdapter, ValidationError

from integrations.gateway.spec_check import SpecCheck, plain_text_tool_result
from interceptors.testing import json_values

SECRET = "ghp_2f9Qx7LmTz4Vb8Nc1Rd6Yh3Kw5Js0Pa9UeXo"


def test_valid_results_pass_at_each_version_and_unknown_methods_are_not_checked() -> None:
    check = SpecCheck()
    result = {"content": [{"type": "text", "text": "hi"}], "isError": False}
    assert check("tools/call", result, "2025-11-25") is None
    assert check("tools/call", {**result, "resultType": "complete"}, "2026-07-28") is None
    assert check("tools/list", {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}, "2025-11-25") is None
    assert check("x-vendor/echo", {"anything": [1]}, "2025-11-25") is None  # no model: not checked
    assert check("tools/call", {"task": {"taskId": "t1"}}, "2025-11-25") is None  # a task-augmented call
    assert check("tools/call", {"content": 5}, None) is None  # no version known: not checked


def test_an_invalid_result_is_named_by_location_and_type_never_by_value() -> None:
    check = SpecCheck()
    problem = check("tools/call", {"content": [{"type": "text", "text": 7, "note": SECRET}]}, "2025-11-25")
    assert problem is not None
    assert problem["reason"] == "the tools/call result does not match the 2025-11-25 schema"
    assert {"path": "content.0.TextContent.text", "type": "string_type"} in problem["errors"]
    assert len(problem["errors"]) <= 5
    modern = check("tools/call", {"content": [{"type": "text", "text": SECRET}]}, "2026-07-28")
    assert modern is not None and any(e["path"].endswith("resultType") for e in modern["errors"])
    bad_list = check("resources/read", {"contents": [{"uri": 3, "text": SECRET}]}, "2025-11-25")
    assert bad_list is not None
    assert SECRET not in json.dumps([problem, modern, bad_list])


_TEXT_BLOCK = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)})
_NEAR_BLOCK = st.one_of(
    _TEXT_BLOCK,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image", "Text"]), "text": st.one_of(st.text(), st.none(), st.integers())}
    ),
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": st.text(max_size=4), "annotations": st.just({"priority": 0.5})}
    ),
    st.fixed_dictionaries({"type": st.just("text")}),
    st.lists(st.text(max_size=2), max_size=2),
    st.text(max_size=3),
)
_NEAR_RESULT = st.one_of(
    st.fixed_dictionaries(
        {"content": st.lists(_TEXT_BLOCK, max_size=3)},
        optional={"isError": st.booleans(), "_meta": st.dictionaries(st.text(max_size=3), json_values(), max_size=3)},
    ),
    st.fixed_dictionaries(
        {"content": st.one_of(st.lists(_NEAR_BLOCK, max_size=3), st.none(), st.text(max_size=2), st.just({}))},
        optional={
            "isError": st.one_of(st.booleans(), st.none(), st.integers(0, 1), st.just("false")),
            "structuredContent": st.just({"x": 1}),
            "resultType": st.sampled_from(["complete", "input_required"]),
            "_meta": st.one_of(st.just({"k": "v"}), st.none(), st.just([]), st.just({1: "int key"})),
        },
    ),
    st.fixed_dictionaries({"isError": st.booleans()}),
)
_VERSIONS = sorted(version for method, version in SERVER_RESULTS if method == "tools/call")


@settings(max_examples=300, deadline=None)
@given(result=_NEAR_RESULT, version=st.sampled_from(_VERSIONS))
def test_the_plain_text_fast_path_answers_as_the_model_does(result: dict[str, Any], version: str) -> None:
    """The pydantic-free accept of text-only tools/call results never accepts what the version's model refuses, and the
    check answers exactly as the model alone does (with or without the fast path)."""
    check = SpecCheck()
    adapter = TypeAdapter(SERVER_RESULTS[("tools/call", version)])
    try:
        adapter.validate_python(result, by_alias=True, by_name=False)
        valid = True
    except ValidationError:
        valid = False
    if plain_text_tool_result(result) and check._accepts_plain_text(version):
        assert valid
    answer = check("tools/call", result, version)
    assert (answer is None) == (valid or "task" in result)


def test_the_fast_path_is_taken_only_at_versions_that_accept_the_plain_shape() -> None:
    check = SpecCheck()
    assert check._accepts_plain_text("2025-11-25")
    assert not check._accepts_plain_text("2026-07-28")  # its results carry resultType: the model decides
    assert not check._accepts_plain_text("1999-01-01")  # no model at all
