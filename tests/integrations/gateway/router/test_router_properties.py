"""General rules of the router, over generated traffic: answers, ids, delivery and per-request state."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrations.gateway.router import ChainOutcome, ChainPassed, RunChain, SendDownstream, SendUpstream
from tests.router_helpers import body, handshake_session, line, ready_router, settle

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ids = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=5))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)
methods = st.sampled_from(
    ["tools/call", "tools/list", "resources/read", "prompts/get", "ping", "x/custom", "logging/setLevel"]
)


def _answer_upstream(router: Any, actions: list[Any]) -> list[Any]:
    """An upstream that answers every request it is sent with an empty result."""
    out: list[Any] = []
    queue = list(actions)
    while queue:
        action = queue.pop(0)
        if isinstance(action, SendUpstream):
            sent = body(action)
            if "method" in sent and "id" in sent:
                queue += settle(router, router.receive_upstream(line(id=sent["id"], result={"content": []})))
            continue
        out.append(action)
    return out


@given(
    request_id=ids,
    method=methods,
    params=json_values,
    mangle=st.sampled_from(["none", "surrogate", "deep", "truncate", "bytes"]),
)
@SETTINGS
def test_every_request_gets_exactly_one_answer_with_its_id(
    request_id: Any, method: str, params: Any, mangle: str
) -> None:
    router = ready_router()
    handshake_session(router, "s")
    raw = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"name": "t", "p": params}})
    if mangle == "surrogate":
        raw = raw.replace('"name": "t"', '"name": "\\ud800"')
    elif mangle == "deep":
        raw = raw.replace('"t"', "[" * 150 + "]" * 150, 1)
    elif mangle == "truncate":
        raw = raw[:-1]
    data = raw.encode() if mangle != "bytes" else raw.encode().replace(b'"t"', b'"\xfe"', 1)
    actions = _answer_upstream(router, settle(router, router.receive_downstream("s", data)))
    replies = [body(a) for a in actions if isinstance(a, SendDownstream)]
    assert len(replies) == 1
    reply = replies[0]
    assert ("result" in reply) != ("error" in reply)
    if isinstance(request_id, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in request_id):
        return
    assert reply["id"] == request_id
    assert router.pending == {}


@given(
    traffic=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 3)), min_size=1, max_size=12, unique=True),
    order=st.randoms(use_true_random=False),
)
@SETTINGS
def test_ids_never_collide_and_replies_go_back_with_the_clients_id(traffic: list[tuple[str, int]], order: Any) -> None:
    router = ready_router()
    for name in "abc":
        handshake_session(router, name)
    sent: dict[int, tuple[str, int]] = {}
    for session, client_id in traffic:
        actions = settle(
            router,
            router.receive_downstream(session, line(id=client_id, method="tools/call", params={"name": session})),
        )
        (up,) = [body(a) for a in actions if isinstance(a, SendUpstream)]
        assert up["id"] not in sent
        sent[up["id"]] = (session, client_id)
    upstream_ids = list(sent)
    order.shuffle(upstream_ids)
    for upstream_id in upstream_ids:
        actions = settle(
            router, router.receive_upstream(line(id=upstream_id, result={"content": [], "for": upstream_id}))
        )
        (reply,) = [a for a in actions if isinstance(a, SendDownstream)]
        assert (reply.session, body(reply)["id"]) == sent[upstream_id]
        assert body(reply)["result"]["for"] == upstream_id


@given(
    requests=st.lists(st.sampled_from("abc"), min_size=1, max_size=8),
    notes=st.lists(st.tuples(st.integers(0, 7), st.booleans()), max_size=20),
)
@SETTINGS
def test_progress_never_reaches_another_session(requests: list[str], notes: list[tuple[int, bool]]) -> None:
    router = ready_router()
    for name in "abc":
        handshake_session(router, name)
    owners: list[tuple[str, Any]] = []
    for index, session in enumerate(requests):
        params = {"name": "t", "_meta": {"progressToken": index % 2}}  # tokens collide across sessions on purpose
        actions = settle(router, router.receive_downstream(session, line(id=index, method="tools/call", params=params)))
        (up,) = [body(a) for a in actions if isinstance(a, SendUpstream)]
        owners.append((session, up["params"]["_meta"]["progressToken"]))
    for which, _ in notes:
        if which >= len(owners):
            continue
        session, token = owners[which]
        note = line(method="notifications/progress", params={"progressToken": token, "progress": 1})
        delivered = [a for a in settle(router, router.receive_upstream(note)) if isinstance(a, SendDownstream)]
        assert [a.session for a in delivered] == [session]


@given(sides=st.lists(st.sampled_from(["progress", "log"]), max_size=15))
@SETTINGS
def test_per_request_state_survives_any_side_channel_traffic(sides: list[str]) -> None:
    router = ready_router()
    handshake_session(router, "a")
    handshake_session(router, "b", principal="a")  # same principal: logs may be attributed, never lost
    (run,) = router.receive_downstream(
        "a", line(id=1, method="tools/call", params={"name": "t", "_meta": {"progressToken": "p"}})
    )
    assert isinstance(run, RunChain)
    (up_action,) = router.chain_done(run.ticket, ChainPassed(run.payload, learned={"rule": "only-t"}))
    up = body(up_action)
    seen: list[RunChain] = []

    def record(r: RunChain) -> ChainOutcome:
        seen.append(r)
        return ChainPassed(r.payload)

    for side in sides:
        if side == "progress":
            note = line(
                method="notifications/progress",
                params={"progressToken": up["params"]["_meta"]["progressToken"], "progress": 1},
            )
        else:
            note = line(method="notifications/message", params={"level": "info", "data": "d"})
        settle(router, router.receive_upstream(note), record)
    actions = settle(router, router.receive_upstream(line(id=up["id"], result={"content": []})), record)
    assert [body(a)["id"] for a in actions if isinstance(a, SendDownstream) and "id" in body(a)] == [1]
    assert len(seen) == len(sides) + 1
    assert all(
        r.request is not None and r.request.learned == {"rule": "only-t"} and r.request.target == "t" for r in seen
    )
