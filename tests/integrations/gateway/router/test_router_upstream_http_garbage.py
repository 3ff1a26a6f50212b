"""`proxy --upstream URL` in front of an HTTP upstream that writes garbage: a raw MCP server in this test's
process (asyncio, no SDK: it must be able to misbehave), the gateway a subprocess, the SDK client on stdio.

Garbage lines before a reply (in a JSON body, in one event's data, as events of their own) are skipped and the
reply arrives; a reply that never comes (only garbage, then the stream or body ends) is answered with an error
at once. The gateway runs with `--upstream-timeout 600`: every answer here comes long before that clock, which
is the point (an answer that waited for it would trip the test's `fail_after`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.integrations.gateway.router.test_router_upstream_http import gateway_argv
from tests.integrations.gateway.test_gateway import STEP_S, GatewayProcess, assert_no_zombies, text_of
from tests.integrations.gateway.test_http_wire import read_request

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WAIT_S = 20.0  # a bound on a hang; the gateway's own request clock is 600 s
GARBAGE = b"garbage one\ngarbage {two"
TOOLS = ["json-garbage", "sse-garbage-lines", "sse-garbage-events", "sse-only-garbage", "json-only-garbage"]


def _result(request_id: Any, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def _http(status: str, content_type: str, body: bytes, extra: bytes = b"") -> bytes:
    head = b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n" % (
        status.encode(),
        content_type.encode(),
        len(body),
    )
    return head + extra + b"\r\n" + body


def _reply(message: dict[str, Any]) -> bytes:
    """The raw upstream's answer to one POSTed message."""
    method, request_id = message.get("method"), message.get("id")
    if request_id is None or method is None:  # a notification or a reply
        return b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "garbage", "version": "1"},
        }
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
        return _http("200 OK", "application/json", body, b"mcp-session-id: s1\r\n")
    if method == "tools/list":
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}}).encode()
        return _http("200 OK", "application/json", body)
    if method != "tools/call":
        error = {"code": -32601, "message": "Method not found"}
        return _http(
            "200 OK", "application/json", json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
        )
    name = message["params"]["name"]
    reply = _result(request_id, name)
    if name == "json-garbage":
        return _http("200 OK", "application/json", GARBAGE + b"\n" + reply)
    if name == "json-only-garbage":
        return _http("200 OK", "application/json", GARBAGE)
    if name == "sse-garbage-lines":  # one event: two garbage data lines, then the reply
        data = b"".join(b"data: " + line + b"\n" for line in [*GARBAGE.split(b"\n"), reply])
        return _http("200 OK", "text/event-stream", data + b"\n")
    if name == "sse-garbage-events":
        events = b"".join(b"data: " + line + b"\n\n" for line in [*GARBAGE.split(b"\n"), reply])
        return _http("200 OK", "text/event-stream", events)
    events = b"".join(b"data: " + line + b"\n\n" for line in GARBAGE.split(b"\n"))  # and no reply
    return _http("200 OK", "text/event-stream", events)


@asynccontextmanager
async def garbage_upstream() -> AsyncIterator[str]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head, body = await read_request(reader)
                if head.startswith(b"GET"):
                    writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                elif head.startswith(b"DELETE"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                else:
                    writer.write(_reply(json.loads(body)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    finally:
        server.close()
        await server.wait_closed()


async def test_garbage_from_an_http_upstream_never_delays_a_reply_or_leaves_a_request_unanswered() -> None:
    async with garbage_upstream() as url:
        gateway = GatewayProcess(gateway_argv(url, "--upstream-timeout", "600"))
        async with (
            gateway.running(),
            Client(gateway.transport(), mode="legacy", read_timeout_seconds=STEP_S) as client,
        ):
            for name in ("json-garbage", "sse-garbage-lines", "sse-garbage-events"):
                with anyio.fail_after(WAIT_S):
                    assert text_of(await client.call_tool(name, {})) == name
            for name in ("sse-only-garbage", "json-only-garbage"):
                with anyio.fail_after(WAIT_S), pytest.raises(MCPError) as failed:
                    await client.call_tool(name, {})
                assert failed.value.error.code == -32603
            with anyio.fail_after(WAIT_S):  # and the session goes on
                assert text_of(await client.call_tool("json-garbage", {})) == "json-garbage"
        logged = "".join(gateway.stderr)
        assert "line(s) that are not JSON" in logged and "garbage one" not in logged  # counted, never echoed
    assert_no_zombies()
