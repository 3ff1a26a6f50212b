"""The gateway tests' upstream server (tests/servers/upstream_server.py) served over Streamable HTTP.

`python -m tests.servers.http_upstream [--json] [--token T]` binds 127.0.0.1 on an ephemeral port, prints
`PORT <n>` on stdout once uvicorn accepts connections, and serves until terminated. `--json` answers
plain JSON instead of SSE streams; `--token T` refuses (401) every request without `Authorization: Bearer T`;
`--resumable` keeps events in memory and adds the `poll` tool, which ends its own SSE stream at once (the
client must resume it with `Last-Event-ID`), then reports progress and answers.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from typing import Any


class MemoryEventStore:
    """Every event in order, replayed per stream after a given id (the SDK's EventStore interface)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        from mcp.server.streamable_http import EventMessage

        index = next((i for i, event in enumerate(self.events) if event[0] == last_event_id), None)
        if index is None:
            return None
        stream_id = self.events[index][1]
        for event_id, stream, message in self.events[index + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


class PollPriming:
    """Counts `poll` requests received and the SSE streams of those requests that have sent their priming event.

    The SDK sends a stream's priming event (its first event id) from a task of its own; a tool that closes its
    stream before that task ran ends the stream with no id, which no client can resume. `poll` waits for its
    stream's priming event first, so the test sees resumption every time, not only when the scheduler is kind.
    """

    def __init__(self) -> None:
        self.received = 0
        self.primed = 0

    def wrap(self, app: Any) -> Any:
        async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await app(scope, receive, send)
                return
            polling = False

            async def peeked() -> Any:
                nonlocal polling
                message = await receive()
                if message.get("type") == "http.request" and b'"poll"' in message.get("body", b""):
                    polling = True
                    self.received += 1
                return message

            primed = False

            async def sent(message: Any) -> None:
                nonlocal primed
                await send(message)
                body = message.get("body", b"") if message["type"] == "http.response.body" else b""
                if polling and not primed and b"id:" in body:
                    primed = True
                    self.primed += 1

            await app(scope, peeked, sent)

        return counted

    async def wait(self) -> None:
        import anyio

        with anyio.fail_after(10):
            while self.primed < self.received:
                await anyio.sleep(0.005)


PRIMING = PollPriming()


def _with_poll() -> None:
    """`poll`: close this request's stream, then progress and the answer (stored, replayed on resumption)."""
    import anyio
    from mcp import types

    from tests.servers import upstream_server

    answer = upstream_server.call_tool

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != "poll":
            return await answer(ctx, params)
        assert ctx.close_sse_stream is not None
        await PRIMING.wait()
        await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        await ctx.session.report_progress(1, 1, "after the stream closed")
        return types.CallToolResult(content=[types.TextContent(type="text", text="polled")])

    upstream_server.call_tool = call_tool


def build_app(json_response: bool, token: str | None, resumable: bool = False) -> Any:
    from mcp.server.streamable_http import EventStore

    from tests.servers.upstream_server import build_server

    store: EventStore | None = None
    if resumable:
        _with_poll()
        store = EventStore.register(MemoryEventStore)()  # type: ignore[assignment]
    app = build_server().streamable_http_app(
        streamable_http_path="/mcp", json_response=json_response, event_store=store, retry_interval=100
    )
    if resumable:
        app = PRIMING.wrap(app)
    if token is None:
        return app
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


async def serve(json_response: bool, token: str | None, resumable: bool) -> None:
    from tests.servers.uvicorn_port import serve_and_report_port

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted connections inherit it (Linux)
    sock.bind(("127.0.0.1", 0))
    await serve_and_report_port(build_app(json_response, token, resumable), sock)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--token")
    parser.add_argument("--resumable", action="store_true")
    args = parser.parse_args()
    asyncio.run(serve(args.json, args.token, args.resumable))


if __name__ == "__main__":
    main()
