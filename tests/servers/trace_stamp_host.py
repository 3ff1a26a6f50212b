"""An interceptor host over stdio whose response mutator appends, to a `tools/call` result, the trace id and
span id of the invocation context it was given: a client of a gateway can then read what the remote
interceptor server saw. Run as `python -m tests.servers.trace_stamp_host` from the checkout root.
"""

from __future__ import annotations

from typing import Any

import anyio

STAMP_PREFIX = "trace-stamp "


def build_server() -> Any:
    from interceptors import Invocation, Mutation, Registry
    from interceptors_server import interceptor_server

    registry = Registry()

    @registry.mutator("trace/stamp", events=["tools/call"], phase="response")
    def stamp(inv: Invocation) -> Mutation:
        context = inv.context
        trace = None if context is None else context.trace_id
        span = None if context is None else context.span_id
        payload = dict(inv.payload)
        content = [*payload.get("content", []), {"type": "text", "text": f"{STAMP_PREFIX}{trace} {span}"}]
        return Mutation({**payload, "content": content})

    return interceptor_server(registry, name="trace-stamp", version="1.0")


async def serve() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    anyio.run(serve)


if __name__ == "__main__":
    main()
