"""The router's dispatch tables and continuation records (`router/state.py`, `router/continuations.py`).

Every transition is looked up: a method the table knows reaches its handler by its row (a new server request
is one row), and every chain run the router waits for is a named record that says what it will do.
"""

from __future__ import annotations

from typing import Any

from integrations.gateway.router import ChainPassed, Dropped, Router, RunChain, SendDownstream, SendUpstream
from integrations.gateway.router.continuations import (
    AnswerClient,
    AnswerClientError,
    AnswerFromRouter,
    AnswerUpstream,
    AnswerUpstreamError,
    DeliverNotification,
    ForwardRequest,
    RelayToClient,
)
from integrations.gateway.router.state import RouterConfig
from interceptors.protocol.methods import METHODS, Channel, Method, Sender, Stage
from tests.router_helpers import body, downstream, handshake_session, line, ready_router, settle


def test_every_continuation_record_has_its_transition() -> None:
    records = {
        ForwardRequest,
        AnswerClient,
        AnswerClientError,
        AnswerFromRouter,
        DeliverNotification,
        RelayToClient,
        AnswerUpstream,
        AnswerUpstreamError,
    }
    assert set(Router.RESUME) == records


def test_every_table_row_the_router_relays_has_a_handler() -> None:
    notification_channels = {row.channel for row in METHODS.values() if row.notification and row.channel}
    assert notification_channels == set(Router.UPSTREAM_NOTIFICATION_CHANNELS)
    assert set(Router.CLIENT_NOTIFICATIONS) <= set(METHODS)
    assert set(Router.UPSTREAM_NOTIFICATIONS) <= set(METHODS)
    assert set(Router.SEND_HANDLERS) | set(Router.RESULT_HANDLERS) | set(Router.CHECKED_RESULT_HANDLERS) <= set(METHODS)


def _waiting_kinds(router: Router) -> list[str]:
    return [type(then).__name__ for then in router.waiting().values()]


def test_what_each_waiting_chain_run_will_do_is_a_named_record() -> None:
    router = ready_router()
    handshake_session(router, "a", sampling={})
    (run,) = router.receive_downstream("a", line(id=1, method="tools/call", params={"name": "x"}))
    assert isinstance(run, RunChain)
    (forward,) = router.waiting().values()
    assert isinstance(forward, ForwardRequest) and forward.pending.client_id == 1
    (sent,) = router.chain_done(run.ticket, ChainPassed(run.payload))
    assert isinstance(sent, SendUpstream) and router.waiting() == {}
    upstream_id = body(sent)["id"]
    asked = router.receive_upstream(line(id="s1", method="sampling/createMessage", params={"messages": []}))
    reply = router.receive_upstream(line(id=upstream_id, result={"content": []}))
    assert _waiting_kinds(router) == ["RelayToClient", "AnswerClient"]
    relay, answer = router.waiting().values()
    assert isinstance(relay, RelayToClient) and relay.method == "sampling/createMessage" and relay.upstream_id == "s1"
    assert isinstance(answer, AnswerClient) and answer.subscribed is None
    actions = settle(router, [*asked, *reply])
    (request, result) = downstream(actions, "a")
    assert request["method"] == "sampling/createMessage" and result["id"] == 1  # in the order they were decided


A_NEW_SERVER_REQUEST = Method(
    "widgets/pick",
    Sender.SERVER,
    channel=Channel.SERVER_REQUEST,
    capability="widgets",
    stages=frozenset({Stage.OUTBOUND, Stage.ANSWERS}),
)


def test_a_new_server_request_is_one_row() -> None:
    """The upstream's request reaches a client that declared the row's capability, by the row's channel alone;
    without the row it is answered -32601."""

    def ask(router: Router) -> list[Any]:
        return settle(router, router.receive_upstream(line(id=5, method="widgets/pick", params={"n": 1})))

    plain = ready_router()
    handshake_session(plain, "a", widgets={})
    (refused,) = ask(plain)
    assert isinstance(refused, SendUpstream) and body(refused)["error"]["code"] == -32601
    router = ready_router(RouterConfig(methods=METHODS.with_rows(A_NEW_SERVER_REQUEST)))
    handshake_session(router, "a", widgets={})
    (relayed,) = ask(router)
    assert isinstance(relayed, SendDownstream)
    sent = body(relayed)
    assert sent["method"] == "widgets/pick" and sent["params"] == {"n": 1}
    (answered,) = settle(router, router.receive_downstream("a", line(id=sent["id"], result={"picked": 2})))
    assert body(answered) == {"jsonrpc": "2.0", "id": 5, "result": {"picked": 2}}


def test_a_subscribe_whose_result_the_spec_check_refuses_leaves_no_update_waiting() -> None:
    """Updates wait for a subscribe's chain only once its result passed the check: a refused one has no chain."""

    def check(method: str, result: dict[str, Any], version: str | None) -> dict[str, Any] | None:
        return {"reason": "refused"} if method == "resources/subscribe" else None

    router = ready_router(RouterConfig(check_result=check))
    handshake_session(router, "a")
    (sent,) = settle(router, router.receive_downstream("a", line(id=1, method="resources/subscribe",
                                                                  params={"uri": "file:///r"})))  # fmt: skip
    (refused,) = downstream(settle(router, router.receive_upstream(line(id=body(sent)["id"], result={}))), "a")
    assert refused["error"]["code"] == -32603
    update = line(method="notifications/resources/updated", params={"uri": "file:///r"})
    (dropped,) = router.receive_upstream(update)
    assert isinstance(dropped, Dropped)  # nobody holds it, nobody waits for it
    assert router.subscriptions.take("a", "file:///r") == []
