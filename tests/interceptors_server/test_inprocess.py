"""The in-process transport (`HostConnection`, LocalChain's default) gives what the MCP transport gives.

Differential: random plans and payloads through both transports give identical `ExecutionResult`s (all but
durations). Isolation: a handler editing its input, its config or what it returned changes nothing the caller
or the next interceptor sees. Errors: the host's table reaches the invoker as the SDK's `MCPError`s. Interop:
a host that answers `modified: false` without a payload (as the working group's Python SDK does) is read as
"unchanged". Threads: cheap sync stages run inline up to the payload threshold, in a worker thread above.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from integrations.testing import run_plan
from interceptors import (
    CAPABILITY,
    InterceptorRpcError,
    Invocation,
    InvocationContext,
    Mutation,
    Phase,
    Principal,
    Registry,
    Verdict,
)
from interceptors.codec import dumps
from interceptors.testing import ChainPlan, chain_plans, json_values
from interceptors_chain import Chain, InterceptorOverride
from interceptors_chain.connection import PassMemo
from interceptors_server import InterceptorHost, LocalChain
from interceptors_server.host import INLINE_MAX_PAYLOAD_BYTES
from interceptors_server.inprocess import HostConnection
from interceptors_server.install import OpenParams

EVENT = "tools/call"


def without_durations(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_durations(v) for k, v in value.items() if k not in ("durationMs", "totalDurationMs")}
    if isinstance(value, list):
        return [without_durations(v) for v in value]
    return value


@settings(max_examples=40)
@given(
    plan=chain_plans(),
    data=json_values(),
    event=st.sampled_from(("tools/call", "resources/read")),
    phase=st.sampled_from(("request", "response")),
    direction=st.sampled_from(("sending", "receiving")),
)
def test_the_inprocess_and_mcp_transports_give_identical_results(
    plan: ChainPlan, data: Any, event: str, phase: str, direction: str
) -> None:
    async def both() -> list[tuple[Any, Any]]:
        runs = []
        for transport in ("inprocess", "mcp"):
            payload = {"trail": [], "data": data}
            result, log = await run_plan(plan, event, phase, direction, payload, transport=transport)  # type: ignore[arg-type]
            runs.append((without_durations(result.to_wire()), (log.mutator_calls, log.validator_saw)))
        return runs

    (inprocess, inprocess_log), (mcp, mcp_log) = anyio.run(both)
    assert inprocess == mcp
    assert inprocess_log == mcp_log


ORIGINAL = {"params": {"name": "t", "arguments": {"x": "original"}}}


@pytest.mark.anyio
@pytest.mark.parametrize("inline", [False, True])
@pytest.mark.parametrize("transport", ["inprocess", "mcp"])
async def test_a_handler_editing_its_input_changes_nothing_outside(transport: Any, inline: bool) -> None:
    """Edits in place (payload and config) reach neither the caller, the next interceptor, nor the next call."""
    registry = Registry()
    seen: list[Any] = []
    configs: list[Any] = []

    @registry.validator("look", events=EVENT, phase="request", inline=inline)
    def look(inv: Invocation) -> Verdict:
        seen.append(copy.deepcopy(inv.payload))
        inv.payload["params"] = "gone"  # a concurrent validator's view, and the caller's, stay as they were
        return Verdict.allow()

    @registry.mutator("editor", events=EVENT, phase="request", priority=0, inline=inline)
    def editor(inv: Invocation) -> Any:
        seen.append(copy.deepcopy(inv.payload))
        configs.append(copy.deepcopy(inv.config))
        assert inv.config is not None
        inv.config["nested"]["n"] = 99
        inv.payload["params"]["arguments"]["x"] = "edited"
        return Mutation(inv.payload, True)

    @registry.mutator("next", events=EVENT, phase="request", priority=1, inline=inline)
    def next_one(inv: Invocation) -> Any:
        seen.append(copy.deepcopy(inv.payload))
        inv.payload["params"]["arguments"]["x"] = "next"
        return Mutation.unchanged()  # an in-place edit claiming no change: malformed, fail closed

    payload = copy.deepcopy(ORIGINAL)
    config = {"nested": {"n": 1}}
    overrides = {"editor": InterceptorOverride(config=config)}
    async with LocalChain(registry, transport=transport, overrides=overrides) as chain:
        first = await chain.execute(EVENT, "request", payload, direction="receiving")
        second = await chain.execute(EVENT, "request", payload, direction="receiving")
    assert payload == ORIGINAL and config == {"nested": {"n": 1}}
    assert configs == [{"nested": {"n": 1}}, {"nested": {"n": 1}}]
    edited = {"params": {"name": "t", "arguments": {"x": "edited"}}}
    assert seen == [ORIGINAL, ORIGINAL, edited] * 2  # receiving: the validator, then the mutators in order
    for result in (first, second):
        assert result.blocked and "differs from the input" in result.aborted_at[0].reason


@pytest.mark.anyio
async def test_a_returned_payload_kept_by_its_handler_is_the_callers_own() -> None:
    registry = Registry()
    cache: dict[str, Any] = {"value": [1]}

    @registry.mutator("cached", events=EVENT, phase="response")
    def cached(inv: Invocation) -> Any:
        return Mutation(cache, True)

    async with LocalChain(registry) as chain:
        result = await chain.execute(EVENT, "response", {"content": []}, direction="receiving")
    cache["value"].append(2)
    assert result.final_payload == {"value": [1]}


@pytest.mark.anyio
async def test_errors_reach_the_invoker_as_the_sdk_raises_them() -> None:
    registry = Registry()

    @registry.validator("ok", events=EVENT, phase="request")
    def ok(inv: Invocation) -> Verdict:
        return Verdict.allow()

    host = InterceptorHost(registry, max_payload_bytes=64)
    connection = HostConnection(host)
    async with Client(_server(host)) as client:
        for method, params in [
            ("interceptor/invoke", {"name": "nope", "event": EVENT, "phase": "request", "payload": {}}),
            ("interceptor/invoke", {"name": "ok", "event": EVENT, "phase": "request"}),
            ("interceptor/invoke", {"name": "ok", "event": EVENT, "phase": "request", "payload": "x" * 100}),
            ("interceptor/invoke", {"name": "ok", "event": "tools/list", "phase": "request", "payload": {}}),
            ("interceptors/list", {"event": "tools/*"}),
        ]:
            with pytest.raises(MCPError) as direct:
                await connection.request(method, params, None)
            with pytest.raises(MCPError) as over_mcp:
                await client.session.send_request(_custom(method, params), dict)  # type: ignore[arg-type, type-var]
            assert (direct.value.error.code, direct.value.error.data) == (
                over_mcp.value.error.code,
                over_mcp.value.error.data,
            ), method
        with pytest.raises(MCPError) as unknown:
            await connection.request("interceptors/nope", {}, None)
        assert unknown.value.error.code == -32601


def _server(host: InterceptorHost) -> Server[Any]:
    from interceptors_server import install

    server: Server[Any] = Server("errors")
    install(server, host=host)
    return server


def _custom(method: str, params: dict[str, Any]) -> Any:
    from mcp import types

    class Custom(types.Request[dict[str, Any], str]):
        pass

    return Custom(method=method, params=params)


# --- interop: `modified: false` with no payload -----------------------------------------------------------------


def working_group_style_host() -> Server[Any]:
    """A host written like the working group's Python SDK: unmodified mutations carry no payload."""
    server: Server[Any] = Server("wg-style")
    info = {
        "name": "noop",
        "type": "mutation",
        "hooks": [{"events": [EVENT], "phase": "response"}],
    }

    async def on_list(ctx: Any, params: OpenParams) -> dict[str, Any]:
        return {"interceptors": [info]}

    async def on_invoke(ctx: Any, params: OpenParams) -> dict[str, Any]:
        extra = params.model_extra or {}
        return {"interceptor": extra["name"], "type": "mutation", "phase": extra["phase"], "modified": False}

    server.add_request_handler("interceptors/list", OpenParams, on_list)
    server.add_request_handler("interceptor/invoke", OpenParams, on_invoke)
    server.extensions[CAPABILITY] = {"supportedEvents": [EVENT]}
    return server


