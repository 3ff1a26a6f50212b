"""The HTTP test upstream (tests/servers/http_upstream.py) behind a front that can forget sessions.

`python -m tests.servers.forgetful_http_upstream [--port N]` prints `PORT <n>` once it accepts connections.
Besides `/mcp`: `POST /forget` makes every session opened so far unknown (404, as after a server restart),
`POST /forget?always=1` also every later one once its handshake is done (a server that ends every session);
`GET /record` lists every POST to `/mcp` as `{session, method, uri, refused}` in arrival order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from typing import Any

NOT_FOUND = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}})


class Forgetful:
    """An ASGI front: it learns session ids from responses and answers 404 for the forgotten ones."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.known: set[str] = set()
        self.forgotten: set[str] = set()
        self.always = False
        self.record: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == "/forget":
            self.forgotten |= self.known
            self.always = self.always or b"always=1" in scope.get("query_string", b"")
            await _plain(send, 200, b"forgotten")
            return
        if path == "/record":
            await _plain(send, 200, json.dumps(self.record).encode(), b"application/json")
            return
        session = dict(scope["headers"]).get(b"mcp-session-id", b"").decode() or None
        body = b""
        if scope["method"] == "POST":
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
        refused = session is not None and session in self.forgotten
        if scope["method"] == "POST":
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = {}
            method = parsed.get("method") if isinstance(parsed, dict) else None
            params = parsed.get("params") if isinstance(parsed, dict) else None
            uri = params.get("uri") if isinstance(params, dict) else None
            self.record.append({"session": session, "method": method, "uri": uri, "refused": refused})
            if self.always and method == "notifications/initialized" and session is not None and not refused:
                self.forgotten.add(session)  # answered this once, then forgotten (below, after the reply)
        if refused:
            await _plain(send, 404, NOT_FOUND.encode(), b"application/json")
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def learning_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        self.known.add(value.decode())
            await send(message)

        await self.app(scope, replay if scope["method"] == "POST" else receive, learning_send)


async def _plain(send: Any, status: int, body: bytes, kind: bytes = b"text/plain") -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind)]})
    await send({"type": "http.response.body", "body": body})


async def serve(port: int) -> None:
    import uvicorn

    from tests.servers.http_upstream import build_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    inner = build_app(json_response=False, token=None)
    front = Forgetful(inner)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await inner(scope, receive, send)
            return
        await front(scope, receive, send)

    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task
            return
        await asyncio.sleep(0.01)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
