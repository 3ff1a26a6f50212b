"""The interceptor server the remote benchmarks spawn: no-op interceptors plus a bare `bench/echo` method.

`--inline`: the no-ops are sync handlers registered `inline` (as the built-in stages are) instead of async ones.
`--loop asyncio|uvloop`: the event loop (default: as `mcp-interceptors serve`, uvloop when installed).
"""

from __future__ import annotations

import sys
from typing import Any

from interceptors.loops import run_on_loop
from interceptors_server.serving import build_server, serve_stdio

from .runner import echo_method, noop_registry


def main() -> None:
    registry = noop_registry("tools/call", 1, 1, inline="--inline" in sys.argv[1:])
    server: Any = build_server([registry], name="bench-remote")
    echo_method(server)
    argv = sys.argv[1:]
    loop = argv[argv.index("--loop") + 1] if "--loop" in argv else "auto"
    run_on_loop(serve_stdio, server, loop=loop)


if __name__ == "__main__":
    main()
