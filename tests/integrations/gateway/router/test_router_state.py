"""The router's state machine, as tables of messages in and actions out (no subprocess, no I/O)."""

from __future__ import annotations

import json
from typing import Any

from integrations.gateway.router import (
    Action,
    AnswerLocally,
    CatalogChanged,
    ChainBlocked,
    ChainOutcome,
    ChainPassed,
    Close,
    Dropped,
    Era,
    Router,
    RouterConfig,
    RunChain,
    SendDownstream,
    SendUpstream,
    UpstreamPhase,
)
from interceptors import Direction, Phase
from tests.router_helpers import (
    body,
    downstream,
    envelope,
    handshake_session,
    line,
    passing,
    ready_router,
    settle,
    upstream_bodies,
)


def forward(router: Router, session: str, request_id: Any, method: str, params: dict[str, Any] | None = None) -> int:
    """Send a request from `session`; the upstream id it went out with."""
    message: dict[str, Any] = {"id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    (sent,) = upstream_bodies(settle(router, router.receive_downstream(session, line(**message))))
    assert sent["method"] == method
    upstream_id: int = sent["id"]
    return upstream_id


# The handshakes ---------------------------------------------------------------------------------


def test_upstream_handshake_era_initialize_then_initialized_then_ready() -> None:
    router = Router(RouterConfig(upstream_era=Era.HANDSHAKE))
    (init,) = router.start()
    assert body(init)["method"] == "initialize" and body(init)["params"]["protocolVersion"] == "2025-11-25"
    result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "u"}}
    actions = router.receive_upstream(line(id=body(init)["id"], result=result))
    assert [body(a)["method"] for a in actions] == ["notifications/initialized"]
    assert router.upstream.phase is UpstreamPhase.READY


def test_auto_upstream_falls_back_from_discover_to_initialize() -> None:
    router = Router()
    (discover,) = router.start()
    assert body(discover)["method"] == "server/discover"
    (init,) = router.receive_upstream(line(id=body(discover)["id"], error={"code": -32601, "message": "nope"}))
    assert body(init)["method"] == "initialize"


def test_modern_only_upstream_is_spoken_to_in_its_era() -> None:
    router = ready_router(era=Era.MODERN)
    handshake_session(router, "a")
    raw = line(id=1, method="tools/call", params={"name": "echo"})
    (sent,) = upstream_bodies(settle(router, router.receive_downstream("a", raw)))
    assert router.upstream.era is Era.MODERN
    assert sent["params"]["name"] == "echo"
    assert sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    result = {"content": [], "resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "u"}}}
    (reply,) = downstream(settle(router, router.receive_upstream(line(id=sent["id"], result=result))), "a")
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}  # handshake client: no modern stamp


def test_requests_before_the_upstream_is_ready_wait_then_go() -> None:
    router = Router(RouterConfig(upstream_era=Era.HANDSHAKE))
    (init,) = router.start()
    router.open_session("a")
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    assert router.receive_downstream("a", line(id=1, method="initialize", params=params)) == []
    result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "u"}}
    actions = settle(router, router.receive_upstream(line(id=body(init)["id"], result=result)))
    (reply,) = downstream(actions, "a")
    assert reply["result"]["protocolVersion"] == "2025-06-18"  # the client's version, which the gateway speaks


def test_a_client_whose_discover_probe_timed_out_may_fall_back_to_initialize() -> None:
    """The SDK's `mode="auto"` probes with server/discover and, when the probe times out (a gateway still
    starting its upstream), sends initialize: the session becomes a handshake one; the late discover reply is
    still delivered (the client no longer reads it). Once a modern request other than discover was made, the
    era is fixed and initialize is refused."""
    router = Router(RouterConfig(upstream_era=Era.HANDSHAKE))
    (init,) = router.start()
    router.open_session("a")
    assert router.receive_downstream("a", line(id=1, method="server/discover", params={"_meta": envelope()})) == []
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    assert router.receive_downstream("a", line(id=2, method="initialize", params=params)) == []
    result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "u"}}
    replies = downstream(settle(router, router.receive_upstream(line(id=body(init)["id"], result=result))), "a")
    assert [reply["id"] for reply in replies] == [1, 2]
    assert replies[1]["result"]["protocolVersion"] == "2025-11-25"
    upstream_id = forward(router, "a", 3, "tools/call", {"name": "echo"})  # a handshake session now
    (reply,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, result={"content": []}))))
    assert reply["result"] == {"content": []}

    router = ready_router()
    router.open_session("m")
    settle(router, router.receive_downstream("m", line(id=1, method="server/discover", params={"_meta": envelope()})))
    forward(router, "m", 2, "tools/call", {"name": "echo", "_meta": envelope()})
    (refused,) = downstream(router.receive_downstream("m", line(id=3, method="initialize", params=params)))
    assert refused["error"]["code"] == -32602


INITIALIZE_TABLE = [
    # requested version, negotiated
    ("2025-11-25", "2025-11-25"),
    ("2024-11-05", "2024-11-05"),
    ("2099-01-01", "2025-11-25"),
]


def test_downstream_initialize_mirrors_the_upstream_and_runs_its_channel() -> None:
    for requested, negotiated in INITIALIZE_TABLE:
        router = ready_router(RouterConfig(extra_capabilities={"experimental": {"x": {}}}))
        router.open_session("a", context="ctx-a")
        params = {"protocolVersion": requested, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
        (run,) = router.receive_downstream("a", line(id=1, method="initialize", params=params))
        assert isinstance(run, RunChain)
        assert (run.event, run.phase, run.direction, run.channel, run.context) == (
            "gateway/initialize",  # initialize itself has no event (SEP-2624): the relayed result has this one
            Phase.RESPONSE,
            Direction.SENDING,
            "initialize",
            "ctx-a",
        )
        changed = {**run.payload, "serverInfo": {"name": "renamed"}}
        (reply,) = router.chain_done(run.ticket, ChainPassed(changed, modified=True))
        result = body(reply)["result"]
        assert result["protocolVersion"] == negotiated
        assert result["serverInfo"] == {"name": "renamed"}
        assert result["capabilities"]["tasks"] == {} and "x" in result["capabilities"]["experimental"]


def test_modern_session_discovers_and_gets_stamped_results_without_its_envelope_upstream() -> None:
    router = ready_router()
    router.open_session("m")
    actions = settle(
        router, router.receive_downstream("m", line(id=1, method="server/discover", params={"_meta": envelope()}))
    )
    (reply,) = downstream(actions)
    assert reply["result"]["supportedVersions"] == ["2026-07-28"] and reply["result"]["resultType"] == "complete"
    params = {"name": "echo", "_meta": envelope(progressToken="p")}
    upstream_id = forward(router, "m", 2, "tools/call", params)
    (reply,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, result={"content": []}))))
    assert reply["result"]["resultType"] == "complete"
    assert reply["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "upstream", "version": "1.0"}


def test_modern_session_without_a_complete_envelope_is_refused() -> None:
    router = ready_router()
    router.open_session("m")
    settle(router, router.receive_downstream("m", line(id=1, method="server/discover", params={"_meta": envelope()})))
    (reply,) = downstream(router.receive_downstream("m", line(id=2, method="tools/list", params={})))
    assert reply["error"]["code"] == -32602 and reply["id"] == 2
    bad = {"_meta": envelope(**{"io.modelcontextprotocol/protocolVersion": "2030-01-01"})}
    (reply,) = downstream(router.receive_downstream("m", line(id=3, method="tools/list", params=bad)))
    assert reply["error"]["code"] == -32022 and reply["error"]["data"]["requested"] == "2030-01-01"


# Requests, replies and ids ----------------------------------------------------------------------


def test_same_client_ids_in_two_sessions_get_distinct_upstream_ids_and_their_own_replies() -> None:
    router = ready_router()
    handshake_session(router, "a")
    handshake_session(router, "b")
    first = forward(router, "a", 1, "tools/call", {"name": "x"})
    second = forward(router, "b", 1, "tools/call", {"name": "y"})
    assert first != second
    actions = settle(router, router.receive_upstream(line(id=second, result={"content": [], "n": "b"})))
    assert actions == [
        SendDownstream(
            "b",
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "n": "b"}}, separators=(",", ":")
            ).encode(),
            1,
        )
    ]


