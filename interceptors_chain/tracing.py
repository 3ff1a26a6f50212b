"""OpenTelemetry spans for chain executions and invokes (extra `otel`); nothing at all when it is off.

`TRACER` is None until `enable()` runs (or `MCP_INTERCEPTORS_OTEL=1` is set when this module is first
imported) and `opentelemetry-api` is importable. The chain reads it once per execution and once per
invoke, so a process without tracing pays two attribute lookups per execution and imports nothing.

Spans carry identifiers and outcomes only (event, phase, direction, status, interceptor and server
names, type, mode, duration): never a payload, a config, a principal or a message text.

Trace context: `context_from_meta` reads a W3C `traceparent` from a request's `_meta` into
`InvocationContext.trace_id`/`span_id`; a chain span is a child of the current span, else of that remote
parent; each invoke carries `_meta.traceparent` naming its own span, so a remote interceptor host that
traces (`serve_invoke`) puts its span under it, in the same trace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from interceptors import InvocationContext

if TYPE_CHECKING:
    from .chain import Chain, _Attempt, _Run
    from .plan import Plan, PlanEntry
    from .result import ExecutionResult

TRACER: Any = None
"""The active `opentelemetry.trace.Tracer`, or None (the fast path)."""

INSTRUMENTATION_NAME = "mcp-interceptors"
CHAIN_SPAN = "mcp.interceptors.chain"
INVOKE_SPAN = "mcp.interceptors.invoke"
SERVE_SPAN = "mcp.interceptors.serve"
PREFIX = "mcp.interceptors."

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_TRACESTATE_MEMBER = re.compile(
    r"^[a-z0-9][_0-9a-z\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$"
)


def enable(provider: Any = None) -> bool:
    """Trace through `provider` (an SDK `TracerProvider`), else the global one; False without the API."""
    global TRACER
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    source = provider if provider is not None else trace.get_tracer_provider()
    TRACER = source.get_tracer(INSTRUMENTATION_NAME)
    return True


def disable() -> None:
    global TRACER
    TRACER = None


def parse_traceparent(value: Any) -> tuple[str, str, bool] | None:
    """`(trace_id, parent span id, sampled)` of a valid W3C traceparent (version 00 rules), else None."""
    if not isinstance(value, str) or len(value) > 256:
        return None
    match = _TRACEPARENT.match(value.strip())
    if match is None:
        return None
    version, trace_id, span_id, flags = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN or (version == "00" and len(value) != 55):
        return None
    return trace_id, span_id, bool(int(flags, 16) & 1)


def parse_tracestate(value: Any) -> str | None:
    """A W3C `tracestate` header value when it is well formed (at most 32 members, 512 characters), else None."""
    if not isinstance(value, str) or not value or len(value) > 512:
        return None
    members = [member.strip(" \t") for member in value.split(",")]
    members = [member for member in members if member]
    if not members or len(members) > 32 or not all(_TRACESTATE_MEMBER.match(member) for member in members):
        return None
    return ",".join(members)


def tracestate_of(params: Any) -> str | None:
    """The `_meta.tracestate` of request params when it is well formed, else None."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return parse_tracestate(meta.get("tracestate")) if isinstance(meta, Mapping) else None


def traceparent_of(params: Any) -> str | None:
    """The `_meta.traceparent` of request params when it is valid, else None."""
    meta = params.get("_meta") if params.__class__ is dict or isinstance(params, Mapping) else None
    if meta is None:
        return None  # the common request: no `_meta`, nothing to parse
    value = meta.get("traceparent") if isinstance(meta, Mapping) else None
    return value if parse_traceparent(value) is not None else None


def context_from_meta(context: InvocationContext | None, params: Any) -> InvocationContext | None:
    """`context` with `trace_id`/`span_id` from the request's `_meta.traceparent`; unchanged without one.

    Works without opentelemetry: remote interceptor servers then still see the caller's trace.
    """
    parsed = parse_traceparent(traceparent_of(params))
    if parsed is None:
        return context
    trace_id, span_id, _ = parsed
    if context is None:
        return InvocationContext(trace_id=trace_id, span_id=span_id)
    from dataclasses import replace

    return replace(context, trace_id=trace_id, span_id=span_id)


@contextmanager
def remote_parent(trace_id: str, span_id: str, sampled: bool, tracestate: str | None = None) -> Iterator[None]:
    """Make the remote span (a client's `traceparent`, with its `tracestate`) current while tracing is on and
    no span is current, so chain spans started inside are its children; does nothing otherwise."""
    if TRACER is None:
        yield
        return
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    if trace.get_current_span().get_span_context().is_valid:
        yield
        return
    state = trace.TraceState.from_header([tracestate]) if tracestate else None
    remote = trace.SpanContext(
        int(trace_id, 16),
        int(span_id, 16),
        is_remote=True,
        trace_flags=trace.TraceFlags(1 if sampled else 0),
        trace_state=state,
    )
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(remote)))
    try:
        yield
    finally:
        otel_context.detach(token)


