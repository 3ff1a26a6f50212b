"""An interceptor host served over Streamable HTTP on a loopback address.

`python -m tests.servers.http_host [--port 0] [--stateless]` binds 127.0.0.1 (port 0 = ephemeral),
prints `PORT <n>` on stdout once uvicorn is accepting connections, and serves until terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import socket
import sys
from pathlib import Path
from typing import Any


def build_app(host: str, stateless: bool) -> Any:
    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from interceptors_server import interceptor_server
    from tests.servers.host_registry import build_registry

    server = interceptor_server(build_registry(), name="http-host", version="1.0")
    return server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=stateless, json_response=stateless, host=host
    )


async def serve(host: str, port: int, stateless: bool) -> None:
    from tests.servers.uvicorn_port import serve_and_report_port

    if not ipaddress.ip_address(host).is_loopback:
        raise SystemExit("http_host serves loopback addresses only")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    await serve_and_report_port(build_app(host, stateless), sock)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stateless", action="store_true")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.host, args.port, args.stateless))


if __name__ == "__main__":
    main()
