"""Parse one JSON-RPC message once into a classified `Message`; malformed input becomes an `INVALID` one.

The one definition of JSON-RPC classification, id recovery and the error object, read by every edge: the
gateway's router and fronts, the interceptor server's stdio transport and the chain's stdio pipe.

Why here, once: every later step (routing, the chain, the reply) reads the same decoded object, and every
way a line can be wrong (not UTF-8, not JSON, a lone surrogate, an integer beyond 64 bits, nesting past the
bound, not a JSON-RPC shape) is named in one place, with the request id recovered whenever the text holds
one, so the sender always gets exactly one standard error instead of silence.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import orjson

from .._fastinit import fast_init
from ..codec import dumps_exact, may_round_numbers
from ..errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, error_object
from .framing import HEAD_BYTES

PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_META_KEY: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_META_KEY: Final = "io.modelcontextprotocol/logLevel"
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"

__all__ = [
    "BATCH_REASON",
    "BATCH_REASON_2025_03_26",
    "CLIENT_CAPABILITIES_META_KEY",
    "CLIENT_INFO_META_KEY",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LOG_LEVEL_META_KEY",
    "MAX_DEPTH",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PROTOCOL_VERSION_META_KEY",
    "SERVER_INFO_META_KEY",
    "Kind",
    "Message",
    "Problem",
    "RequestId",
    "classify",
    "error_line",
    "error_message",
    "error_object",
    "is_request",
    "parse",
    "recover_id",
]

BATCH_REASON: Final = "a message must be an object, not a batch (array): MCP has no batches since 2025-06-18"
BATCH_REASON_2025_03_26: Final = (
    "a batch (array): this gateway takes one message at a time (batches are optional at 2025-03-26)"
)
"""A batch is refused with one error, whatever it holds: its wording follows the session's version."""

MAX_DEPTH: Final = 100
"""Deepest nesting of objects and arrays a message may have (the tool schemas seen in the wild stay under 30)."""

_INT_MIN: Final = -(2**63)
_UINT_MAX: Final = 2**64 - 1

RequestId = int | str


