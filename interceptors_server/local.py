"""LocalChain: a chain wired to in-process interceptor hosts through the SDK's in-memory transport.

Every interceptor is still invoked over the real MCP request path, so in-process and remote
interceptors behave identically.
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

from .install import host_of, interceptor_server, lowlevel_server

Source = Registry | Server[Any] | MCPServer


class LocalChain:
    """`async with LocalChain(registry, ...) as chain:` yields a connected, discovered `Chain`.

    Sources are registries (each gets its own in-memory interceptor server) or servers that already
    have interceptors installed. `mode` is the client's protocol mode: "auto" (2026 era, direct
    dispatch) or "legacy" (2025-11-25 handshake over memory streams).
    """

    def __init__(
        self,
        *sources: Source,
        mode: Literal["auto", "legacy"] = "auto",
        overrides: Mapping[str, InterceptorOverride] | None = None,
        execution_handler: ExecutionHandler | None = None,
        default_timeout_ms: int | None = None,
        deadline_ms: int | None = None,
    ) -> None:
        if not sources:
            raise ValueError("LocalChain needs at least one registry or server")
        self._sources = sources
        self._mode = mode
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
                    if host_of(server) is None:
                        raise ValueError(f"server {server.name!r} has no interceptors installed")
                client = await stack.enter_async_context(Client(server, mode=self._mode))
                name = server.name if not any(s.name == server.name for s in self.chain.servers) else None
                await self.chain.add_session(client.session, name or f"{server.name}-{index}")
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
