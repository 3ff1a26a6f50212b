"""A client's W3C trace context (`_meta.traceparent`/`tracestate`) through the router gateway's chain adapter:
every pass of a request runs with the client's trace id and a span id of that request's own (so concurrent
requests of one trace keep their own per-tool rules), remote interceptor servers see the client's trace,
and with the OpenTelemetry SDK the chain spans are children of the client's span. A malformed traceparent
is ignored.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import anyio
import pytest
from mcp import Client, types
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from integrations.gateway.chain_adapter import TRACE_LEARNED, ChainAdapter
from integrations.gateway.router import ChainPassed, RequestState, RunChain
from integrations.gateway.router.channels import Channel
from interceptors import Direction, Invocation, Phase, Registry
from interceptors_chain import Chain, RemoteServer, tracing
from interceptors_server import LocalChain
from tests.conftest import ROOT
from tests.integrations.gateway.router.test_router_gateway import PER_TOOL, router_params
from tests.integrations.gateway.test_gateway import STEP_S, TEST_S
from tests.servers.trace_stamp_host import STAMP_PREFIX
from tests.servers.upstream_server import MARKER

pytestmark = pytest.mark.anyio

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
SPAN_ID = re.compile(r"^[0-9a-f]{16}$")


def request_pass(call: int, params: dict[str, Any], state: RequestState | None = None) -> RunChain:
    state = state or RequestState(call, "tools/call", params.get("name"))
    payload = {"method": "tools/call", "params": params}
    return RunChain(call, "tools/call", Phase.REQUEST, Direction.RECEIVING, str(Channel.REQUEST), payload, None, state)


def later_pass(state: RequestState, channel: Channel, payload: Any = None) -> RunChain:
    payload = payload or {"content": [{"type": "text", "text": "ok"}]}
    phase, direction = Phase.RESPONSE, Direction.SENDING
    if channel is Channel.SERVER_REQUEST:
        phase = Phase.REQUEST
    return RunChain(0, "tools/call", phase, direction, str(channel), payload, None, state)


async def run_request(adapter: ChainAdapter, action: RunChain) -> None:
    """What the router does with a request pass's outcome: keep what it learned with the request."""
    outcome = await adapter.run(action)
    assert isinstance(outcome, ChainPassed)
    assert action.request is not None
    if outcome.learned:
        action.request.learned.update(outcome.learned)


def recording_registry(phase: str) -> tuple[Registry, list[tuple[str, str | None, str | None]]]:
    seen: list[tuple[str, str | None, str | None]] = []
    registry = Registry()

    @registry.validator("record", events=["tools/call"], phase=phase)
    def record(inv: Invocation) -> None:
        context = inv.context
        assert context is not None
        seen.append((inv.phase.value, context.trace_id, context.span_id))

    return registry, seen


async def test_every_pass_of_a_request_carries_the_clients_trace_and_its_own_span() -> None:
    registry, seen = recording_registry("both")
    async with LocalChain(registry) as chain:
        adapter = ChainAdapter(chain)
        meta = {"_meta": {"traceparent": TRACEPARENT, "tracestate": "vendor=abc"}}
        first, second = request_pass(1, {"name": "a", **meta}), request_pass(2, {"name": "b", **meta})
        await run_request(adapter, first)
        await run_request(adapter, second)
        assert first.request is not None and second.request is not None
        for channel in (Channel.PROGRESS, Channel.LOG, Channel.RESULT, Channel.ERROR):
            await adapter.run(later_pass(first.request, channel))
        await adapter.run(later_pass(second.request, Channel.RESULT))
        await adapter.run(later_pass(first.request, Channel.TASK_STATUS))  # a side pass: ids of its own
        await run_request(adapter, request_pass(3, {"name": "c", "_meta": {"traceparent": "00-zz-yy-01"}}))
    print("contexts seen:", seen)
    one, two = seen[0][2], seen[1][2]
    assert one is not None and two is not None and SPAN_ID.match(one) and SPAN_ID.match(two)
    assert one != two and CLIENT_SPAN not in (one, two) and "0" * 16 not in (one, two)
    assert seen[:7] == [("request", TRACE_ID, one), ("request", TRACE_ID, two)] + [("response", TRACE_ID, one)] * 4 + [
        ("response", TRACE_ID, two)
    ]
    side_trace, side_span = seen[7][1:]
    assert side_trace is not None and side_trace.startswith("gateway-call-1-side-") and side_span is None
    assert seen[8] == ("request", "gateway-call-3", None)  # malformed: ignored, never an error


async def test_a_chain_with_only_a_response_plan_still_gets_the_clients_trace() -> None:
    registry, seen = recording_registry("response")
    async with LocalChain(registry) as chain:
        adapter = ChainAdapter(chain)
        assert adapter.has_work("tools/call", Phase.REQUEST, Direction.RECEIVING)  # to read the trace context
        assert not adapter.has_work("tools/list", Phase.REQUEST, Direction.RECEIVING)
        action = request_pass(1, {"name": "a", "_meta": {"traceparent": TRACEPARENT}})
        await run_request(adapter, action)
        assert seen == []  # the request pass executed nothing
        assert action.request is not None and TRACE_LEARNED in action.request.learned
        await adapter.run(later_pass(action.request, Channel.RESULT))
    assert len(seen) == 1 and seen[0][:2] == ("response", TRACE_ID)


