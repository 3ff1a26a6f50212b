"""An output pipeline applied to everything a model reads: tool results, resource contents, prompt
messages, completion values, result-shaped error/progress/log payloads, and metadata (list results, the
initialize result, task records, requests to the client: scrubbed only, see `transform_metadata`).

The parts of one result (structured content, each text block, links, embedded resources, `_meta`) go
through the pipeline in a single run, so the same value gets the same replacement in all of them.
`_meta` is scanned at every level (result, block, link, embedded resource), except our own keys, and so is
every other member no specific part reads (annotations, `mimeType`, URIs, unknown and extra fields), put back
in place with keys and order kept. A streamed message's neighbours (`_meta[STREAM_META_KEY]`) are read as
adjacent text blocks, context only. Images,
audio and blobs whose decoded bytes are text (a base64 `.env` file served as a blob) are scanned as that text
and re-encoded; binary data passes untouched.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Mapping
from typing import Any

from .base import META_KEY, Pipeline, TransformContext, merge_report, render_json
from .cap import cap_text_blocks
from .stream import STREAM_META_KEY

CHANNEL_META_KEY = "io.mcp-interceptors/channel"
_RESERVED_META = frozenset({META_KEY, CHANNEL_META_KEY, STREAM_META_KEY, "progressToken"})
_LINK_FIELDS = ("uri", "name", "title", "description")
_REQUIRED_LINK_FIELDS = ("uri", "name")
_MISSING = "[REDACTED:content]"

Setter = Callable[[Any], None]
_MAX_DECODED_BLOB = 1 << 20
"""Larger blobs are not decoded (a text file that big is not what a model is shown)."""


def blob_text(data: Any) -> str | None:
    """The text a base64 blob holds, when its decoded bytes are UTF-8 text (printable, few control characters)."""
    if not isinstance(data, str) or len(data) < 8 or len(data) > _MAX_DECODED_BLOB * 4 // 3 + 4:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\t\n\r")
    return text if text and controls * 100 <= len(text) else None


def _encode_blob(text: Any) -> str:
    return base64.b64encode(_text(text).encode("utf-8")).decode("ascii")


class _Bundle:
    """The parts of one result, each with a label (for reports) and a way to put its new value back."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.labels: list[str] = []
        self.setters: list[Setter] = []

    def add(self, value: Any, label: str, setter: Setter) -> None:
        self.values.append(value)
        self.labels.append(label)
        self.setters.append(setter)

    def run(self, pipeline: Pipeline, ctx: TransformContext) -> bool:
        """Transform every part and put it back; whether anything changed."""
        if not self.values or pipeline.empty:
            return False
        new_values = pipeline.run(self.values, ctx, self.labels)
        changed = False
        for old, new, setter in zip(self.values, new_values, self.setters, strict=True):
            if new is not old and new != old:
                setter(new)
                changed = True
        return changed


def _text(value: Any) -> str:
    return value if isinstance(value, str) else render_json(value)


_REQUIRED_FIELDS = frozenset({"uri", "name", "mimeType"})
"""Fields a dropped value may not remove (the message would no longer be well-formed): they read `_MISSING`."""


def _holds_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, Mapping | list) and bool(value))


def _rest_of(source: Mapping[str, Any], handled: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in source.items() if isinstance(k, str) and k not in handled and _holds_text(v)}


def _put_rest(current: Mapping[str, Any], rest: Mapping[str, Any], new: Any) -> dict[str, Any]:
    """`current` with the members in `rest` replaced by their new values, in their places (keys and order kept;
    a dropped member leaves, or reads `_MISSING` when the message needs it; a renamed key comes last)."""
    new_rest = new if isinstance(new, Mapping) else {}
    out: dict[str, Any] = {}
    for key, value in current.items():
        if key not in rest:
            out[key] = value
        elif key in new_rest:
            out[key] = new_rest[key]
        elif key in _REQUIRED_FIELDS:
            out[key] = _MISSING
    for key, value in new_rest.items():
        if key not in rest:
            out[key] = value
    return out


def _add_rest(
    bundle: _Bundle,
    source: Mapping[str, Any],
    handled: frozenset[str],
    label: str,
    get: Callable[[], Mapping[str, Any]],
    put: Callable[[dict[str, Any]], None],
) -> None:
    """Every member of `source` no other part reads (annotations, `mimeType`, URIs, unknown and extra fields),
    as one part under its own keys (so key rules see them), put back in place."""
    rest = _rest_of(source, handled)
    if not rest:
        return

    def set_rest(new: Any) -> None:
        put(_put_rest(get(), rest, new))

    bundle.add(rest, label, set_rest)


