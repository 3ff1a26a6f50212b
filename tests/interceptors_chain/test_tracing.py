"""OpenTelemetry: the span tree of a chain execution with a remote (stdio) interceptor host, the W3C trace
carried into the remote invoke, no payload content in any attribute, and nothing at all when it is off."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from interceptors import Direction, InvocationContext
from interceptors.enums import Phase
from interceptors.registry import Invocation
from interceptors.transforms.mutators import _call_key
from interceptors_chain import Chain, RemoteServer, tracing
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio

SECRET = "sk_live_PLANTEDsecret0123456789abcdef"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
PAYLOAD = {"name": "send", "arguments": {"token": SECRET, "note": f"use {SECRET}"}}


def remote() -> RemoteServer:
    return RemoteServer("trace-host", command=[sys.executable, "-m", "tests.servers.trace_host"], cwd=str(ROOT))


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def attr(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    return span.attributes[tracing.PREFIX + key]


def report_of(result: Any) -> dict[str, Any]:
    (record,) = [r for r in result.results if r.interceptor == "trace/report"]
    info: dict[str, Any] = record.result["info"]
    return info


def assert_no_secret(spans: tuple[ReadableSpan, ...]) -> None:
    for span in spans:
        for key, value in (span.attributes or {}).items():
            assert SECRET not in str(value) and "PLANTED" not in str(value), (span.name, key)
        assert SECRET not in span.name
        for event in span.events:
            assert SECRET not in str(event.attributes)


async def test_traceparent_roots_the_tree_and_reaches_the_remote_host(exporter: InMemorySpanExporter) -> None:
    context = tracing.context_from_meta(None, {"_meta": {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}})
    assert context is not None and (context.trace_id, context.span_id) == (TRACE_ID, CLIENT_SPAN)
    async with remote() as server:
        chain = Chain(default_timeout_ms=30_000)
        await chain.add_remote(server)
        result = await chain.execute("tools/call", "request", PAYLOAD, direction=Direction.SENDING, context=context)
    assert not result.blocked and result.final_payload == {**PAYLOAD, "tagged": True}
    spans = exporter.get_finished_spans()
    (chain_span,) = by_name(spans, tracing.CHAIN_SPAN)
    invokes = by_name(spans, tracing.INVOKE_SPAN)
    assert chain_span.parent is not None and chain_span.parent.is_remote
    assert f"{chain_span.context.trace_id:032x}" == TRACE_ID
    assert f"{chain_span.parent.span_id:016x}" == CLIENT_SPAN
    assert (attr(chain_span, "event"), attr(chain_span, "phase"), attr(chain_span, "direction")) == (
        "tools/call", "request", "sending",
    )  # fmt: skip
    assert attr(chain_span, "status") == "success" and attr(chain_span, "interceptors") == 2
    assert sorted(attr(span, "interceptor") for span in invokes) == ["trace/report", "trace/tag"]
    for span in invokes:
        assert span.parent is not None and span.parent.span_id == chain_span.context.span_id
        assert span.context.trace_id == chain_span.context.trace_id
        assert attr(span, "server") == "trace-host" and attr(span, "mode") == "active"
        assert attr(span, "duration_ms") >= 0
    outcomes = {attr(span, "interceptor"): (attr(span, "type"), attr(span, "outcome")) for span in invokes}
    assert outcomes == {"trace/tag": ("mutation", "modified"), "trace/report": ("validation", "passed")}
    # The remote host's own span sits under the invoke span that called it, in the caller's trace.
    (report_span,) = [span for span in invokes if attr(span, "interceptor") == "trace/report"]
    report = report_of(result)
    print("remote host saw", report)
    assert report["trace"] == TRACE_ID
    assert report["parent"] == f"{report_span.context.span_id:016x}"
    assert (report["contextTrace"], report["contextSpan"]) == (TRACE_ID, CLIENT_SPAN)
    assert_no_secret(spans)


async def test_chain_span_is_a_child_of_the_current_span(exporter: InMemorySpanExporter) -> None:
    tracer = tracing.TRACER  # the provider the fixture enabled
    async with remote() as server:
        chain = Chain(default_timeout_ms=30_000)
        await chain.add_remote(server)
        with tracer.start_as_current_span("gateway.request") as request_span:
            await chain.execute("tools/call", "request", PAYLOAD, direction=Direction.SENDING)
            await chain.execute("tools/call", "response", {"content": [{"type": "text", "text": SECRET}]},
                                direction=Direction.RECEIVING)  # fmt: skip
    spans = exporter.get_finished_spans()
    chains = by_name(spans, tracing.CHAIN_SPAN)
    assert [attr(span, "phase") for span in chains] == ["request", "response"]
    for span in chains:
        assert span.parent is not None and span.parent.span_id == request_span.get_span_context().span_id
    assert len(by_name(spans, tracing.INVOKE_SPAN)) == 3  # two on the request, the validator on the response
    assert_no_secret(spans)


async def test_a_block_is_an_error_span_naming_the_interceptor_only(exporter: InMemorySpanExporter) -> None:
    async with RemoteServer(
        "host", command=[sys.executable, "-m", "tests.servers.stdio_host"], cwd=str(ROOT)
    ) as server:
        chain = Chain(default_timeout_ms=30_000)
        await chain.add_remote(server)
        payload = {"name": "echo", "arguments": {"text": f"forbidden {SECRET}"}}
        result = await chain.execute("tools/call", "request", payload, direction=Direction.SENDING)
    assert result.blocked
    spans = exporter.get_finished_spans()
    (chain_span,) = by_name(spans, tracing.CHAIN_SPAN)
    assert attr(chain_span, "status") == "validation_failed" and attr(chain_span, "blocked_by") == "host/deny-word"
    assert chain_span.status.status_code is trace.StatusCode.ERROR
    blocked = [span for span in by_name(spans, tracing.INVOKE_SPAN) if attr(span, "outcome") == "blocked"]
    assert [attr(span, "interceptor") for span in blocked] == ["host/deny-word"]
    assert_no_secret(spans)


async def test_off_means_no_spans_and_no_traceparent() -> None:
    assert tracing.TRACER is None
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))  # not enabled: must stay empty
    async with remote() as server:
        chain = Chain(default_timeout_ms=30_000)
        await chain.add_remote(server)
        context = tracing.context_from_meta(None, {"_meta": {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}})
        result = await chain.execute("tools/call", "request", PAYLOAD, direction=Direction.SENDING, context=context)
    assert result.final_payload == {**PAYLOAD, "tagged": True}
    report = report_of(result)
    # The context still carries the caller's trace (no SDK needed); the remote host's span has no parent.
    assert (report["contextTrace"], report["contextSpan"]) == (TRACE_ID, CLIENT_SPAN)
    assert report["parent"] is None and report["trace"] != TRACE_ID
    assert memory.get_finished_spans() == ()
    provider.shutdown()


@pytest.mark.parametrize(
    "value",
    [
        None, 7, "", "garbage", f"00-{'0' * 32}-{CLIENT_SPAN}-01", f"00-{TRACE_ID}-{'0' * 16}-01",
        f"ff-{TRACE_ID}-{CLIENT_SPAN}-01", f"00-{TRACE_ID.upper()}-{CLIENT_SPAN}-01",
        f"00-{TRACE_ID}-{CLIENT_SPAN}-01-x",
    ],
)  # fmt: skip
def test_an_invalid_traceparent_leaves_the_context_alone(value: Any) -> None:
    context = InvocationContext(trace_id="gateway-call-1")
    assert tracing.context_from_meta(context, {"_meta": {"traceparent": value}}) is context


def test_requests_of_one_trace_keep_their_own_transforms_memo() -> None:
    first = Invocation(
        "t", "tools/call", Phase.REQUEST, {}, None, InvocationContext(trace_id=TRACE_ID, span_id="1" * 16)
    )
    second = Invocation(
        "t", "tools/call", Phase.REQUEST, {}, None, InvocationContext(trace_id=TRACE_ID, span_id="2" * 16)
    )
    assert _call_key(first) != _call_key(second)
