"""The interceptor host over the real SDK in-process: list, invoke, every SEP-2624 error row, capability.

Every test runs in both eras: mode "auto" (2026-07-28, server/discover) and "legacy" (2025-11-25
initialize handshake over memory streams).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ErrorData

from interceptors import (
    CAPABILITY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Invocation,
    Mutation,
    MutationResult,
    Registry,
    Verdict,
)
from interceptors_chain import SessionConnection
from interceptors_server import InterceptorHost, host_of, install, interceptor_server

pytestmark = pytest.mark.anyio

SECRET = "sk_live_TOPSECRET_4242"
CONFIG_SCHEMA = {
    "type": "object",
    "properties": {"limit": {"type": "integer", "minimum": 0}},
    "required": ["limit"],
    "additionalProperties": False,
}
RPC_TIMEOUT_S = 60.0


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def build_registry() -> Registry:
    """Interceptors covering every hook shape, outcome and failure the host must handle."""
    reg = Registry()

    @reg.validator("v/deny-flag", events=["tools/call"], phase="both")
    def deny_flag(inv: Invocation) -> Verdict:
        if isinstance(inv.payload, dict) and inv.payload.get("deny"):
            return Verdict.deny("denied by flag", path="/deny")
        return Verdict.allow()

    @reg.mutator("m/upper", events=["tools/call"], phase="request")
    def upper(inv: Invocation) -> Mutation:
        text = inv.payload.get("text") if isinstance(inv.payload, dict) else None
        if not isinstance(text, str) or text == text.upper():
            return Mutation.unchanged()
        return Mutation({**inv.payload, "text": text.upper()})

    @reg.validator("v/star", events=["*"], phase="request")
    def star(inv: Invocation) -> bool:
        return True

    @reg.validator("v/prompts-ns", events=["prompts/*"], phase="response")
    async def prompts_ns(inv: Invocation) -> Verdict:
        return Verdict.allow()

    @reg.validator("v/config", events=["tools/call"], config_schema=CONFIG_SCHEMA)
    def with_config(inv: Invocation) -> Verdict:
        limit = (inv.config or {}).get("limit", 0)
        return Verdict.allow() if len(json.dumps(inv.payload)) <= limit else Verdict.deny("too long")

    @reg.validator("v/echo-invocation", events=["custom/echo"])
    def echo_invocation(inv: Invocation) -> Verdict:
        context = None if inv.context is None else inv.context.to_wire()
        return Verdict.allow(
            info={
                "interceptor": inv.interceptor,
                "event": inv.event,
                "phase": inv.phase.value,
                "config": None if inv.config is None else dict(inv.config),
                "context": context,
            }
        )

    @reg.validator("v/boom", events=["tools/call"])
    def boom(inv: Invocation) -> Verdict:
        raise RuntimeError(f"database password is {SECRET}; payload={inv.payload}")

    @reg.mutator("m/boom", events=["tools/call"])
    async def async_boom(inv: Invocation) -> Mutation:
        raise ValueError(SECRET)

    @reg.validator("v/malformed", events=["tools/call"])
    def malformed(inv: Invocation) -> Any:
        return f"not a verdict {SECRET}"

    @reg.mutator("m/lies", events=["tools/call"])
    def lies(inv: Invocation) -> MutationResult:
        return MutationResult("m/lies", inv.phase, False, {"changed": SECRET})

    @reg.validator("v/slow-sync", events=["slow/op"])
    def slow_sync(inv: Invocation) -> Verdict:
        time.sleep(10)  # blocks its thread and ignores cancellation
        return Verdict.allow()

    @reg.validator("v/slow-async", events=["slow/op"])
    async def slow_async(inv: Invocation) -> Verdict:
        await anyio.sleep(10)
        return Verdict.allow()

    @reg.mutator("m/slow-sync", events=["slow/op"])
    def slow_sync_mutator(inv: Invocation) -> Mutation:
        time.sleep(10)
        return Mutation.unchanged()

    return reg


ALL_NAMES = [
    "v/deny-flag",
    "m/upper",
    "v/star",
    "v/prompts-ns",
    "v/config",
    "v/echo-invocation",
    "v/boom",
    "m/boom",
    "v/malformed",
    "m/lies",
    "v/slow-sync",
    "v/slow-async",
    "m/slow-sync",
]


@asynccontextmanager
async def connected(server: Server[Any] | MCPServer, mode: str) -> AsyncIterator[tuple[Client, SessionConnection]]:
    async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
        yield client, SessionConnection(client.session)


@asynccontextmanager
async def host(mode: str, registry: Registry | None = None) -> AsyncIterator[SessionConnection]:
    server = interceptor_server(build_registry() if registry is None else registry)
    async with connected(server, mode) as (_, conn):
        yield conn


async def listed(conn: SessionConnection, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    result = await conn.request("interceptors/list", params or {}, RPC_TIMEOUT_S)
    assert set(result) == {"interceptors"}
    return list(result["interceptors"])


async def invoke(conn: SessionConnection, **params: Any) -> dict[str, Any]:
    return await conn.request("interceptor/invoke", params, RPC_TIMEOUT_S)


async def rpc_error(conn: SessionConnection, method: str, params: dict[str, Any]) -> ErrorData:
    with pytest.raises(MCPError) as info:
        await conn.request(method, params, RPC_TIMEOUT_S)
    return info.value.error


def call(name: str, payload: Any, event: str = "tools/call", phase: str = "request", **extra: Any) -> Any:
    return {"name": name, "event": event, "phase": phase, "payload": payload, **extra}


# interceptors/list -------------------------------------------------------------------------------


async def test_list_all_in_registration_order_with_defaults_omitted(mode: str) -> None:
    async with host(mode) as conn:
        interceptors = await listed(conn)
    assert [i["name"] for i in interceptors] == ALL_NAMES
    by_name = {i["name"]: i for i in interceptors}
    assert by_name["v/deny-flag"] == {
        "name": "v/deny-flag",
        "type": "validation",
        "hooks": [
            {"events": ["tools/call"], "phase": "request"},
            {"events": ["tools/call"], "phase": "response"},
        ],
    }
    assert by_name["m/upper"] == {
        "name": "m/upper",
        "type": "mutation",
        "hooks": [{"events": ["tools/call"], "phase": "request"}],
    }
    assert by_name["v/config"]["configSchema"] == CONFIG_SCHEMA


async def test_list_order_spans_registries_in_install_order(mode: str) -> None:
    first, second = Registry(), Registry()
    second.register(lambda inv: True, name="z-first", type="validation", events=["a/b"])
    first.register(lambda inv: True, name="b", type="validation", events=["a/b"])
    first.register(lambda inv: True, name="a", type="validation", events=["a/b"])
    async with connected(interceptor_server(second, first), mode) as (_, conn):
        assert [i["name"] for i in await listed(conn)] == ["z-first", "b", "a"]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            "tools/call",
            [
                "v/deny-flag",
                "m/upper",
                "v/star",
                "v/config",
                "v/boom",
                "m/boom",
                "v/malformed",
                "m/lies",
            ],
        ),
        ("prompts/get", ["v/star", "v/prompts-ns"]),
        ("prompts/list", ["v/star", "v/prompts-ns"]),
        ("resources/read", ["v/star"]),
        ("custom/echo", ["v/star", "v/echo-invocation"]),
        ("slow/op", ["v/star", "v/slow-sync", "v/slow-async", "m/slow-sync"]),
        # Not context operations: no hook matches them, not even "*".
        ("initialize", []),
        ("ping", []),
        ("notifications/initialized", []),
        ("interceptor/invoke", []),
    ],
)
async def test_list_filter_by_event(mode: str, event: str, expected: list[str]) -> None:
    async with host(mode) as conn:
        assert [i["name"] for i in await listed(conn, {"event": event})] == expected


async def test_list_empty_filter_means_all(mode: str) -> None:
    async with host(mode) as conn:
        assert [i["name"] for i in await listed(conn, {"event": ""})] == ALL_NAMES


async def test_list_unknown_event_is_an_empty_list(mode: str) -> None:
    reg = Registry()
    reg.register(lambda inv: True, name="only-tools", type="validation", events=["tools/call"])
    async with host(mode, reg) as conn:
        assert await listed(conn, {"event": "unknown/event"}) == []
        assert await listed(conn, {"event": "tools/list"}) == []
    async with host(mode) as conn:
        assert [i["name"] for i in await listed(conn, {"event": "unknown/event"})] == ["v/star"]


@pytest.mark.parametrize("pattern", ["*", "tools/*", "prompts/*", "*/call"])
async def test_list_wildcard_filter_is_invalid_params(mode: str, pattern: str) -> None:
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptors/list", {"event": pattern})
    assert error.code == INVALID_PARAMS


@pytest.mark.parametrize("bad", [123, True, ["tools/call"], {"event": "tools/call"}])
async def test_list_non_string_filter_is_invalid_params(mode: str, bad: Any) -> None:
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptors/list", {"event": bad})
    assert error.code == INVALID_PARAMS


async def test_list_on_an_empty_host(mode: str) -> None:
    async with host(mode, Registry()) as conn:
        assert await listed(conn) == []


# interceptor/invoke: successful results ----------------------------------------------------------


@pytest.mark.parametrize("phase", ["request", "response"])
async def test_invoke_validator_pass(mode: str, phase: str) -> None:
    async with host(mode) as conn:
        result = await invoke(conn, **call("v/deny-flag", {"deny": False}, phase=phase))
    duration = result.pop("durationMs")
    assert isinstance(duration, int | float) and duration >= 0
    assert result == {"interceptor": "v/deny-flag", "type": "validation", "phase": phase, "valid": True}


async def test_invoke_validator_deny(mode: str) -> None:
    async with host(mode) as conn:
        result = await invoke(conn, **call("v/deny-flag", {"deny": True}, phase="response"))
    result.pop("durationMs")
    assert result == {
        "interceptor": "v/deny-flag",
        "type": "validation",
        "phase": "response",
        "valid": False,
        "severity": "error",
        "messages": [{"message": "denied by flag", "severity": "error", "path": "/deny"}],
    }


async def test_invoke_mutator_modified(mode: str) -> None:
    async with host(mode) as conn:
        result = await invoke(conn, **call("m/upper", {"text": "hello", "n": 1}))
    result.pop("durationMs")
    assert result == {
        "interceptor": "m/upper",
        "type": "mutation",
        "phase": "request",
        "modified": True,
        "payload": {"text": "HELLO", "n": 1},
    }


@pytest.mark.parametrize("payload", [{"text": "ALREADY"}, {"other": [1, 2.5, None]}, None, "str", 7])
async def test_invoke_mutator_unmodified_echoes_payload(mode: str, payload: Any) -> None:
    async with host(mode) as conn:
        result = await invoke(conn, **call("m/upper", payload))
    result.pop("durationMs")
    assert result == {
        "interceptor": "m/upper",
        "type": "mutation",
        "phase": "request",
        "modified": False,
        "payload": payload,
    }


async def test_invoke_through_wildcard_and_namespace_hooks(mode: str) -> None:
    async with host(mode) as conn:
        star = await invoke(conn, **call("v/star", {}, event="anything/custom"))
        namespaced = await invoke(conn, **call("v/prompts-ns", {}, event="prompts/get", phase="response"))
    assert star["valid"] is True and star["interceptor"] == "v/star"
    assert namespaced["valid"] is True and namespaced["phase"] == "response"


async def test_invoke_passes_event_phase_config_and_context_to_the_handler(mode: str) -> None:
    context = {
        "principal": {"type": "user", "id": "u1", "claims": {"role": "admin"}},
        "traceId": "t-1",
        "spanId": "s-1",
        "timestamp": "2026-01-01T00:00:00.000Z",
    }
    async with host(mode) as conn:
        result = await invoke(
            conn, **call("v/echo-invocation", {"x": 1}, event="custom/echo", config={"k": [1]}, context=context)
        )
        bare = await invoke(conn, **call("v/echo-invocation", {"x": 1}, event="custom/echo"))
    assert result["info"] == {
        "interceptor": "v/echo-invocation",
        "event": "custom/echo",
        "phase": "request",
        "config": {"k": [1]},
        "context": context,
    }
    assert bare["info"]["config"] is None and bare["info"]["context"] is None


async def test_invoke_config_satisfying_the_schema_runs(mode: str) -> None:
    async with host(mode) as conn:
        allowed = await invoke(conn, **call("v/config", {"a": 1}, config={"limit": 100}))
        denied = await invoke(conn, **call("v/config", {"a": 1}, config={"limit": 1}))
    assert allowed["valid"] is True
    assert denied["valid"] is False


# interceptor/invoke: the SEP-2624 error table ----------------------------------------------------


async def test_unknown_name(mode: str) -> None:
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptor/invoke", call("no/such-interceptor", {}))
    assert error.code == INVALID_PARAMS
    assert error.data == {"name": "no/such-interceptor"}


@pytest.mark.parametrize(
    ("name", "event", "phase", "hooks"),
    [
        ("m/upper", "tools/call", "response", [{"events": ["tools/call"], "phase": "request"}]),
        ("m/upper", "tools/list", "request", [{"events": ["tools/call"], "phase": "request"}]),
        ("v/prompts-ns", "prompts/get", "request", [{"events": ["prompts/*"], "phase": "response"}]),
        ("v/prompts-ns", "tools/call", "response", [{"events": ["prompts/*"], "phase": "response"}]),
        ("v/star", "initialize", "request", [{"events": ["*"], "phase": "request"}]),
        ("v/star", "notifications/initialized", "request", [{"events": ["*"], "phase": "request"}]),
        ("v/star", "tools/call", "response", [{"events": ["*"], "phase": "request"}]),
    ],
)
async def test_event_or_phase_not_hooked(
    mode: str, name: str, event: str, phase: str, hooks: list[dict[str, Any]]
) -> None:
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptor/invoke", call(name, {}, event=event, phase=phase))
    assert error.code == INVALID_PARAMS
    assert error.data == {"name": name, "event": event, "phase": phase, "advertisedHooks": hooks}


def _without(params: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != key}


MALFORMED = {
    "missing name": _without(call("v/deny-flag", {}), "name"),
    "empty name": call("", {}),
    "non-string name": call(7, {}),
    "missing event": _without(call("v/deny-flag", {}), "event"),
    "empty event": call("v/deny-flag", {}, event=""),
    "missing phase": _without(call("v/deny-flag", {}), "phase"),
    "phase both": call("v/deny-flag", {}, phase="both"),
    "phase unknown": call("v/deny-flag", {}, phase="REQUEST"),
    "payload missing": _without(call("v/deny-flag", {}), "payload"),
    "timeoutMs negative": call("v/deny-flag", {}, timeoutMs=-5),
    "timeoutMs zero": call("v/deny-flag", {}, timeoutMs=0),
    "timeoutMs fractional": call("v/deny-flag", {}, timeoutMs=1.5),
    "timeoutMs boolean": call("v/deny-flag", {}, timeoutMs=True),
    "timeoutMs string": call("v/deny-flag", {}, timeoutMs="100"),
    "config not an object": call("v/deny-flag", {}, config=["limit"]),
    "context without timestamp": call("v/deny-flag", {}, context={"traceId": "t"}),
    "context not an object": call("v/deny-flag", {}, context="ctx"),
    "context bad principal": call(
        "v/deny-flag", {}, context={"timestamp": "2026-01-01T00:00:00Z", "principal": {"type": "robot"}}
    ),
}


@pytest.mark.parametrize("params", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_malformed_params(mode: str, params: dict[str, Any]) -> None:
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptor/invoke", params)
    assert error.code == INVALID_PARAMS


@pytest.mark.parametrize(
    "config",
    [{}, {"limit": -1}, {"limit": "10"}, {"limit": 1.5}, {"limit": 1, "extra": True}],
    ids=["missing-required", "below-minimum", "wrong-type", "not-integer", "additional-property"],
)
async def test_config_failing_config_schema(mode: str, config: dict[str, Any]) -> None:
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptor/invoke", call("v/config", {"a": 1}, config=config))
    assert error.code == INVALID_PARAMS
    assert isinstance(error.data, dict) and error.data.get("name") == "v/config"


def _error_text(error: ErrorData) -> str:
    return error.message + json.dumps(error.data)


@pytest.mark.parametrize(("name", "exc_type"), [("v/boom", "RuntimeError"), ("m/boom", "ValueError")])
async def test_handler_exception_is_internal_error_without_the_secret(
    mode: str, name: str, exc_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptor/invoke", call(name, {"card": SECRET}))
        # The connection survives a failing handler.
        assert (await invoke(conn, **call("v/deny-flag", {})))["valid"] is True
    assert error.code == INTERNAL_ERROR
    assert isinstance(error.data, dict)
    assert set(error.data) == {"interceptor", "reason"}
    assert error.data["interceptor"] == name
    assert exc_type in error.data["reason"]
    assert SECRET not in _error_text(error)
    assert SECRET not in caplog.text


@pytest.mark.parametrize("name", ["v/malformed", "m/lies"])
async def test_malformed_handler_result_is_internal_error(mode: str, name: str) -> None:
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptor/invoke", call(name, {"a": 1}))
    assert error.code == INTERNAL_ERROR
    assert isinstance(error.data, dict) and error.data["interceptor"] == name
    assert SECRET not in _error_text(error)


@pytest.mark.parametrize("name", ["v/slow-sync", "v/slow-async", "m/slow-sync"])
async def test_timeout_is_returned_on_time(mode: str, name: str) -> None:
    async with host(mode) as conn:
        started = time.perf_counter()
        error = await rpc_error(conn, "interceptor/invoke", call(name, {}, event="slow/op", timeoutMs=100))
        elapsed = time.perf_counter() - started
        # The host is still responsive while the abandoned sync handler sleeps on.
        assert (await invoke(conn, **call("v/deny-flag", {})))["valid"] is True
    assert elapsed < 5.0, f"timeout answered after {elapsed:.2f}s"  # the handler takes 10 s: wide, never flaky
    assert error.code == INTERNAL_ERROR
    assert error.data == {"interceptor": name, "reason": "timeout", "timeoutMs": 100, "phase": "request"}


async def test_generous_timeout_does_not_fire(mode: str) -> None:
    async with host(mode) as conn:
        result = await invoke(conn, **call("m/upper", {"text": "a"}, timeoutMs=10_000))
    assert result["payload"] == {"text": "A"}


async def test_handler_raising_timeout_error_is_not_a_timeout_ms_expiry(mode: str) -> None:
    # BUG: interceptors_server/host.py InterceptorHost.invoke (the `except TimeoutError` around
    # `anyio.fail_after`) also catches a TimeoutError the *handler itself* raised (e.g. an upstream
    # socket timeout), even when no timeoutMs was sent, and reports it as a host timeout:
    # data == {"reason": "timeout", "timeoutMs": None, ...}. A handler's own exception is an execution
    # failure: {interceptor, reason: "handler raised TimeoutError"}. Fix: tell the two apart, e.g.
    # `with anyio.CancelScope(deadline=...) as scope:` and report a timeout only if
    # `scope.cancelled_caught` (or only when timeout_ms is set and the deadline has passed).
    reg = Registry()

    @reg.validator("v/upstream", events=["tools/call"])
    def upstream(inv: Invocation) -> Verdict:
        raise TimeoutError("upstream socket timed out")

    async with host(mode, reg) as conn:
        error = await rpc_error(conn, "interceptor/invoke", call("v/upstream", {}))
    assert error.code == INTERNAL_ERROR
    assert error.data == {"interceptor": "v/upstream", "reason": "handler raised TimeoutError"}


async def test_oversized_payload_is_refused_before_the_handler_runs(mode: str) -> None:
    ran: list[int] = []
    reg = Registry()

    @reg.validator("v/sized", events=["tools/call"])
    def sized(inv: Invocation) -> Verdict:
        ran.append(len(inv.payload["blob"]))
        return Verdict.allow()

    server: Server[Any] = Server("sized")
    install(server, reg, host=InterceptorHost(max_payload_bytes=1024))
    async with connected(server, mode) as (_, conn):
        small = await invoke(conn, **call("v/sized", {"blob": "x" * 100}))
        assert small["valid"] is True
        error = await rpc_error(conn, "interceptor/invoke", call("v/sized", {"blob": "x" * 4096}))
    assert error.code == INVALID_PARAMS
    assert isinstance(error.data, dict) and error.data.get("field") == "payload"
    assert ran == [100]


async def test_unknown_method_is_method_not_found(mode: str) -> None:
    async with host(mode) as conn:
        error = await rpc_error(conn, "interceptors/nope", {})
    assert error.code == -32601


# Capability ----------------------------------------------------------------------------------------


def _capability(client: Client, mode: str) -> dict[str, Any]:
    """The capability from `experimental` (both eras) and `extensions` (2026 era; 2025-11-25 drops it)."""
    caps = client.server_capabilities
    assert caps.experimental is not None
    value = caps.experimental[CAPABILITY]
    if mode == "auto":
        assert caps.extensions is not None
        assert caps.extensions[CAPABILITY] == value
    elif caps.extensions is not None:
        assert caps.extensions.get(CAPABILITY, value) == value
    return dict(value)


async def test_capability_lists_sorted_deduplicated_events(mode: str) -> None:
    async with connected(interceptor_server(build_registry()), mode) as (client, _):
        assert _capability(client, mode) == {
            "supportedEvents": ["*", "custom/echo", "prompts/*", "slow/op", "tools/call"]
        }


async def test_capability_of_an_empty_host(mode: str) -> None:
    async with connected(interceptor_server(Registry()), mode) as (client, _):
        assert _capability(client, mode) == {"supportedEvents": []}


async def test_capability_sees_registrations_made_after_install(mode: str) -> None:
    reg = Registry()
    reg.register(lambda inv: True, name="a", type="validation", events=["tools/call", "b/b"])
    server = interceptor_server(reg)
    reg.register(lambda inv: True, name="b", type="mutation", events=["a/a", "tools/call"], phase="both")
    async with connected(server, mode) as (client, conn):
        assert _capability(client, mode) == {"supportedEvents": ["a/a", "b/b", "tools/call"]}
        assert [i["name"] for i in await listed(conn)] == ["a", "b"]


# Next to tools ---------------------------------------------------------------------------------------


async def test_tools_and_interceptors_share_one_server(mode: str) -> None:
    app = MCPServer("tools-and-interceptors")

    @app.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    installed = install(app, build_registry())
    assert host_of(app) is installed
    async with connected(app, mode) as (client, conn):
        result = await client.call_tool("echo", {"text": "hi"})
        assert not result.is_error
        assert [getattr(block, "text", None) for block in result.content] == ["echo: hi"]
        assert [i["name"] for i in await listed(conn)] == ALL_NAMES
        mutated = await invoke(conn, **call("m/upper", {"text": "hi"}))
        assert mutated["payload"] == {"text": "HI"}
        again = await client.call_tool("echo", {"text": "again"})
        assert [getattr(block, "text", None) for block in again.content] == ["echo: again"]
        caps = client.server_capabilities
        assert caps.tools is not None
        assert _capability(client, mode)["supportedEvents"][-1] == "tools/call"


async def test_installing_twice_adds_to_the_same_host(mode: str) -> None:
    server: Server[Any] = Server("twice")
    first, second = Registry(), Registry()
    first.register(lambda inv: True, name="one", type="validation", events=["x/one"])
    second.register(lambda inv: True, name="two", type="validation", events=["x/two"])
    installed = install(server, first)
    assert install(server, second) is installed
    async with connected(server, mode) as (client, conn):
        assert [i["name"] for i in await listed(conn)] == ["one", "two"]
        assert _capability(client, mode) == {"supportedEvents": ["x/one", "x/two"]}


# Duplicate names -----------------------------------------------------------------------------------


def _named(name: str) -> Registry:
    reg = Registry()
    reg.register(lambda inv: True, name=name, type="validation", events=["tools/call"])
    return reg


def test_duplicate_names_across_registries_on_one_host() -> None:
    with pytest.raises(ValueError):
        InterceptorHost(_named("dup"), _named("dup"))
    with pytest.raises(ValueError):
        interceptor_server(_named("dup"), _named("dup"))
    server: Server[Any] = Server("dups")
    install(server, _named("dup"))
    with pytest.raises(ValueError):
        install(server, _named("dup"))
    host_ = InterceptorHost(_named("dup"))
    with pytest.raises(ValueError):
        host_.add_registry(_named("dup"))


def test_duplicate_name_in_one_registry() -> None:
    reg = _named("dup")
    with pytest.raises(ValueError):
        reg.register(lambda inv: True, name="dup", type="mutation", events=["tools/call"])


async def test_late_duplicate_registration_fails_with_a_standard_error(mode: str) -> None:
    # BUG: interceptors_server/host.py `_entries()` recompiles lazily and raises a plain ValueError
    # inside the request handler when a registry gains a name another registry on the host already
    # has; install.py's `on_list`/`on_invoke` only translate InterceptorRpcError. In legacy mode the SDK
    # then answers JSON-RPC error code 0 (not a valid JSON-RPC code) carrying the raw exception text;
    # in auto mode a generic -32603. Fix: in install.py's handlers (or `_entries()`), turn any other
    # exception into InterceptorRpcError(INTERNAL_ERROR, ...) so both eras answer -32603.
    first, second = _named("one"), _named("two")
    async with connected(interceptor_server(first, second), mode) as (_, conn):
        assert len(await listed(conn)) == 2
        second.register(lambda inv: True, name="one", type="validation", events=["tools/call"])
        error = await rpc_error(conn, "interceptors/list", {})
    assert error.code == INTERNAL_ERROR
