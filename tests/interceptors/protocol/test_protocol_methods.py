"""The one method table (`interceptors.protocol.methods`): every stage's and the router's method set comes
from it, it knows every method the SDK knows, and adding a method is one row (plus a handler when the router
answers it itself)."""

from __future__ import annotations

from typing import Any

import mcp_types.methods as sdk_methods
import pytest

from integrations.gateway import catalog, recovery, upstream_http
from integrations.gateway.hub import aggregate as hub_aggregate
from integrations.gateway.router import AnswerLocally, Router, RouterConfig, SendUpstream
from integrations.gateway.router import channels as router_channels
from integrations.gateway.router import state as router_state
from integrations.gateway.stages import build_stages
from interceptors import SERVER_INFO_EVENT, is_context_operation
from interceptors.policy import engine as policy_engine
from interceptors.policy.metadata import LIST_KEYS
from interceptors.protocol import METHODS, Channel, Method, MethodTable, Sender, Stage
from interceptors.protocol.messages import Message
from interceptors.transforms import mutators
from interceptors.vault import TokenVault, vault_registry
from interceptors.vault import stages as vault_stages
from tests.router_helpers import body, downstream, handshake_session, line, passing, ready_router, settle

EVENTS_OUTSIDE_THE_TABLE = {SERVER_INFO_EVENT}
"""The one event that is no method: the handshake's result runs under it (`Method.server_info`)."""


def _known(name: str) -> bool:
    return name in METHODS or name in EVENTS_OUTSIDE_THE_TABLE


def test_the_table_knows_every_method_the_sdk_knows_with_its_sender() -> None:
    """A method the SDK adds fails here until it has a row."""
    for published, sender in (
        (sdk_methods.CLIENT_REQUESTS, Sender.CLIENT),
        (sdk_methods.CLIENT_NOTIFICATIONS, Sender.CLIENT),
        (sdk_methods.SERVER_REQUESTS, Sender.SERVER),
        (sdk_methods.SERVER_NOTIFICATIONS, Sender.SERVER),
    ):
        for name, _version in published:
            assert name in METHODS, f"{name} is not in the method table"
            row = METHODS[name]
            assert row.sender in (sender, Sender.EITHER), f"{name}: the SDK says the {sender} sends it"
            assert row.notification == name.startswith("notifications/")


def test_caching_hints_agree_with_the_sdk() -> None:
    assert set(METHODS.names(lambda row: row.cacheable)) == set(sdk_methods.CACHEABLE_METHODS)


def test_every_stage_hooks_exactly_the_methods_the_table_gives_it() -> None:
    """The built-in stages, assembled as the gateway does (`standard`, with its vault): each interceptor's
    events are the table's set for its stage, and every event is a table row."""
    stages = build_stages("standard", None)
    vault = vault_registry(TokenVault.from_config({"key": "k" * 32}))
    hooked: dict[tuple[str, str], tuple[str, ...]] = {}
    for registry in (*stages.registries, vault):
        for info in registry.infos():
            for hook in info.hooks:
                hooked[(info.name, hook.phase.value)] = hook.events
                unknown = [event for event in hook.events if not _known(event)]
                assert not unknown, f"{info.name} hooks {unknown}, which the method table does not have"
    assert hooked[("policy", "request")] == METHODS.names(Stage.POLICY)
    assert hooked[("policy-lists", "response")] == METHODS.names(Stage.POLICY_LISTS)
    assert hooked[("vault/depseudonymize", "request")] == METHODS.names(Stage.VAULT)
    assert hooked[("vault/repseudonymize", "response")] == METHODS.names(Stage.VAULT)
    responses = (*METHODS.names(Stage.OUTPUT), *METHODS.response_events(Stage.METADATA))
    assert hooked[("transforms/output", "response")] == responses
    # The request guard: the calls, a task's result (found by its call's rules) and the subscribed URI.
    assert hooked[("transforms/request", "request")] == (
        *METHODS.names(Stage.OUTPUT),
        "tasks/result",
        "resources/subscribe",
    )
    assert hooked[("transforms/outbound", "request")] == METHODS.names(Stage.OUTBOUND)
    assert hooked[("transforms/answers", "response")] == METHODS.names(Stage.ANSWERS)


def test_the_stage_modules_lists_are_the_tables() -> None:
    assert METHODS.names(Stage.POLICY) == policy_engine.CALL_METHODS
    assert METHODS.names(Stage.POLICY_LISTS) == policy_engine.LIST_METHODS
    assert METHODS.names(Stage.VAULT) == vault_stages.EVENTS
    assert METHODS.names(Stage.OUTPUT) == mutators.OUTPUT_EVENTS
    assert METHODS.response_events(Stage.METADATA) == mutators.METADATA_EVENTS
    assert METHODS.names(Stage.OUTBOUND) == mutators.CLIENT_REQUEST_EVENTS
    assert METHODS.names(Stage.ANSWERS) == mutators.CLIENT_ANSWER_EVENTS
    assert METHODS.names(Stage.POLICY) == METHODS.names(lambda row: row.call)
    # The policy's list shapes are its own (kind, identifier), keyed by the table's list methods.
    assert tuple(LIST_KEYS) == METHODS.names(Stage.POLICY_LISTS)
    assert all(LIST_KEYS[name][0] == METHODS[name].items for name in LIST_KEYS)