def test_request_chain_receives_and_its_mutation_goes_upstream() -> None:
    router = ready_router()
    handshake_session(router, "a")
    (run,) = router.receive_downstream(
        "a", line(id=1, method="tools/call", params={"name": "x", "arguments": {"k": 1}})
    )
    assert isinstance(run, RunChain)
    assert (run.event, run.phase, run.direction) == ("tools/call", Phase.REQUEST, Direction.RECEIVING)
    assert run.payload == {"method": "tools/call", "params": {"name": "x", "arguments": {"k": 1}}}
    mutated = {"method": "tools/call", "params": {"name": "x", "arguments": {"k": 2}}}
    (sent,) = upstream_bodies(router.chain_done(run.ticket, ChainPassed(mutated, modified=True)))
    assert sent["params"] == {"name": "x", "arguments": {"k": 2}}


UPSTREAM_ERRORS = [
    {"code": -32002, "message": "Resource not found", "data": {"uri": "file:///x"}},
    {"code": -32602, "message": "Unknown tool: nope"},
    {"code": -31999, "message": "custom", "data": [1, 2]},
]


def test_upstream_errors_keep_their_code_and_data() -> None:
    for error in UPSTREAM_ERRORS:
        router = ready_router()
        handshake_session(router, "a")
        upstream_id = forward(router, "a", "r", "resources/read", {"uri": "file:///x"})
        (reply,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, error=error))))
        assert reply == {"jsonrpc": "2.0", "id": "r", "error": error}


def test_error_message_and_data_pass_the_chain_but_never_the_code() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    error = {"code": -32002, "message": "secret sk-123", "data": {"token": "sk-123"}}
    (run,) = router.receive_upstream(line(id=upstream_id, error=error))
    assert isinstance(run, RunChain) and run.channel == "error"
    assert run.payload["content"] == [{"type": "text", "text": "secret sk-123"}]
    redacted = {
        **run.payload,
        "content": [{"type": "text", "text": "secret [R]"}],
        "structuredContent": {"data": {"token": "[R]"}},
    }
    (reply,) = downstream(router.chain_done(run.ticket, ChainPassed(redacted, modified=True)))
    assert reply["error"] == {"code": -32002, "message": "secret [R]", "data": {"token": "[R]"}}


HIDDEN = [
    # upstream era, method, params, expected error
    (
        Era.HANDSHAKE,
        "resources/read",
        {"uri": "file:///h"},
        {"code": -32002, "message": "Resource not found", "data": {"uri": "file:///h"}},
    ),
    (
        Era.MODERN,
        "resources/read",
        {"uri": "file:///h"},
        {"code": -32602, "message": "Resource not found", "data": {"uri": "file:///h"}},
    ),
    (Era.HANDSHAKE, "tools/call", {"name": "hid"}, {"code": -32602, "message": "Unknown tool: hid"}),
    (Era.HANDSHAKE, "prompts/get", {"name": "p"}, {"code": -32602, "message": "Unknown prompt: p"}),
]


def test_a_hidden_primitive_is_answered_as_the_upstream_answers_a_missing_one() -> None:
    for era, method, params, expected in HIDDEN:
        router = ready_router(era=era)
        handshake_session(router, "a")
        (run,) = router.receive_downstream("a", line(id=1, method=method, params=params))
        assert isinstance(run, RunChain)
        (reply,) = downstream(router.chain_done(run.ticket, ChainBlocked(not_found=True)))
        assert reply["error"] == expected


def test_blocks_substitutes_and_requester_errors() -> None:
    table: list[tuple[ChainOutcome, dict[str, Any]]] = [
        (ChainBlocked(), {"error": {"code": -32603, "message": "blocked by interceptor"}}),
        (ChainBlocked(error={"code": -31001, "message": "denied"}), {"error": {"code": -31001, "message": "denied"}}),
        (ChainBlocked(substitute={"completion": {"values": []}}), {"result": {"completion": {"values": []}}}),
    ]
    for outcome, expected in table:
        router = ready_router()
        handshake_session(router, "a")
        (run,) = router.receive_downstream("a", line(id=1, method="completion/complete", params={}))
        assert isinstance(run, RunChain)
        (reply,) = downstream(router.chain_done(run.ticket, outcome))
        assert {k: v for k, v in reply.items() if k in ("error", "result")} == expected


LOCAL_ANSWERS = [
    ("ping", None, {"result": {}}),
    ("logging/setLevel", {"level": "info"}, {"result": {}}),
    ("logging/setLevel", {"level": 3}, {"error": {"code": -32602}}),
]


def test_ping_and_set_level_are_answered_by_the_router() -> None:
    for method, params, expected in LOCAL_ANSWERS:
        router = ready_router()
        handshake_session(router, "a")
        message: dict[str, Any] = {"id": 5, "method": method} | ({"params": params} if params is not None else {})
        replies = downstream(router.receive_downstream("a", line(**message)), "a")
        assert len(replies) == 1
        for key, value in expected.items():
            assert replies[0][key] == value or all(replies[0][key][k] == v for k, v in value.items())


def test_set_level_goes_upstream_once_at_the_most_verbose_level() -> None:
    router = ready_router()
    handshake_session(router, "a")
    handshake_session(router, "b")
    first = upstream_bodies(
        router.receive_downstream("a", line(id=1, method="logging/setLevel", params={"level": "warning"}))
    )
    second = upstream_bodies(
        router.receive_downstream("b", line(id=1, method="logging/setLevel", params={"level": "debug"}))
    )
    again = upstream_bodies(
        router.receive_downstream("a", line(id=2, method="logging/setLevel", params={"level": "error"}))
    )
    assert [b["params"]["level"] for b in first + second + again] == ["warning", "debug"]


def test_set_level_without_upstream_logging_is_method_not_found() -> None:
    router = ready_router(capabilities={"tools": {}})
    handshake_session(router, "a")
    (reply,) = downstream(
        router.receive_downstream("a", line(id=1, method="logging/setLevel", params={"level": "info"}))
    )
    assert reply["error"]["code"] == -32601


def test_local_methods_are_handed_to_the_shell() -> None:
    router = ready_router(RouterConfig(local_methods=frozenset({"interceptors/list"})))
    handshake_session(router, "a")
    (answer,) = router.receive_downstream("a", line(id=3, method="interceptors/list", params={}))
    assert answer == AnswerLocally("a", 3, "interceptors/list", {})
    (reply,) = downstream(router.reply_local("a", 3, result={"interceptors": []}))
    assert reply == {"jsonrpc": "2.0", "id": 3, "result": {"interceptors": []}}


