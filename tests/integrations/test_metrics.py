"""Metrics through a real chain (the policy and transforms stages in LocalChain, a remote stdio host),
read back with prometheus-client's own parser over the real HTTP server; /healthz shows nothing secret."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from integrations.metrics import Metrics, answer, metrics_asgi, parse_address, serve_metrics
from interceptors import Direction, InvocationContext, Principal
from interceptors.policy import policy_registry, transforms_selector
from interceptors.transforms import transforms_registry
from interceptors_chain import Chain, RemoteServer
from interceptors_server import LocalChain
from tests.conftest import ROOT
from tests.interceptors.policy.test_policy_catalog import primed

pytestmark = pytest.mark.anyio

SECRET = "AKIAQ3EGUJZN5XKW7P2L"
CONTEXT = InvocationContext(principal=Principal("user", "alice", {"roles": []}), trace_id="t-1", session_id="s")


async def http_get(port: int, path: str, head: str = "host: 127.0.0.1\r\n") -> tuple[int, str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\n{head}\r\n".encode())
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), timeout=30)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), headers["content-type"], body


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(parsed: dict[Any, float], name: str, **labels: str) -> float:
    return parsed.get((name, tuple(sorted(labels.items()))), 0.0)


async def call(chain: Any, metrics: Metrics, name: str, arguments: dict[str, Any]) -> Any:
    payload = {"method": "tools/call", "params": {"name": name, "arguments": arguments}}
    result = await chain.execute("tools/call", "request", payload, direction="receiving", context=CONTEXT)
    metrics.observe_execution(result, method="tools/call")
    return result


async def test_counters_move_as_calls_are_made_and_parse_with_the_prometheus_parser() -> None:
    document = {"name": "M", "rate_limits": [{"rate": 2, "per": "minute", "burst": 2, "tools": ["get_asset"]}],
                "extends": "standard"}  # fmt: skip
    engine = primed(document)
    full = engine.policy.document
    registries = [policy_registry(engine), transforms_registry(full, select=transforms_selector(engine))]
    async with LocalChain(*registries) as chain:
        metrics = Metrics(chain)
        server = await serve_metrics(metrics, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            before = samples((await http_get(port, "/metrics"))[2].decode())
            assert value(before, "mcp_interceptors_requests_total", method="tools/call", outcome="passed") == 0
            for _ in range(3):
                await call(chain, metrics, "get_asset", {"id": "a"})
            metrics.request_started(1, "tools/call")
            response = {"content": [{"type": "text", "text": f"token {SECRET}"}]}
            result = await chain.execute("tools/call", "response", response, direction="sending", context=CONTEXT)
            metrics.observe_execution(result)
            metrics.request_finished(1)
            assert result.modified and SECRET not in json.dumps(result.final_payload)
            metrics.note_reload(True)
            status, content_type, body = await http_get(port, "/metrics")
        finally:
            server.close()
            await server.wait_closed()
    assert status == 200 and content_type.startswith("text/plain")
    text = body.decode()
    assert SECRET not in text
    after = samples(text)
    print({k: v for k, v in after.items() if k[0].endswith("_total") and v})
    assert value(after, "mcp_interceptors_requests_total", method="tools/call", outcome="passed") == 2
    assert value(after, "mcp_interceptors_requests_total", method="tools/call", outcome="blocked") == 1
    assert value(after, "mcp_interceptors_rate_limited_total") == 1
    assert value(after, "mcp_interceptors_blocks_total", interceptor="policy", reason="rate_limited") == 1
    redacted = {k: v for k, v in after.items() if k[0] == "mcp_interceptors_redactions_total" and v}
    assert redacted and sum(redacted.values()) >= 1, after
    assert value(after, "mcp_interceptors_call_seconds_count", method="tools/call") == 1
    assert value(after, "mcp_interceptors_reloads_total", outcome="ok") == 1
    policy_invokes = sum(
        v
        for k, v in after.items()
        if k[0] == "mcp_interceptors_interceptor_seconds_count" and ("interceptor", "policy") in k[1]
    )
    assert policy_invokes >= 3


async def test_healthz_reports_a_remote_server_up_then_down_and_names_nothing_secret() -> None:
    remote = RemoteServer("host", command=[sys.executable, "-m", "tests.servers.stdio_host"], cwd=str(ROOT))
    chain = Chain(default_timeout_ms=30_000)
    metrics = Metrics(chain)
    connected = {"upstream": True}
    metrics.upstream_connected = lambda: connected["upstream"]
    server = await serve_metrics(metrics, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with remote:
            await chain.add_remote(remote)
            status, content_type, body = await http_get(port, "/healthz")
            assert (status, content_type) == (200, "application/json")
            report = json.loads(body)
            assert report == {"status": "ok", "interceptorServers": {"host": {"up": True, "restarts": 0}},
                              "upstream": {"connected": True}}  # fmt: skip
            parsed = samples((await http_get(port, "/metrics"))[2].decode())
            assert value(parsed, "mcp_interceptors_interceptor_server_up", server="host") == 1
            assert value(parsed, "mcp_interceptors_upstream_connected") == 1
        connected["upstream"] = False
        status, _, body = await http_get(port, "/healthz")
        assert status == 503 and json.loads(body)["status"] == "degraded"
        assert json.loads(body)["interceptorServers"]["host"]["up"] is False
        assert (await http_get(port, "/nope"))[0] == 404
    finally:
        server.close()
        await server.wait_closed()


async def test_label_values_are_bounded_and_plain_names() -> None:
    metrics = Metrics()
    for index in range(300):
        metrics.note_request(f"vendor/method-{index}", "passed")
    metrics.note_request(f"x {SECRET}\n", "passed")
    text = metrics.exposition()[0].decode()
    parsed = samples(text)
    methods = {dict(k[1]).get("method") for k in parsed if k[0] == "mcp_interceptors_requests_total"}
    assert len(methods) == 257 and "other" in methods and SECRET not in text


async def test_the_asgi_app_answers_like_the_server() -> None:
    metrics = Metrics()
    app = metrics_asgi(metrics)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", "method": "GET", "path": "/healthz"}, receive, send)
    assert sent[0]["status"] == 200 and json.loads(sent[1]["body"]) == {"status": "ok", "interceptorServers": {}}
    assert answer(metrics, "POST", "/metrics")[0] == 405
    assert parse_address("127.0.0.1:9464") == ("127.0.0.1", 9464) and parse_address("[::1]:1") == ("::1", 1)
    with pytest.raises(ValueError):
        parse_address("9464x")
    _ = Direction


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.slow
async def test_router_gateway_serves_metrics_and_health_with_metrics_flag() -> None:
    from mcp import Client

    from tests.integrations.gateway.router.test_router_gateway import router_params

    port = free_port()
    params = router_params("--policy", "standard", "--metrics", f"127.0.0.1:{port}")
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            for text in ("one", "two"):
                await client.session.call_tool("echo", {"text": text})
            status, _, body = await http_get(port, "/metrics")
            health_status, _, health = await http_get(port, "/healthz")
    assert status == 200 and health_status == 200
    parsed = samples(body.decode())
    assert value(parsed, "mcp_interceptors_requests_total", method="tools/call", outcome="passed") == 2
    assert value(parsed, "mcp_interceptors_upstream_connected") == 1
    assert value(parsed, "mcp_interceptors_call_seconds_count", method="tools/call") == 2
    report = json.loads(health)
    assert report["status"] == "ok" and report["upstream"] == {"connected": True}
    assert report["interceptorServers"] and all(
        s == {"up": True, "restarts": 0} for s in report["interceptorServers"].values()
    )


@pytest.mark.parametrize(
    ("head", "status"),
    [
        ("host: 127.0.0.1\r\n", 200),
        ("Host: localhost:9464\r\n", 200),
        ("host: 127.0.0.1\r\norigin: http://localhost:3000\r\n", 200),
        ("host: attacker.example\r\n", 421),  # a page that rebound its DNS name to 127.0.0.1
        ("", 421),
        ("host: 127.0.0.1:x\r\n", 421),
        ("host: 127.0.0.1\r\norigin: http://attacker.example\r\n", 403),
        ("host: 127.0.0.1\r\norigin: null\r\n", 403),
    ],
)
async def test_the_metrics_server_checks_host_and_origin_like_mcp(head: str, status: int) -> None:
    server = await serve_metrics(Metrics(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        for path in ("/metrics", "/healthz"):
            got, _, body = await http_get(port, path, head)
            assert got == status or (status == 200 and path == "/healthz" and got == 503), (path, got, body)
            if status != 200:
                assert b"mcp_interceptors" not in body and b"status" not in body
    finally:
        server.close()
        await server.wait_closed()
