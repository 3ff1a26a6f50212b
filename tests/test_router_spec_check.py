"""The router gateway's spec check (integrations/gateway/spec_check.py): the SDK's result models, per version."""

from __future__ import annotations

import json

from integrations.gateway.spec_check import SpecCheck

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
