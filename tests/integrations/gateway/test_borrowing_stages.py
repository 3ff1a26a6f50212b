"""The built-in stages that borrow the caller's objects (`RegisteredInterceptor.borrows`) edit none of them.

An in-process host hands a borrowing handler the caller's payload, config and context as they are and takes its
result without a JSON round trip; the copies that isolate any other handler are skipped. That is only sound if
the handler never edits what it is given and returns JSON. These properties hold every borrowing stage of every
profile to that, on payloads with planted secrets (so the stages do change their output) and on arbitrary JSON.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrations.gateway.stages import build_stages
from interceptors import (
    Invocation,
    InvocationContext,
    Mutation,
    Phase,
    Principal,
    Registry,
    Verdict,
)
from interceptors.registry import RegisteredInterceptor
from interceptors.testing import McpCase, embedded, json_values, mcp_payloads, secrets
from interceptors.testing.payloads import KINDS, tool_call_requests
from interceptors_chain.connection import PassMemo
from interceptors_server.host import InterceptorHost

PROFILES = ("standard", "strict", "read_only", "audit")


def _borrowing(profile: str) -> list[RegisteredInterceptor]:
    stages = build_stages(profile, None)
    return [entry for registry in stages.registries for entry in registry if entry.borrows]


BORROWING = {profile: _borrowing(profile) for profile in PROFILES}


def test_the_hot_path_stages_borrow() -> None:
    names = {entry.name for entry in BORROWING["standard"]}
    assert {"policy", "transforms/request", "transforms/input", "transforms/output"} <= names


def _context() -> InvocationContext:
    return InvocationContext(Principal("user", "alice", {"roles": ["reader"], "org": {"id": "o1"}}), trace_id="t-1")


def _run_every(payload: Any, event: str, phase: Phase) -> None:
    """Each borrowing stage of each profile that hooks (event, phase) leaves the payload and claims as they were,
    and answers with JSON."""
    for entries in BORROWING.values():
        for entry in entries:
            if not any(event in hook.events and hook.phase is phase for hook in entry.info.hooks):
                continue
            context = _context()
            before, claims = copy.deepcopy(payload), copy.deepcopy(context.principal.claims)  # type: ignore[union-attr]
            try:
                answer = entry.handler(Invocation(entry.name, event, phase, payload, None, context))
            except Exception as exc:  # a refusal a stage raises (a requester error) is an answer too
                answer = exc
            assert payload == before, entry.name
            assert context.principal is not None and context.principal.claims == claims, entry.name
            if isinstance(answer, Mutation) and answer.modified:
                orjson.dumps(answer.payload)  # JSON: no round trip would have made it so
            if isinstance(answer, Verdict):
                orjson.dumps(answer.messages or [], default=lambda m: m.__dict__ if hasattr(m, "__dict__") else str(m))


@settings(max_examples=120, deadline=None)
@given(mcp_payloads(embedded(secrets()), kinds=KINDS, max_parts=2))
def test_borrowing_stages_edit_no_result_they_are_given(case: McpCase) -> None:
    _run_every(case.payload, case.event, Phase.RESPONSE)


@settings(max_examples=120, deadline=None)
@given(tool_call_requests(embedded(secrets())))
def test_borrowing_stages_edit_no_request_they_are_given(case: McpCase) -> None:
    _run_every(case.payload, case.event, Phase.REQUEST)


EVENTS = ("tools/call", "resources/read", "prompts/get", "completion/complete", "tools/list", "resources/list",
          "sampling/createMessage", "elicitation/create", "roots/list")  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(json_values(max_leaves=12), st.sampled_from(EVENTS), st.sampled_from([Phase.REQUEST, Phase.RESPONSE]))
def test_borrowing_stages_edit_no_json_they_are_given(value: Any, event: str, phase: Phase) -> None:
    """Arbitrary JSON where a stage expects params or a result: the stage may refuse or ignore it, never edit it."""
    payload = {"params": {"name": "lookup", "arguments": {"q": value}}} if phase is Phase.REQUEST else value
    _run_every(payload, event, phase)


# --- the host's side of borrowing ----------------------------------------------------------------------------

EVENT = "tools/call"


def _host(borrows: bool, seen: list[Invocation]) -> InterceptorHost:
    registry = Registry()

    def look(inv: Invocation) -> Verdict:
        seen.append(inv)
        return Verdict.allow()

    def keep(inv: Invocation) -> Mutation:
        seen.append(inv)
        return Mutation.unchanged()

    def rewrite(inv: Invocation) -> Mutation:
        seen.append(inv)
        return Mutation({**inv.payload, "changed": True}, True)

    for handler, name, kind in ((look, "look", "validation"), (keep, "keep", "mutation"),
                                (rewrite, "rewrite", "mutation")):  # fmt: skip
        registry.register(handler, name=name, type=kind, events=EVENT, phase="request", inline=True, borrows=borrows)
    return InterceptorHost(registry)


@pytest.mark.parametrize("borrows", [False, True])
def test_a_borrowing_handler_gets_the_callers_objects_and_any_other_a_copy(borrows: bool) -> None:
    seen: list[Invocation] = []
    host = _host(borrows, seen)
    payload: dict[str, Any] = {"params": {"name": "echo", "arguments": {"x": [1, 2]}}}
    context = _context()
    memo = PassMemo()
    replies = [host.start_local(name, EVENT, Phase.REQUEST, payload, None, context, memo)
               for name in ("look", "keep", "rewrite")]  # fmt: skip
    assert all(isinstance(reply, tuple) for reply in replies)
    assert all((inv.payload is payload) is borrows for inv in seen)
    assert all((inv.context is context) is borrows for inv in seen)
    assert all(inv.payload == payload for inv in seen)
    (_, look_wire), (kept, kept_wire), (rewritten, _) = replies  # type: ignore[misc]
    assert look_wire["valid"] is True
    # An unchanged mutation echoes what it was given: the caller's own payload when it borrows, else a fresh copy.
    assert kept.payload == payload and kept_wire["payload"] == payload and kept.modified is False
    assert (kept.payload is payload) is borrows
    assert rewritten.modified and rewritten.payload == {**payload, "changed": True}