@pytest.mark.anyio
async def test_modified_false_without_a_payload_reads_as_unchanged() -> None:
    chain = Chain()
    async with Client(working_group_style_host()) as client:
        await chain.add_session(client.session, "wg")
        payload = {"content": [{"type": "text", "text": "hello"}]}
        result = await chain.execute(EVENT, "response", payload, direction="receiving")
    assert not result.blocked
    assert result.modified is False and result.payload_or(payload) is payload
    record = result.results[0]
    assert record.error is None and record.applied is False
    assert record.result is not None and "payload" not in record.result


# --- threads: inline up to the threshold ------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("size", "on_loop"), [(100, True), (INLINE_MAX_PAYLOAD_BYTES + 1, False)])
async def test_inline_handlers_leave_the_loop_only_for_large_payloads(size: int, on_loop: bool) -> None:
    registry = Registry()
    threads: list[int] = []

    @registry.validator("cheap", events=EVENT, phase="response", inline=True)
    def cheap(inv: Invocation) -> Verdict:
        threads.append(threading.get_ident())
        return Verdict.allow()

    @registry.validator("plain", events=EVENT, phase="response")
    def plain(inv: Invocation) -> Verdict:  # not declared cheap: may block, so always in a worker thread
        threads.append(threading.get_ident())
        return Verdict.allow()

    async with LocalChain(registry) as chain:
        result = await chain.execute(EVENT, "response", {"text": "x" * size}, direction="receiving")
    assert not result.blocked
    loop_thread = threading.get_ident()
    assert (threads[0] == loop_thread) is on_loop
    assert threads[1] != loop_thread


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "event", "payload", "inline"),
    [
        ("ok", EVENT, {"a": 1}, "runs"),
        ("ok", "tools/list", {"a": 1}, "runs"),  # admission error, as invoke_local gives it
        ("ok", EVENT, "x" * 100, "runs"),  # above the host's maximum: its size error
        ("ok", "tools/list", "x" * 100, "runs"),  # admission comes first, then the size
        ("boom", EVENT, {"a": 1}, "runs"),
        ("nope", EVENT, {"a": 1}, "runs"),  # unknown: its error at once
        ("ok", "tools/list", 2**70, "runs"),  # admission error before the payload's
        ("ok", EVENT, 2**70, "runs"),  # cannot be encoded: its error at once
        ("threaded", EVENT, {"a": 1}, "waits"),
        ("ok", EVENT, "x" * (INLINE_MAX_PAYLOAD_BYTES + 1), "waits"),  # must not stall the loop
    ],
)
async def test_start_local_answers_as_invoke_local_at_once_or_waits_having_run_nothing(
    name: str, event: str, payload: Any, inline: str
) -> None:
    """`start_local` answers on the caller's stack (a reply or an error) exactly as `invoke_local` does, or returns
    a coroutine having run no handler; awaited, that coroutine gives `invoke_local`'s outcome."""
    registry = Registry()
    calls: list[str] = []

    @registry.validator("ok", events=EVENT, phase="request", inline=True)
    def ok(inv: Invocation) -> Verdict:
        calls.append("ok")
        return Verdict.allow()

    @registry.validator("boom", events=EVENT, phase="request", inline=True)
    def boom(inv: Invocation) -> Verdict:
        calls.append("boom")
        raise RuntimeError("secret text")

    @registry.validator("threaded", events=EVENT, phase="request")
    def threaded(inv: Invocation) -> Verdict:
        calls.append("threaded")
        return Verdict.allow()

    big = isinstance(payload, str) and len(payload) > INLINE_MAX_PAYLOAD_BYTES
    host = InterceptorHost(registry, max_payload_bytes=None if big else 64)
    phase = Phase.REQUEST

    async def outcome(call: Any, starting: bool) -> Any:
        try:
            reply = call()
            if not isinstance(reply, tuple):
                assert not starting or (inline == "waits" and calls == [])  # nothing ran yet
                reply = await reply
        except InterceptorRpcError as exc:
            return ("error", exc.code, exc.data)
        return ("reply", without_durations(reply[1]))

    got = await outcome(lambda: host.start_local(name, event, phase, payload, None, None), True)
    started_calls = list(calls)
    calls.clear()
    local = await outcome(lambda: host.invoke_local(name, event, phase, payload, None, None), False)
    assert got == local and started_calls == calls
    if inline == "runs":
        assert isinstance(host.start_local("ok", EVENT, phase, {"a": 1}, None, None), tuple)