def test_malformed_downstream_requests_get_one_error_with_their_id() -> None:
    router = ready_router()
    handshake_session(router, "a")
    raw = rb'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"\ud800"}}'
    (reply,) = router.receive_downstream("a", raw)
    assert isinstance(reply, SendDownstream)
    assert body(reply)["id"] == 11 and body(reply)["error"]["data"]["path"] == "params.name"
    (big,) = router.receive_downstream("a", b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}')
    assert isinstance(big, SendDownstream) and b'"id":123456789012345678901234567890' in big.data


def test_a_duplicate_id_in_flight_is_refused_and_the_first_still_answered() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    (dup,) = downstream(
        settle(router, router.receive_downstream("a", line(id=1, method="tools/call", params={"name": "y"})))
    )
    assert dup["error"]["code"] == -32600
    (reply,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, result={"content": []}))))
    assert reply["id"] == 1 and "result" in reply


def test_an_invalid_upstream_reply_answers_its_request() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    raw = f'{{"jsonrpc":"2.0","id":{upstream_id},"result":{{"n":123456789012345678901234567890}}}}'
    (reply,) = downstream(router.receive_upstream(raw))
    assert (
        reply["error"]["code"] == -32603
        and reply["error"]["message"] == "the upstream server returned an invalid result"
    )


def test_cancellation_goes_upstream_and_the_late_reply_is_dropped() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    (cancel,) = router.receive_downstream(
        "a", line(method="notifications/cancelled", params={"requestId": 1, "reason": "user"})
    )
    assert body(cancel)["params"] == {"requestId": upstream_id, "reason": "user"}
    (late,) = router.receive_upstream(line(id=upstream_id, result={"content": []}))
    assert isinstance(late, Dropped)


def test_upstream_closing_answers_every_pending_request() -> None:
    router = ready_router()
    handshake_session(router, "a")
    handshake_session(router, "b")
    forward(router, "a", 1, "tools/call", {"name": "x"})
    forward(router, "b", "q", "tools/call", {"name": "y"})
    actions = router.upstream_closed()
    assert sorted((str(r["id"]), r["error"]["code"]) for r in downstream(actions)) == [("1", -32603), ("q", -32603)]
    assert isinstance(actions[-1], Close)
    (after,) = downstream(router.receive_downstream("a", line(id=2, method="tools/list")))
    assert after["error"]["message"] == "upstream server closed the connection"


def test_closing_a_session_cancels_its_requests_upstream() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    (cancel,) = upstream_bodies(router.close_session("a"))
    assert cancel == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": upstream_id}}
    assert router.pending == {}


# Side channels ----------------------------------------------------------------------------------


def test_progress_goes_only_to_its_session_with_the_clients_token() -> None:
    router = ready_router()
    handshake_session(router, "a")
    handshake_session(router, "b")
    up_a = forward(router, "a", 1, "tools/call", {"name": "x", "_meta": {"progressToken": "same"}})
    forward(router, "b", 1, "tools/call", {"name": "y", "_meta": {"progressToken": "same"}})
    upstream_token = router.pending[up_a].upstream_token
    actions = settle(
        router,
        router.receive_upstream(
            line(
                method="notifications/progress",
                params={"progressToken": upstream_token, "progress": 1, "message": "half"},
            )
        ),
    )
    assert [(a.session, body(a)["params"]["progressToken"]) for a in actions if isinstance(a, SendDownstream)] == [
        ("a", "same")
    ]


def test_a_log_passes_its_chain_before_the_reply_is_released() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    (log_run,) = router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "sk-1"}))
    (reply_run,) = router.receive_upstream(line(id=upstream_id, result={"content": []}))
    assert isinstance(log_run, RunChain) and isinstance(reply_run, RunChain)
    assert log_run.event == "tools/call" and log_run.channel == "log"
    assert router.chain_done(reply_run.ticket, ChainPassed(reply_run.payload)) == []  # held behind the log
    redacted = {**log_run.payload, "content": [{"type": "text", "text": "[R]"}]}
    released = router.chain_done(log_run.ticket, ChainPassed(redacted, modified=True))
    assert [body(a).get("method", "reply") for a in released] == ["notifications/message", "reply"]
    assert body(released[0])["params"] == {"level": "info", "data": "[R]"}


def test_a_blocked_log_is_dropped_and_the_reply_still_goes() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    (log_run,) = router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "x"}))
    (reply_run,) = router.receive_upstream(line(id=upstream_id, result={"content": []}))
    assert isinstance(log_run, RunChain) and isinstance(reply_run, RunChain)
    router.chain_done(reply_run.ticket, ChainPassed(reply_run.payload))
    (reply,) = router.chain_done(log_run.ticket, ChainBlocked())
    assert body(reply)["id"] == 1


def test_logs_outside_any_request_reach_only_sessions_that_asked_for_logging() -> None:
    router = ready_router()
    for name in ("quiet", "loud", "picky"):
        handshake_session(router, name, principal="one user")  # several principals: see the next tests
    settle(router, router.receive_downstream("loud", line(id=1, method="logging/setLevel", params={"level": "debug"})))
    settle(router, router.receive_downstream("picky", line(id=1, method="logging/setLevel", params={"level": "error"})))
    actions = settle(
        router, router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "d"}))
    )
    runs: list[RunChain] = []
    settle(
        router,
        router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "d"})),
        lambda r: runs.append(r) or ChainPassed(r.payload),
    )
    assert [a.session for a in actions if isinstance(a, SendDownstream)] == ["loud"]
    assert [(r.event, r.context) for r in runs] == [("logging/setLevel", {"session": "loud"})]


def test_a_log_with_several_principals_in_flight_is_not_guessed() -> None:
    router = ready_router()
    handshake_session(router, "a", principal="alice")
    handshake_session(router, "b", principal="bob")
    forward(router, "a", 1, "tools/call", {"name": "x"})
    forward(router, "b", 1, "tools/call", {"name": "y"})
    (dropped,) = router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "d"}))
    assert isinstance(dropped, Dropped)


def test_an_untied_log_never_goes_to_the_only_principal_in_flight_while_another_is_connected() -> None:
    """Alice's call is the only one in flight, but the log may be Bob's (or nobody's): dropped, never guessed."""
    router = ready_router()
    handshake_session(router, "a", principal="alice")
    handshake_session(router, "b", principal="bob")
    forward(router, "a", 1, "tools/call", {"name": "x"})
    (dropped,) = router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "d"}))
    assert isinstance(dropped, Dropped)


def test_logs_outside_any_request_never_cross_principals() -> None:
    router = ready_router()
    handshake_session(router, "a", principal="alice")
    handshake_session(router, "b", principal="bob")
    for name in ("a", "b"):
        settle(
            router, router.receive_downstream(name, line(id=1, method="logging/setLevel", params={"level": "debug"}))
        )
    (dropped,) = router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "d"}))
    assert isinstance(dropped, Dropped)
    router.close_session("b")
    actions = settle(
        router, router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "d"}))
    )
    assert [a.session for a in actions if isinstance(a, SendDownstream)] == ["a"]


