"""LocalChain: a chain wired to interceptor hosts in the same process.

By default through the in-process transport (`HostConnection`: a function call with the wire's copies,
limits and error table); with `transport="mcp"` over the SDK's in-memory MCP transport instead, so every
invoke takes the real MCP request path. The conformance suite runs in both, which is what keeps
in-process and remote interceptors behaving identically.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Literal

from mcp import Client
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer

from interceptors import Registry
from interceptors_chain import Chain, ExecutionHandler, InterceptorOverride

from .host import DEFAULT_MAX_PAYLOAD_BYTES
from .inprocess import HostConnection
from .install import host_of, interceptor_server, lowlevel_server

Source = Registry | Server[Any] | MCPServer
Transport = Literal["inprocess", "mcp"]


class LocalChain:
    """`async with LocalChain(registry, ...) as chain:` yields a connected, discovered `Chain`.

    Sources are registries (each gets its own interceptor host) or servers that already have interceptors
    installed. `transport` is "inprocess" (the default: `HostConnection`) or "mcp" (an SDK `Client` per
    host); with "mcp", `mode` is the client's protocol mode: "auto" (2026 era, direct dispatch) or
    "legacy" (2025-11-25 handshake over memory streams). `max_payload_bytes` bounds the payloads the hosts
    of `registries` accept (servers passed in keep their own).
    """

    def __init__(
        self,
        *sources: Source,
        mode: Literal["auto", "legacy"] = "auto",
        transport: Transport = "inprocess",
        overrides: Mapping[str, InterceptorOverride] | None = None,
        execution_handler: ExecutionHandler | None = None,
        default_timeout_ms: int | None = None,
        deadline_ms: int | None = None,
        max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        if not sources:
            raise ValueError("LocalChain needs at least one registry or server")
        self._sources = sources
        if transport not in ("inprocess", "mcp"):
            raise ValueError(f"transport must be 'inprocess' or 'mcp', not {transport!r}")
        self._mode = mode
        self._transport = transport
        self._max_payload_bytes = max_payload_bytes
        self.chain = Chain(
            overrides=overrides,
            execution_handler=execution_handler,
            default_timeout_ms=default_timeout_ms,
            deadline_ms=deadline_ms,
        )
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> Chain:
        stack = AsyncExitStack()
        try:
            for index, source in enumerate(self._sources):
                if isinstance(source, Registry):
                    server: Server[Any] = interceptor_server(source, name=f"local-{index}")
                else:
                    server = lowlevel_server(source)
                host = host_of(server)
                if host is None:
                    raise ValueError(f"server {server.name!r} has no interceptors installed")
                if isinstance(source, Registry):
                    host.max_payload_bytes = self._max_payload_bytes
                taken = any(s.name == server.name for s in self.chain.servers)
                name = f"{server.name}-{index}" if taken else server.name
                if self._transport == "inprocess":
                    await self.chain.add_connection(HostConnection(host), name)
                else:
                    client = await stack.enter_async_context(Client(server, mode=self._mode))
                    await self.chain.add_session(client.session, name)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self.chain

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._stack is not None:
            await self._stack.__aexit__(exc_type, exc, tb)
            self._stack = None
