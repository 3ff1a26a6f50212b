"""What the gateway answers itself (integrations/gateway/local.py), driven directly with router actions."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.gateway.local import LocalAnswers
from integrations.gateway.router import AnswerLocally
from interceptors import Invocation, InvocationContext, Mutation, Principal, Registry

pytestmark = pytest.mark.anyio


def _whoami(invocation: Invocation) -> Mutation:
    context = invocation.context
    principal = context.principal.id if context is not None and context.principal is not None else None
    session = context.session_id if context is not None else None
    return Mutation({"principal": principal, "session": session}, True)


def _registry() -> Registry:
    registry = Registry()
    registry.register(_whoami, name="whoami", type="mutation", events="tools/call", phase="request")
    return registry


@pytest.mark.parametrize(
    "session_context", [InvocationContext(principal=Principal("user", "alice"), session_id="s-1"), None]
)
async def test_an_exposed_invoke_runs_as_its_session_never_as_the_context_a_client_writes(
    session_context: InvocationContext | None,
) -> None:
    """A client naming `admin` in the invoke's context must not get an interceptor to act for `admin`."""
    local = LocalAnswers([_registry()])
    claimed: dict[str, Any] = {"principal": {"type": "user", "id": "admin", "claims": {"roles": ["admin"]}},
                               "sessionId": "someone-else"}  # fmt: skip
    params = {"name": "whoami", "event": "tools/call", "phase": "request", "payload": {}, "context": claimed}
    result, error = await local.answer(AnswerLocally("s-1", 1, "interceptor/invoke", params), session_context)
    assert error is None and result is not None
    expected = {"principal": "alice", "session": "s-1"} if session_context else {"principal": None, "session": None}
    assert result["payload"] == expected