def test_a_related_log_goes_to_its_request_even_with_several_principals() -> None:
    router = ready_router()
    handshake_session(router, "a", principal="alice")
    handshake_session(router, "b", principal="bob")
    forward(router, "a", 1, "tools/call", {"name": "x"})
    up_b = forward(router, "b", 1, "tools/call", {"name": "y"})
    raw = line(method="notifications/message", params={"level": "info", "data": "d"})
    actions = settle(router, router.receive_upstream(raw, related=up_b))
    assert [a.session for a in actions if isinstance(a, SendDownstream)] == ["b"]


def test_modern_requests_get_logs_only_when_they_opted_in() -> None:
    router = ready_router()
    router.open_session("m")
    settle(router, router.receive_downstream("m", line(id=0, method="server/discover", params={"_meta": envelope()})))
    quiet = forward(router, "m", 1, "tools/call", {"name": "x", "_meta": envelope()})
    log = line(method="notifications/message", params={"level": "info", "data": "d"})
    assert isinstance(router.receive_upstream(log)[0], Dropped)
    settle(router, router.receive_upstream(line(id=quiet, result={"content": []})))
    forward(
        router, "m", 2, "tools/call", {"name": "x", "_meta": envelope(**{"io.modelcontextprotocol/logLevel": "info"})}
    )
    assert downstream(settle(router, router.receive_upstream(log)), "m")[0]["method"] == "notifications/message"


def test_list_changed_relays_and_asks_the_catalog_to_relearn() -> None:
    router = ready_router()
    handshake_session(router, "a")
    actions = router.receive_upstream(line(method="notifications/tools/list_changed"))
    assert actions[0] == CatalogChanged("tools")
    assert downstream(actions, "a") == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]


def test_resource_subscriptions_are_shared_and_updates_reach_only_holders() -> None:
    router = ready_router()
    for name in ("a", "b", "c"):
        handshake_session(router, name)
    first = forward(router, "a", 1, "resources/subscribe", {"uri": "file:///r"})
    settle(router, router.receive_upstream(line(id=first, result={})))
    (second,) = downstream(
        settle(
            router,
            router.receive_downstream("b", line(id=1, method="resources/subscribe", params={"uri": "file:///r"})),
        )
    )
    assert second["result"] == {}  # held already: not asked upstream again
    update = line(method="notifications/resources/updated", params={"uri": "file:///r"})
    assert sorted(
        a.session for a in settle(router, router.receive_upstream(update)) if isinstance(a, SendDownstream)
    ) == ["a", "b"]
    (mine,) = downstream(
        settle(
            router,
            router.receive_downstream("a", line(id=2, method="resources/unsubscribe", params={"uri": "file:///r"})),
        )
    )
    assert mine["result"] == {}  # b still holds it
    assert upstream_bodies(router.close_session("b")) == [
        {"jsonrpc": "2.0", "id": router._next_id, "method": "resources/unsubscribe", "params": {"uri": "file:///r"}}
    ]


def test_a_subscribe_whose_response_chain_blocks_holds_nothing_and_is_released_upstream() -> None:
    """A hidden resource's updates must never arrive: the block is final, the upstream is told to stop."""
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "resources/subscribe", {"uri": "file:///hidden"})

    def block_responses(run: RunChain) -> ChainOutcome:
        return ChainBlocked(not_found=True) if run.phase is Phase.RESPONSE else ChainPassed(run.payload)

    actions = settle(router, router.receive_upstream(line(id=upstream_id, result={})), block_responses)
    assert [b["method"] for b in upstream_bodies(actions)] == ["resources/unsubscribe"]
    assert "error" in downstream(actions, "a")[0]
    update = line(method="notifications/resources/updated", params={"uri": "file:///hidden"})
    assert not [a for a in settle(router, router.receive_upstream(update)) if isinstance(a, SendDownstream)]


def test_an_update_that_overtakes_its_subscribes_response_chain_follows_the_reply() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "resources/subscribe", {"uri": "file:///r"})
    (reply_run,) = router.receive_upstream(line(id=upstream_id, result={}))
    update = line(method="notifications/resources/updated", params={"uri": "file:///r"})
    assert router.receive_upstream(update) == []  # waits for the subscribe's outcome
    assert isinstance(reply_run, RunChain)
    actions = settle(router, router.chain_done(reply_run.ticket, ChainPassed(reply_run.payload)))
    assert [m.get("method", "reply") for m in downstream(actions, "a")] == ["reply", "notifications/resources/updated"]


def test_an_unsubscribe_runs_its_request_chain() -> None:
    router = ready_router()
    handshake_session(router, "a")
    first = forward(router, "a", 1, "resources/subscribe", {"uri": "file:///r"})
    settle(router, router.receive_upstream(line(id=first, result={})))
    (run,) = router.receive_downstream("a", line(id=2, method="resources/unsubscribe", params={"uri": "file:///r"}))
    assert isinstance(run, RunChain) and run.event == "resources/unsubscribe" and run.phase is Phase.REQUEST
    assert [b["method"] for b in upstream_bodies(settle(router, router.chain_done(run.ticket, passing(run))))] == [
        "resources/unsubscribe"
    ]


# Server -> client requests ----------------------------------------------------------------------


def test_sampling_is_relayed_to_the_session_in_flight_and_its_answer_goes_back() -> None:
    router = ready_router()
    handshake_session(router, "a", sampling={})
    forward(router, "a", 1, "tools/call", {"name": "x"})
    (run,) = router.receive_upstream(line(id="up-7", method="sampling/createMessage", params={"messages": []}))
    assert isinstance(run, RunChain)
    assert (run.event, run.phase, run.direction) == ("sampling/createMessage", Phase.REQUEST, Direction.SENDING)
    (relayed,) = router.chain_done(run.ticket, ChainPassed(run.payload))
    assert isinstance(relayed, SendDownstream) and relayed.related == 1
    down_id = body(relayed)["id"]
    (answer_run,) = router.receive_downstream(
        "a", line(id=down_id, result={"role": "assistant", "content": {"type": "text", "text": "hi"}})
    )
    assert isinstance(answer_run, RunChain) and answer_run.direction is Direction.RECEIVING
    (back,) = router.chain_done(answer_run.ticket, ChainPassed(answer_run.payload))
    assert body(back)["id"] == "up-7" and body(back)["result"]["role"] == "assistant"


def test_a_request_to_the_client_is_answered_upstream_when_the_clients_answer_is_malformed_or_undeliverable() -> None:
    for ending in ("malformed", "undeliverable"):
        router = ready_router()
        handshake_session(router, "a", sampling={})
        forward(router, "a", 1, "tools/call", {"name": "x"})
        (run,) = router.receive_upstream(line(id="up-7", method="sampling/createMessage", params={"messages": []}))
        (relayed,) = router.chain_done(run.ticket, ChainPassed(run.payload))
        assert isinstance(relayed, SendDownstream)
        down_id = body(relayed)["id"]
        assert relayed.outgoing == down_id  # the shell can tell the router it could not deliver it
        if ending == "malformed":
            actions = router.receive_downstream("a", f'{{"jsonrpc": "2.0", "id": "{down_id}", "result": 5}}')
        else:
            actions = router.undeliverable("a", down_id)
        (answer,) = upstream_bodies(actions)
        assert answer["id"] == "up-7" and answer["error"]["code"] == -32603, ending
        assert downstream(actions) == []  # nothing for the client: its answer is not a request
        assert router.undeliverable("a", down_id) == []  # answered once


