"""Output channels that are not results (errors, progress, log messages) pass the response-phase chain too.

Each is presented to interceptors as a tool-result-shaped payload, so a mutator written for tool results
redacts them without knowing about channels: the text goes in `content`, anything structured in
`structuredContent.data`, and `_meta["io.mcp-interceptors/channel"]` says which channel it is. The chain runs
with the event of the operation in flight, phase response, direction sending. A block turns an error into
a generic -32603 and drops a notification (logged without content).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp.shared.exceptions import MCPError

from interceptors import INTERNAL_ERROR, Direction, InvocationContext, Phase
from interceptors_chain import Chain

logger = logging.getLogger("interceptors.gateway")

CHANNEL_META_KEY = "io.mcp-interceptors/channel"
BLOCKED_MESSAGE = "blocked by interceptor"

Channel = Literal["error", "progress", "log"]


def _payload(channel: Channel, text: str | None, data: Any = None, *, structured: bool = False) -> dict[str, Any]:
    payload: dict[str, Any] = {"content": [] if text is None else [{"type": "text", "text": text}]}
    if structured:
        payload["structuredContent"] = {"data": data}
    if channel == "error":
        payload["isError"] = True
    payload["_meta"] = {CHANNEL_META_KEY: channel}
    return payload


def error_payload(message: str, data: Any) -> dict[str, Any]:
    """An upstream error as a result: the message is the text, `data` (when present) is structured."""
    return _payload("error", message, data, structured=data is not None)


def progress_payload(message: str | None) -> dict[str, Any]:
    """A progress notification as a result: only the message is content; the numbers never reach the chain."""
    return _payload("progress", message)


def log_payload(data: Any, logger_name: str | None = None) -> dict[str, Any]:
    """A log message as a result: string data is text, anything else is `structuredContent.data`; the logger's
    name (a server may put anything there) rides in `_meta.logger`, scanned like the rest."""
    payload = _payload("log", data) if isinstance(data, str) else _payload("log", None, data, structured=True)
    if logger_name is not None:
        payload["_meta"]["logger"] = logger_name
    return payload


def log_logger_from_payload(payload: Any, original: str | None) -> str | None:
    if original is None or not isinstance(payload, dict):
        return original
    meta = payload.get("_meta")
    name = meta.get("logger") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else "[REDACTED:content]"


class MalformedChannelPayload(ValueError):
    """A mutator returned something that is no longer result-shaped; the channel fails closed."""


def _text_of(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        raise MalformedChannelPayload("the payload is not an object")
    content = payload.get("content")
    if not isinstance(content, list):
        raise MalformedChannelPayload("content is not an array")
    texts = [block["text"] for block in content if isinstance(block, dict) and block.get("type") == "text"]
    if not all(isinstance(text, str) for text in texts):
        raise MalformedChannelPayload("a text block has no string text")
    return "\n".join(texts) if texts else None


def _data_of(payload: dict[str, Any]) -> Any:
    structured = payload.get("structuredContent")
    if structured is None:
        return None
    if not isinstance(structured, dict):
        raise MalformedChannelPayload("structuredContent is not an object")
    return structured.get("data")


def error_from_payload(payload: Any, code: int) -> MCPError:
    """The (possibly mutated) payload back as the error, keeping the upstream's code."""
    message = _text_of(payload)
    return MCPError(code, message or "", _data_of(payload))


def progress_message_from_payload(payload: Any) -> str | None:
    return _text_of(payload)


def log_data_from_payload(payload: Any, original: Any) -> Any:
    """Text back to a string when the original was one; otherwise the structured data."""
    text = _text_of(payload)
    if isinstance(original, str):
        return text or ""
    return _data_of(payload)


@dataclass(frozen=True, slots=True)
class ChannelVerdict:
    """What the chain made of one channel payload: `payload` is None when it was blocked."""

    payload: Any
    blocked_by: str | None = None

    @property
    def blocked(self) -> bool:
        return self.blocked_by is not None