@pytest.mark.anyio
async def test_blocking_sync_handlers_run_in_threads_of_their_own_at_once() -> None:
    """Four validators that each wait for all four to arrive can only pass if each got a worker thread at once;
    the mutator raising StopIteration (which no future can carry) fails closed like any other raising handler."""
    registry = Registry()
    arrived = threading.Barrier(4, timeout=30)

    for index in range(4):

        @registry.validator(f"wait-{index}", events=EVENT, phase="request")
        def wait(inv: Invocation) -> Verdict:
            arrived.wait()
            return Verdict.allow()

    @registry.mutator("stop", events=EVENT, phase="request")
    def stop(inv: Invocation) -> Mutation:
        raise StopIteration

    async with LocalChain(registry) as chain:
        result = await chain.execute(EVENT, "request", {"params": {}}, direction="receiving")
    assert [r.error for r in result.results[:4]] == [None] * 4
    assert result.blocked and result.aborted_at[0].interceptor == "stop"


def test_an_abandoned_handler_that_never_returns_does_not_keep_the_process_alive(tmp_path: Any) -> None:
    """The worker threads are daemons: a timed-out handler stuck forever is abandoned, and the process exits."""
    import subprocess
    import sys

    script = tmp_path / "stuck.py"
    script.write_text(
        "import threading, anyio\n"
        "from interceptors import Registry, Verdict\n"
        "from interceptors_server import LocalChain\n"
        "registry = Registry()\n"
        "@registry.validator('stuck', events='tools/call', phase='request')\n"
        "def stuck(inv):\n"
        "    threading.Event().wait()\n"
        "    return Verdict.allow()\n"
        "async def main():\n"
        "    async with LocalChain(registry, default_timeout_ms=50) as chain:\n"
        "        result = await chain.execute('tools/call', 'request', {}, direction='receiving')\n"
        "    print(result.status.value)\n"
        "anyio.run(main)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "timeout"


@pytest.mark.anyio
@pytest.mark.parametrize("inline", [False, True])
@pytest.mark.parametrize("transport", ["inprocess", "mcp"])
async def test_a_handler_editing_the_principals_claims_grants_nothing(transport: Any, inline: bool) -> None:
    """An edit in place of the claims by one handler is never seen by the next, in this run or the next, nor by the
    caller, whether handlers run inline (one after another on the caller's stack), in threads or over MCP; an
    edit the caller makes between runs reaches the next run."""
    from interceptors import Principal

    registry = Registry()
    seen: list[Any] = []

    def roles_of(inv: Invocation) -> Any:
        assert inv.context is not None and inv.context.principal is not None
        claims = inv.context.principal.claims
        assert claims is not None
        return claims["roles"]

    @registry.validator("grab", events=EVENT, phase="request", inline=inline)
    def grab(inv: Invocation) -> Any:
        seen.append(list(roles_of(inv)))
        roles_of(inv).append("root")
        return Verdict.allow()

    @registry.validator("check", events=EVENT, phase="request", inline=inline)
    def check(inv: Invocation) -> Any:
        seen.append(list(roles_of(inv)))
        return Verdict.allow()

    @registry.mutator("escalate", events=EVENT, phase="request", priority=0, inline=inline)
    def escalate(inv: Invocation) -> Any:
        seen.append(list(roles_of(inv)))
        roles_of(inv).append("admin")
        return Mutation.unchanged()

    @registry.mutator("look", events=EVENT, phase="request", priority=1, inline=inline)
    def look(inv: Invocation) -> Any:
        seen.append(list(roles_of(inv)))
        return Mutation.unchanged()

    principal = Principal("user", "alice", {"roles": ["reader"]})
    context = InvocationContext(principal=principal, trace_id="t")
    async with LocalChain(registry, transport=transport) as chain:
        for _ in range(2):
            result = await chain.execute(EVENT, "request", {"params": {}}, direction="receiving", context=context)
            assert not result.blocked
        principal.claims["roles"].append("writer")  # the caller's own edit between runs reaches the next run
        await chain.execute(EVENT, "request", {"params": {}}, direction="receiving", context=context)
    assert principal.claims == {"roles": ["reader", "writer"]}
    assert seen == [["reader"]] * 8 + [["reader", "writer"]] * 4


def test_invocation_build_is_the_constructor() -> None:
    """`Invocation.build` (the host's per-invoke constructor) sets every field the dataclass declares."""
    import dataclasses

    from interceptors import Phase

    values = ("name", "tools/call", Phase.REQUEST, {"a": [1]}, {"k": 1}, InvocationContext(trace_id="t"))
    built = Invocation.build(*values)
    assert built == Invocation(*values)
    assert [field.name for field in dataclasses.fields(Invocation)] == [
        "interceptor", "event", "phase", "payload", "config", "context",
    ]  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.payload = {}  # type: ignore[misc]


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["inprocess", "mcp"])
async def test_plain_replies_are_fresh_and_in_place_edits_still_fail(transport: Any) -> None:
    """The in-process host's shortcut for plain verdicts and unchanged mutations gives what the wire gives: an
    echo the handler cannot reach later, and a failure for a mutator that edits its copy but claims no change."""
    kept: list[Any] = []
    reg = Registry()

    @reg.validator("look", events=EVENT)
    def look(inv: Invocation) -> Verdict:
        return Verdict.allow()

    @reg.mutator("keep", events=EVENT, priority=0)
    def keep(inv: Invocation) -> Mutation:
        kept.append(inv.payload)
        return Mutation.unchanged()

    @reg.mutator("sneak", events=EVENT, priority=1)
    def sneak(inv: Invocation) -> Mutation:
        if inv.payload.get("sneak"):
            inv.payload["sneaked"] = True
        return Mutation.unchanged()

    payload: dict[str, Any] = {"params": {"name": "echo"}, "sneak": False}
    async with LocalChain(reg, transport=transport) as chain:
        result = await chain.execute(EVENT, "request", payload, direction="receiving")
        assert result.status.value == "success"
        echoed = result.results[1].result
        assert echoed is not None and echoed["payload"] == payload
        if transport == "inprocess":  # (the SDK's in-memory dispatch hands the host's reply over uncopied)
            kept[0]["params"]["name"] = "changed later"  # the handler's copy, edited after it answered
            assert echoed["payload"] == payload and payload["params"]["name"] == "echo"
        failed = await chain.execute(EVENT, "request", {**payload, "sneak": True}, direction="receiving")
    assert failed.status.value == "mutation_failed"
    assert failed.results[2].error is not None and "modified is false" in failed.results[2].error