def test_a_session_closing_while_its_chains_run_ignores_their_late_outcomes() -> None:
    router = ready_router()
    handshake_session(router, "a", sampling={})
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    (log_run,) = router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "d"}))
    (reply_run,) = router.receive_upstream(line(id=upstream_id, result={"content": []}))
    (request_run,) = router.receive_downstream("a", line(id=2, method="tools/call", params={"name": "y"}))
    router.close_session("a")
    for run in (log_run, reply_run, request_run):
        assert isinstance(run, RunChain)
        (late,) = router.chain_done(run.ticket, ChainPassed(run.payload))
        assert isinstance(late, Dropped)


def test_mutator_values_with_no_json_form_are_errors_never_exceptions() -> None:
    # a side message: dropped
    router = ready_router()
    handshake_session(router, "a")
    forward(router, "a", 1, "tools/call", {"name": "x"})
    (log_run,) = router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "d"}))
    assert isinstance(log_run, RunChain)
    out = router.chain_done(log_run.ticket, ChainPassed({**log_run.payload, "_meta": {"x": object()}}, modified=True))
    assert downstream(out) == []
    # a request: answered -32603
    (run,) = router.receive_downstream("a", line(id=2, method="tools/call", params={"name": "y"}))
    assert isinstance(run, RunChain)
    bad_request = {"method": "tools/call", "params": {"name": "y", "arguments": {"v": object()}}}
    (reply,) = downstream(router.chain_done(run.ticket, ChainPassed(bad_request, modified=True)))
    assert reply["id"] == 2 and reply["error"]["code"] == -32603
    # a request to the client: the upstream is answered
    router = ready_router()
    handshake_session(router, "a", sampling={})
    forward(router, "a", 1, "tools/call", {"name": "x"})
    (run,) = router.receive_upstream(line(id="up-1", method="sampling/createMessage", params={"messages": []}))
    assert isinstance(run, RunChain)
    bad = {"method": "sampling/createMessage", "params": {"messages": [], "x": object()}}
    (answer,) = upstream_bodies(router.chain_done(run.ticket, ChainPassed(bad, modified=True)))
    assert answer["id"] == "up-1" and answer["error"]["code"] == -32603


def test_server_requests_without_a_capable_client_are_refused() -> None:
    table = [({}, "sampling/createMessage"), ({"sampling": {}}, "elicitation/create"), ({"sampling": {}}, "roots/list")]
    for capabilities, method in table:
        router = ready_router()
        handshake_session(router, "a", **capabilities)
        forward(router, "a", 1, "tools/call", {"name": "x"})
        (refusal,) = router.receive_upstream(line(id=3, method=method, params={}))
        assert body(refusal)["error"]["code"] == -32601 and body(refusal)["id"] == 3


# Tasks (SEP-1686) -------------------------------------------------------------------------------


def test_tasks_belong_to_the_session_that_created_them() -> None:
    router = ready_router()
    handshake_session(router, "a")
    handshake_session(router, "b")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "slow", "task": {"ttl": 1000}})
    created = {"task": {"taskId": "t1", "status": "working", "createdAt": "x", "ttl": 1000}}
    (reply,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, result=created))))
    assert reply["result"]["task"]["taskId"] == "t1"
    (theirs,) = downstream(router.receive_downstream("b", line(id=1, method="tasks/get", params={"taskId": "t1"})))
    assert theirs["error"]["code"] == -32602
    forward(router, "a", 2, "tasks/get", {"taskId": "t1"})
    status = line(method="notifications/tasks/status", params={"taskId": "t1", "status": "completed"})
    assert [a.session for a in settle(router, router.receive_upstream(status)) if isinstance(a, SendDownstream)] == [
        "a"
    ]
    listed = forward(router, "b", 2, "tasks/list", {})
    tasks = {"tasks": [{"taskId": "t1"}, {"taskId": "unknown"}]}
    (only,) = downstream(settle(router, router.receive_upstream(line(id=listed, result=tasks))))
    assert only["result"]["tasks"] == []


# Per-request state ------------------------------------------------------------------------------


def test_what_the_request_chain_learned_rides_every_later_pass() -> None:
    router = ready_router()
    handshake_session(router, "a")
    (run,) = router.receive_downstream(
        "a", line(id=1, method="tools/call", params={"name": "t", "_meta": {"progressToken": 1}})
    )
    assert isinstance(run, RunChain) and run.request is not None
    assert run.request.target == "t"
    (sent,) = upstream_bodies(router.chain_done(run.ticket, ChainPassed(run.payload, learned={"rule": "r1"})))
    token = sent["params"]["_meta"]["progressToken"]
    seen: list[RunChain] = []

    def record(r: RunChain) -> ChainOutcome:
        seen.append(r)
        return ChainPassed(r.payload)

    settle(
        router,
        router.receive_upstream(line(method="notifications/progress", params={"progressToken": token, "progress": 1})),
        record,
    )
    settle(
        router,
        router.receive_upstream(line(method="notifications/message", params={"level": "info", "data": "x"})),
        record,
    )
    settle(router, router.receive_upstream(line(id=sent["id"], result={"content": []})), record)
    assert [r.channel for r in seen] == ["progress", "log", "result"]
    assert all(r.request is not None and r.request.learned == {"rule": "r1"} and r.request.target == "t" for r in seen)


def test_a_shell_without_work_skips_the_chain() -> None:
    router = ready_router(RouterConfig(has_work=lambda event, phase, direction: False))
    handshake_session(router, "a")
    actions = router.receive_downstream("a", line(id=1, method="tools/call", params={"name": "x"}))
    assert [type(a) for a in actions] == [SendUpstream]


# Upstream request timeouts (the shell's clock, the router's answer) -------------------------------


def test_requests_sent_upstream_carry_their_upstream_id_for_the_shell() -> None:
    router = ready_router()
    handshake_session(router, "a")
    (sent,) = settle(router, router.receive_downstream("a", line(id=1, method="tools/call", params={"name": "x"})))
    assert isinstance(sent, SendUpstream) and sent.request_id == body(sent)["id"]
    (cancel,) = router.receive_downstream("a", line(method="notifications/cancelled", params={"requestId": 1}))
    assert isinstance(cancel, SendUpstream) and cancel.request_id is None


def test_a_timed_out_request_is_answered_and_cancelled_upstream_and_its_late_reply_dropped() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", "c1", "tools/call", {"name": "slow"})
    assert router.awaiting(upstream_id)
    actions = router.upstream_timeout(upstream_id, 2.5)
    assert [a["params"] for a in upstream_bodies(actions)] == [{"requestId": upstream_id, "reason": "upstream timeout"}]
    (reply,) = downstream(actions, "a")
    assert reply["id"] == "c1"
    assert reply["error"] == {
        "code": -32001,
        "message": "Request timed out",
        "data": {"reason": "upstream timeout", "timeoutSeconds": 2.5},
    }
    assert not router.awaiting(upstream_id)
    assert router.upstream_timeout(upstream_id, 2.5) == []  # once only
    (late,) = router.receive_upstream(line(id=upstream_id, result={"content": []}))
    assert isinstance(late, Dropped)