_BLOCK_HANDLED: dict[Any, frozenset[str]] = {
    "text": frozenset({"type", "text", "_meta"}),
    "image": frozenset({"type", "data", "_meta"}),
    "audio": frozenset({"type", "data", "_meta"}),
    "resource_link": frozenset({"type", "_meta", "uri", "name", "title", "description"}),
    "resource": frozenset({"type", "resource", "_meta"}),
}
_EMBEDDED_HANDLED = frozenset({"text", "uri", "blob", "_meta"})
_RESULT_HANDLED = frozenset({"content", "structuredContent", "_meta", "isError"})


def _add_block(bundle: _Bundle, block: Any, label: str, put: Callable[[dict[str, Any]], None]) -> None:
    """One content block: text, a resource link's fields, an embedded resource's text and URI, and every
    other member (annotations, `mimeType`, unknown fields; the whole of a block of an unknown type)."""
    if block.__class__ is not dict and not isinstance(block, Mapping):
        return
    kind = block.get("type")
    holder: dict[str, Any] = {"block": dict(block)}

    def commit() -> None:
        put(holder["block"])

    def set_block(new: dict[str, Any]) -> None:
        holder["block"] = new
        commit()

    _add_rest(bundle, block, _BLOCK_HANDLED.get(kind, frozenset({"type", "_meta"})), f"{label}.*",
              lambda: holder["block"], set_block)  # fmt: skip

    meta = block.get("_meta")
    if meta is not None and isinstance(meta, Mapping):
        own = {k: v for k, v in meta.items() if k not in _RESERVED_META}
        if own:

            def set_block_meta(new: Any) -> None:
                current = holder["block"]
                kept = {k: v for k, v in current["_meta"].items() if k in _RESERVED_META}
                holder["block"] = {**current, "_meta": {**(new if isinstance(new, Mapping) else {}), **kept}}
                commit()

            bundle.add(own, f"{label}._meta", set_block_meta)
    if kind in ("image", "audio") and (decoded := blob_text(block.get("data"))) is not None:

        def set_data(new: Any) -> None:
            holder["block"] = {**holder["block"], "data": _encode_blob(new)}
            commit()

        bundle.add(decoded, f"{label}.data", set_data)
    if kind == "text" and isinstance(block.get("text"), str):

        def set_text(new: Any) -> None:
            holder["block"] = {**holder["block"], "text": _text(new)}
            commit()

        bundle.add(block["text"], f"{label}.text", set_text)
    elif kind == "resource_link":
        fields = {k: block[k] for k in _LINK_FIELDS if isinstance(block.get(k), str)}
        if fields:

            def set_link(new: Any) -> None:
                updated = {**holder["block"]}
                new_fields = new if isinstance(new, Mapping) else {}
                for key in fields:
                    if key in new_fields and isinstance(new_fields[key], str):
                        updated[key] = new_fields[key]
                    elif key in _REQUIRED_LINK_FIELDS:
                        updated[key] = _MISSING
                    else:
                        updated.pop(key, None)
                holder["block"] = updated
                commit()

            bundle.add(fields, label, set_link)
    elif kind == "resource" and isinstance(block.get("resource"), Mapping):
        resource = block["resource"]
        if (decoded := blob_text(resource.get("blob"))) is not None:

            def set_blob(new: Any) -> None:
                current = holder["block"]
                holder["block"] = {**current, "resource": {**current["resource"], "blob": _encode_blob(new)}}
                commit()

            bundle.add(decoded, f"{label}.resource.blob", set_blob)
        inner_meta = resource.get("_meta")
        if isinstance(inner_meta, Mapping) and (own_inner := {k: v for k, v in inner_meta.items()
                                                              if k not in _RESERVED_META}):  # fmt: skip

            def set_inner_meta(new: Any) -> None:
                current = holder["block"]
                kept = {k: v for k, v in current["resource"]["_meta"].items() if k in _RESERVED_META}
                merged = {**(new if isinstance(new, Mapping) else {}), **kept}
                holder["block"] = {**current, "resource": {**current["resource"], "_meta": merged}}
                commit()

            bundle.add(own_inner, f"{label}.resource._meta", set_inner_meta)

        def set_inner(new: dict[str, Any]) -> None:
            holder["block"] = {**holder["block"], "resource": new}
            commit()

        _add_rest(bundle, resource, _EMBEDDED_HANDLED, f"{label}.resource.*",
                  lambda: holder["block"]["resource"], set_inner)  # fmt: skip
        for field in ("text", "uri"):
            if isinstance(resource.get(field), str):

                def set_field(new: Any, field: str = field) -> None:
                    current = holder["block"]
                    value = _text(new) if new is not None else _MISSING
                    holder["block"] = {**current, "resource": {**current["resource"], field: value}}
                    commit()

                bundle.add(resource[field], f"{label}.resource.{field}", set_field)