_TEXT = st.one_of(st.none(), st.text(max_size=8))


@settings(max_examples=200, deadline=None)
@given(
    principal_type=st.sampled_from(["user", "service", "anonymous"]),
    principal_id=_TEXT,
    claims=st.one_of(st.none(), st.dictionaries(st.text(max_size=5), json_values(), max_size=4)),
    trace=_TEXT,
    span=_TEXT,
    session=_TEXT,
    timestamp=st.text(max_size=8),
)
def test_the_sent_context_is_what_a_json_round_trip_gives(
    principal_type: str,
    principal_id: str | None,
    claims: dict[str, Any] | None,
    trace: str | None,
    span: str | None,
    session: str | None,
    timestamp: str,
) -> None:
    """The in-process host copies only the claims when every field is a plain string: the same context (or the
    same refusal) as the full wire round trip, and never the caller's claims object."""
    from interceptors import InterceptorRpcError, Principal, WireError, dumps, loads
    from interceptors_server.host import _sent_context

    context = InvocationContext(Principal(principal_type, principal_id, claims), trace, span, timestamp, session)
    try:
        expected: Any = InvocationContext.from_wire(loads(dumps(context.to_wire())))
    except (TypeError, WireError):
        expected = InterceptorRpcError
    try:
        sent: Any = _sent_context(context)
    except InterceptorRpcError:
        sent = InterceptorRpcError
    assert sent == expected
    if claims is not None and sent is not InterceptorRpcError:
        assert sent.principal.claims is not claims


