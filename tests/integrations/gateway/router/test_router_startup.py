"""What the router tells the upstream about the client, and the upstream's requests to a client that has not
finished its handshake yet (issue 31), as tables on the pure router."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.gateway.router import Era, Router, RouterConfig, RunChain, SendDownstream, SendUpstream
from integrations.gateway.router.state import ALL_RELAYED, MAX_HELD_REQUESTS
from tests.router_helpers import (
    UPSTREAM_CAPS,
    UPSTREAM_INFO,
    body,
    downstream,
    handshake_session,
    line,
    ready_router,
    settle,
    upstream_bodies,
)

ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (None, ALL_RELAYED),
        ({}, {}),
        ({"roots": {"listChanged": True}}, {"roots": {"listChanged": True}}),
        (
            {"sampling": {}, "elicitation": {"form": {}}, "experimental": {"x": {}}, "tasks": {}},
            {"sampling": {}, "elicitation": {"form": {}}},
        ),
        ({"roots": True, "sampling": {}}, {"sampling": {}}),
    ],
)
def test_the_upstream_handshake_declares_what_the_client_declared(declared: Any, expected: Any) -> None:
    router = Router(RouterConfig(upstream_era=Era.HANDSHAKE))
    (start,) = router.start(declared)
    sent = body(start)
    assert sent["method"] == "initialize" and sent["params"]["capabilities"] == expected
    router.receive_upstream(line(id=sent["id"], result={"protocolVersion": "2025-11-25", "capabilities": {}}))
    router.upstream_closed(restarting=True)
    (again,) = router.start()  # a restarted upstream is told the same
    assert body(again)["params"]["capabilities"] == expected


def started(declared: dict[str, Any]) -> tuple[Router, SendUpstream]:
    """A router whose upstream is ready, with one session opened before it (the stdio shell's order)."""
    router = Router(RouterConfig(upstream_era=Era.HANDSHAKE))
    router.open_session("a", context={}, principal="a")
    (start,) = router.start(declared)
    assert isinstance(start, SendUpstream)
    return router, start


def client_initialize(router: Router, capabilities: dict[str, Any]) -> list[dict[str, Any]]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "c", "version": "1"},
    }
    return downstream(settle(router, router.receive_downstream("a", line(id=0, method="initialize", params=params))))


def test_roots_asked_before_the_client_handshake_ends_wait_for_it_then_go_to_the_client() -> None:
    router, start = started({"roots": {}})
    assert client_initialize(router, {"roots": {}}) == []  # the upstream is not ready: it waits in the backlog
    result = {"protocolVersion": "2025-11-25", "capabilities": UPSTREAM_CAPS, "serverInfo": UPSTREAM_INFO}
    ready = settle(router, router.receive_upstream(line(id=body(start)["id"], result=result)))
    assert [b.get("method") for b in upstream_bodies(ready)] == ["notifications/initialized"]
    (reply,) = downstream(ready)
    assert reply["id"] == 0 and "result" in reply
    # the upstream asks at once; the client has not sent notifications/initialized yet: it waits
    assert settle(router, router.receive_upstream(line(id="r1", method="roots/list"))) == []
    released = settle(router, router.receive_downstream("a", line(method="notifications/initialized")))
    (asked,) = downstream(released)
    assert asked["method"] == "roots/list"
    (answer,) = upstream_bodies(settle(router, router.receive_downstream("a", line(id=asked["id"], result=ROOTS))))
    assert answer == {"jsonrpc": "2.0", "id": "r1", "result": ROOTS}


def test_a_request_sent_before_any_session_waits_for_the_first_one() -> None:
    router = ready_router()
    assert settle(router, router.receive_upstream(line(id="r1", method="roots/list"))) == []
    router.open_session("a", context={}, principal="a")
    client_initialize(router, {"roots": {}})
    actions = settle(router, router.receive_downstream("a", line(method="notifications/initialized")))
    (asked,) = downstream(actions)
    assert asked["method"] == "roots/list"


def test_a_client_that_did_not_declare_the_capability_gets_it_refused_as_the_spec_says() -> None:
    router = ready_router()
    router.open_session("a", context={}, principal="a")
    assert settle(router, router.receive_upstream(line(id="s1", method="sampling/createMessage", params={}))) == []
    client_initialize(router, {"roots": {}})
    actions = settle(router, router.receive_downstream("a", line(method="notifications/initialized")))
    (refused,) = upstream_bodies(actions)
    assert refused["id"] == "s1" and refused["error"]["code"] == -32601
    assert downstream(actions) == []


def test_an_initialized_client_gets_a_request_tied_to_no_call() -> None:
    router = ready_router()
    handshake_session(router, "a", roots={})
    actions = settle(router, router.receive_upstream(line(id="r2", method="roots/list")))
    assert [a for a in actions if isinstance(a, SendDownstream)] and not upstream_bodies(actions)


def test_held_requests_are_bounded_and_forgotten_with_their_upstream() -> None:
    router = ready_router()
    for n in range(MAX_HELD_REQUESTS):
        assert settle(router, router.receive_upstream(line(id=f"r{n}", method="roots/list"))) == []
    (over,) = upstream_bodies(settle(router, router.receive_upstream(line(id="over", method="roots/list"))))
    assert over["id"] == "over" and over["error"]["code"] == -32601
    router.upstream_closed()
    router.open_session("a", context={}, principal="a")
    client_initialize(router, {"roots": {}})
    assert not [
        a
        for a in router.receive_downstream("a", line(method="notifications/initialized"))
        if isinstance(a, RunChain | SendUpstream)
    ]
