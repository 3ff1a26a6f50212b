"""The stdio server's read side (`interceptors_server/stdio.py` `_Lines`) over a real pipe: what the SDK has not
taken yet is bounded (reading pauses, then resumes), lines split across reads arrive whole, and the reader's
own replies (refusals) leave as soon as their read is handled."""

from __future__ import annotations

import asyncio
import os

import orjson
import pytest

from interceptors_server.stdio import _Lines, _Writer

pytestmark = pytest.mark.anyio


async def _wire(max_line_bytes: int) -> tuple[_Lines, asyncio.ReadTransport, int, int, asyncio.WriteTransport]:
    """(lines, their transport, the fd the test writes requests to, the fd replies come out of, reply transport)."""
    loop = asyncio.get_running_loop()
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_write, "wb", buffering=0)
    )
    writer = _Writer(asyncio.StreamWriter(transport, protocol, None, loop), loop)
    lines = _Lines(loop, writer, None, max_line_bytes)
    read_transport, _ = await loop.connect_read_pipe(lambda: lines, os.fdopen(in_read, "rb", buffering=0))
    return lines, read_transport, in_write, out_read, transport  # type: ignore[return-value]


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _ping(n: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}) + b"\n"


async def test_reading_pauses_past_twice_the_line_bound_and_resumes_as_the_sdk_takes_lines() -> None:
    lines, transport, requests, replies, reply_transport = await _wire(max_line_bytes=100)
    try:
        os.write(requests, b"".join(_ping(n) for n in range(20)))  # ~40 bytes each: ~800 queued, bound 200
        await _settle()
        assert not transport.is_reading(), "the SDK's backlog is over twice the bound: reading must pause"
        taken = [orjson.loads(await lines.__anext__())["id"] for _ in range(20)]
        assert taken == list(range(20)), "every line, in order"
        assert transport.is_reading(), "the backlog is gone: reading resumes"
        os.write(requests, _ping(99)[:10])
        await _settle()
        os.write(requests, _ping(99)[10:])  # one line in two reads
        assert orjson.loads(await asyncio.wait_for(lines.__anext__(), 10))["id"] == 99
    finally:
        transport.close()
        reply_transport.close()
        os.close(requests)
        os.close(replies)


async def test_a_refused_line_is_answered_at_once_and_the_end_of_input_ends_the_lines() -> None:
    lines, transport, requests, replies, reply_transport = await _wire(max_line_bytes=1000)
    try:
        os.write(requests, b'{"jsonrpc": "2.0", "id": 7, "method": 5}\n' + _ping(8)[:-1])  # the last: no newline
        await _settle()
        reply = orjson.loads(os.read(replies, 4096))
        assert reply["id"] == 7 and reply["error"]["code"] == -32600
        os.close(requests)
        requests = -1
        assert orjson.loads(await asyncio.wait_for(lines.__anext__(), 10))["id"] == 8, "a last line without newline"
        try:
            await asyncio.wait_for(lines.__anext__(), 10)
        except StopAsyncIteration:
            pass
        else:
            raise AssertionError("the lines must end with the input")
    finally:
        transport.close()
        reply_transport.close()
        if requests >= 0:
            os.close(requests)
        os.close(replies)
