"""The one breaker in front of every Redis round trip (`interceptors/store_breaker.py`): each user's own error
and warning label, a round trip still queued when the breaker opens never runs, and the one call that asks a
failed store again waits no longer than the probe deadline. The rate limiter's and the vault's own rules are
proven through them in tests/integrations/gateway/test_gateway_shared_state.py and
tests/interceptors/vault/test_vault_store_breaker.py; a real
redis-server is stopped in tests/integrations/gateway/test_redis_gateways.py and
tests/interceptors/security/test_guard_store_stall.py.

A hung store is stood in for by functions that wait on an event the test releases (not the MCP protocol)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from interceptors.store_breaker import UNAVAILABLE_RETRY_S, StoreBreaker, StoreUnavailable

WAIT_S = 30.0
logger = logging.getLogger("tests.store_breaker")


class Refused(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def fail(*args: Any, **kwargs: Any) -> str:
    raise ConnectionError("the store does not answer")


def test_a_failed_call_raises_the_users_own_error_and_warns_under_its_label(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tests.store_breaker")
    breaker = StoreBreaker(label="test store", logger=logger, deadline=WAIT_S, threads=1, error=Refused)
    with pytest.raises(Refused) as caught:
        breaker.call(fail)
    assert caught.value.why == "ConnectionError"
    assert [r.getMessage() for r in caplog.records] == ["test store unavailable: ConnectionError"]
    plain = StoreBreaker(label="plain store", logger=logger, deadline=WAIT_S, threads=1)
    with pytest.raises(StoreUnavailable):
        plain.call(fail)


def test_a_round_trip_still_queued_when_the_breaker_opens_never_runs() -> None:
    breaker = StoreBreaker(label="test store", logger=logger, deadline=WAIT_S * 4, threads=1)
    release, holding = threading.Event(), threading.Event()
    ran: list[str] = []

    def hang() -> str:
        holding.set()
        release.wait(WAIT_S)
        return "late"

    def write() -> str:
        ran.append("write")
        return "written"

    outcomes: list[str] = []

    def call(function: Any) -> None:
        try:
            outcomes.append(breaker.call(function))
        except StoreUnavailable as exc:
            outcomes.append(exc.why)

    first = threading.Thread(target=call, args=(hang,))
    first.start()
    assert holding.wait(WAIT_S)  # the one thread is held by a hung store
    queued = threading.Thread(target=call, args=(write,))
    queued.start()
    while breaker._busy < 2:  # the write is submitted and queued behind it
        threading.Event().wait(0.01)
    breaker._trip()  # another call found the store failing
    first.join(WAIT_S)
    queued.join(WAIT_S)
    release.set()
    while breaker._busy:  # the thread is free again and has taken the queued round trip
        threading.Event().wait(0.01)
    assert ran == []  # its caller had given up: it never reached the store
    assert len(outcomes) == 2 and all("no answer within" in o for o in outcomes), outcomes


def test_the_call_that_asks_a_failed_store_again_waits_only_the_probe_deadline() -> None:
    now = [0.0]
    breaker = StoreBreaker(
        label="test store", logger=logger, deadline=WAIT_S * 4, threads=2, probe_deadline=0.01, clock=lambda: now[0]
    )
    release = threading.Event()
    with pytest.raises(StoreUnavailable):
        breaker.call(fail)
    now[0] += UNAVAILABLE_RETRY_S
    try:
        with pytest.raises(StoreUnavailable) as caught:
            breaker.call(release.wait, WAIT_S)  # the deadline alone would keep it for minutes
        assert caught.value.why == "no answer within 0.01s"
        assert breaker.open
    finally:
        release.set()