def _add_meta(bundle: _Bundle, result: dict[str, Any]) -> None:
    meta = result.get("_meta")
    if meta is None or not isinstance(meta, Mapping):
        return
    own = {k: v for k, v in meta.items() if k not in _RESERVED_META}
    if not own:
        return

    def set_meta(new: Any) -> None:
        kept = {k: v for k, v in result["_meta"].items() if k in _RESERVED_META}
        result["_meta"] = {**(new if isinstance(new, Mapping) else {}), **kept}

    bundle.add(own, "_meta", set_meta)


def _ignore(new: Any) -> None:
    """A context part's new value is not written anywhere."""


def _stream_context(result: Mapping[str, Any], blocks: list[Any]) -> tuple[str, str]:
    """(before, after): the text of a streamed message's neighbours (`stream.StreamHoldBack`), read as context
    only where the message's first (last) block is text, so the seam is between two texts."""
    meta = result.get("_meta")
    context = meta.get(STREAM_META_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(context, Mapping) or not blocks:
        return "", ""

    def is_text(block: Any) -> bool:
        return isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)

    before, after = context.get("before"), context.get("after")
    return (
        before if isinstance(before, str) and is_text(blocks[0]) else "",
        after if isinstance(after, str) and is_text(blocks[-1]) else "",
    )


def _add_top_rest(bundle: _Bundle, out: dict[str, Any], source: Mapping[str, Any], handled: frozenset[str]) -> None:
    """A result's own unknown and extra members (written back into `out` in place)."""

    def put(new: dict[str, Any]) -> None:
        out.clear()
        out.update(new)

    _add_rest(bundle, source, handled, "*", lambda: dict(out), put)


def _attach(result: dict[str, Any], report: Mapping[str, Any]) -> None:
    """The report under `_meta[META_KEY]`, merged with one an earlier run left there."""
    if not report:
        return
    meta = dict(result.get("_meta") or {})
    previous = meta.get(META_KEY)
    meta[META_KEY] = merge_report(dict(previous), report) if isinstance(previous, Mapping) else dict(report)
    result["_meta"] = meta


def transform_tool_result(
    result: Mapping[str, Any], pipeline: Pipeline, ctx: TransformContext, *, max_output_chars: int | None = None
) -> tuple[dict[str, Any], bool]:
    """A tool result (or an error/progress/log payload shaped like one) after the pipeline and the cap."""
    out = dict(result)
    bundle = _Bundle()
    if out.get("structuredContent") is not None:

        def set_structured(new: Any) -> None:
            out["structuredContent"] = new if isinstance(new, dict) else {"result": new}

        bundle.add(out["structuredContent"], "structuredContent", set_structured)
    content = out.get("content")
    if isinstance(content, list):
        blocks = list(content)
        out["content"] = blocks
        before, after = _stream_context(out, blocks)
        shift = 1 if before else 0
        if before:  # a streamed message's neighbours: read across the seam, never written back
            bundle.add(before, "content[0].text", _ignore)
        for index, block in enumerate(blocks):

            def put(new: dict[str, Any], index: int = index) -> None:
                blocks[index] = new

            _add_block(bundle, block, f"content[{index + shift}]", put)
        if after:
            bundle.add(after, f"content[{len(blocks) + shift}].text", _ignore)
    _add_top_rest(bundle, out, result, _RESULT_HANDLED)
    _add_meta(bundle, out)
    changed = bundle.run(pipeline, ctx)
    if max_output_chars is not None:
        capped, removed = cap_text_blocks(out, max_output_chars)
        if removed:
            out = capped
            ctx.report["truncated_chars"] = ctx.report.get("truncated_chars", 0) + removed
            changed = True
    if ctx.report:
        _attach(out, ctx.report)
        changed = True
    return (out, True) if changed else (dict(result), False)


def _finish(
    bundle: _Bundle, out: dict[str, Any], result: Mapping[str, Any], pipeline: Pipeline, ctx: TransformContext
) -> tuple[dict[str, Any], bool]:
    """Run the bundle (with `_meta`), attach the report, and hand back the original when nothing changed."""
    _add_meta(bundle, out)
    changed = bundle.run(pipeline, ctx)
    if ctx.report:
        _attach(out, ctx.report)
        changed = True
    return (out, True) if changed else (dict(result), False)


