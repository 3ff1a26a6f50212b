"""Token buckets in Redis, shared by every gateway process of one policy (extra: `redis`).

One Lua script takes a token from every bucket of a call or from none, atomically and in one round trip,
on Redis's own clock (`TIME`), so processes on different hosts agree and no read-modify-write can race.
Keys hold no principal id or tool name in clear: the scope part is a keyed hash (the policy's vault key
when it has one). A bucket key expires once it would have refilled, so idle buckets cost nothing.

A Redis outage refuses the call (fail closed) with `Refusal.unavailable`, unless `fail_open`. Each store
call goes through the limiter's breaker (`interceptors/store_breaker.py`): a thread of its own, waited for
at most `STORE_DEADLINE_S`, so a store that hangs (SIGSTOP, a dead peer whose socket has not timed out yet)
costs the call that found out that long and opens the breaker at once for every call waiting behind it; a
call still queued for a thread is skipped. After a failure the store is not asked again for
`UNAVAILABLE_RETRY_S`, then by one call at a time (waiting at most `SMALL_PROBE_DEADLINE_S`; every other call is
refused at once), and the warning is logged at most once per `WARN_EVERY_S`, with the count of what it held
back. `shared` tells the policy stage to decide calls off the event loop.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..store_breaker import SMALL_DEADLINE_S, SMALL_PROBE_DEADLINE_S, StoreBreaker, StoreUnavailable, redis_client
from ..store_breaker import UNAVAILABLE_RETRY_S as UNAVAILABLE_RETRY_S
from ..store_breaker import WARN_EVERY_S as WARN_EVERY_S
from .ratelimit import RateLimit, Refusal

if TYPE_CHECKING:
    from .policy import Policy

logger = logging.getLogger("interceptors.policy")

STORE_DEADLINE_S = SMALL_DEADLINE_S
"""The longest a call waits for the store (one tiny script)."""
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
        self.breaker = StoreBreaker(
            label="rate-limit store",
            logger=logger,
            deadline=deadline,
            threads=STORE_THREADS,
            probe_deadline=SMALL_PROBE_DEADLINE_S,
            clock=clock,
        )
        self.client = client = redis_client(client)
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
        try:
            which, wait_s = self.breaker.call(self._ask, keys, args)
        except StoreUnavailable:
            if self.fail_open:
                return None
            return Refusal(limits[0], UNAVAILABLE_RETRY_S, unavailable=True)
        index = int(which)
        if index == 0:
            return None
        return Refusal(limits[index - 1], max(0.01, round(float(wait_s), 2)))

    def _ask(self, keys: list[str], args: list[str]) -> Any:
        """One store call, on one of the breaker's threads."""
        return self._script(keys=keys, args=args)

    def reset(self) -> None:
        for key in self.client.scan_iter(match=f"{{{self.prefix}}}:*"):
            self.client.delete(key)

    def __len__(self) -> int:
        return sum(1 for _ in self.client.scan_iter(match=f"{{{self.prefix}}}:*"))
