"""Streamable HTTP clients served: the listening socket, uvicorn, and the runner's lifecycle around the front.

Why a module of its own: the ASGI front (`http_front.py`) frames and admits, and keeps what it knows about
sessions in the session book (`http_sessions.py`); what is here only binds, accepts and runs.

Every accepted connection has TCP_NODELAY: a reply is a few small writes, and Nagle's algorithm with the
peer's delayed ACK would hold each one back ~40 ms. A connection must send a request's head within
`HEADER_TIMEOUT_S` of opening (or of its first byte after a response; an idle keep-alive connection is uvicorn's
to close, after 5 s): a connection that never sends a request is closed instead of holding a file descriptor
forever.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from interceptors import Principal
from interceptors.errors import InterceptorsError

from .catalog import Catalog
from .chain_adapter import ChainAdapter
from .http_front import MCP_PATH, HttpFront
from .http_sessions import HEADER_TIMEOUT_S, HttpSettings
from .router import Router, SendDownstream
from .runner import NoDownstream, Runner, UpstreamShell

logger = logging.getLogger("interceptors.gateway")


class NoDelayProtocol(H11Protocol):
    """uvicorn's h11 protocol with TCP_NODELAY set on every accepted connection, and a deadline for each request's
    head: uvicorn times only the keep-alive pause after a response, so a connection that opens and sends
    nothing (or half a head) would be held forever."""

    header_timeout_s: float = HEADER_TIMEOUT_S
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        set_nodelay(transport.get_extra_info("socket"))
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.conn.their_state is h11.IDLE:  # a new request begins
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)
        super().data_received(data)
        timer = self._head_timer
        if timer is not None and self.conn.their_state is not h11.IDLE:  # its head is in
            timer.cancel()
            self._head_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        busy = self.cycle is not None and not self.cycle.response_complete
        if self.conn.their_state is h11.IDLE and not busy and not self.transport.is_closing():
            logger.info("closed a connection that sent no request within %g s", self.header_timeout_s)
            self.transport.close()


def set_nodelay(sock: Any) -> None:
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ListenError(InterceptorsError, OSError):
    """The address cannot be listened on (in use, not ours)."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening, non-blocking socket with TCP_NODELAY (inherited by what it accepts on Linux)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        set_nodelay(sock)
        sock.bind((host, port))
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


class HttpServer(uvicorn.Server):
    """uvicorn serving one ASGI app on a given socket; the gateway owns the signals (uvicorn would re-raise)."""

    def __init__(self, app: Any, *, header_timeout_s: float = HEADER_TIMEOUT_S) -> None:
        protocol: type[NoDelayProtocol] = NoDelayProtocol
        if header_timeout_s != HEADER_TIMEOUT_S:
            protocol = type("NoDelayProtocol", (NoDelayProtocol,), {"header_timeout_s": header_timeout_s})
        config = uvicorn.Config(
            app,
            http=protocol,
            ws="none",
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
            proxy_headers=False,  # loopback only: no proxy in front whose X-Forwarded-* to believe (nor the cost)
        )
        super().__init__(config)

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def announce(host: str, port: int) -> None:
    shown = f"[{host}]" if ":" in host else host
    print(f"mcp-interceptors proxy: listening on http://{shown}:{port}{MCP_PATH}", file=sys.stderr, flush=True)


# The runner ---------------------------------------------------------------------------------------
class HttpRunner(Runner):
    """The router gateway serving Streamable HTTP: the upstream pump of `Runner`, uvicorn for the clients."""

    def __init__(
        self,
        router: Router,
        adapter: ChainAdapter,
        upstream: UpstreamShell,
        sock: socket.socket,
        *,
        tokens: Any = None,
        default_principal: Principal | None = None,
        settings: HttpSettings | None = None,
        catalog: Catalog | None = None,
        handle_signals: bool = False,
        on_listening: Callable[[str, int], None] | None = announce,
        timeout: float | None = None,
        local: Any = None,
    ) -> None:
        super().__init__(
            router, adapter, upstream, NoDownstream(), catalog=catalog, handle_signals=handle_signals, timeout=timeout,
            local=local,
        )  # fmt: skip
        self.sock = sock
        self.on_listening = on_listening
        self.front = HttpFront(
            router, self.perform, upstream.drain, tokens=tokens, default_principal=default_principal, settings=settings,
            tool_schema=catalog.tool_schema if catalog is not None else None, upstream_for=self.upstream_for,
        )  # fmt: skip

    def send_downstream(self, action: SendDownstream) -> None:
        self.front.deliver(action)

    async def run(self) -> int:
        http = HttpServer(self.front, header_timeout_s=self.front.settings.header_timeout_s)
        async with anyio.create_task_group() as tasks:
            served = anyio.Event()
            # the upstream's handshake waits for the first client (`upstream_for`), so it is told that client's
            # capabilities; the upstream pump runs from the start, so one that dies is noticed at once
            self._start_tasks(tasks)

            async def serve() -> None:
                try:
                    await http.serve(sockets=[self.sock])
                finally:
                    served.set()
                    self._finish(0)

            tasks.start_soon(serve)
            tasks.start_soon(self.front.sweep)
            if self.on_listening is not None:
                host, port = self.sock.getsockname()[:2]
                self.on_listening(host, port)
            await self._done.wait()
            http.should_exit = True  # answers already released still reach their clients
            with anyio.move_on_after(3):
                await served.wait()
            self.front.shutdown()
            for run in self._chain_runs:
                run.cancel()
            tasks.cancel_scope.cancel()
        return self.exit_code or 0
