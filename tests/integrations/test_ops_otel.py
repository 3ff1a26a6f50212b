"""OpenTelemetry the standard way (issue 32): a stdio gateway with `MCP_INTERCEPTORS_OTEL=1` and the standard
`OTEL_*` variables exports one span per call (the tool's name on it, the client's traceparent its parent, the
chain's passes and each interceptor under it) to a real OTLP/HTTP receiver on loopback, or with the console
exporter to stderr; stdout carries MCP and nothing else. In process, the SDK's in-memory exporter shows the
outcome of a refused call."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from integrations.gateway.chain_adapter import ChainAdapter
from integrations.gateway.router import ChainBlocked
from integrations.gateway.router.channels import Channel
from integrations.otel import CallSpans
from interceptors import Invocation, Registry, Verdict
from interceptors_chain import tracing
from interceptors_server import LocalChain
from tests.conftest import ROOT
from tests.integrations.gateway.test_gateway import STEP_S, UPSTREAM
from tests.integrations.gateway.test_gateway_trace import later_pass, request_pass, run_request

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
SECRET = "AKIAZ7QW3RT5YU8OP2LM"


def _lines() -> list[dict[str, Any]]:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    call = {"name": "echo", "arguments": {"text": f"key {SECRET}"}, "_meta": {"traceparent": TRACEPARENT}}
    return [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
    ]


def run_stdio_gateway(env: dict[str, str]) -> tuple[list[bytes], str]:
    """Initialize and call `echo` through `proxy --policy standard` on stdio; (stdout lines, stderr). Stderr goes
    to a file: the console exporter writes much, and a full pipe would stall the gateway."""
    import os
    import tempfile

    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "standard", "--", *UPSTREAM],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env={**os.environ, "MCP_INTERCEPTORS_OTEL": "1", "OTEL_SERVICE_NAME": "gw-test", **env},
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        lines: list[bytes] = []
        try:
            for message in _lines():
                process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            while not any(b'"id":2' in line for line in lines):
                line = process.stdout.readline()
                assert line, "the gateway closed stdout before its reply"
                lines.append(line)
            process.stdin.close()  # the client leaves: the gateway exits, its spans flushed
            lines.extend(process.stdout.read().splitlines(keepends=True))
            process.wait(timeout=STEP_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=STEP_S)
            process.stdout.close()
        log.seek(0)
        err = log.read().decode()
    assert process.returncode == 0, err[-2000:]
    return lines, err


def assert_only_mcp(lines: list[bytes]) -> None:
    for line in lines:
        message = json.loads(line)
        assert message.get("jsonrpc") == "2.0", line
    reply = json.loads(next(line for line in lines if b'"id":2' in line))
    assert SECRET not in json.dumps(reply)  # the standard policy redacted it: the chain ran


def check_call_tree(spans: list[dict[str, Any]]) -> None:
    """`spans`: {name, trace_id, span_id, parent_id, kind, attributes, service} with hex ids."""
    (call,) = [span for span in spans if span["name"] == "tools/call echo"]
    assert call["kind"] == "server"
    assert call["trace_id"] == TRACE_ID and call["parent_id"] == CLIENT_SPAN
    assert call["attributes"]["mcp.method.name"] == "tools/call"
    assert call["attributes"]["gen_ai.tool.name"] == "echo"
    assert call["attributes"]["mcp.interceptors.outcome"] in ("passed", "modified")
    assert call["service"] == "gw-test"
    chains = [span for span in spans if span["name"] == tracing.CHAIN_SPAN and span["parent_id"] == call["span_id"]]
    assert {span["attributes"]["mcp.interceptors.phase"] for span in chains} == {"request", "response"}
    chain_ids = {span["span_id"] for span in chains}
    invokes = [span for span in spans if span["name"] == tracing.INVOKE_SPAN and span["parent_id"] in chain_ids]
    assert invokes and all(span["attributes"]["mcp.interceptors.interceptor"] for span in invokes)
    assert SECRET not in json.dumps(spans)


# OTLP over HTTP to a receiver on loopback --------------------------------------------------------------
@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[bytes]]]:
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers.get("content-length", "0"))))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(STEP_S)


def decode_otlp(bodies: list[bytes]) -> list[dict[str, Any]]:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    spans = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    attributes = {kv["key"]: next(iter(kv["value"].values())) for kv in MessageToDict(span).get(
                        "attributes", [])}  # fmt: skip
                    spans.append({
                        "name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                        "parent_id": span.parent_span_id.hex() or None, "service": resource.get("service.name"),
                        "kind": {2: "server"}.get(span.kind, str(span.kind)), "attributes": attributes,
                    })  # fmt: skip
    return spans


@pytest.mark.slow
def test_otlp_environment_variables_export_one_span_per_call_to_a_loopback_receiver() -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    with otlp_receiver() as (endpoint, bodies):
        env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
        lines, err = run_stdio_gateway({**env, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
        assert_only_mcp(lines)
        assert bodies, err[-2000:]  # exported at exit at the latest (the batch processor flushes)
        spans = decode_otlp(bodies)
    check_call_tree(spans)


# The console exporter: stderr, never the MCP stream --------------------------------------------------
def console_spans(err: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    spans, index = [], 0
    while (start := err.find("{\n", index)) >= 0:
        value, index = decoder.raw_decode(err, start)
        if isinstance(value, dict) and "context" in value:
            spans.append({
                "name": value["name"], "trace_id": value["context"]["trace_id"][2:],
                "span_id": value["context"]["span_id"][2:],
                "parent_id": value["parent_id"][2:] if value["parent_id"] else None,
                "kind": value["kind"].removeprefix("SpanKind.").lower(), "attributes": value["attributes"],
                "service": value["resource"]["attributes"].get("service.name"),
            })  # fmt: skip
    return spans


@pytest.mark.slow
def test_the_console_exporter_writes_spans_to_stderr_and_stdout_stays_mcp() -> None:
    lines, err = run_stdio_gateway({"OTEL_TRACES_EXPORTER": "console"})
    assert_only_mcp(lines)
    check_call_tree(console_spans(err))


# In process: the SDK's in-memory exporter ---------------------------------------------------------------
@pytest.mark.anyio
async def test_a_call_refused_by_the_chain_ends_its_span_with_the_error_code(exporter: InMemorySpanExporter) -> None:
    registry = Registry()

    @registry.validator("no-deletes", events="tools/call", phase="request")
    async def no_deletes(invocation: Invocation) -> Verdict:
        name = invocation.payload["params"]["name"]
        return Verdict.deny("destructive") if name.startswith("delete_") else Verdict.allow()

    async with LocalChain(registry) as chain:
        adapter = ChainAdapter(chain)
        spans = CallSpans(adapter, tracing.TRACER)
        refused = request_pass(1, {"name": "delete_all", "arguments": {}})
        assert isinstance(await adapter.run(refused), ChainBlocked)
        allowed = request_pass(2, {"name": "read", "arguments": {}})
        await run_request(adapter, allowed)
        assert allowed.request is not None
        await adapter.run(later_pass(allowed.request, Channel.PROGRESS))  # inside the call: not its end
        assert 2 in spans.open
        await adapter.run(later_pass(allowed.request, Channel.RESULT))
        assert not spans.open
    finished = {span.name: span for span in exporter.get_finished_spans()}
    deleted, read = finished["tools/call delete_all"], finished["tools/call read"]
    assert deleted.attributes is not None and read.attributes is not None
    assert deleted.attributes["mcp.interceptors.outcome"] == "refused"
    assert isinstance(deleted.attributes["rpc.jsonrpc.error_code"], int)
    assert deleted.status.status_code.name == "ERROR"
    assert read.attributes["mcp.interceptors.outcome"] == "passed" and read.status.status_code.name == "UNSET"
    chains = [span for span in exporter.get_finished_spans() if span.name == tracing.CHAIN_SPAN]
    assert chains and all(span.parent is not None for span in chains)
    parents = {span.parent.span_id for span in chains if span.parent is not None}
    assert parents <= {deleted.context.span_id, read.context.span_id}