def test_a_request_whose_reply_arrived_does_not_time_out_while_its_chain_runs() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    (run,) = router.receive_upstream(line(id=upstream_id, result={"content": []}))
    assert isinstance(run, RunChain) and not router.awaiting(upstream_id)
    assert router.upstream_timeout(upstream_id, 1) == []
    (duplicate,) = router.receive_upstream(line(id=upstream_id, result={"content": []}))
    assert isinstance(duplicate, Dropped)
    (reply,) = downstream(router.chain_done(run.ticket, ChainPassed(run.payload)))
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}


def test_an_internal_request_that_times_out_reaches_its_continuation_as_an_error() -> None:
    router = ready_router()
    seen: list[Any] = []
    (sent,) = router.upstream_request("tools/list", {}, lambda reply: seen.append(reply.error) or [])
    assert isinstance(sent, SendUpstream) and router.awaiting(body(sent)["id"])
    actions = router.upstream_timeout(body(sent)["id"], 1)
    assert [b["method"] for b in upstream_bodies(actions)] == ["notifications/cancelled"]
    assert seen[0]["code"] == -32001 and seen[0]["data"]["reason"] == "upstream timeout"


def test_a_malformed_reply_to_an_internal_request_reaches_its_continuation_at_once() -> None:
    """A catalog read answered with garbage must not wait for the upstream timeout (forever with timeout 0)."""
    router = ready_router()
    seen: list[Any] = []
    (sent,) = router.upstream_request("tools/list", {}, lambda reply: seen.append(reply.error) or [])
    upstream_id = body(sent)["id"]
    for raw in (b'{"jsonrpc": "2.0", "id": %d, "result": 1, "error": 2}' % upstream_id,):
        router.receive_upstream(raw)
    assert seen and seen[0]["code"] == -32603 and "reason" in seen[0]["data"]
    assert not router.awaiting(upstream_id)


def test_a_malformed_reply_to_the_handshake_closes_instead_of_stalling() -> None:
    router = Router(RouterConfig(upstream_era=Era.HANDSHAKE))
    (init,) = router.start()
    actions = router.receive_upstream(b'{"jsonrpc": "2.0", "id": %d, "result": [1]}' % body(init)["id"])
    assert isinstance(actions[-1], Close) and router.upstream.phase is UpstreamPhase.CLOSED


def test_an_upstream_handshake_that_times_out_closes_the_gateway() -> None:
    router = Router(RouterConfig(upstream_era=Era.HANDSHAKE))
    (init,) = router.start()
    assert isinstance(init, SendUpstream) and init.request_id == body(init)["id"]
    actions = router.upstream_timeout(body(init)["id"], 1)
    assert upstream_bodies(actions) == []  # initialize is never cancelled
    assert isinstance(actions[-1], Close) and router.upstream.phase is UpstreamPhase.CLOSED


# The spec check (injected: the router knows no schema) -------------------------------------------


def test_results_are_checked_at_the_upstreams_version_and_mutated_ones_at_the_clients() -> None:
    checked: list[tuple[str, dict[str, Any], str | None]] = []

    def check(method: str, result: dict[str, Any], version: str | None) -> dict[str, Any] | None:
        checked.append((method, result, version))
        return (
            {"reason": "no text", "errors": [{"path": "content.0.text", "type": "missing"}]}
            if result.get("bad")
            else None
        )

    router = ready_router(RouterConfig(check_result=check))
    handshake_session(router, "a")
    router.sessions["a"].version = "2025-06-18"  # the client's version differs from the upstream's
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    (reply,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, result={"content": []}))))
    assert reply["result"] == {"content": []}
    assert checked == [("tools/call", {"content": []}, "2025-11-25")]  # unchanged by the chain: once

    checked.clear()
    upstream_id = forward(router, "a", 2, "tools/call", {"name": "x"})
    (invalid,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, result={"bad": 1}))))
    assert invalid["error"] == {
        "code": -32603,
        "message": "the upstream server returned an invalid result",
        "data": {"reason": "no text", "errors": [{"path": "content.0.text", "type": "missing"}]},
    }

    def mutate(run: RunChain) -> ChainOutcome:
        if run.channel == "result":
            return ChainPassed({"bad": 2}, modified=True)
        return ChainPassed(run.payload)

    checked.clear()
    upstream_id = forward(router, "a", 3, "tools/call", {"name": "x"})
    (broken,) = downstream(
        settle(router, router.receive_upstream(line(id=upstream_id, result={"content": []})), mutate)
    )
    assert [(method, version) for method, _, version in checked] == [
        ("tools/call", "2025-11-25"),
        ("tools/call", "2025-06-18"),
    ]
    assert broken["error"]["code"] == -32603 and broken["error"]["message"] == "interceptor chain failed"
    assert broken["error"]["data"]["reason"] == "a response mutator produced an invalid result: no text"


# Gateway-local tools ------------------------------------------------------------------------------


def test_local_tools_join_the_first_tools_page_before_its_chain_and_their_calls_go_to_the_shell() -> None:
    reveal = {"name": "reveal_token", "inputSchema": {"type": "object"}}
    router = ready_router(RouterConfig(local_tools=(reveal,)))
    handshake_session(router, "a")
    seen: list[Any] = []

    def record(run: RunChain) -> ChainOutcome:
        seen.append(run.payload)
        return ChainPassed(run.payload)

    upstream_id = forward(router, "a", 1, "tools/list", {})
    tools = [{"name": "echo", "inputSchema": {}}, {"name": "reveal_token", "inputSchema": {"upstream": True}}]
    reply = {"tools": tools, "nextCursor": "p2"}
    (first,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, result=reply)), record))
    assert [t["name"] for t in first["result"]["tools"]] == ["echo", "reveal_token"]
    assert first["result"]["tools"][1] == reveal  # the upstream's namesake gives way
    assert seen[-1]["tools"][1] == reveal  # the response chain saw it (the policy can hide it)
    upstream_id = forward(router, "a", 2, "tools/list", {"cursor": "p2"})
    (second,) = downstream(settle(router, router.receive_upstream(line(id=upstream_id, result={"tools": []}))))
    assert second["result"]["tools"] == []  # only on the first page
    call = router.receive_downstream("a", line(id=3, method="tools/call", params={"name": "reveal_token"}))
    assert call == [AnswerLocally("a", 3, "tools/call", {"name": "reveal_token"})]
    (answered,) = downstream(router.reply_local("a", 3, result={"content": []}))
    assert answered == {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}
    (other,) = settle(router, router.receive_downstream("a", line(id=4, method="tools/call", params={"name": "echo"})))
    assert isinstance(other, SendUpstream)  # every other tool goes upstream


def test_progress_of_a_request_is_counted_for_the_shells_clock() -> None:
    router = ready_router()
    handshake_session(router, "a")
    (run,) = router.receive_downstream(
        "a", line(id=1, method="tools/call", params={"name": "t", "_meta": {"progressToken": "p"}})
    )
    assert isinstance(run, RunChain)
    (sent,) = upstream_bodies(router.chain_done(run.ticket, ChainPassed(run.payload)))
    token = sent["params"]["_meta"]["progressToken"]
    assert router.progress_seen(sent["id"]) == 0
    for step in (1, 2):
        progress = line(method="notifications/progress", params={"progressToken": token, "progress": step})
        settle(router, router.receive_upstream(progress))
    assert router.progress_seen(sent["id"]) == 2
    assert router.progress_seen(10_000) == 0  # no such request


