"""Token buckets in Redis, shared by every gateway process of one policy (extra: `redis`).

One Lua script takes a token from every bucket of a call or from none, atomically and in one round trip,
on Redis's own clock (`TIME`), so processes on different hosts agree and no read-modify-write can race.
Keys hold no principal id or tool name in clear: the scope part is a keyed hash (the policy's vault key
when it has one). A bucket key expires once it would have refilled, so idle buckets cost nothing.

A Redis outage refuses the call (fail closed) with `Refusal.unavailable`, unless `fail_open`. Each store
call runs on a thread of the limiter's own and is waited for at most `STORE_DEADLINE_S`: a store that hangs
(SIGSTOP, a dead peer whose socket has not timed out yet) costs the call that found out that long, and
opens the breaker at once for every call waiting behind it. After a failure the store is not asked again
for `UNAVAILABLE_RETRY_S`, then by one call at a time (every other call is refused at once, never waiting
on a store that hangs), and the warning is logged at most once per `WARN_EVERY_S`, with the count of what
it held back. `shared` tells the policy stage to decide calls off the event loop.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from ..errors import InterceptorsError
from .ratelimit import RateLimit, Refusal

if TYPE_CHECKING:
    from .policy import Policy

logger = logging.getLogger("interceptors.policy")

UNAVAILABLE_RETRY_S = 1.0
WARN_EVERY_S = 10.0
STORE_DEADLINE_S = 0.5
"""The longest a call waits for the store (a healthy Redis answers in about a millisecond; its socket timeout,
2 s, is only the bound on the thread left waiting)."""
PROBE_DEADLINE_S = 0.1
"""The longest the one call that asks a failed store again waits (it keeps the breaker open one more period)."""
STORE_THREADS = 16
"""The store's threads (more concurrent calls queue for one, within their deadline)."""

_ACQUIRE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local tokens = {}
local worst, which = -1, 0
for i = 1, #KEYS do
  local rate = tonumber(ARGV[i * 3 - 2])
  local burst = tonumber(ARGV[i * 3 - 1])
  local held = redis.call('HMGET', KEYS[i], 't', 'l')
  local have, last = tonumber(held[1]), tonumber(held[2])
  if have == nil or last == nil then have, last = burst, now end
  local elapsed = now - last
  if elapsed < 0 then elapsed = 0 end
  have = math.min(burst, have + elapsed * rate)
  tokens[i] = have
  if have < 1 then
    local wait = (1 - have) / rate
    if wait > worst then worst, which = wait, i end
  end
end
if which > 0 then return {which, tostring(worst)} end
for i = 1, #KEYS do
  redis.call('HSET', KEYS[i], 't', tostring(tokens[i] - 1), 'l', tostring(now))
  redis.call('PEXPIRE', KEYS[i], ARGV[i * 3])
