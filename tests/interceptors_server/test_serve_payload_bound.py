"""The stdio lane's size shortcut changes nothing on the wire: an invoke whose line bounds its payload's size
(`codec.written_size_bound`) gets, byte for byte but for `durationMs`, the reply it gets when the host writes the
payload again to measure it (the general path, taken here by switching the bound off)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.codec import written_size_bound
from interceptors_server import express, host_of
from interceptors_server.express import express_lane_for
from interceptors_server.serving import build_server
from interceptors_server.stdio import _Lines
from tests.interceptors.test_codec_bounds import SPACE, TEXT
from tests.servers.express_host import registry

DURATION = re.compile(rb'"durationMs":[-+0-9.eE]+')
OPENING = [
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},'
    b'"clientInfo":{"name":"bound-test","version":"0"}}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
]


class _Wire:
    """The reader's writer, keeping what it is given: the lines the reader and the lane answer."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def put(self, data: bytes) -> None:
        self.sent.append(data)

    def release(self) -> None:
        pass

    async def write_bytes(self, data: bytes) -> None:
        self.sent.append(data)


@contextmanager
def _general_path() -> Iterator[None]:
    """The lane without the bound: the host writes every payload again to learn its size."""
    bound = express.written_size_bound
    express.written_size_bound = lambda data: None  # type: ignore[assignment]
    try:
        yield
    finally:
        express.written_size_bound = bound


def _replies(lines: list[bytes], max_payload_bytes: int | None) -> tuple[list[bytes], list[str]]:
    """(what the reader and the lane answered, durations masked; the lines left for the SDK)."""
    server = build_server([registry], name="bound-test")
    host = host_of(server)
    assert host is not None
    host.max_payload_bytes = max_payload_bytes
    wire = _Wire()
    lane = express_lane_for(server, wire.write_bytes, wire.put)
    assert lane is not None
    loop = asyncio.new_event_loop()
    try:
        reader = _Lines(loop, wire, lane, 1 << 20)  # type: ignore[arg-type]
        for line in OPENING:
            reader.data_received(line)
        opened = len(reader._queue)
        for line in lines:
            reader.data_received(line)
    finally:
        loop.close()
    return [DURATION.sub(b'"durationMs":0', sent) for sent in wire.sent], list(reader._queue)[opened:]


def _invoke_line(request_id: int, name: str, payload: str, space: str) -> bytes:
    named = orjson.dumps(name).decode()
    params = f'{{"name":{named},"event":"tools/call","phase":"request",{space}"payload":{payload}}}'
    return f'{{"jsonrpc":"2.0","id":{request_id},"method":"interceptor/invoke","params":{params}}}\n'.encode()


NAMES = st.sampled_from(["express/allow", "express/deny", "express/upper", "express/raise", "nope"])
DEPTH = st.sampled_from([0, 0, 0, 3, 254, 255, 260])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(NAMES, TEXT, SPACE, DEPTH), min_size=1, max_size=4),
    st.sampled_from([None, 40, 300, 4 * 1024 * 1024]),
)
@example([("express/allow", "[]", "", 0), ("express/allow", "true", "", 254)], None)  # a reply too deep to write
def test_every_invoke_gets_the_reply_of_the_general_path(
    invokes: list[tuple[str, str, str, int]], max_payload_bytes: int | None
) -> None:
    lines = [
        _invoke_line(index + 1, name, "[" * depth + payload + "]" * depth, space)
        for index, (name, payload, space, depth) in enumerate(invokes)
    ]
    fast = _replies(lines, max_payload_bytes)
    with _general_path():
        general = _replies(lines, max_payload_bytes)
    assert fast == general


def test_the_cases_that_matter_are_answered_as_the_general_path_answers_them() -> None:
    """Named cases: a float that grows when written, a payload over a small host limit, one nested deeper than
    orjson writes (refused as not encodable), one beyond 64 bits (left to the SDK), and plain ones."""
    deep = "[" * 300 + "1" + "]" * 300
    cases: list[tuple[str, Any]] = [
        ("express/allow", '{"n": 1e15}'),
        ("express/allow", "[1e5,1e5,1e5,1e5,1e5,1e5,1e5,1e5,1e5,1e5]"),
        ("express/upper", '{"name": "echo", "arguments": {"text": "\\u00e9\\ud83d\\ude00"}}'),
        ("express/allow", deep),
        ("express/allow", "18446744073709551616"),
        ("express/deny", '"x"'),
    ]
    lines = [_invoke_line(index + 1, name, payload, "") for index, (name, payload) in enumerate(cases)]
    for limit in (None, 20, 40, 100):
        fast = _replies(lines, limit)
        with _general_path():
            assert fast == _replies(lines, limit)
    answered, left = _replies(lines, None)
    assert len(answered) == len(cases) - 1 and len(left) == 1  # (the 64-bit one: the SDK's)
    assert b"cannot be encoded" in answered[3]
    refused = _replies(lines[:2], 20)[0]  # (written: 24 and 89 bytes, from texts of 11 and 39)
    assert all(b"exceeds the host's maximum size" in reply for reply in refused)


def test_a_result_too_deep_to_write_is_an_error_reply() -> None:
    """A payload orjson can write (254 levels) passed back inside the reply's envelope is deeper than it writes:
    the client gets an error naming why, and the lane answers the next invoke."""
    deep = "[" * 254 + "true" + "]" * 254
    lines = [_invoke_line(1, "express/allow", deep, ""), _invoke_line(2, "express/allow", "[]", "")]
    answered, left = _replies(lines, None)
    assert not left and len(answered) == 2
    error = orjson.loads(answered[0])
    assert error["id"] == 1 and error["error"]["data"] == {"reason": "nested too deeply"}
    assert orjson.loads(answered[1])["id"] == 2 and "result" in orjson.loads(answered[1])


def test_the_bound_is_taken_for_a_small_line() -> None:
    """The shortcut is really taken: the bound of an ordinary invoke line is within every default limit."""
    line = _invoke_line(1, "express/allow", '{"name": "echo", "arguments": {"text": "hi"}}', "")
    bound = written_size_bound(line)
    assert bound is not None and bound <= 64 * 1024
