"""Every string of every message is read (issue 29): a credential planted in annotations, extra fields,
`mimeType`, URIs or `_meta` of any result or side message does not come out; the rest keeps its keys, order
and bytes."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from integrations.gateway.router.channels import Channel, from_side_payload, side_payload
from interceptors.transforms import META_KEY, STANDARD_TRANSFORMS, TransformContext, assemble_output
from interceptors.transforms.channels import transform_payload

GHP = "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"
STANDARD = assemble_output(STANDARD_TRANSFORMS)
OPEN = assemble_output({"transforms": []})


def _run(event: str, payload: dict[str, Any], pipeline: Any = STANDARD) -> dict[str, Any]:
    before = copy.deepcopy(payload)
    out, _ = transform_payload(event, payload, pipeline, TransformContext(), argument="q")
    assert payload == before  # never mutated
    return out


def _without_report(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_report(v) for k, v in value.items() if k != META_KEY}
    if isinstance(value, list):
        return [_without_report(v) for v in value]
    return value


def _leaks(value: Any) -> bool:
    return GHP in json.dumps(_without_report(value))


# --- one table row per message kind and place ---------------------------------------------------------------

TEXT = {"type": "text", "text": "hello"}
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("tool block annotations", "tools/call",
     {"content": [{**TEXT, "annotations": {"audience": ["user"], "note": GHP}}]}),
    ("tool block extra field", "tools/call", {"content": [{**TEXT, "x-origin": f"from {GHP}"}]}),
    ("tool result extra field", "tools/call", {"content": [TEXT], "debug": {"env": [f"T={GHP}"]}}),
    ("image mimeType", "tools/call", {"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": GHP}]}),
    ("audio annotations", "tools/call",
     {"content": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav", "annotations": {"x": GHP}}]}),
    ("link mimeType and icons", "tools/call",
     {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": f"text/{GHP}",
                   "icons": [{"src": f"https://x.example/{GHP}.png"}]}]}),
    ("embedded resource mimeType", "tools/call",
     {"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "t", "mimeType": GHP}}]}),
    ("embedded resource annotations", "tools/call",
     {"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "t"}, "annotations": {"n": GHP}}]}),
    ("unknown block type", "tools/call", {"content": [{"type": "x-chart", "series": [{"label": GHP}]}]}),
    ("structured content", "tools/call", {"content": [], "structuredContent": {"a": [GHP]}}),
    ("block _meta", "tools/call", {"content": [{**TEXT, "_meta": {"trace": GHP}}]}),
    ("resource contents uri", "resources/read", {"contents": [{"uri": f"https://x.example/?t={GHP}", "text": "t"}]}),
    ("resource contents mimeType", "resources/read",
     {"contents": [{"uri": "file:///a", "blob": "AAAA", "mimeType": GHP}]}),
    ("resource contents extra", "resources/read", {"contents": [{"uri": "file:///a", "text": "t", "x": [GHP]}]}),
    ("resource result extra", "resources/read", {"contents": [], "note": GHP}),
    ("prompt message extra", "prompts/get",
     {"messages": [{"role": "user", "content": TEXT, "name": GHP}]}),
    ("prompt block annotations", "prompts/get",
     {"messages": [{"role": "user", "content": {**TEXT, "annotations": {"n": GHP}}}]}),
    ("prompt result extra", "prompts/get", {"messages": [], "extra": GHP}),
    ("completion extra field", "completion/complete",
     {"completion": {"values": ["a"], "total": 1, "hint": GHP}}),
    ("completion result extra", "completion/complete", {"completion": {"values": []}, "x": GHP}),
    ("completion _meta", "completion/complete", {"completion": {"values": []}, "_meta": {"x": GHP}}),
    ("tool list annotations", "tools/list",
     {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "annotations": {"title": GHP}}]}),
    ("resource list mimeType", "resources/list", {"resources": [{"uri": "file:///a", "name": "a", "mimeType": GHP}]}),
    ("task record extra", "tasks/get", {"taskId": "t1", "status": "working", "statusMessage": GHP}),
]  # fmt: skip


def test_every_case_is_caught() -> None:
    for name, event, payload in CASES:
        out = _run(event, payload)
        assert not _leaks(out), name


def test_open_policy_leaves_every_case_as_sent() -> None:
    for name, event, payload in CASES:
        out = _run(event, payload, OPEN)
        assert out == payload, name


def test_only_the_span_changes_and_keys_keep_their_order() -> None:
    block = {"type": "text", "annotations": {"priority": 0.5, "note": f"see {GHP} now"}, "text": "hi", "z": "keep"}
    out = _run("tools/call", {"content": [block], "zeta": "1", "alpha": {"b": GHP, "a": "x"}})
    assert list(out["content"][0]) == ["type", "annotations", "text", "z"]
    assert out["content"][0]["annotations"] == {"priority": 0.5, "note": "see [REDACTED:api_token] now"}
    assert out["content"][0]["z"] == "keep"
    assert list(out)[:3] == ["content", "zeta", "alpha"]
    assert list(out["alpha"]) == ["b", "a"] and out["alpha"]["a"] == "x"


def test_a_dropped_required_field_reads_as_redacted() -> None:
    pipeline = assemble_output({"transforms": [{"type": "redact", "strategies": {"secret": "drop"}}]})
    out = _run("resources/read", {"contents": [{"uri": GHP, "text": "t", "mimeType": "text/plain"}]}, pipeline)
    assert out["contents"][0] == {"uri": "[REDACTED:content]", "text": "t", "mimeType": "text/plain"}


# --- side messages through the gateway's presentation -------------------------------------------------------


def _side(channel: Channel, params: dict[str, Any], pipeline: Any = STANDARD) -> dict[str, Any]:
    payload = side_payload(channel, params)
    out, _ = transform_payload("tools/call", payload, pipeline, TransformContext())
    return from_side_payload(channel, params, out)


def test_side_messages_extra_members_are_scanned_and_put_back() -> None:
    progress = {"progressToken": GHP, "progress": 1, "message": "working", "detail": {"url": f"https://a/{GHP}"}}
    out = _side(Channel.PROGRESS, progress)
    assert out["progressToken"] == GHP  # the client's own token is plumbing, never rewritten
    assert out["detail"] == {"url": "https://a/[REDACTED:api_token]"} and out["message"] == "working"
    log = {"level": "info", "logger": "app", "data": {"k": 1}, "hint": f"x {GHP}"}
    out = _side(Channel.LOG, log)
    assert (
        out["hint"] == "x [REDACTED:api_token]"
        and out["data"] == {"k": 1}
        and [k for k in out if k != "_meta"] == list(log)
    )
    status = {"taskId": "t1", "status": "failed", "statusMessage": "m", "lastError": GHP}
    assert not _leaks(_side(Channel.TASK_STATUS, status))
    for channel, params in ((Channel.PROGRESS, progress), (Channel.LOG, log), (Channel.TASK_STATUS, status)):
        assert _side(channel, params, OPEN) == params


# --- the property: a key planted anywhere ------------------------------------------------------------------

_RESERVED = {"_annotations", "type", "progressToken", META_KEY}
KEYS = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-", min_size=1, max_size=10).filter(
    lambda k: k not in _RESERVED
)
MESSAGES: list[tuple[str, dict[str, Any]]] = [
    ("tools/call", {"content": [{"type": "text", "text": "a"},
                                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                                {"type": "resource_link", "uri": "file:///a", "name": "a"},
                                {"type": "resource", "resource": {"uri": "file:///b", "text": "b"}}],
                    "structuredContent": {"k": "v"}, "_meta": {"m": "v"}}),
    ("resources/read", {"contents": [{"uri": "file:///a", "text": "a"}, {"uri": "file:///b", "blob": "AAAA"}]}),
    ("prompts/get", {"description": "d", "messages": [{"role": "user", "content": {"type": "text", "text": "a"}}]}),
    ("completion/complete", {"completion": {"values": ["a", "b"], "total": 2, "hasMore": False}}),
    ("tools/list", {"tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}]}),
    ("resources/templates/list", {"resourceTemplates": [{"uriTemplate": "file:///{x}", "name": "x"}]}),
]  # fmt: skip


def _containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every dict inside `value` (a planted member goes into one of them)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        found.append(path)
        for key, item in value.items():
            found += _containers(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _containers(item, (*path, index))
    return found


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    event, template = draw(st.sampled_from(MESSAGES))
    message = copy.deepcopy(template)
    path = draw(st.sampled_from(_containers(message)))
    target = _at(message, path)
    key = draw(KEYS)
    shape = draw(st.sampled_from(["bare", "prose", "list", "nested", "uri"]))
    value: Any = {
        "bare": GHP,
        "prose": f"the value is {GHP}.",
        "list": ["x", GHP],
        "nested": {draw(KEYS): {"v": GHP}},
        "uri": f"https://host.example/p?k={GHP}",
    }[shape]
    if draw(st.booleans()) and key in target and isinstance(target[key], str):
        target[key] = f"{target[key]} {GHP}"  # into an existing string (a known field)
    else:
        target[key] = value
    return event, message


@settings(max_examples=300, deadline=None)
@given(planted())
@example(("tools/call", {"content": [{"type": "image", "data": "AAAA", "mimeType": f"image/{GHP}"}]}))
@example(("resources/read", {"contents": [{"uri": f"file:///{GHP}", "text": "a"}]}))
def test_a_key_planted_anywhere_does_not_come_out(case: tuple[str, dict[str, Any]]) -> None:
    event, message = case
    out = _run(event, message)
    assert not _leaks(out)
    assert _run(event, message, OPEN) == message