end
return {0, '0'}
"""


class _Skipped(InterceptorsError):
    """A queued store call whose caller was refused before it ran."""


def limit_names(policy: Policy) -> dict[RateLimit, str]:
    """A name per `rate_limits` entry that every process loading the same document agrees on."""
    names: dict[RateLimit, str] = {}
    for index, limit in enumerate(policy.rate_limits):
        names[limit] = f"p{index}:{_spec(limit)}"
    for rule_index, rule in enumerate(policy.rules):
        for index, limit in enumerate(rule.rate_limits):
            names[limit] = f"r{rule_index}.{index}:{_spec(limit)}"
    return names


def _spec(limit: RateLimit) -> str:
    tools = ",".join(sorted(getattr(limit.tools, "patterns", ()) or ()))
    kinds = ",".join(sorted(limit.kinds or ()))
    raw = f"{limit.rate:g}/{limit.per}/{limit.burst}/{limit.scope}/{tools}/{kinds}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


class RedisRateLimiter:
    """`RateLimiter`'s interface over Redis: `acquire(limits, principal_id, ident)` and `reset()`."""

    shared = True
    """A network store: its calls may block, so the policy stage decides calls in a worker thread."""

    def __init__(
        self,
        client: Any,
        *,
        names: Mapping[RateLimit, str],
        prefix: str = "mcp-interceptors:rl",
        key: bytes | None = None,
        fail_open: bool = False,
        clock: Callable[[], float] = time.monotonic,
        deadline: float = STORE_DEADLINE_S,
    ) -> None:
        self.clock = clock
        self.deadline = deadline
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None  # the store's own threads (made on first use)
        self._tripped: Future[None] = Future()  # completed when the breaker opens: the waiting calls give up
        self._failed = False  # the last call to the store failed
        self._down_until = 0.0  # ... so it is not asked again before this (clock time)
        self._probing = False  # one call is asking it again: the others do not wait on it too
        self._warned_at = -WARN_EVERY_S
        self._unwarned = 0
        if isinstance(client, str):
            import redis

            client = redis.Redis.from_url(client, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.client = client
        self.names = dict(names)
        self.prefix = prefix
        self.fail_open = fail_open
        self._key = key or b"mcp-interceptors rate limits"
        self._script = client.register_script(_ACQUIRE)

    def _bucket(self, limit: RateLimit, principal_id: str, ident: str) -> str:
        scope = limit.scope
        if scope == "principal":
            part = principal_id
        elif scope == "tool":
            part = ident
        elif scope == "global":
            part = ""
        else:
            part = f"{principal_id}\x00{ident}"
        digest = hmac.new(self._key, part.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32]
        name = self.names.get(limit) or f"x:{_spec(limit)}"
        # One hash tag for every bucket: a call's buckets share a slot on a Redis Cluster.
        return f"{{{self.prefix}}}:{name}:{digest}"

    def acquire(self, limits: Sequence[RateLimit], principal_id: str, ident: str) -> Refusal | None:
        """Take one token from every bucket, or none; a Redis failure refuses unless `fail_open`."""
        if not limits:
            return None
        keys = [self._bucket(limit, principal_id, ident) for limit in limits]
        args: list[str] = []
        for limit in limits:
            per_second = limit.rate / limit.period
            refill_ms = int(limit.burst / per_second * 1000) + 1000
            args += [repr(per_second), str(limit.burst), str(refill_ms)]
        with self._lock:
            failed = self._failed
            if failed and (self._probing or self.clock() < self._down_until):
                closed = True  # it failed a moment ago, or one call is asking it again
            else:
                closed = False
                self._probing = failed
                tripped = self._tripped
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(STORE_THREADS, thread_name_prefix="rate-limit-store")
                executor = self._executor
        if closed:
            return self._unavailable(limits, None)
        try:
            asked = executor.submit(self._ask, keys, args, tripped)
        except RuntimeError:  # the interpreter is shutting down
            with self._lock:
                self._probing = False
            return self._unavailable(limits, "shutting down")
        deadline = min(self.deadline, PROBE_DEADLINE_S) if failed else self.deadline
        done, _ = wait((asked, tripped), timeout=deadline, return_when=FIRST_COMPLETED)
        if asked not in done:  # no answer in time (or another call found the store hung): the breaker opens
            if not tripped.done():
                self._trip()
            return self._unavailable(limits, f"no answer within {deadline:g}s")
        try:
            which, wait_s = asked.result()
        except Exception as exc:  # redis.RedisError, a closed socket, a script error: the store is unavailable
            self._trip()
            return self._unavailable(limits, type(exc).__name__)
        with self._lock:
            self._failed = self._probing = False
        index = int(which)
        if index == 0:
            return None
        return Refusal(limits[index - 1], max(0.01, round(float(wait_s), 2)))

    def _ask(self, keys: list[str], args: list[str], tripped: Future[None]) -> Any:
        """One store call, on the store's own thread; skipped when the breaker opened while it queued (its
        caller was refused: it would only take a token on a store found hung)."""
        if tripped.done():
            raise _Skipped
        return self._script(keys=keys, args=args)

    def _trip(self) -> None:
        """The store failed or hangs: not asked again for `UNAVAILABLE_RETRY_S`, and every call now waiting on
        it is refused at once (it would wait on the same store)."""
        with self._lock:
            self._failed, self._probing = True, False
            self._down_until = self.clock() + UNAVAILABLE_RETRY_S
            tripped, self._tripped = self._tripped, Future()
        if not tripped.done():
            tripped.set_result(None)

    def _unavailable(self, limits: Sequence[RateLimit], error: str | None) -> Refusal | None:
        now = self.clock()
        with self._lock:  # calls are decided on several threads at once
            warn = now - self._warned_at >= WARN_EVERY_S
            if warn:
                held, self._unwarned, self._warned_at = self._unwarned, 0, now
            else:
                self._unwarned += 1
        if warn:
            if held:
                logger.warning(
                    "rate-limit store unavailable: %s (and %d more calls since the last warning)",
                    error or "not asked again yet",
                    held,
                )
            else:
                logger.warning("rate-limit store unavailable: %s", error or "not asked again yet")
        if self.fail_open:
            return None
        return Refusal(limits[0], UNAVAILABLE_RETRY_S, unavailable=True)

    def reset(self) -> None:
        for key in self.client.scan_iter(match=f"{{{self.prefix}}}:*"):
            self.client.delete(key)

    def __len__(self) -> int:
        return sum(1 for _ in self.client.scan_iter(match=f"{{{self.prefix}}}:*"))