class Kind(StrEnum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    ERROR = "error"
    INVALID = "invalid"


@fast_init
@dataclass(frozen=True, slots=True)
class Problem:
    """Why a message is invalid, as the JSON-RPC error its sender should get (when it sent a request)."""

    code: int
    message: str
    data: dict[str, Any]


@fast_init
@dataclass(frozen=True, slots=True)
class Message:
    """One decoded JSON-RPC message. `body` is the decoded object (None when it never decoded)."""

    kind: Kind
    body: dict[str, Any] | None = None
    method: str | None = None
    id: RequestId | None = None
    problem: Problem | None = None

    @property
    def params(self) -> dict[str, Any] | None:
        params = self.body.get("params") if self.body is not None else None
        return params if isinstance(params, dict) else None

    @property
    def meta(self) -> dict[str, Any] | None:
        params = self.params
        meta = params.get("_meta") if params is not None else None
        return meta if isinstance(meta, dict) else None

    @property
    def result(self) -> dict[str, Any]:
        assert self.body is not None and self.kind is Kind.RESPONSE
        result: dict[str, Any] = self.body["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert self.body is not None and self.kind is Kind.ERROR
        error: dict[str, Any] = self.body["error"]
        return error

    @property
    def protocol_version(self) -> str | None:
        """The 2026-07-28 per-request envelope's version, when the request carries one (its era hint)."""
        meta = self.meta
        version = meta.get(PROTOCOL_VERSION_META_KEY) if meta is not None else None
        return version if isinstance(version, str) else None

    @property
    def progress_token(self) -> RequestId | None:
        meta = self.meta
        token = meta.get("progressToken") if meta is not None else None
        return token if _is_id(token) else None

    @property
    def expects_answer(self) -> bool:
        """A request, or an invalid message whose sender may be waiting (it had an id, or no id could be read)."""
        return self.kind is Kind.REQUEST or (self.kind is Kind.INVALID and self.answer_id_known)

    @property
    def answer_id_known(self) -> bool:
        return self.kind is Kind.INVALID and (self.id is not None or self.method is None)


def _is_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _invalid(code: int, message: str, request_id: RequestId | None, **data: Any) -> Message:
    return Message(Kind.INVALID, id=request_id, problem=Problem(code, message, data))


def parse(raw: bytes | str) -> Message:
    """The classified message in `raw` (one stdio line or one HTTP body, without framing)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    try:
        value = orjson.loads(data)  # checks the UTF-8 itself: the text is decoded only where a path needs it
    except orjson.JSONDecodeError as exc:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as bad:
            scan = _scan(data.decode("utf-8", "replace"))
            return _invalid(PARSE_ERROR, "Parse error", scan.request_id, reason=f"invalid UTF-8 at byte {bad.start}")
        return _unreadable(text, str(exc))
    if may_round_numbers(data):  # orjson reads integers beyond 64 bits as floats: read them exactly
        exact = json.loads(data.decode("utf-8"))  # valid UTF-8: orjson read it
        if (path := _wide_integer_path(exact)) is not None:
            return _invalid(*_code_for(path), _id_of(exact), reason="an integer does not fit in 64 bits", path=path)
        value = exact
    # Deeper than MAX_DEPTH needs more than MAX_DEPTH opening brackets: counted in C, measured only then.
    if data.count(b"{") + data.count(b"[") > MAX_DEPTH and _deeper_than(data, MAX_DEPTH):
        return _invalid(INVALID_REQUEST, "Invalid Request", _id_of(value), reason=f"nested deeper than {MAX_DEPTH}")
    return classify(value)


def recover_id(data: bytes) -> RequestId | None:
    """The id a broken or oversized line carries, read from its first `HEAD_BYTES` only (by the string-aware
    scan when they do not parse), so its request can be answered at once; None when they hold none."""
    return parse(data[:HEAD_BYTES]).id


def error_message(request_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """One serialised JSON-RPC error response (an HTTP body, or a stdio line before its newline)."""
    return dumps_exact({"jsonrpc": "2.0", "id": request_id, "error": error_object(code, message, data)})


def error_line(request_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """One JSON-RPC error response, newline-terminated, as the stdio transports write it."""
    return error_message(request_id, code, message, data) + b"\n"


def _code_for(path: str) -> tuple[int, str]:
    if path.startswith("params"):
        return INVALID_PARAMS, "Invalid params"
    return INVALID_REQUEST, "Invalid Request"


def _unreadable(text: str, reason: str) -> Message:
    """Text orjson refused: too deep, a lone surrogate (valid for the stdlib, not UTF-8), or not JSON."""
    scan = _scan(text)
    if scan.max_depth > MAX_DEPTH:
        return _invalid(INVALID_REQUEST, "Invalid Request", scan.request_id, reason=f"nested deeper than {MAX_DEPTH}")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return _invalid(PARSE_ERROR, "Parse error", scan.request_id, reason=reason.split(":", 1)[0])
    path = _surrogate_path(value)
    if path is not None:
        code, message = _code_for(path)
        return _invalid(code, message, _id_of(value), reason="a string holds a lone surrogate", path=path)
    return _invalid(PARSE_ERROR, "Parse error", _id_of(value), reason=reason.split(":", 1)[0])


def _id_of(value: Any) -> RequestId | None:
    """The id of a decoded message, when it is one that can be written back (no lone surrogate in it)."""
    request_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(request_id, str) and _surrogate_path(request_id) is not None:
        return None
    return request_id if _is_id(request_id) else None


def is_request(value: Any) -> bool:
    """Whether a decoded value is a well-formed request or notification: exactly what `classify` calls `REQUEST`
    or `NOTIFICATION` (a property test holds the two together), decided without building a `Message` (the
    interceptor server's transport asks this of every line)."""
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        return False
    method = value.get("method")
    if not isinstance(method, str) or not method:
        return False
    if "id" in value:
        request_id = value["id"]
        if type(request_id) is not int and type(request_id) is not str and not _is_id(request_id):
            return False  # (the two plain types answered without a call: this runs on every line)
    params = value.get("params")
    return params is None or isinstance(params, dict)


def classify(value: Any) -> Message:
    """A decoded value as a JSON-RPC message (MCP: one object per message, no batches)."""
    if isinstance(value, list):
        return _invalid(INVALID_REQUEST, "Invalid Request", None, reason=BATCH_REASON)
    if not isinstance(value, dict):
        kind = f"a JSON {type(value).__name__}"
        return _invalid(INVALID_REQUEST, "Invalid Request", None, reason=f"a message must be an object, not {kind}")
    raw_id = value.get("id")
    request_id = raw_id if _is_id(raw_id) else None
    method = value.get("method")
    if value.get("jsonrpc") != "2.0":
        return _invalid(INVALID_REQUEST, "Invalid Request", request_id, reason='jsonrpc must be "2.0"')
    if "id" in value and request_id is None:
        return _invalid(INVALID_REQUEST, "Invalid Request", None, reason="id must be a string or an integer")
    if method is not None:
        if not isinstance(method, str) or not method:
            return _invalid(INVALID_REQUEST, "Invalid Request", request_id, reason="method must be a non-empty string")
        params = value.get("params")
        if params is not None and not isinstance(params, dict):
            return Message(
                Kind.INVALID,
                method=method,
                id=request_id,
                problem=Problem(INVALID_PARAMS, "Invalid params", {"reason": "params must be an object"}),
            )
        return Message(Kind.REQUEST if "id" in value else Kind.NOTIFICATION, value, method, request_id)
    if request_id is None:
        return _invalid(INVALID_REQUEST, "Invalid Request", None, reason="neither a request nor a response")
    has_result, has_error = "result" in value, "error" in value
    if has_result == has_error:
        return _invalid(INVALID_REQUEST, "Invalid Request", request_id, reason="a response has one of result or error")
    if has_result:
        if not isinstance(value["result"], dict):
            return _invalid(INVALID_REQUEST, "Invalid Request", request_id, reason="result must be an object")
        return Message(Kind.RESPONSE, value, None, request_id)
    error = value["error"]
    if not (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and not isinstance(error.get("code"), bool)
        and isinstance(error.get("message"), str)
    ):
        return _invalid(
            INVALID_REQUEST, "Invalid Request", request_id, reason="error needs an integer code and a message"
        )
    return Message(Kind.ERROR, value, None, request_id)


def _walk(value: Any) -> Any:
    """(path, value) for every node, iteratively (a deep value never exhausts the stack)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if isinstance(node, dict):
            stack.extend((f"{path}.{key}" if path else str(key), item) for key, item in node.items())
            stack.extend((f"{path}.<key>" if path else "<key>", key) for key in node)
        elif isinstance(node, list):
            stack.extend((f"{path}[{index}]", item) for index, item in enumerate(node))


def _wide_integer_path(value: Any) -> str | None:
    for path, node in _walk(value):
        if isinstance(node, int) and not isinstance(node, bool) and not _INT_MIN <= node <= _UINT_MAX:
            return path or "<message>"
    return None


def _surrogate_path(value: Any) -> str | None:
    for path, node in _walk(value):
        if isinstance(node, str) and any(0xD800 <= ord(char) <= 0xDFFF for char in node):
            return path or "<message>"
    return None


_QUOTED: Final = re.compile(rb'"[^"]*"')
_NOT_STRUCTURE: Final = bytes(byte for byte in range(256) if byte not in b'"[]{}')
_LEAF_PAIR: Final = re.compile(rb"\[\]|\{\}")


def _deeper_than(data: bytes, bound: int) -> bool:
    """Whether valid JSON `data` nests deeper than `bound`, at the speed of C (a walk of a million-element
    result in Python took seconds).

    Escapes go first (an escaped backslash, then an escaped quote), so every quote left delimits a string;
    only quotes and brackets are kept; strings go (an adjacent quote pair holds nothing outside a string,
    so removing it keeps the pairing); then each pass removes the innermost (now empty) containers, one
    level per pass: what is left after `bound` passes nests deeper.
    """
    kept = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    brackets = _QUOTED.sub(b"", kept) if b'"' in kept else kept
    for _ in range(bound):
        if not brackets:
            return False
        brackets = _LEAF_PAIR.sub(b"", brackets)
    return bool(brackets)


@dataclass(frozen=True, slots=True)
class _Scan:
    request_id: RequestId | None
    max_depth: int


def _scan(text: str) -> _Scan:
    """Without parsing: the deepest nesting, and the top-level `"id"` member when its value is readable.

    Strings are skipped whole, so brackets and `"id"` inside them never count; used for text that does
    not parse, so a request that is broken later in its body still gets its own id back.
    """
    depth = max_depth = 0
    request_id: RequestId | None = None
    index, length = 0, len(text)
    last_key: str | None = None
    expect_key = False
    while index < length:
        char = text[index]
        if char == '"':
            end = _string_end(text, index)
            literal = text[index : end + 1]
            index = end + 1
            if depth == 1 and expect_key:
                try:
                    last_key = json.loads(literal)
                except ValueError:
                    last_key = None
                expect_key = False
            elif depth == 1 and last_key == "id" and request_id is None:
                request_id = _literal_id(literal)
                last_key = None
            continue
        if char in "{[":
            depth += 1
            max_depth = max(max_depth, depth)
            expect_key = char == "{" and depth == 1
        elif char in "}]":
            depth -= 1
        elif char == "," and depth == 1:
            expect_key, last_key = True, None
        elif depth == 1 and last_key == "id" and request_id is None and (char == "-" or char.isdigit()):
            end = index
            while end < length and (text[end] == "-" or text[end].isdigit()):
                end += 1
            request_id = _literal_id(text[index:end])
            last_key = None
            index = end
            continue
        index += 1
    return _Scan(request_id, max_depth)


def _string_end(text: str, start: int) -> int:
    index = start + 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == '"':
            return index
        index += 1
    return len(text) - 1


def _literal_id(literal: str) -> RequestId | None:
    try:
        value = json.loads(literal)
    except ValueError:
        return None
    if isinstance(value, str):
        if any(0xD800 <= ord(char) <= 0xDFFF for char in value):
            return None  # an id that could not be written back
        return value
    return value if isinstance(value, int) else None
