"""Which channel each message is, under which event its chain runs, and its payload there and back.

Every channel reaches the chain. A context operation's request is `{method, params}` and its result is the
result object (list results whole, so the policy's hiding stays one decision). Side channels that are not
results (errors, progress, logs, resource updates, task status) are presented result-shaped, as the
stages already read tool results: the text in `content`, anything structured in
`structuredContent.data`, the message's own `_meta` kept and `_meta[CHANNEL_META_KEY]` naming the
channel. A message with no operation of its own runs under the carrier event in `CARRIER_EVENTS`: the
operation that asked for it (`logging/setLevel` for logs outside any request, `resources/subscribe` for
updates), so the chain of the session that asked judges it, with that session's principal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from interceptors.errors import InterceptorsError
from interceptors.events import SERVER_INFO_EVENT, is_context_operation
from interceptors.protocol.methods import METHODS, Sender
from interceptors.protocol.methods import Channel as Channel  # the router's name for it, re-exported

CHANNEL_META_KEY: Final = "io.mcp-interceptors/channel"
LOGGER_META_KEY: Final = "io.mcp-interceptors/logger"
"""A log's logger name rides the chain in `_meta` under this key, scanned like the rest, and goes back after."""
STREAM_META_KEY: Final = "io.mcp-interceptors/stream"
"""A streamed message's neighbours' text (`{"before", "after"}`), read by the stages as context only; never sent
on (the same key as `interceptors.transforms.stream.STREAM_META_KEY`)."""
PARAMS_META_KEY: Final = "io.mcp-interceptors/params"
"""A side message's other members holding text (extra fields, a task's fields) ride the chain in `_meta` under
this key, scanned like the rest, and go back after: no string of a message passes unread."""
_OUR_META_KEYS: Final = frozenset({CHANNEL_META_KEY, LOGGER_META_KEY, PARAMS_META_KEY, STREAM_META_KEY})
_NOT_PARAMS: Final = frozenset({"_meta", "progressToken", "progress", "total", "logger", "level", "taskId", "status"})
"""Members that are the message's plumbing (the client's own token, numbers, enums, ids): never rewritten."""


SERVER_REQUESTS: Final = METHODS.mapping(lambda row: row.capability if row.channel is Channel.SERVER_REQUEST else None)
"""Requests the upstream sends the client, and the client capability each needs."""

LIST_CHANGED: Final = METHODS.mapping(lambda row: row.capability if row.channel is Channel.LIST_CHANGED else None)
"""list_changed notifications, and the server capability (the lists) each invalidates."""

_SERVER_INFO_METHODS: Final = frozenset(METHODS.names(lambda row: row.server_info))
_NOTIFICATION_CHANNELS: Final = METHODS.mapping(lambda row: row.channel if row.notification else None)
_RESULT_CHANNELS: Final = METHODS.mapping(
    lambda row: None if row.notification or row.sender is Sender.SERVER else row.channel
)
"""A client's request's result channel (a server's request is answered on `CLIENT_RESULT`)."""

CARRIER_EVENTS: Final = {
    Channel.INITIALIZE: SERVER_INFO_EVENT,
    Channel.LOG: "logging/setLevel",
    Channel.RESOURCE_UPDATED: "resources/subscribe",
    Channel.TASK_STATUS: "tasks/get",
    Channel.LIST_CHANGED: "tools/list",
}
"""The event a channel runs under when no request of its own is in flight (see the module docstring)."""


def request_event(method: str) -> str | None:
    """The event a request's chain runs under, or None for a request no chain sees (the handshake, ping, the
    interceptor methods). The gateway and the server middleware both ask here, so the two cannot drift."""
    return method if is_context_operation(method) else None


def response_event(method: str) -> str | None:
    """The event a request's result runs under: the request's own, SERVER_INFO_EVENT for the handshake's
    results (SEP-2624 gives `initialize` no event, yet its instructions reach the model), None for the rest."""
    return SERVER_INFO_EVENT if method in _SERVER_INFO_METHODS else request_event(method)


def result_channel(method: str) -> Channel:
    return _RESULT_CHANNELS.get(method, Channel.RESULT)


def notification_channel(method: str) -> Channel | None:
    """The side channel an upstream notification is, or None for one the router does not relay."""
    return _NOTIFICATION_CHANNELS.get(method)


@dataclass(frozen=True, slots=True)
class _Shape:
    text: str | None  # the params (or error) member presented as text
    data: str | None = None  # the member presented as structuredContent.data


