"""The Redis rate limiter never holds the gateway up (issue 31): after a failure the store is left alone for a
moment and then asked by one call at a time, every other limited call is refused at once, the warning is
one line per period, and with a shared store the policy decides calls off the event loop."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from interceptors.policy import PolicyEngine, policy_registry
from interceptors.policy.ratelimit import RateLimit
from interceptors.policy.shared_limits import UNAVAILABLE_RETRY_S, WARN_EVERY_S, RedisRateLimiter

LIMIT = RateLimit.from_document({"rate": 10, "per": "second"})


class Store:
    """Stands in for the Redis client: its one script fails while `down`, else grants every token. (Not the
    MCP protocol: a store whose outage a test decides.)"""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0

    def register_script(self, _source: str) -> Any:
        def run(*, keys: list[str], args: list[str]) -> tuple[int, float]:
            self.calls += 1
            if self.down:
                raise ConnectionError("the store does not answer")
            return 0, 0.0

        return run


def test_a_failed_store_is_asked_again_only_after_a_moment_and_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="interceptors.policy")
    now = [0.0]
    store = Store()
    limiter = RedisRateLimiter(store, names={}, clock=lambda: now[0])
    for _ in range(855):
        refusal = limiter.acquire([LIMIT], "p", "tool")
        assert refusal is not None and refusal.unavailable
    assert store.calls == 1  # the rest were refused at once
    now[0] += UNAVAILABLE_RETRY_S
    assert limiter.acquire([LIMIT], "p", "tool") is not None
    assert store.calls == 2  # one call asked again, and it failed again
    store.down = False
    now[0] += UNAVAILABLE_RETRY_S
    assert limiter.acquire([LIMIT], "p", "tool") is None and limiter.acquire([LIMIT], "p", "tool") is None
    assert store.calls == 4  # back: every call asks it
    lines = [r.getMessage() for r in caplog.records if "rate-limit store unavailable" in r.getMessage()]
    assert len(lines) == 1 and "ConnectionError" in lines[0]
    store.down = True
    now[0] += WARN_EVERY_S
    limiter.acquire([LIMIT], "p", "tool")
    lines = [r.getMessage() for r in caplog.records if "rate-limit store unavailable" in r.getMessage()]
    assert len(lines) == 2 and "(and 855 more failed calls" in lines[1]


def test_while_one_call_asks_a_failed_store_again_the_others_are_refused_at_once() -> None:
    store = Store()
    limiter = RedisRateLimiter(store, names={}, clock=lambda: 10.0 * UNAVAILABLE_RETRY_S, deadline=60)
    limiter.breaker._failed = True  # it failed long ago: the next call asks again
    asking, release = threading.Event(), threading.Event()
    script = store.register_script("")

    def hanging(*, keys: list[str], args: list[str]) -> tuple[int, float]:
        asking.set()
        release.wait(60)
        granted: tuple[int, float] = script(keys=keys, args=args)
        return granted

    limiter._script = hanging
    store.down = False
    prober = threading.Thread(target=limiter.acquire, args=([LIMIT], "p", "tool"))
    prober.start()
    assert asking.wait(60)
    refusal = limiter.acquire([LIMIT], "p", "other")
    assert refusal is not None and refusal.unavailable  # not a second wait on the same store
    release.set()
    prober.join(60)
    assert limiter.acquire([LIMIT], "p", "tool") is None


def test_with_a_shared_store_the_policy_decides_calls_off_the_event_loop() -> None:
    document = {"name": "limited", "rate_limits": [{"rate": 10, "per": "second"}]}
    local = PolicyEngine(document)
    shared = PolicyEngine(document)
    shared.limiter = RedisRateLimiter(Store(), names={})

    def check_of(engine: PolicyEngine) -> Any:
        registry = policy_registry(engine)
        return next(entry for entry in registry if "access, hiding, rate limits" in (entry.info.description or ""))

    assert not check_of(local).is_async
    assert check_of(shared).is_async


def test_a_failed_audit_stream_is_written_again_only_after_a_moment() -> None:
    from interceptors.policy.audit_stream import RETRY_S, RedisAuditStream

    class Client:
        def __init__(self) -> None:
            self.calls = 0
            self.down = True

        def xadd(self, *_args: Any, **_kwargs: Any) -> None:
            self.calls += 1
            if self.down:
                raise ConnectionError("the store does not answer")

    now = [0.0]
    client = Client()
    stream = RedisAuditStream(client, clock=lambda: now[0])
    for _ in range(100):
        stream({"decision": "denied"})
    assert stream.flush(60)
    assert client.calls == 1  # one socket timeout per RETRY_S, not one per call
    client.down = False
    now[0] += RETRY_S
    stream({"decision": "allowed"})
    stream({"decision": "allowed"})
    assert stream.flush(60)
    assert client.calls == 3
