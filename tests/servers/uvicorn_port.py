"""Serve an ASGI app with uvicorn on a bound socket and print `PORT <n>` once it accepts connections.

Shared by the HTTP test servers. A start-up that stalls dumps every thread's stack to stderr (the tests keep
the server's stderr), so a failed start says where it stood instead of leaving an empty line.
"""

from __future__ import annotations

import asyncio
import faulthandler
import socket
import sys
from typing import Any

STALL_DUMP_S = 20.0


async def serve_and_report_port(app: Any, sock: socket.socket) -> None:
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    faulthandler.dump_traceback_later(STALL_DUMP_S, repeat=True)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task
            print("uvicorn ended before it started serving", file=sys.stderr, flush=True)
            return
        await asyncio.sleep(0.01)
    faulthandler.cancel_dump_traceback_later()
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await task
