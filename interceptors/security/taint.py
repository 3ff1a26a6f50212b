"""Where the cross-boundary guard keeps what each session has read: in memory, or in Redis (extra `redis`).

A taint is (secret, format id, origin server). Redis holds no secret in clear: each is a keyed hash
(`key`, the same in every process that shares the store), the session id is hashed too, and a session's
hash expires `ttl_s` after its last new taint. Any Redis failure raises `TaintStoreUnavailable`: the
guard refuses the send (fail closed) unless it was built with `fail_open`.

A stalled Redis never stalls the calls (issue 31): every round trip goes through the store's breaker
(`interceptors/store_breaker.py`): a thread of its own, waited for at most `STORE_DEADLINE_S`, open at once
for every call waiting behind the one that found Redis hung or failing, then left alone for 1 s and asked
by one call at a time (waiting at most `SMALL_PROBE_DEADLINE_S`). `shared` tells the guard's stage to judge calls
in a worker thread, never on the event loop.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..errors import InterceptorsError
from ..store_breaker import SMALL_DEADLINE_S, SMALL_PROBE_DEADLINE_S, StoreBreaker, redis_client

Taint = tuple[str, str]
"""(format id, origin server)"""

logger = logging.getLogger("interceptors.security")

STORE_DEADLINE_S = SMALL_DEADLINE_S
"""The longest a call waits for one taint round trip (an `HMGET` or a tiny script, like the rate limiter's)."""
STORE_THREADS = 8
"""The store's threads (more concurrent calls queue for one, within their deadline)."""


class TaintStoreUnavailable(InterceptorsError, RuntimeError):
    """The shared taint store could not be read or written (or did not answer within its deadline)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class TaintStore(Protocol):
    def origins(self, session: str, secrets: Iterable[str]) -> dict[str, Taint]:
        """The taints of these secrets in this session (only those recorded)."""
        ...

    def record(self, session: str, taints: Mapping[str, Taint]) -> int:
        """Record taints not yet known (first origin wins); returns the session's taint count."""
        ...


class MemoryTaintStore:
    """Per-process taints, bounded to `max_sessions` least-recently-used sessions."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, dict[str, Taint]] = OrderedDict()

    def _session(self, session: str) -> dict[str, Taint]:
        taints = self._sessions.get(session)
        if taints is None:
            taints = self._sessions[session] = {}
            if len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(session)
        return taints

    def origins(self, session: str, secrets: Iterable[str]) -> dict[str, Taint]:
        taints = self._session(session)
        return {secret: taints[secret] for secret in secrets if secret in taints}

    def record(self, session: str, taints: Mapping[str, Taint]) -> int:
        known = self._session(session)
        for secret, taint in taints.items():
            known.setdefault(secret, taint)
        return len(known)


_RECORD = """
for i = 1, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], tonumber(KEYS[2]))
return redis.call('HLEN', KEYS[1])
"""


class RedisTaintStore:
    """Taints in one Redis hash per session, shared by every gateway process."""

    shared = True
    """A network store: its calls may block, so the guard's stage judges calls in a worker thread."""

    def __init__(
        self,
        client: Any,
        *,
        key: bytes,
        prefix: str = "mcp-interceptors:taint",
        ttl_s: int = 86_400,
        deadline: float = STORE_DEADLINE_S,
    ) -> None:
        self.breaker = StoreBreaker(
            label="guard taint store",
            logger=logger,
            deadline=deadline,
            threads=STORE_THREADS,
            probe_deadline=SMALL_PROBE_DEADLINE_S,
            error=TaintStoreUnavailable,
        )
        client = redis_client(client)
        if not key:
            raise ValueError("a RedisTaintStore needs a key shared by every process (secrets are stored hashed)")
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._key = key
        self._record = client.register_script(_RECORD)

    def _hash(self, text: str) -> str:
        return hmac.new(self._key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:40]

    def _session_key(self, session: str) -> str:
        return f"{self.prefix}:{self._hash('session:' + session)}"

    def origins(self, session: str, secrets: Iterable[str]) -> dict[str, Taint]:
        wanted = list(dict.fromkeys(secrets))
        if not wanted:
            return {}
        values = self.breaker.call(self.client.hmget, self._session_key(session), [self._hash(s) for s in wanted])
        out: dict[str, Taint] = {}
        for secret, value in zip(wanted, values, strict=True):
            if value is not None:
                format_id, _, origin = (value.decode() if isinstance(value, bytes) else str(value)).partition("\x1f")
                out[secret] = (format_id, origin)
        return out

    def record(self, session: str, taints: Mapping[str, Taint]) -> int:
        args: list[str] = []
        for secret, (format_id, origin) in taints.items():
            args += [self._hash(secret), f"{format_id}\x1f{origin}"]
        if not args:
            return int(self.breaker.call(self.client.hlen, self._session_key(session)))
        return int(self.breaker.call(self._record, keys=[self._session_key(session), str(self.ttl_s)], args=args))