def _w3c_parent(context: Mapping[str, Any] | None) -> Any:
    """An OpenTelemetry Context whose span is the remote (traceId, spanId) of a wire context, or None."""
    if context is None:
        return None
    trace_id, span_id = context.get("traceId"), context.get("spanId")
    if not isinstance(trace_id, str) or not isinstance(span_id, str):
        return None
    parsed = parse_traceparent(f"00-{trace_id}-{span_id}-01")
    if parsed is None:
        return None
    from opentelemetry import trace

    remote = trace.SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=trace.TraceFlags(1))
    return trace.set_span_in_context(trace.NonRecordingSpan(remote))


def start_chain(event: str, phase: Any, direction: Any, plan: Plan, context: Mapping[str, Any] | None) -> Any:
    """The span of one execution: a child of the current span, else of the context's W3C parent."""
    from opentelemetry import trace

    parent = None
    if not trace.get_current_span().get_span_context().is_valid:
        parent = _w3c_parent(context)
    return TRACER.start_span(
        CHAIN_SPAN,
        context=parent,
        attributes={
            PREFIX + "event": event,
            PREFIX + "phase": phase.value,
            PREFIX + "direction": direction.value,
            PREFIX + "interceptors": len(plan.validators) + len(plan.mutators),
        },
    )


def end_chain(span: Any, result: ExecutionResult) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute(PREFIX + "status", result.status.value)
    span.set_attribute(PREFIX + "blocked", result.blocked)
    span.set_attribute(PREFIX + "duration_ms", result.total_duration_ms)
    if result.blocked:
        first = result.aborted_at[0]
        span.set_attribute(PREFIX + "blocked_by", first.interceptor)
        span.set_status(Status(StatusCode.ERROR, result.status.value))
    span.end()


def _outcome(attempt: _Attempt) -> str:
    record, result = attempt
    if record.error is not None:
        return "timeout" if record.error_kind is not None and record.error_kind.value == "timeout" else "failed"
    if result is None:
        return "failed"
    if getattr(result, "modified", False):
        return "modified"
    return "blocked" if getattr(result, "blocks", False) else "passed"


async def invoke(chain_span: Any, chain: Chain, entry: PlanEntry, run: _Run, payload: Any) -> _Attempt:
    """`chain.invoke` inside a span under the chain's span, current while it runs (see `inject`)."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    span = TRACER.start_span(
        INVOKE_SPAN,
        context=trace.set_span_in_context(chain_span),
        attributes={
            PREFIX + "interceptor": entry.info.name,
            PREFIX + "server": entry.server.name,
            PREFIX + "type": entry.info.type.value,
        },
    )
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        attempt = await chain.invoke(entry, run, payload)
    except BaseException:
        span.set_attribute(PREFIX + "outcome", "cancelled")
        span.end()
        raise
    finally:
        otel_context.detach(token)
    outcome = _outcome(attempt)
    record = attempt[0]
    span.set_attribute(PREFIX + "mode", record.mode.value)
    span.set_attribute(PREFIX + "outcome", outcome)
    span.set_attribute(PREFIX + "duration_ms", round(record.duration_ms, 3))
    if outcome in ("failed", "timeout"):
        span.set_status(trace.Status(trace.StatusCode.ERROR, outcome))
    span.end()
    return attempt


def inject(params: dict[str, Any]) -> None:
    """Name the current (invoke) span in `params._meta.traceparent`: the remote host parents on it."""
    from opentelemetry import trace

    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return
    flags = int(span_context.trace_flags) & 0xFF
    value = f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{flags:02x}"
    meta = params.get("_meta")
    carried: dict[str, Any] = {**meta} if isinstance(meta, Mapping) else {}
    carried["traceparent"] = value
    state = span_context.trace_state.to_header() if span_context.trace_state else ""
    if state:
        carried["tracestate"] = state
    params["_meta"] = carried


async def serve_invoke(
    run: Callable[[Mapping[str, Any] | None], Awaitable[dict[str, Any]]],
    params: Mapping[str, Any] | None,
    traceparent: str | None,
) -> dict[str, Any]:
    """A host's invoke inside a span under the caller's traceparent (the caller's invoke span)."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    parent = None
    parsed = parse_traceparent(traceparent)
    if parsed is not None:
        trace_id, span_id, sampled = parsed
        remote = trace.SpanContext(
            int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=trace.TraceFlags(1 if sampled else 0)
        )
        parent = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    name = params.get("name") if isinstance(params, Mapping) else None
    attributes = {PREFIX + "interceptor": name} if isinstance(name, str) and len(name) <= 256 else {}
    span = TRACER.start_span(SERVE_SPAN, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        answer = await run(params)
    except BaseException as exc:
        span.set_attribute(PREFIX + "outcome", "error")
        span.set_attribute(PREFIX + "error_type", type(exc).__name__)
        span.set_status(trace.Status(trace.StatusCode.ERROR, "invoke failed"))
        raise
    else:
        span.set_attribute(PREFIX + "outcome", "answered")
        return answer
    finally:
        otel_context.detach(token)
        span.end()


if os.environ.get("MCP_INTERCEPTORS_OTEL", "").strip().lower() in ("1", "true", "yes", "on"):
    enable()
