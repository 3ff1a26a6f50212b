"""The gateway tests' upstream server (tests/servers/upstream_server.py) served over Streamable HTTP.

`python -m tests.servers.http_upstream [--json] [--token T]` binds 127.0.0.1 on an ephemeral port, prints
`PORT <n>` on stdout once uvicorn accepts connections, and serves until terminated. `--json` answers
plain JSON instead of SSE streams; `--token T` refuses (401) every request without `Authorization: Bearer T`.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from typing import Any


def build_app(json_response: bool, token: str | None) -> Any:
    from tests.servers.upstream_server import build_server

    app = build_server().streamable_http_app(streamable_http_path="/mcp", json_response=json_response)
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


async def serve(json_response: bool, token: str | None) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        build_app(json_response, token), log_level="warning", lifespan="on", timeout_graceful_shutdown=1
    )
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
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--token")
    args = parser.parse_args()
    asyncio.run(serve(args.json, args.token))


if __name__ == "__main__":
    main()
