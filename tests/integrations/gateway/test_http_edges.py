"""The HTTP front's connection edges (`integrations/gateway/downstream_http.py`): uvicorn serving in this
process on a loopback port with the front's own protocol, raw sockets as clients.

A connection that never sends a request (or half a head) is closed; a request whose head came in time is served
however long its reply takes; a body that stops coming is refused with 408. The timeouts here are short (0.2 s)
and every wait is bounded by a generous `fail_after`: what is asserted is the event (closed, answered), never
how long it took.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from integrations.gateway.downstream_http import HttpServer, listening_socket
from integrations.gateway.http_front import _TIMEOUT, _read_body

pytestmark = pytest.mark.anyio

HEAD_S = 0.2
WAIT_S = 10.0  # 50x the timeouts under test: a bound on a hang, not a measure


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Echo the body back after `?sleep` seconds of thinking (longer than the head timeout); 408 on a stalled body."""
    if scope["type"] != "http":
        return
    body = await _read_body(receive, HEAD_S)
    if body is _TIMEOUT:
        await send({"type": "http.response.start", "status": 408, "headers": [(b"connection", b"close")]})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope.get("query_string") == b"sleep":
        await asyncio.sleep(3 * HEAD_S)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def serving() -> AsyncIterator[int]:
    sock = listening_socket("127.0.0.1", 0)
    server = HttpServer(_app, header_timeout_s=HEAD_S)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def _closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await reader.read(-1)


def _request(body: bytes, target: str = "/") -> bytes:
    return b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: %d\r\n\r\n" % (target.encode(), len(body)) + body


async def test_connections_that_never_send_a_request_head_are_closed() -> None:
    async with serving() as port:
        with anyio.fail_after(WAIT_S):
            silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(150)]
            partial = [await asyncio.open_connection("127.0.0.1", port) for _ in range(50)]
            for _, writer in partial:
                writer.write(b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # a head that never ends
            for reader, writer in [*silent, *partial]:
                assert await _closed(reader) == b""
                writer.close()


async def test_a_request_whose_head_came_in_time_is_served_however_long_it_takes_and_the_next_one_too() -> None:
    async with serving() as port:
        with anyio.fail_after(WAIT_S):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_request(b"slow", "/?sleep"))
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and await reader.readexactly(4) == b"slow"
            writer.write(_request(b"again"))  # the same connection, kept alive
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and await reader.readexactly(5) == b"again"
            # After a response a keep-alive connection that starts a head and stops is closed too.
            writer.write(b"POST / HTTP/1.1\r\n")
            assert await _closed(reader) == b""
            writer.close()


async def test_a_body_that_stops_coming_is_refused_with_408() -> None:
    async with serving() as port:
        with anyio.fail_after(WAIT_S):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 10\r\n\r\nabc")
            answer = await _closed(reader)
            assert answer.startswith(b"HTTP/1.1 408")
            writer.close()