async def test_chain_spans_and_the_remote_host_join_the_clients_trace(exporter: InMemorySpanExporter) -> None:
    host = RemoteServer("trace-host", command=[sys.executable, "-m", "tests.servers.trace_host"], cwd=str(ROOT))
    async with host as server:
        chain = Chain(default_timeout_ms=30_000)
        await chain.add_remote(server)
        adapter = ChainAdapter(chain)
        meta = {"traceparent": TRACEPARENT, "tracestate": "vendor=abc,other=x1"}
        action = request_pass(1, {"name": "send", "arguments": {}, "_meta": meta})
        await run_request(adapter, action)
        assert action.request is not None
        learned = action.request.learned[TRACE_LEARNED]
        context = adapter.context_for(later_pass(action.request, Channel.RESULT), learned)
        assert context is not None
        result = await chain.execute(
            "tools/call", Phase.RESPONSE, {"content": []}, direction=Direction.SENDING, context=context
        )
        await adapter.run(later_pass(action.request, Channel.RESULT))
    (report,) = [r.result["info"] for r in result.results if r.interceptor == "trace/report"]
    print("remote host saw", report)
    assert (report["trace"], report["contextTrace"], report["contextSpan"]) == (TRACE_ID, TRACE_ID, learned.span_id)
    spans = exporter.get_finished_spans()
    chains = [span for span in spans if span.name == tracing.CHAIN_SPAN]
    print("chain spans:", [(span.context.trace_id, span.parent.span_id if span.parent else None) for span in chains])
    assert len(chains) == 3  # request, and the response twice (by hand and through the adapter)
    through_adapter = [chains[0], chains[2]]
    for span in through_adapter:
        assert f"{span.context.trace_id:032x}" == TRACE_ID
        assert span.parent is not None and f"{span.parent.span_id:016x}" == CLIENT_SPAN and span.parent.is_remote
        assert dict(span.context.trace_state) == {"vendor": "abc", "other": "x1"}
    invokes = [span for span in spans if span.name == tracing.INVOKE_SPAN]
    assert invokes and all(f"{span.context.trace_id:032x}" == TRACE_ID for span in invokes)


def stamps(result: types.CallToolResult) -> tuple[str, list[str]]:
    """The result's own text, and the (trace, span) the remote stamp host saw."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    own = [text for text in texts if not text.startswith(STAMP_PREFIX)]
    (stamp,) = [text for text in texts if text.startswith(STAMP_PREFIX)]
    return "".join(own), stamp.removeprefix(STAMP_PREFIX).split(" ")


@pytest.mark.slow
async def test_concurrent_calls_of_one_trace_keep_their_rules_and_the_remote_server_sees_the_trace(
    tmp_path: Any,
) -> None:
    policy = tmp_path / "per-tool.yaml"
    policy.write_text(PER_TOOL)
    chain = tmp_path / "chain.yaml"
    stamp_host = f"[{sys.executable}, -m, tests.servers.trace_stamp_host]"
    chain.write_text(f"servers:\n  - name: stamp\n    command: {stamp_host}\n")
    params = router_params("--policy", str(policy), "--chain", str(chain))
    first_progress = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        first_progress.set()

    meta: Any = {"traceparent": TRACEPARENT}
    outcome: dict[str, types.CallToolResult] = {}
    with anyio.fail_after(TEST_S):
        async with Client(params, read_timeout_seconds=STEP_S) as client:

            async def slow() -> None:
                # step 1 at once, step 2 after 3 s: the echo call below runs entirely in between
                arguments = {"text": MARKER, "steps": 2, "interval": 3}
                outcome["progress"] = await client.session.call_tool(
                    "progress", arguments, progress_callback=on_progress, meta=meta
                )

            async with anyio.create_task_group() as group:
                group.start_soon(slow)
                await first_progress.wait()
                outcome["echo"] = await client.session.call_tool("echo", {"text": MARKER}, meta=meta)
            malformed: Any = {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01-x"}
            outcome["malformed"] = await client.session.call_tool("echo", {"text": "x"}, meta=malformed)
    progress_text, progress_seen = stamps(outcome["progress"])
    echo_text, echo_seen = stamps(outcome["echo"])
    print("progress:", progress_text, progress_seen, "echo:", echo_text, echo_seen)
    assert progress_text == "done: [per-tool]"  # its rule held although the echo call of the same trace ran between
    assert echo_text == MARKER  # and echo kept having no rule
    assert progress_seen[0] == echo_seen[0] == TRACE_ID  # the remote interceptor server joined the client's trace
    assert progress_seen[1] != echo_seen[1] and all(SPAN_ID.match(s[1]) for s in (progress_seen, echo_seen))
    _, malformed_seen = stamps(outcome["malformed"])
    assert malformed_seen[0].startswith("gateway-call-") and malformed_seen[1] == "None"
