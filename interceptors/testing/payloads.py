"""MCP payloads carrying embedded samples: every place a model reads, in the shapes interceptors see.

Tool results (text blocks, `structuredContent`, `_meta`, resource links, embedded resources), resource
contents, prompt messages, completion values, list results, and the gateway's channel payloads: errors,
progress and log messages presented as tool-result-shaped payloads with
`_meta["io.mcp-interceptors/channel"]`. Also `tools/call` requests with arguments, for the input side.

No MCP SDK is imported: payloads are the plain dicts interceptors receive.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from ..transforms.channels import CHANNEL_META_KEY
from .contexts import Embedded, SampleViews, distinct_samples
from .formats import Sample
from .regexgen import uniform

TOOL_PLACES = ("text", "structured", "both", "meta", "resource_link", "embedded_resource")
KINDS = ("tool", "resource", "prompt", "completion", "error", "progress", "log", "list")
"""Every payload kind. The full output pipeline runs on all but `list`, which is metadata: only its redaction
steps run there (`transforms.channels.transform_metadata`), so `list` is not in `TRANSFORMED_KINDS`."""
TRANSFORMED_KINDS = ("tool", "resource", "prompt", "completion", "error", "progress", "log")
EVENTS = {
    "tool": "tools/call",
    "resource": "resources/read",
    "prompt": "prompts/get",
    "completion": "completion/complete",
    "error": "tools/call",
    "progress": "tools/call",
    "log": "tools/call",
    "list": "tools/list",
}


@dataclass(frozen=True, slots=True)
class McpCase(SampleViews):
    """One payload: `event` and `phase` say where an interceptor meets it; `kind` which channel it is."""

    kind: str
    event: str
    payload: dict[str, Any]
    embedded: tuple[Embedded, ...]
    phase: str = "response"

    @property
    def samples(self) -> tuple[Sample, ...]:
        return tuple(s for e in self.embedded for s in e.samples)

    def __repr__(self) -> str:
        return f"McpCase({self.kind} {self.event}, {list(self.embedded)!r})"


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def as_structured(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"result": value}


def tool_result(embedded: Embedded, place: str) -> dict[str, Any]:
    value = embedded.value
    text = as_text(value)
    result: dict[str, Any] = {"content": [{"type": "text", "text": "Done."}], "isError": False}
    if place in ("text", "both"):
        result["content"] = [{"type": "text", "text": text}]
    if place in ("structured", "both"):
        result["structuredContent"] = as_structured(value)
    if place == "meta":
        result["_meta"] = {"com.example/trace": {"detail": text}}
    if place == "resource_link":
        result["content"].append(
            {"type": "resource_link", "uri": "file:///reports/latest.txt", "name": "latest", "description": text}
        )
    if place == "embedded_resource":
        result["content"].append(
            {"type": "resource", "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": text}}
        )
    return result


def channel_payload(kind: str, embedded: Embedded) -> dict[str, Any]:
    """The gateway's result-shaped payload for an error, a progress message or a log message."""
    value = embedded.value
    payload: dict[str, Any]
    if kind == "error":
        payload = {"content": [{"type": "text", "text": as_text(value) if isinstance(value, str) else "failed"}]}
        if not isinstance(value, str):
            payload["structuredContent"] = {"data": value}
        payload["isError"] = True
    elif kind == "progress":
        payload = {"content": [{"type": "text", "text": as_text(value)}]}
    elif isinstance(value, str):
        payload = {"content": [{"type": "text", "text": value}]}
    else:
        payload = {"content": [], "structuredContent": {"data": value}}
    payload["_meta"] = {CHANNEL_META_KEY: kind}
    return payload


def payload_for(kind: str, embedded: Embedded, place: str = "text") -> dict[str, Any]:
    """`embedded` inside a payload of `kind` (see `KINDS`); `place` chooses the part of a tool result."""
    text = as_text(embedded.value)
    if kind == "tool":
        return tool_result(embedded, place)
    if kind == "resource":
        return {"contents": [{"uri": "file:///notes.txt", "mimeType": "text/plain", "text": text}]}
    if kind == "prompt":
        content: Any = {"type": "text", "text": text}
        if place == "structured":
            content = [{"type": "text", "text": "Context:"}, content]
        return {"description": "Summarise", "messages": [{"role": "user", "content": content}]}
    if kind == "completion":
        return {"completion": {"values": [text], "total": 1, "hasMore": False}}
    if kind in ("error", "progress", "log"):
        return channel_payload(kind, embedded)
    if kind == "list":
        return {"tools": [{"name": "lookup", "description": text, "inputSchema": {"type": "object"}}]}
    raise ValueError(f"unknown payload kind {kind!r}")


def mcp_payloads(
    embedded: st.SearchStrategy[Embedded], *, kinds: Sequence[str] = TRANSFORMED_KINDS, max_parts: int = 1
) -> st.SearchStrategy[McpCase]:
    """Payloads of the given kinds carrying one embedding (or, for tool results, up to `max_parts`)."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown payload kinds: {', '.join(unknown)}")

    @st.composite
    def build(draw: st.DrawFn) -> McpCase:
        kind = draw(uniform(list(kinds)))
        first = draw(embedded)
        payload = payload_for(kind, first, draw(uniform(TOOL_PLACES)))
        parts = [first]
        if kind == "tool" and max_parts > 1:
            for _ in range(draw(st.integers(0, max_parts - 1))):
                extra = draw(embedded)
                if not distinct_samples([*(s for p in parts for s in p.samples), *extra.samples]):
                    continue  # one part's value spelled inside another's text could not be told apart
                payload["content"].append({"type": "text", "text": as_text(extra.value)})
                parts.append(extra)
        return McpCase(kind, EVENTS[kind], payload, tuple(parts))

    return build()


def tool_call_requests(embedded: st.SearchStrategy[Embedded], tool: str = "lookup") -> st.SearchStrategy[McpCase]:
    """`tools/call` requests (`{method, params}`) whose arguments carry the embedding."""

    @st.composite
    def build(draw: st.DrawFn) -> McpCase:
        inner = draw(embedded)
        shape = draw(st.sampled_from(["value", "nested", "list"]))
        argument: Any = inner.value
        if shape == "nested":
            argument = {"options": {"query": inner.value}}
        elif shape == "list":
            argument = ["first", inner.value]
        payload = {"method": "tools/call", "params": {"name": tool, "arguments": {"query": argument}}}
        return McpCase("request", "tools/call", payload, (inner,), phase="request")

    return build()


def json_values(*, max_leaves: int = 8, text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values (None, booleans, small integers, short text, lists, objects)."""
    scalars = st.none() | st.booleans() | st.integers(-5, 5) | (text if text is not None else st.text(max_size=4))
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=max_leaves,
    )
