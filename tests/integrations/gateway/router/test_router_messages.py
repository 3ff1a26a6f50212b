"""Parsing once: every well-formed shape classified, every malformed one a standard error with its id."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interceptors.protocol.messages import MAX_DEPTH, Kind, parse

DEEP = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + "[" * 2000 + "]" * 2000 + "}"
SHALLOW_TOO_DEEP = '{"jsonrpc":"2.0","id":8,"method":"x","params":{"a":' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}}"

WELL_FORMED = [
    ('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', Kind.REQUEST, 1, "tools/list"),
    ('{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}', Kind.REQUEST, "a", "ping"),
    ('{"jsonrpc":"2.0","method":"notifications/initialized"}', Kind.NOTIFICATION, None, "notifications/initialized"),
    ('{"jsonrpc":"2.0","id":2,"result":{}}', Kind.RESPONSE, 2, None),
    ('{"jsonrpc":"2.0","id":3,"error":{"code":-32002,"message":"nope","data":{"uri":"x"}}}', Kind.ERROR, 3, None),
    ('{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}', Kind.REQUEST, 2**64 - 1, "ping"),
]


@pytest.mark.parametrize(("raw", "kind", "request_id", "method"), WELL_FORMED)
def test_well_formed_messages_are_classified(raw: str, kind: Kind, request_id: object, method: str | None) -> None:
    message = parse(raw.encode())
    assert (message.kind, message.id, message.method) == (kind, request_id, method)


MALFORMED = [
    # raw, code, recovered id, a word of the reason
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{', -32700, 5, "end of data"),
    (b'{"jsonrpc":"2.0","id":"k","method":"tools/call","params":{"name":"\xff"}}', -32700, "k", "UTF-8"),
    (rb'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"\ud800"}}', -32602, 9, "surrogate"),
    (b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"n":123456789012345678901234567890}}', -32602, 4, "64"),
    (
        b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}',
        -32600,
        123456789012345678901234567890,
        "64",
    ),
    (DEEP.encode(), -32600, 7, "deeper"),
    (SHALLOW_TOO_DEEP.encode(), -32600, 8, "deeper"),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, None, "batch"),
    (b'{"id":1,"method":"ping"}', -32600, 1, "jsonrpc"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', -32602, 1, "object"),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, None, "id"),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, None, "id"),
    (b'{"jsonrpc":"2.0","id":1,"method":""}', -32600, 1, "method"),
    (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}', -32600, 1, "one of"),
    (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"x"}}', -32600, 1, "integer code"),
    (b"not json at all", -32700, None, ""),
    (b'{"jsonrpc":"2.0","method":"x","params":{"s":"\\"id\\": 3"},"id":"real"', -32700, "real", ""),
]


@pytest.mark.parametrize(("raw", "code", "request_id", "reason"), MALFORMED)
def test_malformed_input_is_an_invalid_message_with_its_id(
    raw: bytes, code: int, request_id: object, reason: str
) -> None:
    message = parse(raw)
    assert message.kind is Kind.INVALID
    assert message.problem is not None
    assert message.problem.code == code
    assert message.id == request_id
    assert reason in json.dumps(message.problem.data)
    assert message.expects_answer


def test_surrogate_path_names_the_field() -> None:
    message = parse(rb'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\ud800"}}')
    assert message.problem is not None and message.problem.data["path"] == "params.name"


def test_era_hints_and_progress_token() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "progressToken": "t"}
    message = parse(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": meta}}))
    assert message.protocol_version == "2026-07-28"
    assert message.progress_token == "t"
    assert parse(b'{"jsonrpc":"2.0","id":1,"method":"ping"}').protocol_version is None


@given(
    prefix=st.sampled_from(
        [b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"', b'{"jsonrpc":"2.0","id":', b""]
    ),
    middle=st.binary(max_size=40),
)
def test_bytes_that_are_not_utf8_are_named_at_their_first_bad_byte_and_nothing_raises(
    prefix: bytes, middle: bytes
) -> None:
    """orjson checks the UTF-8 itself (the text is decoded only on error paths): whatever it refuses for its
    encoding is still told as `invalid UTF-8 at byte N`, N where Python's decoder stops."""
    raw = prefix + middle + b'"}}'
    message = parse(raw)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        assert message.kind is Kind.INVALID and message.problem is not None
        assert message.problem.code == -32700
        assert message.problem.data["reason"] == f"invalid UTF-8 at byte {exc.start}"
