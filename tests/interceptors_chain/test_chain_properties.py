"""Property tests: random chains run through LocalChain must agree with a small reference model.

The plans, the model and the runner come from `interceptors.testing.chains` (the kit we ship): the model is
written from SEP-2624 §2 (ordering by direction, concurrent validators that all complete, mutators sorted by
phase priority / code points / server order, atomic mutation pass, the audit x failOpen matrix) and shares no
code with the engine. Plans have colliding names, both priority forms, exact and wildcard hooks, and injected
faults: crashes, malformed answers, in-place edits claiming no change, and timeouts.
"""

from __future__ import annotations

import copy
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from integrations.testing import run_plan
from interceptors import Invocation, Mutation, Registry
from interceptors.testing import ChainPlan, assert_matches_model, chain_plans, expected_outcome, json_values
from interceptors_server import LocalChain
from tests.chain_helpers import EVENT


@settings(max_examples=40)
@given(
    plan=chain_plans(),
    event=st.sampled_from(("tools/call", "resources/read")),
    phase=st.sampled_from(("request", "response")),
    direction=st.sampled_from(("sending", "receiving")),
)
def test_chain_agrees_with_the_reference_model(plan: ChainPlan, event: str, phase: str, direction: str) -> None:
    payload = {"trail": [], "nested": {"keep": [1, 2, {"deep": "value"}]}}
    snapshot = copy.deepcopy(payload)

    async def run() -> Any:
        return await run_plan(plan, event, phase, direction, payload)

    result, log = anyio.run(run)
    assert_matches_model(result, log, expected_outcome(plan, event, phase, direction), payload, snapshot)


@settings(max_examples=25)
@given(payload=json_values(), direction=st.sampled_from(("sending", "receiving")))
def test_execute_never_mutates_the_input_payload(payload: Any, direction: str) -> None:
    """Mutators that rewrite, wrap or edit in place never change the caller's object."""
    reg = Registry()

    @reg.mutator("wrap", events=EVENT, priority=0)
    def wrap(inv: Invocation) -> Any:
        return {"wrapped": inv.payload}

    @reg.mutator("vandal", events=EVENT, priority=1, mode="audit")
    def vandal(inv: Invocation) -> Any:
        inv.payload["wrapped"] = "vandalised"  # in place, in audit: must not leak anywhere
        return Mutation.unchanged()

    @reg.validator("look", events=EVENT)
    def look(inv: Invocation) -> None:
        return None

    snapshot = copy.deepcopy(payload)

    async def run() -> Any:
        async with LocalChain(reg) as engine:
            return await engine.execute(EVENT, "request", payload, direction=direction)

    result = anyio.run(run)
    assert payload == snapshot
    assert not result.blocked
    assert result.final_payload == {"wrapped": snapshot}
