"""Serve interceptor registries as a standalone MCP server over stdio or Streamable HTTP."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.lowlevel.server import Server

from interceptors import Registry
from interceptors.errors import InterceptorsError

from .install import interceptor_server

logger = logging.getLogger("interceptors.serve")


class RegistryLoadError(InterceptorsError, ValueError):
    """A `module:attr` spec that does not name a registry."""


def load_registry(spec: str) -> Registry:
    """Import `module:attr`; the attribute is a Registry or a zero-argument callable returning one."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise RegistryLoadError(f"registry spec {spec!r} must look like 'package.module:attribute'")
    if os.getcwd() not in sys.path:  # like uvicorn: modules of the current folder are importable
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistryLoadError(f"cannot import {module_name!r}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise RegistryLoadError(f"{module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if callable(target) and not isinstance(target, Registry):
        target = target()
    if not isinstance(target, Registry):
        raise RegistryLoadError(f"{spec!r} is a {type(target).__name__}, not a Registry")
    return target


def build_server(registries: Sequence[Registry], name: str = "mcp-interceptors", tracing: bool = False) -> Server[Any]:
    return interceptor_server(*registries, name=name, version=_version(), tracing=tracing)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mcp-interceptors")
    except Exception:
        return "0"


async def serve_stdio(server: Server[Any]) -> None:
    """Protocol data on stdout only; logs go to stderr."""
    from .express import express_lane_for
    from .stdio import serve_streams

    async with serve_streams(lambda write, put: express_lane_for(server, write, put)) as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(
    server: Server[Any], host: str, port: int, on_listening: Callable[[str, int], None] | None = None
) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp, served by uvicorn (port 0 picks a free one, reported to
    `on_listening` once the socket is bound). An address that cannot be bound is an OSError."""
    import socket

    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
        app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        if on_listening is not None:
            on_listening(host, sock.getsockname()[1])
        await uvicorn.Server(config).serve(sockets=[sock])