# subscriptions/listen (2026-07-28) ---------------------------------------------------------------

LISTEN_ID = "listen-1"
STAMP = {"io.modelcontextprotocol/subscriptionId": LISTEN_ID}


def modern_listener(
    notifications: dict[str, Any], capabilities: dict[str, Any] | None = None
) -> tuple[Router, list[Action]]:
    caps = capabilities or {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True}}
    router = ready_router(capabilities=caps)
    router.open_session("m")
    settle(router, router.receive_downstream("m", line(id=0, method="server/discover", params={"_meta": envelope()})))
    params = {"notifications": notifications, "_meta": envelope()}
    return router, settle(
        router, router.receive_downstream("m", line(id=LISTEN_ID, method="subscriptions/listen", params=params))
    )


def test_a_listen_stream_is_acknowledged_with_what_the_upstream_can_honor_and_subscribes_upstream_once() -> None:
    wanted = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["file:///r", "file:///r"]}
    router, actions = modern_listener(wanted)
    (ack,) = downstream(actions, "m")
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///r"]}, "_meta": STAMP},
    }  # no prompts: the upstream has none to change
    assert [a.related for a in actions if isinstance(a, SendDownstream)] == [LISTEN_ID]  # on the listen's own stream
    assert not any(a.final for a in actions if isinstance(a, SendDownstream))
    assert upstream_bodies(actions) == [
        {"jsonrpc": "2.0", "id": router._next_id, "method": "resources/subscribe", "params": {"uri": "file:///r"}}
    ]


def test_a_listen_stream_carries_the_changes_it_asked_for_stamped_and_nothing_else() -> None:
    router, _ = modern_listener({"toolsListChanged": True, "resourceSubscriptions": ["file:///r"]})
    tools = settle(router, router.receive_upstream(line(method="notifications/tools/list_changed")))
    assert tools[0] == CatalogChanged("tools")
    assert downstream(tools, "m") == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": STAMP}}
    ]
    resources = settle(router, router.receive_upstream(line(method="notifications/resources/list_changed")))
    assert downstream(resources, "m") == []  # not asked for
    updated = settle(
        router, router.receive_upstream(line(method="notifications/resources/updated", params={"uri": "file:///r"}))
    )
    (frame,) = downstream(updated, "m")
    assert frame["params"]["uri"] == "file:///r" and frame["params"]["_meta"] == STAMP
    other = router.receive_upstream(line(method="notifications/resources/updated", params={"uri": "file:///other"}))
    assert downstream(settle(router, other), "m") == []


def test_cancelling_a_listen_stream_ends_it_and_releases_its_subscriptions_upstream() -> None:
    router, _ = modern_listener({"resourceSubscriptions": ["file:///r"]})
    cancel = line(method="notifications/cancelled", params={"requestId": LISTEN_ID, "_meta": envelope()})
    actions = router.receive_downstream("m", cancel)
    assert [b["method"] for b in upstream_bodies(actions)] == ["resources/unsubscribe"]
    updated = router.receive_upstream(line(method="notifications/resources/updated", params={"uri": "file:///r"}))
    assert downstream(settle(router, updated), "m") == []


def test_listen_needs_a_modern_session_and_ends_gracefully_when_the_upstream_goes() -> None:
    router = ready_router()
    handshake_session(router, "h")
    (refused,) = downstream(
        router.receive_downstream("h", line(id=5, method="subscriptions/listen", params={"notifications": {}}))
    )
    assert refused["error"]["code"] == -32601
    router, _ = modern_listener({"toolsListChanged": True})
    ends = [a for a in router.upstream_closed() if isinstance(a, SendDownstream)]
    assert [(body(a), a.final) for a in ends] == [
        ({"jsonrpc": "2.0", "id": LISTEN_ID, "result": {"_meta": STAMP}}, True)
    ]


# Secrets cut across streaming messages -----------------------------------------------------------


def test_a_progress_message_ending_in_a_secret_prefix_is_held_whole_and_read_with_its_neighbours() -> None:
    """Text never moves between messages (issue 29): a message that could end in the start of a secret waits,
    whole, for the next one, and each reaches the chain with its neighbours' text as context only."""
    from interceptors.transforms.stream import StreamHoldBack

    router = ready_router(RouterConfig(hold_back=StreamHoldBack))
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x", "_meta": {"progressToken": "p"}})
    head, tail = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl", "6Mn7Op8Qr9St0Uv1Wx2Yz"
    seen: list[tuple[str, dict[str, str] | None]] = []

    def record(run: RunChain) -> ChainOutcome:
        if run.channel == "progress":
            text = run.payload["content"][0]["text"] if run.payload["content"] else ""
            seen.append((text, run.payload["_meta"].get("io.mcp-interceptors/stream")))
        return ChainPassed(run.payload)

    def progress(text: str) -> bytes:
        return line(
            method="notifications/progress", params={"progressToken": upstream_id, "progress": 1, "message": text}
        )

    first = settle(router, router.receive_upstream(progress(f"reading {head}")), record)
    assert downstream(first, "a") == [] and seen == []  # held, whole
    second = settle(router, router.receive_upstream(progress(f"{tail} read; next ghp_" + "Zz9")), record)
    out = settle(router, router.receive_upstream(line(id=upstream_id, result={"content": []})), record)
    second_tail = f"{tail} read; next ghp_Zz9"
    assert seen == [
        (f"reading {head}", {"before": "", "after": second_tail}),
        (second_tail, {"before": f"reading {head}", "after": ""}),  # held in turn, flushed before the reply
    ]
    sent = downstream(second, "a") + downstream(out, "a")
    assert [m.get("method", "reply") for m in sent] == ["notifications/progress", "notifications/progress", "reply"]
    assert [m["params"]["message"] for m in sent[:2]] == [f"reading {head}", second_tail]  # as the upstream sent
    exact = [{"progressToken": "p", "progress": 1, "message": m} for m in (f"reading {head}", second_tail)]
    assert [m["params"] for m in sent[:2]] == exact  # as the upstream sent them: the context never goes on


def test_a_logs_logger_name_rides_the_chain_and_comes_back_as_the_chain_left_it() -> None:
    router = ready_router()
    handshake_session(router, "a")
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "x"})
    raw = line(method="notifications/message", params={"level": "info", "logger": "svc SECRET", "data": "d"})
    (run,) = router.receive_upstream(raw)
    assert isinstance(run, RunChain)
    assert run.payload["_meta"]["io.mcp-interceptors/logger"] == "svc SECRET"
    scrubbed = {**run.payload, "_meta": {**run.payload["_meta"], "io.mcp-interceptors/logger": "svc [R]"}}
    (log,) = downstream(router.chain_done(run.ticket, ChainPassed(scrubbed, modified=True)), "a")
    assert log["params"] == {"level": "info", "logger": "svc [R]", "data": "d"}  # our key never reaches the client
    del upstream_id


