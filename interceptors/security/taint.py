"""Where the cross-boundary guard keeps what each session has read: in memory, or in Redis (extra `redis`).

A taint is (secret, format id, origin server). Redis holds no secret in clear: each is a keyed hash
(`key`, the same in every process that shares the store), the session id is hashed too, and a session's
hash expires `ttl_s` after its last new taint. Any Redis failure raises `TaintStoreUnavailable`: the
guard refuses the send (fail closed) unless it was built with `fail_open`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..errors import InterceptorsError

Taint = tuple[str, str]
"""(format id, origin server)"""


class TaintStoreUnavailable(InterceptorsError, RuntimeError):
    """The shared taint store could not be read or written."""


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

    def __init__(self, client: Any, *, key: bytes, prefix: str = "mcp-interceptors:taint", ttl_s: int = 86_400) -> None:
        if isinstance(client, str):
            import redis

            client = redis.Redis.from_url(client, socket_timeout=2.0, socket_connect_timeout=2.0)
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
        try:
            values = self.client.hmget(self._session_key(session), [self._hash(s) for s in wanted])
        except Exception as exc:
            raise TaintStoreUnavailable(type(exc).__name__) from None
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
        try:
            if not args:
                return int(self.client.hlen(self._session_key(session)))
            return int(self._record(keys=[self._session_key(session), str(self.ttl_s)], args=args))
        except Exception as exc:
            raise TaintStoreUnavailable(type(exc).__name__) from None
