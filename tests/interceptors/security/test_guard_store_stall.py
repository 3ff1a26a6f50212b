"""The cross-boundary guard's taints in a real redis-server that stops (SIGSTOP) (issue 31): every round trip
goes through the store breaker, so a send carrying a secret is refused with the documented error (-32603,
`guard_store_unavailable`, no secret and no server named) instead of waiting on the socket, the calls after it
are refused at once without asking Redis, calls carrying no secret pass, and after SIGCONT the taints recorded
before the stall still hold. With its taints in Redis the guard's stage runs in a worker thread, never on the
event loop. Timing is not asserted here."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from typing import Any

import pytest

from interceptors import INTERNAL_ERROR, Invocation, InvocationContext, Phase
from interceptors.outcomes import REQUESTER_ERROR_KEY, Verdict
from interceptors.security import CrossBoundaryGuard, RedisTaintStore
from interceptors.security.guard import UNAVAILABLE_DATA, UNAVAILABLE_MESSAGE
from interceptors.security.session_guard import SessionGuard, guard_registry
from interceptors.store_breaker import UNAVAILABLE_RETRY_S
from interceptors_chain import abort_to_error
from interceptors_server import LocalChain
from tests.interceptors.security.test_redis_scale import own_redis  # noqa: F401 - the fixture: a redis-server of the test alone

pytestmark = pytest.mark.anyio
redis = pytest.importorskip("redis")

WAIT_S = 60.0
SECRET = "AKIAQ3EGUJZN5XKW7P2L"
KEY = b"a-taint-key-of-the-stall-test"
DOCUMENTED = {"code": INTERNAL_ERROR, "message": UNAVAILABLE_MESSAGE, "data": UNAVAILABLE_DATA}
READ = {"content": [{"type": "text", "text": f"key={SECRET}"}]}
SEND = {"name": "write_query", "arguments": {"query": f"insert '{SECRET}'"}}


def at(phase: Phase, payload: Any, session: str = "s1") -> Invocation:
    return Invocation("guard", "tools/call", phase, payload, None, InvocationContext(session_id=session))


def error_of(verdict: Verdict) -> Any:
    assert not verdict.valid
    return (verdict.info or {}).get(REQUESTER_ERROR_KEY)


def test_a_stalled_taint_store_refuses_with_the_documented_error_and_recovers(
    own_redis: tuple[str, subprocess.Popen[bytes]],  # noqa: F811
) -> None:
    url, server = own_redis
    store = RedisTaintStore(url, key=KEY, prefix="stall")
    guard = CrossBoundaryGuard(store=store)
    assert guard(at(Phase.REQUEST, {"name": "read_file", "arguments": {"path": "/etc/creds"}})).valid
    assert guard(at(Phase.RESPONSE, READ)).valid  # the secret is tainted with its origin, in Redis
    calls = [0]
    hmget = store.client.hmget

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return hmget(*args, **kwargs)

    store.client.hmget = counted
    server.send_signal(signal.SIGSTOP)
    try:
        errors: list[Any] = []

        def send() -> None:
            errors.append(error_of(guard(at(Phase.REQUEST, SEND))))

        senders = [threading.Thread(target=send) for _ in range(8)]
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join(WAIT_S)
            assert not thread.is_alive()
        assert errors == [DOCUMENTED] * 8  # no secret, no server name in it
        asked = calls[0]
        assert 1 <= asked <= 8 and store.breaker.open
        for _ in range(50):  # the breaker is open: refused at once, Redis not asked
            assert error_of(guard(at(Phase.REQUEST, SEND))) == DOCUMENTED
            assert error_of(guard(at(Phase.RESPONSE, READ, "s2"))) == DOCUMENTED  # a secret it cannot record
        assert calls[0] == asked
        assert guard(at(Phase.REQUEST, {"name": "write_query", "arguments": {"query": "plain"}})).valid
        assert guard(at(Phase.RESPONSE, {"content": [{"type": "text", "text": "plain"}]})).valid
    finally:
        server.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + WAIT_S
    while True:  # after a moment one call asks again, and the store answers
        verdict = guard(at(Phase.REQUEST, SEND))
        if (verdict.info or {}).get(REQUESTER_ERROR_KEY) is None or time.monotonic() > deadline:
            break
        time.sleep(UNAVAILABLE_RETRY_S / 4)
    assert not verdict.valid and "may not be sent to 'sqlite'" in (verdict.messages or ())[0].message  # the taint held
    assert not store.breaker.open


async def test_through_a_chain_the_requester_gets_exactly_the_documented_error(
    own_redis: tuple[str, subprocess.Popen[bytes]],  # noqa: F811
) -> None:
    url, server = own_redis
    guard = SessionGuard(store=RedisTaintStore(url, key=KEY, prefix="stall-chain"))
    registry = guard_registry(guard)
    assert guard.shared and not any(entry.inline for entry in registry)  # judged in a worker thread
    assert all(entry.inline for entry in guard_registry(SessionGuard()))  # in memory: on the loop
    context = InvocationContext(trace_id="trace-1", session_id="session-1")
    async with LocalChain(registry) as chain:
        server.send_signal(signal.SIGSTOP)
        try:
            result = await chain.execute("tools/call", "request", SEND, direction="sending", context=context)
        finally:
            server.send_signal(signal.SIGCONT)
    assert result.blocked
    assert abort_to_error(result).to_wire() == DOCUMENTED
