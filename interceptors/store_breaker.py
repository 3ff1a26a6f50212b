"""A breaker in front of a network store (Redis) whose round trips may hang (issue 31).

The rate limiter, the vault and the cross-boundary guard keep shared state in Redis. A Redis that stalls
(SIGSTOP, a dead peer whose socket has not timed out yet) must never hold their calls up, and a failure must
never be retried by every call at once. So each round trip runs on a thread of the breaker's own and is
waited for at most `deadline`; the call that finds the store hung (or failing) opens the breaker at once:
every call then waiting on a round trip gives up too (it would wait on the same store), a round trip still
queued for a thread is skipped, and for `UNAVAILABLE_RETRY_S` no call asks the store at all. Then one call
at a time asks again (waiting at most `probe_deadline`; the others fail at once) until one succeeds. The
warning is one line per `WARN_EVERY_S`, with the count of failed calls it held back.

A failed call raises the error its user chose (`error`), so each store keeps its own documented refusal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from .errors import InterceptorsError

T = TypeVar("T")

UNAVAILABLE_RETRY_S = 1.0
"""After a failure the store is not asked again for this long (calls fail at once), then by one call at a time."""
WARN_EVERY_S = 10.0
"""At most one warning line per this many seconds; the next one counts the failed calls in between."""
SMALL_DEADLINE_S = 0.5
"""The deadline of a store whose round trips are tiny (one small script or `HMGET`: rate limits, guard taints):
a healthy Redis answers in about a millisecond."""
SMALL_PROBE_DEADLINE_S = 0.1
"""How long the one call that asks such a store again waits (it keeps the breaker open one more period)."""
SOCKET_TIMEOUT_S = 2.0
"""Such a store's socket timeout: only the bound on a thread left waiting past its deadline."""


def redis_client(client: Any, socket_timeout_s: float = SOCKET_TIMEOUT_S) -> Any:
    """`client` as is, or a Redis client for it when it is a URL (`redis://host:port/db`; extra `redis`)."""
    if not isinstance(client, str):
        return client
    import redis

    return redis.Redis.from_url(client, socket_timeout=socket_timeout_s, socket_connect_timeout=socket_timeout_s)


class StoreUnavailable(InterceptorsError):
    """The store did not answer in time or failed (the default error of a failed call)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _Skipped(InterceptorsError):
    """A queued round trip whose caller had already given up when a thread took it."""


class StoreBreaker:
    """Runs each round trip on a thread of its own with a deadline; opens at once when one fails or hangs.

    `label` names the store in the warning (`<label> unavailable: <why>`). `probe_deadline`: how long the one
    call that asks a failed store again waits (default `deadline`). `fail_when_busy`: when every thread is
    still held by a round trip, a call fails at once and opens the breaker (a hung store holds them all)
    instead of queueing for a thread within its deadline."""

    def __init__(
        self,
        *,
        label: str,
        logger: logging.Logger,
        deadline: float,
        threads: int,
        probe_deadline: float | None = None,
        fail_when_busy: bool = False,
        error: Callable[[str], Exception] = StoreUnavailable,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.logger = logger
        self.deadline = deadline
        self.threads = threads
        self.probe_deadline = deadline if probe_deadline is None else min(deadline, probe_deadline)
        self.fail_when_busy = fail_when_busy
        self.error = error
        self.clock = clock
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None  # made on first use
        self._busy = 0  # round trips not finished (one left behind by a deadline runs to its socket timeout)
        self._tripped: Future[None] = Future()  # completed when the breaker opens: the waiting calls give up
        self._failed = False  # the last round trip failed
        self._down_until = 0.0  # ... so the store is not asked again before this (clock time)
        self._probing = False  # one call is asking it again: the others fail at once
        self._warned_at = -WARN_EVERY_S
        self._unwarned = 0

    @property
    def open(self) -> bool:
        """Whether the last round trip failed (calls fail at once, or one probes)."""
        return self._failed

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`function(*args, **kwargs)` (one round trip) on a store thread, or the breaker's `error`."""
        with self._lock:
            failed = self._failed
            if failed and (self._probing or self.clock() < self._down_until):
                closed: str | None = None  # it failed a moment ago, or one call is asking it again
            elif self.fail_when_busy and self._busy >= self.threads:
                closed = "every store call in flight is still waiting"  # a hung store holds them all
            else:
                closed = ""
                self._probing = failed
                self._busy += 1
                tripped = self._tripped
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix=self.label.replace(" ", "-"))
                executor = self._executor
        if closed != "":
            if closed is not None:
                self._trip()
            raise self._unavailable(closed or "not asked again yet")
        try:
            asked = executor.submit(self._run, tripped, function, args, kwargs)
        except RuntimeError:  # the interpreter is shutting down
            with self._lock:
                self._busy -= 1
                self._probing = False
            raise self._unavailable("shutting down") from None
        deadline = self.probe_deadline if failed else self.deadline
        waited: tuple[Future[Any], ...] = (asked, tripped)
        done, _ = wait(waited, timeout=deadline, return_when=FIRST_COMPLETED)
        if asked not in done:  # no answer in time (or another call found the store hung): the breaker opens
            if not tripped.done():
                self._trip()
            raise self._unavailable(f"no answer within {deadline:g}s")
        try:
            result = asked.result()
        except Exception as exc:  # redis.RedisError, a closed socket, a script error: the store is unavailable
            self._trip()
            raise self._unavailable(type(exc).__name__) from None
        with self._lock:
            self._failed = self._probing = False
        return result

    def _run(
        self, tripped: Future[None], function: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> T:
        """One round trip on a store thread; skipped when the breaker opened while it queued (its caller gave up:
        a write would then land unseen, on a store found hung)."""
        try:
            if tripped.done():
                raise _Skipped
            return function(*args, **kwargs)
        finally:
            with self._lock:
                self._busy -= 1

    def _trip(self) -> None:
        """The store failed or hangs: not asked again for `UNAVAILABLE_RETRY_S`, and every call now waiting on
        it fails at once."""
        with self._lock:
            self._failed, self._probing = True, False
            self._down_until = self.clock() + UNAVAILABLE_RETRY_S
            tripped, self._tripped = self._tripped, Future()
        if not tripped.done():
            tripped.set_result(None)

    def _unavailable(self, why: str) -> Exception:
        now = self.clock()
        with self._lock:  # calls fail on several threads at once
            warn = now - self._warned_at >= WARN_EVERY_S
            if warn:
                held, self._unwarned, self._warned_at = self._unwarned, 0, now
            else:
                self._unwarned += 1
        if warn:
            more = f" (and {held} more failed calls since the last warning)" if held else ""
            self.logger.warning("%s unavailable: %s%s", self.label, why, more)
        return self.error(why)
