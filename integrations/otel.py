"""OpenTelemetry the standard way: `MCP_INTERCEPTORS_OTEL=1` and the standard `OTEL_*` variables, no wrapper.

`configure_from_env()` (run by the command line before any command) builds the SDK's `TracerProvider` from the
environment as the OpenTelemetry specification describes it, when no provider is configured yet (under
`opentelemetry-instrument` the one it set up is used as it is):

- `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`: the resource (`Resource.create()`; the service name is
  `mcp-interceptors` when neither names one); `OTEL_TRACES_SAMPLER` and `OTEL_BSP_*`: read by the SDK itself;
- `OTEL_TRACES_EXPORTER`: `otlp` (default), `console`, `none`, or several separated by commas; OTLP over
  `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the default, or
  `grpc`), to `OTEL_EXPORTER_OTLP_ENDPOINT` and the rest of the exporter's own variables;
- the console exporter writes to **stderr**: on a stdio gateway, stdout is the MCP stream and nothing else.

`CallSpans` gives the router gateway one span per MCP request (kind SERVER, named `METHOD TARGET` as the MCP
semantic conventions do), with the chain's passes (`mcp.interceptors.chain`) and each invoke under them as
children; the span's parent is the client's `_meta.traceparent` when it sent one. Attributes are names,
codes and outcomes, never a payload or argument value; a session id only as a hash.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

logger = logging.getLogger("interceptors.otel")

ENABLE_VARIABLE: Final = "MCP_INTERCEPTORS_OTEL"
DEFAULT_SERVICE_NAME: Final = "mcp-interceptors"
MAX_OPEN_SPANS: Final = 4096
"""Calls whose reply never ran its pass (cancelled, the upstream gone): the oldest are ended past this many."""


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(ENABLE_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def configure_from_env(environ: Mapping[str, str] = os.environ) -> Any:
    """The tracer provider for `MCP_INTERCEPTORS_OTEL=1` (None when off); the chain's tracing is switched on."""
    if not enabled(environ):
        return None
    from opentelemetry import trace

    from interceptors_chain import tracing

    current = trace.get_tracer_provider()
    if type(current).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider"):
        tracing.enable(current)  # opentelemetry-instrument (or the program) configured one: use it
        return current
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "%s=1 needs the OpenTelemetry SDK to export spans: pip install opentelemetry-sdk "
            "(and opentelemetry-exporter-otlp for OTLP); no span is exported",
            ENABLE_VARIABLE,
        )
        return None
    resource = Resource.create()
    names_service = environ.get("OTEL_SERVICE_NAME") or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    if not names_service:
        resource = resource.merge(Resource.create({"service.name": DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for exporter in _exporters(environ):
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracing.enable(provider)
    return provider


def _exporters(environ: Mapping[str, str]) -> list[Any]:
    names = [name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if name.strip()]
    exporters: list[Any] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter(out=sys.stderr))  # never stdout: the MCP stream on stdio
        elif name == "otlp":
            exporter = _otlp(environ)
            if exporter is not None:
                exporters.append(exporter)
        else:
            logger.warning("OTEL_TRACES_EXPORTER: unknown exporter %r ignored (otlp, console, none)", name[:40])
    return exporters


_EXPORTER: Final = "opentelemetry.exporter.otlp.proto.{}.trace_exporter"
_OTLP_MODULES: Final = {
    "grpc": (_EXPORTER.format("grpc"), "opentelemetry-exporter-otlp-proto-grpc"),
    "http/protobuf": (_EXPORTER.format("http"), "opentelemetry-exporter-otlp-proto-http"),
}


def _otlp(environ: Mapping[str, str]) -> Any:
    """The OTLP span exporter of the configured protocol (optional packages: imported by name when asked for)."""
    import importlib

    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = (protocol or "http/protobuf").strip()
    if protocol not in _OTLP_MODULES:
        logger.warning("OTEL_EXPORTER_OTLP_PROTOCOL: unsupported protocol %r (http/protobuf, grpc)", protocol[:40])
        return None
    module, package = _OTLP_MODULES[protocol]
    try:
        exporter = importlib.import_module(module).OTLPSpanExporter
    except ImportError:
        logger.warning("OTEL_TRACES_EXPORTER=otlp needs pip install %s; no span is exported", package)
        return None
    return exporter()  # the endpoint, headers and timeout from the exporter's own OTEL_* variables


# One span per MCP request -----------------------------------------------------------------------------
class CallSpans:
    """Wraps a `ChainAdapter` (before the router is built from it): the request pass opens the call's span,
    every pass of the call runs inside it, the pass of its reply (result or error) ends it."""

    def __init__(self, adapter: Any, tracer: Any) -> None:
        from integrations.gateway.router.channels import Channel

        self.adapter = adapter
        self.tracer = tracer
        self.open: OrderedDict[int, Any] = OrderedDict()
        self._not_final = frozenset(
            {Channel.PROGRESS, Channel.LOG, Channel.RESOURCE_UPDATED, Channel.LIST_CHANGED, Channel.SERVER_REQUEST,
             Channel.CLIENT_RESULT, Channel.TASK_STATUS}
        )  # fmt: skip
        self._request = Channel.REQUEST
        self._error = Channel.ERROR
        self._has_work = adapter.has_work
        self._run = adapter.run
        adapter.has_work = self.has_work
        adapter.run = self.run

    def has_work(self, event: str, phase: Any, direction: Any) -> bool:
        """A client's request and the server's answers pass through `run` (an empty plan executes nothing), so
        each call has its span; what else crosses is asked of the chain as before."""
        from interceptors import Direction, Phase

        if (phase, direction) in ((Phase.REQUEST, Direction.RECEIVING), (Phase.RESPONSE, Direction.SENDING)):
            return True
        return bool(self._has_work(event, phase, direction))

    async def run(self, action: Any) -> Any:
        from opentelemetry import trace

        from interceptors import Phase

        state = action.request
        if state is None or action.channel in self._not_final:  # a pass inside the call: under its span
            span = None if state is None else self.open.get(state.call)
            if span is None:
                return await self._run(action)
            with trace.use_span(span, end_on_exit=False):
                return await self._run(action)
        if action.phase == Phase.REQUEST and action.channel == self._request:
            span = self._start(action)
            with trace.use_span(span, end_on_exit=False):
                outcome = await self._run(action)
            if _blocked(outcome):  # refused here: no reply pass comes
                self.open.pop(state.call, None)
                _finish(span, outcome, refused=True)
            return outcome
        span = self.open.pop(state.call, None)  # the reply: its pass ends the call's span
        if span is None:
            return await self._run(action)
        try:
            with trace.use_span(span, end_on_exit=False):
                outcome = await self._run(action)
        except BaseException:
            span.end()
            raise
        if action.channel == self._error:
            failure = "jsonrpc_error"
        elif isinstance(action.payload, dict) and action.payload.get("isError") is True:
            failure = "tool_error"
        else:
            failure = None
        _finish(span, outcome, failure=failure)
        return outcome

    def _start(self, action: Any) -> Any:
        from opentelemetry import trace

        from interceptors_chain import tracing

        state = action.request
        attributes: dict[str, Any] = {"mcp.method.name": state.method, "rpc.system": "mcp"}
        target = state.target if isinstance(state.target, str) else None
        if target is not None:
            key = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}.get(
                state.method, "mcp.resource.uri" if state.method.startswith("resources/") else None
            )
            if key is not None:
                attributes[key] = target[:256]
        context = getattr(action, "context", None)
        session = getattr(context, "session_id", None)
        if isinstance(session, str):  # an HTTP session id admits its holder: only a hash of it
            attributes["mcp.session.id"] = hashlib.sha256(session.encode()).hexdigest()[:16]
        parent = None
        params = action.payload.get("params") if isinstance(action.payload, dict) else None
        parsed = tracing.parse_traceparent(tracing.traceparent_of(params))
        if parsed is not None and not trace.get_current_span().get_span_context().is_valid:
            trace_id, span_id, sampled = parsed
            state_header = tracing.tracestate_of(params)
            remote = trace.SpanContext(
                int(trace_id, 16),
                int(span_id, 16),
                is_remote=True,
                trace_flags=trace.TraceFlags(1 if sampled else 0),
                trace_state=trace.TraceState.from_header([state_header]) if state_header else None,
            )
            parent = trace.set_span_in_context(trace.NonRecordingSpan(remote))
        name = f"{state.method} {target[:128]}" if target else state.method
        span = self.tracer.start_span(name, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes)
        self.open[state.call] = span
        while len(self.open) > MAX_OPEN_SPANS:
            _, old = self.open.popitem(last=False)
            old.set_attribute("mcp.interceptors.outcome", "abandoned")
            old.end()
        return span


def _blocked(outcome: Any) -> bool:
    return type(outcome).__name__ == "ChainBlocked"


def _finish(span: Any, outcome: Any, *, refused: bool = False, failure: str | None = None) -> None:
    """The outcome (passed, modified, blocked by the chain, refused at the request), the JSON-RPC error code of a
    refusal, `error.type` for an error reply or a tool's error result; then the span ends."""
    from opentelemetry.trace import Status, StatusCode

    if _blocked(outcome):
        blocked_error = getattr(outcome, "error", None)
        code = blocked_error.get("code") if isinstance(blocked_error, dict) else None
        span.set_attribute("mcp.interceptors.outcome", "refused" if refused else "blocked")
        if isinstance(code, int) and not isinstance(code, bool):
            span.set_attribute("rpc.jsonrpc.error_code", code)
        failure = str(code) if isinstance(code, int) else "blocked"
    else:
        span.set_attribute("mcp.interceptors.outcome", "modified" if getattr(outcome, "modified", False) else "passed")
    if failure is not None:
        span.set_attribute("error.type", failure)
        span.set_status(Status(StatusCode.ERROR))
    span.end()


def instrument_calls(adapter: Any) -> CallSpans | None:
    """Spans per call on the gateway's chain adapter when tracing is on (`tracing.TRACER`), else nothing."""
    from interceptors_chain import tracing

    if tracing.TRACER is None:
        return None
    return CallSpans(adapter, tracing.TRACER)