@functools.lru_cache(maxsize=256)
def metadata_pipeline(pipeline: Pipeline) -> Pipeline:
    """The steps of `pipeline` that apply to metadata (`Transform.for_metadata`), in order."""
    steps = tuple(step for step in (t.for_metadata() for t in pipeline.transforms) if step is not None)
    return Pipeline(steps)


def _add_fields(bundle: _Bundle, out: dict[str, Any], skip: frozenset[str] = frozenset({"_meta"})) -> None:
    """Every member of `out` that holds text at any depth, as one part each."""
    for key, value in out.items():
        if key in skip or not isinstance(value, str | Mapping | list):
            continue

        def put(new: Any, key: str = key) -> None:
            out[key] = new

        bundle.add(value, key, put)


def transform_metadata(
    result: Mapping[str, Any], pipeline: Pipeline, ctx: TransformContext
) -> tuple[dict[str, Any], bool]:
    """Catalog and server metadata (list results whole, the initialize result, task records, the params of a
    request to the client): every string at any depth through the pipeline's metadata steps, `_meta` too.
    Names and URIs are scanned like the rest: one that is a credential is masked, and so unusable."""
    out = dict(result)
    bundle = _Bundle()
    _add_fields(bundle, out)
    return _finish(bundle, out, result, metadata_pipeline(pipeline), ctx)


def transform_resource_result(
    result: Mapping[str, Any], pipeline: Pipeline, ctx: TransformContext
) -> tuple[dict[str, Any], bool]:
    """`resources/read`: each text content (and blob that decodes to text), each content's `_meta`, URI,
    `mimeType` and extra fields, and the result's own."""
    out = dict(result)
    bundle = _Bundle()
    contents = out.get("contents")
    if isinstance(contents, list):
        items = list(contents)
        out["contents"] = items
        for index, item in enumerate(items):
            if isinstance(item, Mapping) and isinstance(item.get("text"), str):

                def set_text(new: Any, index: int = index) -> None:
                    items[index] = {**items[index], "text": _text(new)}

                bundle.add(item["text"], f"contents[{index}].text", set_text)
            elif isinstance(item, Mapping) and (decoded := blob_text(item.get("blob"))) is not None:

                def set_blob(new: Any, index: int = index) -> None:
                    items[index] = {**items[index], "blob": _encode_blob(new)}

                bundle.add(decoded, f"contents[{index}].blob", set_blob)
            if isinstance(item, Mapping) and isinstance(item.get("_meta"), Mapping) and item["_meta"]:

                def set_item_meta(new: Any, index: int = index) -> None:
                    items[index] = {**items[index], "_meta": new if isinstance(new, Mapping) else {}}

                bundle.add(item["_meta"], f"contents[{index}]._meta", set_item_meta)
            if isinstance(item, Mapping):  # its uri, mimeType and extra fields (a blob is never read as text)

                def set_item(new: dict[str, Any], index: int = index) -> None:
                    items[index] = new

                def get_item(index: int = index) -> Mapping[str, Any]:
                    current: Mapping[str, Any] = items[index]
                    return current

                _add_rest(bundle, item, _CONTENTS_HANDLED, f"contents[{index}].*", get_item, set_item)
    _add_top_rest(bundle, out, result, frozenset({"contents", "_meta"}))
    return _finish(bundle, out, result, pipeline, ctx)


_CONTENTS_HANDLED = frozenset({"text", "blob", "_meta"})