def test_an_upstream_cancel_never_overtakes_the_request_it_cancels() -> None:
    router = ready_router()
    handshake_session(router, "a", sampling={})
    forward(router, "a", 1, "tools/call", {"name": "x"})
    (run,) = router.receive_upstream(line(id="up-9", method="sampling/createMessage", params={"messages": []}))
    cancel = line(method="notifications/cancelled", params={"requestId": "up-9", "reason": "gave up"})
    assert downstream(router.receive_upstream(cancel)) == []  # the request is still in its chain: the cancel waits
    assert isinstance(run, RunChain)
    released = downstream(router.chain_done(run.ticket, ChainPassed(run.payload)))
    assert [m["method"] for m in released] == ["sampling/createMessage", "notifications/cancelled"]
    assert released[1]["params"]["requestId"] == released[0]["id"]
    assert "reason" not in released[1]["params"]  # free text no stage checks: not relayed


def test_a_list_changed_with_meta_passes_each_sessions_chain_and_a_bare_one_is_stated_plainly() -> None:
    router = ready_router()
    handshake_session(router, "a")
    handshake_session(router, "b")
    meta = {"note": "AKIA-planted"}
    actions = router.receive_upstream(
        line(method="notifications/prompts/list_changed", params={"_meta": meta, "extra": "not relayed"})
    )
    assert actions[0] == CatalogChanged("prompts")
    runs = [a for a in actions if isinstance(a, RunChain)]
    assert [(r.event, r.phase, r.direction) for r in runs] == [("prompts/list", Phase.RESPONSE, Direction.SENDING)] * 2
    assert downstream(actions) == []  # nothing leaves before its chain

    def scrub(run: RunChain) -> ChainPassed:
        return ChainPassed({**run.payload, "_meta": {**run.payload["_meta"], "note": "[masked]"}}, modified=True)

    out = settle(router, actions, scrub)
    for name in ("a", "b"):
        assert downstream(out, name) == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/prompts/list_changed",
                "params": {"_meta": {"note": "[masked]"}},
            }
        ]
    bare = router.receive_upstream(line(method="notifications/tools/list_changed", params={"extra": 1}))
    assert downstream(bare, "a") == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]


def test_a_sessions_task_table_is_bounded_and_forgets_the_oldest() -> None:
    from integrations.gateway.router.state import MAX_TASKS_PER_SESSION

    router = ready_router()
    handshake_session(router, "a")
    for n in range(MAX_TASKS_PER_SESSION + 1):
        upstream_id = forward(router, "a", n + 1, "tools/call", {"name": "x", "task": {}})
        settle(router, router.receive_upstream(line(id=upstream_id, result={"task": {"taskId": f"t-{n}"}})))
    assert len(router._tasks) == MAX_TASKS_PER_SESSION
    (gone,) = downstream(
        settle(router, router.receive_downstream("a", line(id="g", method="tasks/get", params={"taskId": "t-0"})))
    )
    assert gone["error"]["code"] == -32602  # as if it expired
    kept = forward(router, "a", "k", "tasks/get", {"taskId": f"t-{MAX_TASKS_PER_SESSION}"})
    assert kept


def test_a_modern_task_outlives_its_exchange_for_its_principal_only() -> None:
    """2026-07-28: each exchange is its own session, so a task is its principal's across exchanges."""
    router = ready_router()

    def exchange(name: str, principal: str) -> None:
        router.open_session(name, context={"session": name}, principal=principal)

    exchange("m1", "p")
    upstream_id = forward(router, "m1", 1, "tools/call", {"name": "slow", "task": {"ttl": 1000}, "_meta": envelope()})
    created = {"task": {"taskId": "t1", "status": "working", "createdAt": "x", "ttl": 1000}}
    settle(router, router.receive_upstream(line(id=upstream_id, result=created)))
    router.close_session("m1")
    exchange("m2", "p")
    forward(router, "m2", 1, "tasks/get", {"taskId": "t1", "_meta": envelope()})
    listed = forward(router, "m2", 2, "tasks/list", {"_meta": envelope()})
    tasks = {"tasks": [{"taskId": "t1"}, {"taskId": "unknown"}]}
    (mine,) = downstream(settle(router, router.receive_upstream(line(id=listed, result=tasks))))
    assert [t["taskId"] for t in mine["result"]["tasks"]] == ["t1"]
    exchange("m3", "q")
    get = line(id=1, method="tasks/get", params={"taskId": "t1", "_meta": envelope()})
    (theirs,) = downstream(settle(router, router.receive_downstream("m3", get)))
    assert theirs["error"]["code"] == -32602  # another principal: as if it did not exist
    handshake_session(router, "h", principal="p")
    (old_era,) = downstream(settle(router, router.receive_downstream("h", line(id=5, method="tasks/get",
                                                                           params={"taskId": "t1"}))))  # fmt: skip
    assert old_era["error"]["code"] == -32602  # a 2025-11-25 session sees only its own tasks
    status = line(method="notifications/tasks/status", params={"taskId": "t1", "status": "completed"})
    assert downstream(settle(router, router.receive_upstream(status))) == []  # no exchange stands open for it


def test_modern_tasks_are_bounded_per_principal() -> None:
    from integrations.gateway.router.state import MAX_TASKS_PER_SESSION

    router = ready_router()
    for n in range(MAX_TASKS_PER_SESSION + 1):
        router.open_session(f"m{n}", context={}, principal="p")
        upstream_id = forward(router, f"m{n}", 1, "tools/call", {"name": "x", "task": {}, "_meta": envelope()})
        settle(router, router.receive_upstream(line(id=upstream_id, result={"task": {"taskId": f"t-{n}"}})))
        router.close_session(f"m{n}")
    assert len(router._tasks) == MAX_TASKS_PER_SESSION
    router.open_session("last", context={}, principal="p")
    get = line(id=1, method="tasks/get", params={"taskId": "t-0", "_meta": envelope()})
    (gone,) = downstream(settle(router, router.receive_downstream("last", get)))
    assert gone["error"]["code"] == -32602


def test_a_restarting_upstream_says_so_and_its_tasks_and_requests_to_the_client_are_forgotten() -> None:
    router = ready_router()
    handshake_session(router, "a", sampling={})
    upstream_id = forward(router, "a", 1, "tools/call", {"name": "slow", "task": {"ttl": 1000}})
    settle(router, router.receive_upstream(line(id=upstream_id, result={"task": {"taskId": "t1"}})))
    forward(router, "a", 2, "tools/call", {"name": "x"})
    asked = settle(router, router.receive_upstream(line(id="up-1", method="sampling/createMessage", params={})))
    (sampling,) = [m for m in downstream(asked) if m.get("method") == "sampling/createMessage"]
    closed = router.upstream_closed(restarting=True)
    assert not any(isinstance(a, Close) for a in closed[:-1]) and isinstance(closed[-1], Close)
    (refused,) = downstream(router.receive_downstream("a", line(id=3, method="tools/list")))
    assert refused["error"]["data"] == {"reason": "the upstream server is restarting", "retry": True}
    (start,) = router.start()
    result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "u2"}}
    settle(router, router.receive_upstream(line(id=body(start)["id"], result=result)))
    get = line(id=4, method="tasks/get", params={"taskId": "t1"})
    (gone,) = downstream(settle(router, router.receive_downstream("a", get)))
    assert gone["error"]["code"] == -32602  # the new upstream never knew it: as if it expired
    late = line(id=sampling["id"], result={"role": "assistant", "content": {"type": "text", "text": "hi"}})
    assert upstream_bodies(settle(router, router.receive_downstream("a", late))) == []  # the old upstream is gone