_SHAPES: Final = {
    Channel.ERROR: _Shape("message", "data"),
    Channel.PROGRESS: _Shape("message"),
    Channel.LOG: _Shape(None, "data"),  # string data is text; see side_payload
    Channel.RESOURCE_UPDATED: _Shape("uri"),
    Channel.TASK_STATUS: _Shape("statusMessage"),
    Channel.LIST_CHANGED: _Shape(None),  # only its `_meta`
}


class MalformedPayload(InterceptorsError, ValueError):
    """A mutator returned something no longer result-shaped: the channel fails closed."""


def side_payload(channel: Channel, source: dict[str, Any]) -> dict[str, Any]:
    """A notification's params (or an error object) as a result-shaped payload for the chain."""
    shape = _SHAPES[channel]
    text_key = shape.text
    data_key = shape.data
    if channel is Channel.LOG and isinstance(source.get("data"), str):
        text_key, data_key = "data", None
    text = source.get(text_key) if text_key is not None else None
    payload: dict[str, Any] = {"content": [{"type": "text", "text": text}] if isinstance(text, str) else []}
    if data_key is not None and source.get(data_key) is not None:
        payload["structuredContent"] = {"data": source[data_key]}
    if channel is Channel.ERROR:
        payload["isError"] = True
    meta = source.get("_meta")
    payload["_meta"] = {**(meta if isinstance(meta, dict) else {}), CHANNEL_META_KEY: str(channel)}
    if channel is Channel.LOG and isinstance(source.get("logger"), str):  # a server may put anything there
        payload["_meta"][LOGGER_META_KEY] = source["logger"]
    extra = _extra_params(source, text_key, data_key)
    if extra:
        payload["_meta"][PARAMS_META_KEY] = extra
    return payload


def _extra_params(source: dict[str, Any], text_key: str | None, data_key: str | None) -> dict[str, Any]:
    return {
        key: value
        for key, value in source.items()
        if key not in _NOT_PARAMS
        and key != text_key
        and key != data_key
        and (isinstance(value, str) or (isinstance(value, dict | list) and value))
    }


def from_side_payload(channel: Channel, source: dict[str, Any], payload: Any) -> dict[str, Any]:
    """The (possibly mutated) payload back into the original's shape; every other member kept as it was.

    An error keeps its code: only its message and data go through the chain.
    """
    if not isinstance(payload, dict):
        raise MalformedPayload("the payload is not an object")
    shape = _SHAPES[channel]
    text_key, data_key = shape.text, shape.data
    if channel is Channel.LOG and isinstance(source.get("data"), str):
        text_key, data_key = "data", None
    out = dict(source)
    if text_key is not None:
        text = _text_of(payload)
        if text is not None or text_key in source:
            out[text_key] = text if text is not None else ""
    if data_key is not None:
        structured = payload.get("structuredContent")
        if structured is None:
            out.pop(data_key, None)
        elif isinstance(structured, dict):
            out[data_key] = structured.get("data")
        else:
            raise MalformedPayload("structuredContent is not an object")
    meta = payload.get("_meta")
    _restore_extra(out, _extra_params(source, text_key, data_key), meta)
    if isinstance(meta, dict):
        kept = {key: value for key, value in meta.items() if key not in _OUR_META_KEYS}
        if kept or "_meta" in source:
            out["_meta"] = kept
        if channel is Channel.LOG and "logger" in source:
            logger = meta.get(LOGGER_META_KEY)
            if not isinstance(logger, str):
                raise MalformedPayload("the logger name is not a string")
            out["logger"] = logger
    return out


def _restore_extra(out: dict[str, Any], extra: dict[str, Any], meta: Any) -> None:
    """The message's other text members back from `_meta[PARAMS_META_KEY]` as the chain left them."""
    if not extra:
        return
    new_extra = meta.get(PARAMS_META_KEY) if isinstance(meta, dict) else None
    if not isinstance(new_extra, dict):
        raise MalformedPayload("the message's other members are not an object")
    for key in extra:
        if key in new_extra:
            out[key] = new_extra[key]
        else:
            out.pop(key, None)  # dropped by a mutator


def _text_of(payload: dict[str, Any]) -> str | None:
    content = payload.get("content")
    if not isinstance(content, list):
        raise MalformedPayload("content is not an array")
    texts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise MalformedPayload("a text block has no string text")
            texts.append(text)
    return "\n".join(texts) if texts else None


def request_payload(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    return {"method": method, "params": params}


def params_from_request_payload(method: str, payload: Any) -> dict[str, Any] | None:
    """A request mutator may change params, never the method or the payload's shape."""
    if not isinstance(payload, dict) or payload.get("method") != method:
        raise MalformedPayload("a request mutator changed the method or the payload shape")
    params = payload.get("params")
    if params is not None and not isinstance(params, dict):
        raise MalformedPayload("a request mutator produced params that are not an object")
    return params