def transform_prompt_result(
    result: Mapping[str, Any], pipeline: Pipeline, ctx: TransformContext
) -> tuple[dict[str, Any], bool]:
    """`prompts/get`: every message's content (text, embedded resource, link); the description as metadata."""
    out = dict(result)
    if isinstance(out.get("description"), str):
        described, _ = transform_metadata({"description": out["description"]}, pipeline, ctx)
        out["description"] = described["description"]
    bundle = _Bundle()
    messages = out.get("messages")
    if isinstance(messages, list):
        items = list(messages)
        out["messages"] = items
        for index, message in enumerate(items):
            if not isinstance(message, Mapping):
                continue

            def set_message(new: dict[str, Any], index: int = index) -> None:
                items[index] = new

            def get_message(index: int = index) -> Mapping[str, Any]:
                current: Mapping[str, Any] = items[index]
                return current

            _add_rest(bundle, message, _MESSAGE_HANDLED, f"messages[{index}].*", get_message, set_message)
            content = message.get("content")
            if isinstance(content, Mapping):

                def put(new: dict[str, Any], index: int = index) -> None:
                    items[index] = {**items[index], "content": new}

                _add_block(bundle, content, f"messages[{index}].content", put)
            elif isinstance(content, list):
                blocks = list(content)
                items[index] = {**message, "content": blocks}
                for position, block in enumerate(blocks):

                    def put_block(new: dict[str, Any], position: int = position, blocks: list[Any] = blocks) -> None:
                        blocks[position] = new

                    _add_block(bundle, block, f"messages[{index}].content[{position}]", put_block)
    _add_top_rest(bundle, out, result, frozenset({"description", "messages", "_meta"}))
    return _finish(bundle, out, result, pipeline, ctx)


_MESSAGE_HANDLED = frozenset({"role", "content"})


def transform_completion_result(
    result: Mapping[str, Any], pipeline: Pipeline, ctx: TransformContext, argument: str | None
) -> tuple[dict[str, Any], bool]:
    """`completion/complete`: each value wrapped as `{argument: value}` so key rules see a key, then unwrapped.

    A value the pipeline dropped (or turned into something other than text) is left out.
    """
    out = dict(result)
    completion = out.get("completion")
    if pipeline.empty:
        return dict(result), False
    changed = False
    if isinstance(completion, Mapping) and isinstance(completion.get("values"), list):
        key = argument or "value"
        values = list(completion["values"])
        wrapped = [{key: value} for value in values]
        labels = [f"completion.values[{i}]" for i in range(len(values))]
        new_wrapped = pipeline.run(wrapped, ctx, labels)
        new_values = []
        for item in new_wrapped:
            value = item.get(key) if isinstance(item, Mapping) else None
            if isinstance(value, str):
                new_values.append(value)
        if new_values != values:
            out["completion"] = {**completion, "values": new_values}
            changed = True
    bundle = _Bundle()
    if isinstance(completion, Mapping):  # the completion's extra fields (`total` and `hasMore` are numbers)

        def get_completion() -> Mapping[str, Any]:
            current = out["completion"]
            return current if isinstance(current, Mapping) else {}

        def set_completion(new: dict[str, Any]) -> None:
            out["completion"] = new

        _add_rest(bundle, completion, frozenset({"values"}), "completion.*", get_completion, set_completion)
    _add_top_rest(bundle, out, result, frozenset({"completion", "_meta"}))
    _add_meta(bundle, out)
    changed = bundle.run(pipeline, ctx) or changed
    if ctx.report:
        _attach(out, ctx.report)
        changed = True
    return (out, True) if changed else (dict(result), False)


def is_channel_payload(payload: Any) -> bool:
    """An error, progress or log message presented as a result (the gateway marks them in `_meta`)."""
    if payload.__class__ is not dict and not isinstance(payload, Mapping):
        return False
    meta = payload.get("_meta")
    return meta is not None and isinstance(meta, Mapping) and meta.get(CHANNEL_META_KEY) in _SIDE_CHANNELS


_SIDE_CHANNELS = frozenset({"error", "progress", "log", "resources/updated", "tasks/status"})
CONTENT_EVENTS = frozenset({"tools/call", "tasks/result", "resources/read", "prompts/get", "completion/complete"})
"""Events whose result is content a model reads (everything else a gateway relays is metadata)."""


def transform_payload(
    event: str,
    payload: Any,
    pipeline: Pipeline,
    ctx: TransformContext,
    *,
    argument: str | None = None,
    max_output_chars: int | None = None,
) -> tuple[Any, bool]:
    """Dispatch on the event (and on the channel marker): the new payload and whether it changed."""
    if payload.__class__ is not dict and not isinstance(payload, Mapping):
        return payload, False
    if "task" in payload and "content" not in payload:  # a task created in place of the result (SEP-1686)
        return transform_metadata(payload, pipeline, ctx)
    if is_channel_payload(payload) or event == "tools/call" or event == "tasks/result":
        return transform_tool_result(payload, pipeline, ctx, max_output_chars=max_output_chars)
    if event == "resources/read":
        return transform_resource_result(payload, pipeline, ctx)
    if event == "prompts/get":
        return transform_prompt_result(payload, pipeline, ctx)
    if event == "completion/complete":
        return transform_completion_result(payload, pipeline, ctx, argument)
    return transform_metadata(payload, pipeline, ctx)
