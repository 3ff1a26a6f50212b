"""The upstream hop's HTTP/1.1 client (`integrations/gateway/http_wire.py`) against raw asyncio servers in this
process: body framings, persistent connections, a connection the server closed while idle, 1xx responses,
malformed responses; and its SSE parser against httpx2's (a reference implementation of the same standard)
on any split of the bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import orjson
import pytest
from httpx2._sse import _SSEParser
from hypothesis import example, given
from hypothesis import strategies as st

from integrations.gateway.http_wire import (
    ConnectFailed,
    EventTooLarge,
    Pool,
    ProtocolFailure,
    SseParser,
    StaleConnection,
    WireTimeout,
)

WAIT_S = 10.0

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server running `handler` per connection; yields its URL and a count of connections."""
    connections: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp?x=1", connections
    finally:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


def _answers(*responses: bytes) -> Handler:
    """Answer the requests of each connection with `responses` in turn, then keep the connection open."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for response in responses:
            await read_request(reader)
            writer.write(response)
            await writer.drain()
        await reader.read()

    return handler


pytestmark = pytest.mark.anyio


async def test_every_body_framing_is_read_whole_and_the_connection_is_kept_for_the_next_request() -> None:
    responses = [
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nx-trailer: 1\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ]
    async with raw_server(_answers(*responses)) as (url, connections):
        pool = Pool(url, [("x-static", "1")])
        try:
            with anyio.fail_after(WAIT_S):
                bodies = []
                for _ in responses:
                    response = await pool.request("POST", {"content-type": "application/json"}, b"{}")
                    bodies.append((response.status, await response.read(1 << 20)))
                    await response.aclose()
            assert bodies == [(200, b"hello"), (200, b"abcde"), (202, b""), (204, b"")]
            assert len(connections) == 1  # one persistent connection for all four
        finally:
            await pool.aclose()


async def test_a_close_delimited_body_ends_with_the_connection_and_a_new_one_serves_the_next() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")
        await writer.drain()

    async with raw_server(handler) as (url, connections):
        pool = Pool(url)
        try:
            with anyio.fail_after(WAIT_S):
                for _ in range(2):
                    response = await pool.request("POST", {}, b"{}")
                    assert await response.read(1 << 20) == b"until the end"
                    await response.aclose()
            assert len(connections) == 2
        finally:
            await pool.aclose()


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()  # and the keep-alive ends at once: the connection closes

    async with raw_server(handler) as (url, connections):
        pool = Pool(url)
        try:
            with anyio.fail_after(WAIT_S):
                first = await pool.request("POST", {}, b"{}")
                assert await first.read(10) == b"ok"
                await first.aclose()
                while len(connections) < 1 or not pool._idle or pool._idle[0].usable():
                    await asyncio.sleep(0.01)  # the server's FIN has reached the pooled connection
                second = await pool.request("POST", {}, b"{}")
                assert await second.read(10) == b"ok"
                await second.aclose()
            assert len(connections) == 2
        finally:
            await pool.aclose()


async def test_a_reused_connection_that_closes_before_any_reply_is_reported_stale() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        await read_request(reader)  # the second request is read, then the connection closes unanswered

    async with raw_server(handler) as (url, _):
        pool = Pool(url)
        try:
            with anyio.fail_after(WAIT_S):
                first = await pool.request("POST", {}, b"{}")
                await first.read(10)
                await first.aclose()
                with pytest.raises(StaleConnection):
                    await pool.request("POST", {}, b"{}")
        finally:
            await pool.aclose()


async def test_malformed_responses_refused_connections_and_a_silent_server_are_clear_errors() -> None:
    cases = [
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
    ]
    for case in cases:

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, case: bytes = case) -> None:
            await read_request(reader)
            writer.write(case)
            await writer.drain()

        async with raw_server(handler) as (url, _):
            pool = Pool(url)
            try:
                with anyio.fail_after(WAIT_S), pytest.raises(ProtocolFailure):
                    response = await pool.request("POST", {}, b"{}")
                    await response.read(1 << 20)
            finally:
                await pool.aclose()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with raw_server(silent) as (url, _):
        pool = Pool(url)
        try:
            with anyio.fail_after(WAIT_S), pytest.raises(WireTimeout):
                await pool.request("POST", {}, b"{}", timeout=0.2)
        finally:
            await pool.aclose()
    async with raw_server(silent) as (url, _):
        pass  # closed: nothing listens on its port any more
    pool = Pool(url)
    with anyio.fail_after(WAIT_S), pytest.raises(ConnectFailed):
        await pool.request("POST", {}, b"{}")


async def test_sse_events_come_as_they_are_written() -> None:
    """An event is handed on when its blank line arrives, not when the response ends."""
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        event = b'data: {"n":1}\n\n'
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
        await release.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with raw_server(handler) as (url, _):
        pool = Pool(url)
        try:
            with anyio.fail_after(WAIT_S):
                response = await pool.request("POST", {}, b"{}")
                events = response.events(1 << 20)
                first = await events.__anext__()
                assert first.data == b'{"n":1}'
                release.set()
                assert [event async for event in events] == []
                await response.aclose()
        finally:
            await pool.aclose()


def _reference(text: str) -> list[tuple[str, str, str, int | None]]:
    parser = _SSEParser()
    events = [*parser.decode(text), *parser.flush()]
    return [(e.event, e.data, e.id, e.retry) for e in events]


def _ours(data: bytes, cuts: list[int], max_event: int = 1 << 20) -> list[tuple[str, str, str, int | None]]:
    parser = SseParser(max_event)
    events = []
    start = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        events += parser.feed(data[start:cut]) if cut > start else []
        start = max(start, cut)
    events += parser.feed(data[start:])
    events += parser.close()
    return [(e.event, e.data.decode(), e.id, e.retry) for e in events]


_LINE = st.one_of(
    st.builds(lambda v: f"data: {v}", st.text('ab{}": é', max_size=8)),
    st.builds(lambda v: f"data:{v}", st.text("ab ", max_size=4)),
    st.sampled_from(
        [
            "",
            "",
            ": a comment",
            "event: message",
            "event: other",
            "id: 7",
            "id: a\0b",
            "retry: 100",
            "retry: x",
            "garbage",
            "data",
            "unknown: field",
        ]
    ),
)


@given(
    lines=st.lists(_LINE, max_size=12),
    ending=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(0, 400), max_size=5),
)
@example(lines=["data: a", ""], ending="\r\n", cuts=[8])  # a CRLF split between its CR and its LF
@example(lines=["data: a", ""], ending="\r", cuts=[])  # lone CRs end lines too
@example(lines=["data: "], ending="\r", cuts=[])  # the stream's last CR ends its line
def test_the_sse_parser_agrees_with_the_reference_on_any_split(lines: list[str], ending: str, cuts: list[int]) -> None:
    text = ending.join(lines) + ending + ending
    assert _ours(text.encode(), cuts) == _reference(text)


def test_an_event_or_a_line_over_the_bound_is_refused_whatever_the_split() -> None:
    with pytest.raises(EventTooLarge):
        _ours(b"data: " + b"x" * 100 + b"\n\n", [], max_event=50)
    with pytest.raises(EventTooLarge):  # a line that never ends is bounded too
        _ours(b"data: " + b"x" * 100, [10, 20, 60], max_event=50)
    with pytest.raises(EventTooLarge):  # many small data lines of one event
        _ours(b"data: xxxxxxxxxx\n" * 10 + b"\n", [], max_event=50)


async def test_the_upstream_resends_only_safe_requests_on_a_connection_the_server_closed_unanswered() -> None:
    """Each connection answers its first request and closes on its second unanswered (as a server whose keep-alive
    ends as a request arrives): a `tools/list` is sent again on a new connection and answered; a `tools/call`
    (it may act) is answered with an error instead, never sent twice."""
    from integrations.gateway.upstream_http import HttpUpstream

    seen: list[str] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, body = await read_request(reader)
        message = orjson.loads(body)
        seen.append(message["method"])
        reply = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"n": len(seen)}})
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(reply))
        writer.write(reply)
        await writer.drain()
        _, body = await read_request(reader)
        seen.append(orjson.loads(body)["method"] + " (dropped)")

    async with raw_server(handler) as (url, connections):
        upstream = await HttpUpstream.start(url)
        try:
            replies = upstream.lines()
            with anyio.fail_after(WAIT_S):
                for request_id, method in ((1, "tools/list"), (2, "tools/list"), (3, "tools/call")):
                    upstream.send(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method}), request_id)
                    item = await replies.__anext__()
                    assert isinstance(item, tuple) and item[1] == request_id
                    answer = orjson.loads(item[0])
                    if method == "tools/list":
                        assert "result" in answer
                    else:
                        assert answer["error"]["data"]["connectionClosed"] is True
            assert seen == ["tools/list", "tools/list (dropped)", "tools/list", "tools/call (dropped)"]
            assert len(connections) == 2
        finally:
            await upstream.aclose()