@pytest.mark.anyio
async def test_one_executions_memo_encodes_a_payload_and_the_claims_once_for_every_host() -> None:
    """`PassMemo`: the payload's JSON made once per payload and the claims' once per context, a private copy decoded
    per interceptor; each host still checks the size against its own maximum."""
    got: list[Invocation] = []

    def registry() -> Registry:
        made = Registry()

        @made.validator("look", events=EVENT, phase="request", inline=True)
        def look(inv: Invocation) -> Verdict:
            got.append(inv)
            return Verdict.allow()

        return made

    host, strict = InterceptorHost(registry()), InterceptorHost(registry(), max_payload_bytes=8)
    memo = PassMemo()
    payload = {"text": "hello"}
    context = InvocationContext(Principal("user", "alice", {"roles": ["reader"]}))
    first = host.start_local("look", EVENT, Phase.REQUEST, payload, None, context, memo)
    assert isinstance(first, tuple) and memo.payload is payload and memo.encoded == dumps(payload)
    assert memo.context is context and memo.sent is not None
    memo.encoded = dumps({"text": "from the memo"})  # the same payload object: its JSON is not made again
    host.start_local("look", EVENT, Phase.REQUEST, payload, None, context, memo)
    assert got[1].payload == {"text": "from the memo"}
    roles = [inv.context.principal.claims for inv in got if inv.context and inv.context.principal]
    assert roles == [{"roles": ["reader"]}] * 2 and roles[0] is not roles[1]  # a copy each
    assert roles[0] is not context.principal.claims  # type: ignore[union-attr]
    with pytest.raises(InterceptorRpcError) as refused:  # the other host's own maximum, from the same JSON
        strict.start_local("look", EVENT, Phase.REQUEST, payload, None, context, memo)
    assert refused.value.data == {"field": "payload", "size": len(memo.encoded), "maxBytes": 8}
    other = {"text": "new"}  # another payload (a mutator's output): encoded for itself
    host.start_local("look", EVENT, Phase.REQUEST, other, None, context, memo)
    assert got[-1].payload == other and memo.payload is other