async def run_channel(
    chain: Chain, events: Sequence[str], payload: Any, context: InvocationContext | None
) -> ChannelVerdict:
    """Run the response-phase (sending) chain of each event in turn; the first block stops the payload.

    A failure of the chain itself counts as a block: these channels fail closed.
    """
    current = payload
    for event in events:
        if chain.plan(event, Phase.RESPONSE, Direction.SENDING).empty:
            continue
        try:
            outcome = await chain.execute(event, Phase.RESPONSE, current, direction=Direction.SENDING, context=context)
        except Exception as exc:
            logger.warning("the chain failed on a channel payload of %s: %s", event, type(exc).__name__)
            return ChannelVerdict(None, "chain failure")
        if outcome.blocked:
            first = outcome.aborted_at[0] if outcome.aborted_at else None
            return ChannelVerdict(None, first.interceptor if first is not None else "unknown")
        if outcome.modified:
            current = outcome.final_payload
    return ChannelVerdict(current)


def has_work(chain: Chain, events: Sequence[str]) -> bool:
    """Whether any of the events has a response-phase plan (otherwise channels pass untouched)."""
    return any(not chain.plan(event, Phase.RESPONSE, Direction.SENDING).empty for event in events)


async def filter_error(chain: Chain, event: str, error: MCPError, context: InvocationContext | None) -> MCPError:
    """The upstream error after the chain: mutated message/data with the original code, or a generic -32603."""
    if not has_work(chain, (event,)):
        return error
    verdict = await run_channel(chain, (event,), error_payload(error.error.message, error.error.data), context)
    if verdict.blocked:
        logger.warning("replaced an error response of %s: blocked by %s", event, verdict.blocked_by)
        return MCPError(INTERNAL_ERROR, BLOCKED_MESSAGE)
    try:
        return error_from_payload(verdict.payload, error.error.code)
    except MalformedChannelPayload as exc:
        logger.warning("replaced an error response of %s: %s", event, exc)
        return MCPError(INTERNAL_ERROR, BLOCKED_MESSAGE)


async def filter_progress(
    chain: Chain, event: str, message: str | None, context: InvocationContext | None
) -> tuple[bool, str | None]:
    """(deliver, message) for one progress notification; a block or a malformed payload drops it."""
    if not has_work(chain, (event,)):
        return True, message
    verdict = await run_channel(chain, (event,), progress_payload(message), context)
    if verdict.blocked:
        logger.warning("dropped a progress notification of %s: blocked by %s", event, verdict.blocked_by)
        return False, None
    try:
        return True, progress_message_from_payload(verdict.payload)
    except MalformedChannelPayload as exc:
        logger.warning("dropped a progress notification of %s: %s", event, exc)
        return False, None


async def filter_log(
    chain: Chain, events: Sequence[str], data: Any, context: InvocationContext | None
) -> tuple[bool, Any]:
    """(deliver, data) for one log message, judged by every operation it may belong to."""
    deliver, new_data, _ = await filter_log_message(chain, events, data, None, context)
    return deliver, new_data


async def filter_log_message(
    chain: Chain, events: Sequence[str], data: Any, logger_name: str | None, context: InvocationContext | None
) -> tuple[bool, Any, str | None]:
    """(deliver, data, logger) for one log message: its data and its logger's name both pass the chain."""
    if not has_work(chain, events):
        return True, data, logger_name
    verdict = await run_channel(chain, events, log_payload(data, logger_name), context)
    if verdict.blocked:
        logger.warning("dropped a log message of %s: blocked by %s", ", ".join(events), verdict.blocked_by)
        return False, None, None
    try:
        return True, log_data_from_payload(verdict.payload, data), log_logger_from_payload(verdict.payload, logger_name)
    except MalformedChannelPayload as exc:
        logger.warning("dropped a log message of %s: %s", ", ".join(events), exc)
        return False, None, None
