"""The interceptor server the remote benchmarks spawn: no-op interceptors plus a bare `bench/echo` method."""

from __future__ import annotations

from typing import Any

import anyio

from interceptors_server.serving import build_server, serve_stdio

from .runner import echo_method, noop_registry


def main() -> None:
    server: Any = build_server([noop_registry("tools/call", 1, 1)], name="bench-remote")
    echo_method(server)
    anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