def test_every_method_the_router_and_the_gateway_name_is_a_row() -> None:
    router = Router()
    named: set[str] = {
        *router_channels.SERVER_REQUESTS,
        *router_channels.LIST_CHANGED,
        *router_channels._NOTIFICATION_CHANNELS,
        *router_channels._RESULT_CHANNELS,
        *router_channels.CARRIER_EVENTS.values(),
        *router._target_keys,
        *router._task_methods,
        *router._cacheable,
        *Router.LOCAL_HANDLERS,
        *(method for _era, method in router_state.DEFAULT_MISSING),
        router_state.LISTEN_METHOD,
        router_state.LISTEN_ACK,
        *upstream_http.RETRY_SAFE,
        *(row[0] for row in catalog.LISTS),
        *(row[0] for row in recovery.LISTS),
        *recovery.LIST_CHANGED_METHODS.values(),
        # The multi-server gateway's per-method facts (its own table until the core's carries them).
        *hub_aggregate.TARGETS,
        *hub_aggregate.LISTS,
        *hub_aggregate.REWRITES,
        *hub_aggregate.SUBSCRIPTIONS,
        *hub_aggregate.BROADCAST,
        *hub_aggregate.BROADCAST_NOTIFICATIONS,
    }
    unknown = sorted(name for name in named if not _known(name))
    assert not unknown, f"the gateway names methods the table does not have: {unknown}"
    assert set(Router.LOCAL_HANDLERS) == set(METHODS.names(lambda row: row.local))
    assert frozenset(METHODS.names(lambda row: row.retry_safe)) == upstream_http.RETRY_SAFE
    assert router._target_keys == {name: row.target for name, row in METHODS.items() if row.target}


def test_context_operations_are_the_hookable_rows() -> None:
    for name, row in METHODS.items():
        assert is_context_operation(name) == (row.hookable and not row.notification), name
    assert is_context_operation("widgets/get")  # a method the table does not know is still hookable (SEP-2624)


def test_a_row_is_in_the_table_once() -> None:
    with pytest.raises(ValueError, match="twice"):
        METHODS.with_rows(Method("tools/call", Sender.CLIENT))


# Adding a method (doc/DESIGN.md, "Adding a method"): one row, plus a handler when each hop answers it itself.

WIDGETS_GET = Method(
    "widgets/get",
    Sender.CLIENT,
    call=True,
    target="id",
    channel=Channel.RESULT,
    retry_safe=True,
    stages=frozenset({Stage.POLICY, Stage.VAULT, Stage.OUTPUT}),
)
HOP_STATUS = Method("hop/status", Sender.CLIENT, channel=Channel.RESULT, local=True)


def _answer_status(router: Router, session: Any, message: Message) -> list[Any]:
    assert message.id is not None
    return [router._reply(session, message.id, {"status": "ok"})]


class _RouterWithStatus(Router):
    LOCAL_HANDLERS = {**Router.LOCAL_HANDLERS, "hop/status": _answer_status}


def test_a_new_request_method_is_one_row() -> None:
    """A forwarded call: the stages' sets include it, the router names its target from the row."""
    table = METHODS.with_rows(WIDGETS_GET)
    assert "widgets/get" in table.names(Stage.POLICY) and "widgets/get" in table.names(Stage.VAULT)
    assert "widgets/get" in table.names(lambda row: row.retry_safe)
    router = ready_router(RouterConfig(methods=table))
    handshake_session(router, "a")
    seen: list[Any] = []

    def chain(run: Any) -> Any:
        seen.append(run.request)
        return passing(run)

    actions = settle(
        router, router.receive_downstream("a", line(id=7, method="widgets/get", params={"id": "w1"})), chain
    )
    (sent,) = [body(action) for action in actions if isinstance(action, SendUpstream)]
    assert sent["method"] == "widgets/get" and sent["params"] == {"id": "w1"}
    assert seen[0].target == "w1"  # the policy's missing-answer and audit read the target from the row's key
    reply = settle(router, router.receive_upstream(line(id=sent["id"], result={"content": []})))
    assert downstream(reply, "a") == [{"jsonrpc": "2.0", "id": 7, "result": {"content": []}}]


def test_a_new_method_each_hop_answers_is_one_row_and_its_handler() -> None:
    table = METHODS.with_rows(HOP_STATUS)
    with pytest.raises(ValueError, match="hop/status"):
        Router(RouterConfig(methods=table))  # a local row without a handler: refused at construction
    with pytest.raises(ValueError, match="hop/status"):
        _RouterWithStatus(RouterConfig())  # a handler without a row, likewise
    router = ready_router(RouterConfig(methods=table), kind=_RouterWithStatus)
    handshake_session(router, "a")
    actions = settle(router, router.receive_downstream("a", line(id=4, method="hop/status")))
    assert downstream(actions, "a") == [{"jsonrpc": "2.0", "id": 4, "result": {"status": "ok"}}]
    assert not any(isinstance(action, SendUpstream | AnswerLocally) for action in actions)


def test_the_table_is_a_read_only_mapping() -> None:
    assert isinstance(METHODS, MethodTable) and len(METHODS) == len(list(METHODS))
    assert METHODS["tools/call"].target == "name" and METHODS["resources/read"].target == "uri"
    assert METHODS["initialize"].response_event == SERVER_INFO_EVENT
    assert METHODS["ping"].response_event is None
