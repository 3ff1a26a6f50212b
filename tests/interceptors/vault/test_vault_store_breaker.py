"""The vault's Redis store never holds a call up (issue 31): each round trip has a deadline on the store's own
threads, a store that hangs or fails opens the breaker at once for every call waiting behind it and after it,
the store is asked again after a moment by one call at a time, the warning is one line per period, and the
failure reaches the requester as the documented -32603 `vault_store_unavailable`, never as a result in clear.

A hung Redis is stood in for by functions that wait on an event the test releases (not the MCP protocol: a
store whose outage the test decides); tests/integrations/gateway/test_redis_gateways.py stops a real redis-server with
SIGSTOP.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from interceptors import INTERNAL_ERROR, InvocationContext, Registry, RequesterError
from interceptors.vault import RedisStore, TokenVault, VaultStages
from interceptors.vault.redis_store import (
    UNAVAILABLE_MESSAGE,
    UNAVAILABLE_RETRY_S,
    WARN_EVERY_S,
    VaultStoreUnavailable,
    vault_breaker,
)
from interceptors_chain import abort_to_error
from interceptors_server import LocalChain

pytestmark = pytest.mark.anyio

WAIT_S = 30.0
"""How long a test waits for what must happen at once (a bound that proves it without ever flaking)."""
DOCUMENTED = {"code": INTERNAL_ERROR, "message": UNAVAILABLE_MESSAGE}
DATA = {"reason": "vault_store_unavailable", "retry_after": UNAVAILABLE_RETRY_S}


class Hang:
    """A round trip that does not come back until released (a SIGSTOPped Redis), counting its calls."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        self.calls += 1
        self.release.wait(WAIT_S)
        return "late"


def _until(condition: Callable[[], bool]) -> None:
    for _ in range(int(WAIT_S * 100)):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("never happened")


def fail(*args: Any, **kwargs: Any) -> str:
    raise ConnectionError("the store does not answer")


def test_a_hung_round_trip_fails_at_its_deadline_and_the_calls_after_it_fail_at_once() -> None:
    now = [0.0]
    breaker = vault_breaker(deadline=0.05, clock=lambda: now[0])
    hang = Hang()
    try:
        with pytest.raises(VaultStoreUnavailable) as caught:
            breaker.call(hang)
        assert caught.value.to_wire() == {**DOCUMENTED, "data": DATA}
        assert "no answer within" in caught.value.why
        assert breaker.open
        for _ in range(100):
            with pytest.raises(VaultStoreUnavailable):
                breaker.call(hang)
        assert hang.calls == 1  # the rest never reached the store
        now[0] += UNAVAILABLE_RETRY_S  # after a moment one call asks again; the store has come back
        assert breaker.call(lambda: "back") == "back"
        assert not breaker.open
        assert breaker.call(lambda: "again") == "again"
    finally:
        hang.release.set()


def test_the_calls_waiting_on_a_hung_store_give_up_as_soon_as_one_call_finds_it_failing() -> None:
    breaker = vault_breaker(deadline=WAIT_S * 4)  # the deadline alone would keep them for minutes
    hang = Hang()
    outcomes: list[BaseException | str] = []

    def wait_on_store() -> None:
        try:
            outcomes.append(breaker.call(hang))
        except VaultStoreUnavailable as exc:
            outcomes.append(exc)

    waiting = [threading.Thread(target=wait_on_store) for _ in range(3)]
    try:
        for thread in waiting:
            thread.start()
        _until(lambda: hang.calls == 3)  # all three are in the store
        with pytest.raises(VaultStoreUnavailable):
            breaker.call(fail)
        for thread in waiting:
            thread.join(WAIT_S)
            assert not thread.is_alive()
    finally:
        hang.release.set()
    assert len(outcomes) == 3 and all(isinstance(o, VaultStoreUnavailable) for o in outcomes)


def test_when_every_store_thread_is_held_by_a_hung_store_a_call_fails_at_once() -> None:
    breaker = vault_breaker(deadline=WAIT_S * 4, threads=2)
    hang = Hang()

    def wait_on_store() -> None:
        with pytest.raises(VaultStoreUnavailable):
            breaker.call(hang)

    waiting = [threading.Thread(target=wait_on_store) for _ in "ab"]
    try:
        for thread in waiting:
            thread.start()
        _until(lambda: hang.calls == 2)
        with pytest.raises(VaultStoreUnavailable) as caught:
            breaker.call(hang)
        assert "every store call in flight" in caught.value.why
        assert hang.calls == 2
        for thread in waiting:  # the breaker opened: they stopped waiting too
            thread.join(WAIT_S)
            assert not thread.is_alive()
    finally:
        hang.release.set()


def test_failures_are_warned_about_once_per_period_with_the_count_held_back(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="interceptors.vault")
    now = [0.0]
    breaker = vault_breaker(clock=lambda: now[0])
    for _ in range(855):
        with pytest.raises(VaultStoreUnavailable):
            breaker.call(fail)
    lines = [r.getMessage() for r in caplog.records if "vault store unavailable" in r.getMessage()]
    assert lines == ["vault store unavailable: ConnectionError"]
    now[0] += WARN_EVERY_S
    with pytest.raises(VaultStoreUnavailable):
        breaker.call(fail)
    lines = [r.getMessage() for r in caplog.records if "vault store unavailable" in r.getMessage()]
    assert len(lines) == 2 and "(and 854 more failed calls" in lines[1]


class HungClient:
    """Stands in for a redis client whose server is stopped: every script and pipeline waits until released."""

    def __init__(self) -> None:
        self.hang = Hang()

    def register_script(self, _source: str) -> Any:
        return self.hang

    def pipeline(self, transaction: bool = True) -> Any:
        client = self

        class Pipeline:
            def __getattr__(self, _name: str) -> Any:
                return lambda *args, **kwargs: None

            def execute(self) -> Any:
                return client.hang()

        return Pipeline()

    def close(self) -> None:
        pass


async def test_a_result_the_vault_cannot_re_pseudonymise_is_answered_with_the_documented_error() -> None:
    """Through a chain: the response stage finds the store hung, the requester gets exactly the vault's error
    (no interceptor server named), and the result (which may hold restored values) is not passed on."""
    client = HungClient()
    store = RedisStore(client=client, deadline=0.05)  # type: ignore[arg-type]
    vault = TokenVault("a-breaker-test-key-0123456789", store=store)
    stages = VaultStages(vault)
    registry = Registry()
    registry.register(stages.response, name="vault/repseudonymize", type="mutation", events="tools/call",
                      phase="response")  # fmt: skip
    context = InvocationContext(trace_id="trace-1", session_id="session-1")
    result_payload = {"content": [{"type": "text", "text": "a real value"}]}
    try:
        async with LocalChain(registry) as chain:
            result = await chain.execute("tools/call", "response", result_payload, direction="receiving",
                                         context=context)  # fmt: skip
        assert result.blocked and not result.modified
        error = abort_to_error(result)
        assert error.to_wire() == {**DOCUMENTED, "data": DATA}
    finally:
        client.hang.release.set()


def test_a_requester_error_is_an_rpc_error_any_host_can_send() -> None:
    error = RequesterError(-32603, "Something shared is unavailable", {"reason": "x"})
    assert error.to_wire() == {"code": -32603, "message": "Something shared is unavailable", "data": {"reason": "x"}}
