"""An interceptor host over stdio that traces with the OpenTelemetry SDK and reports the span it ran in.

Its validator answers, in `info`, the trace id and parent span id of the host's own span (what the
invoker's `_meta.traceparent` made it) and the `traceId`/`spanId` of the invocation context it was given.
Run as `python -m tests.servers.trace_host` from the checkout root.
"""

from __future__ import annotations

from typing import Any

import anyio


def build_server() -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from interceptors import Invocation, Mutation, Registry, Verdict
    from interceptors_chain import tracing
    from interceptors_server import interceptor_server

    tracing.enable(TracerProvider())
    registry = Registry()

    @registry.validator("trace/report", events=["tools/call"], phase="both")
    def report(inv: Invocation) -> Verdict:
        span = trace.get_current_span()
        own = span.get_span_context()
        parent = getattr(span, "parent", None)
        context = inv.context
        return Verdict.allow(
            {
                "trace": f"{own.trace_id:032x}" if own.is_valid else None,
                "name": getattr(span, "name", None),
                "parent": f"{parent.span_id:016x}" if parent is not None else None,
                "contextTrace": None if context is None else context.trace_id,
                "contextSpan": None if context is None else context.span_id,
            }
        )

    @registry.mutator("trace/tag", events=["tools/call"], phase="request")
    def tag(inv: Invocation) -> Mutation:
        return Mutation({**inv.payload, "tagged": True})

    return interceptor_server(registry, name="trace-host", version="1.0")


async def serve() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    anyio.run(serve)


if __name__ == "__main__":
    main()
