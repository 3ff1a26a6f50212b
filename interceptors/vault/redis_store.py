"""A `VaultStore` in Redis, so several processes issue and reverse the same tokens (extra: `redis`).

Layout under `<prefix>:<key id>` (vaults under different keys never see each other's entries):

- `:tok`  hash `<namespace id>:<token>` → 32-hex value fingerprint + the entry sealed with AES-GCM;
- `:val`  hash `<keyed index of namespace, entity, value>` → `<namespace id>:<token>`;
- `:used` hash `<namespace id>:<token>` → last use (seconds);
- `:op:<keyed index>` lists of sealed per-operation pairs (expiring).

Redis never holds a real value, a namespace (principal id) or a key in clear: values are sealed under the
store sub-key with the field name as associated data (an entry cannot be moved to another namespace),
and indexes are keyed HMACs. Claims, lookups and reversals are Lua scripts, so each is atomic and one
round trip; reversal looks up every candidate of a text in one call.

A stalled or failing Redis never stalls the calls (issue 31): every round trip goes through the store's
breaker (`interceptors/store_breaker.py`: a thread of its own, at most `STORE_DEADLINE_S`, open at once
for every call waiting behind the one that found Redis hung, then one probing call at a time after
`UNAVAILABLE_RETRY_S`). A failed call raises `VaultStoreUnavailable` (-32603,
`data.reason = "vault_store_unavailable"`), which the chain answers as is: fail closed (a result that
cannot be re-pseudonymised is never passed in clear, a token never invented).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import orjson

from ..errors import INTERNAL_ERROR, RequesterError
from ..store_breaker import UNAVAILABLE_RETRY_S as UNAVAILABLE_RETRY_S
from ..store_breaker import WARN_EVERY_S as WARN_EVERY_S
from ..store_breaker import StoreBreaker
from .store import ClaimStatus, Entry, Pair, StoreKeys

if TYPE_CHECKING:
    import redis

_CLAIM = """
local now = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local function live(field)
  local used = redis.call('HGET', KEYS[3], field)
  if not used then return false end
  if ttl < 0 then return true end
  return (now - tonumber(used)) < ttl
end
local have = redis.call('HGET', KEYS[2], ARGV[2])
if have then
  local entry = redis.call('HGET', KEYS[1], have)
  if entry and string.sub(entry, 1, 32) == ARGV[4] and live(have) then
    redis.call('HSET', KEYS[3], have, ARGV[5])
    return {'have', string.sub(have, 34)}
  end
  redis.call('HDEL', KEYS[2], ARGV[2])
end
local entry = redis.call('HGET', KEYS[1], ARGV[1])
local alive = entry and live(ARGV[1])
if alive and string.sub(entry, 1, 32) ~= ARGV[4] then return {'taken', ''} end
if not alive then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[5])
return {'ok', ARGV[7]}
"""

_FIND = """
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local have = redis.call('HGET', KEYS[2], ARGV[1])
if not have then return false end
local entry = redis.call('HGET', KEYS[1], have)
local used = redis.call('HGET', KEYS[3], have)
if entry and used and string.sub(entry, 1, 32) == ARGV[2] and (ttl < 0 or now - tonumber(used) < ttl) then
  redis.call('HSET', KEYS[3], have, ARGV[3])
  return string.sub(have, 34)
end
redis.call('HDEL', KEYS[2], ARGV[1])
return false
"""

_REVERSE = """
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local field = ARGV[i]
  local entry = redis.call('HGET', KEYS[1], field)
  if entry then
    local used = redis.call('HGET', KEYS[2], field)
    if used and (ttl < 0 or now - tonumber(used) < ttl) then
      redis.call('HSET', KEYS[2], field, ARGV[1])
      out[#out + 1] = entry
    else
      redis.call('HDEL', KEYS[1], field)
      redis.call('HDEL', KEYS[2], field)
      out[#out + 1] = false
    end
  else
    out[#out + 1] = false
  end
end
return out
"""

logger = logging.getLogger("interceptors.vault")

STORE_DEADLINE_S = 1.5
"""The longest a call waits for one Redis round trip. A healthy Redis answers in about a millisecond; the
largest round trips here (a reversal or an import of 512 entries) take a few; a loaded machine can hold a
thread off the CPU for some hundreds of milliseconds. 1.5 s is far above all of that (a healthy store never
trips it, even on a busy CI machine), three times the rate limiter's 0.5 s (a limit check is one tiny
script), and still well below the socket timeout (`SOCKET_TIMEOUT_S`) a call would otherwise wait."""
SOCKET_TIMEOUT_S = 5.0
"""The Redis client's socket timeout: only the bound on a store thread left waiting past its deadline."""
STORE_THREADS = 8
"""Round trips in flight at most: with every one still waiting on a hung store, a call fails at once."""
UNAVAILABLE_MESSAGE = "Vault state unavailable; retry in 1s"


class VaultStoreUnavailable(RequesterError):
    """Redis did not answer in time or failed: the call fails (closed) with -32603 and
    `data = {"reason": "vault_store_unavailable", "retry_after": 1.0}`, no value or server name in it."""

    def __init__(self, why: str) -> None:
        super().__init__(
            INTERNAL_ERROR,
            UNAVAILABLE_MESSAGE,
            {"reason": "vault_store_unavailable", "retry_after": UNAVAILABLE_RETRY_S},
        )
        self.why = why


def vault_breaker(
    *, deadline: float = STORE_DEADLINE_S, threads: int = STORE_THREADS, clock: Callable[[], float] = time.monotonic
) -> StoreBreaker:
    """The vault's breaker: a failed round trip raises `VaultStoreUnavailable`; a call finding every store thread
    still held (by a hung store) fails at once."""
    return StoreBreaker(
        label="vault store",
        logger=logger,
        deadline=deadline,
        threads=threads,
        fail_when_busy=True,
        error=VaultStoreUnavailable,
        clock=clock,
    )


BATCH = 512
MAX_TOKEN = 4096
"""Tokens are at most this long (the longest are composite ones, bounded by the 2048-character ARN)."""


def _ttl(ttl: float | None) -> str:
    return "-1" if ttl is None else repr(float(ttl))


class RedisStore:
    """Entries and per-operation pairs in Redis. Give a URL (`redis://host:port/db`) or a client."""

    name = "redis"

    def __init__(
        self,
        url: str | None = None,
        *,
        client: redis.Redis | None = None,
        prefix: str = "mcpi:vault",
        max_pairs: int = 4_096,
        deadline: float = STORE_DEADLINE_S,
    ) -> None:
        if client is None:
            if url is None:
                raise ValueError("RedisStore needs a url or a client")
            try:
                import redis as redis_module
            except ImportError:
                raise ImportError("RedisStore needs the redis package: pip install 'mcp-interceptors[redis]'") from None
            client = redis_module.Redis.from_url(
                url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=SOCKET_TIMEOUT_S
            )
        self.client: redis.Redis = client
        self.breaker = vault_breaker(deadline=deadline)
        self.prefix = prefix
        self.max_pairs = max_pairs
        self._keys: StoreKeys | None = None
        self._base = ""
        self._claim = client.register_script(_CLAIM)
        self._find = client.register_script(_FIND)
        self._reverse = client.register_script(_REVERSE)

    def __repr__(self) -> str:
        return f"RedisStore(prefix={self.prefix!r})"

    def bind(self, keys: StoreKeys) -> None:
        self._keys = keys
        self._base = f"{self.prefix}:{keys.key_id}"

    @property
    def keys(self) -> StoreKeys:
        if self._keys is None:
            raise RuntimeError("the store is not bound to a vault yet")
        return self._keys

    def _names(self) -> list[str]:
        return [f"{self._base}:tok", f"{self._base}:val", f"{self._base}:used"]

    def _field(self, namespace: str, token: str) -> str:
        return f"{self.keys.index('ns', namespace)}:{token}"

    def _fingerprint(self, namespace: str, value: str) -> str:
        return self.keys.index("fp", namespace, value)

    def _seal(self, entry: Entry, field: str) -> bytes:
        plain = orjson.dumps([entry.namespace, entry.entity, entry.value, entry.token, entry.created])
        return self._fingerprint(entry.namespace, entry.value).encode() + self.keys.seal(plain, field.encode())

    def _open(self, field: str, blob: bytes, last_used: float) -> Entry | None:
        plain = self.keys.open(blob[32:], field.encode())
        if plain is None:
            return None
        ns, entity, value, token, created = orjson.loads(plain)
        return Entry(ns, entity, value, token, float(created), last_used)

    # --- entries ---------------------------------------------------------------------------------------

    def find(self, namespace: str, entity: str, value: str, now: float, ttl: float | None) -> str | None:
        tok, val, used = self._names()
        args = [
            self.keys.index("val", namespace, entity, value),
            self._fingerprint(namespace, value),
            repr(now),
            _ttl(ttl),
        ]
        found = self.breaker.call(self._find, keys=[tok, val, used], args=args)
        return None if found is None else _text(found)

    def claim(self, entry: Entry, ttl: float | None) -> tuple[ClaimStatus, str]:
        field = self._field(entry.namespace, entry.token)
        args: list[str | bytes] = [
            field,
            self.keys.index("val", entry.namespace, entry.entity, entry.value),
            self._seal(entry, field),
            self._fingerprint(entry.namespace, entry.value),
            repr(entry.last_used),
            _ttl(ttl),
            entry.token,
        ]
        names = self._names()
        status, token = cast(list[bytes], self.breaker.call(self._claim, keys=names, args=args))
        return cast(ClaimStatus, _text(status)), _text(token)

    def reverse(self, namespace: str, tokens: Sequence[str], now: float, ttl: float | None) -> dict[str, Entry]:
        tok, _, used = self._names()
        found: dict[str, Entry] = {}
        unique = list(dict.fromkeys(tokens))
        for start in range(0, len(unique), BATCH):
            chunk = unique[start : start + BATCH]
            fields = [self._field(namespace, t) for t in chunk]
            args = [repr(now), _ttl(ttl), *fields]
            blobs = cast(list[bytes | None], self.breaker.call(self._reverse, keys=[tok, used], args=args))
            for token, field, blob in zip(chunk, fields, blobs, strict=True):
                if blob is not None:
                    entry = self._open(field, blob, now)
                    if entry is not None and entry.token == token and entry.namespace == namespace:
                        found[token] = entry
        return found

    def entries(self, namespace: str | None = None) -> Iterator[Entry]:
        tok, _, used = self._names()
        pending: list[tuple[str, bytes]] = []
        for raw_field, blob in self._scan(tok):
            pending.append((_text(raw_field), blob))
            if len(pending) >= BATCH:
                yield from self._entries(pending, used, namespace)
                pending = []
        if pending:
            yield from self._entries(pending, used, namespace)

    def _entries(self, items: list[tuple[str, bytes]], used: str, namespace: str | None) -> Iterator[Entry]:
        fields = [f for f, _ in items]
        stamps = cast(list[bytes | None], self.breaker.call(self.client.hmget, used, fields))
        for (field, blob), stamp in zip(items, stamps, strict=True):
            last = float(stamp) if stamp is not None else -math.inf
            entry = self._open(field, blob, last)
            if entry is not None and (namespace is None or entry.namespace == namespace):
                yield entry

    def put(self, entries: Iterable[Entry], overwrite: bool) -> int:
        tok, val, used = self._names()
        added = 0
        items = list(entries)
        for start in range(0, len(items), BATCH):
            chunk = items[start : start + BATCH]
            fields = [self._field(e.namespace, e.token) for e in chunk]
            present = cast(list[bytes | None], self.breaker.call(self.client.hmget, tok, fields))
            pipe = self.client.pipeline(transaction=True)
            for entry, field, old in zip(chunk, fields, present, strict=True):
                if old is not None and not overwrite:
                    continue
                pipe.hset(tok, field, self._seal(entry, field))
                pipe.hsetnx(val, self.keys.index("val", entry.namespace, entry.entity, entry.value), field)
                pipe.hset(used, field, repr(entry.last_used))
                added += 1
            self.breaker.call(pipe.execute)
        return added

    def purge(self, now: float, ttl: float | None) -> int:
        if ttl is None:
            return 0
        tok, val, used = self._names()
        stale = {_text(field) for field, stamp in self._scan(used) if now - float(stamp) >= ttl}
        if not stale:
            return 0
        fields = sorted(stale)
        for start in range(0, len(fields), BATCH):
            chunk = fields[start : start + BATCH]
            self.breaker.call(self.client.hdel, tok, *chunk)
            self.breaker.call(self.client.hdel, used, *chunk)
        dangling = [_text(f) for f, target in self._scan(val) if _text(target) in stale]
        for start in range(0, len(dangling), BATCH):
            batch = dangling[start : start + BATCH]
            self.breaker.call(self.client.hdel, val, *batch)
        return len(fields)

    def count(self) -> int:
        name = f"{self._base}:tok"
        return int(self.breaker.call(self.client.hlen, name))

    def max_token_length(self) -> int:
        # Asking Redis would cost a round trip per text (and could be stale): assume the longest ARN-like token.
        return MAX_TOKEN

    def clear(self) -> None:
        names = self._names()
        match = f"{self._base}:op:*"
        cursor: Any = 0
        while True:
            cursor, found = self.breaker.call(self.client.scan, cursor, match=match, count=BATCH)
            names.extend(_text(k) for k in found)
            if not int(cursor):
                break
        self.breaker.call(self.client.delete, *names)

    def _scan(self, name: str) -> Iterator[tuple[bytes, bytes]]:
        """`HSCAN` page by page, each page one round trip with the store's deadline."""
        cursor: Any = 0
        while True:
            cursor, page = self.breaker.call(self.client.hscan, name, cursor, count=BATCH)
            yield from cast(dict[bytes, bytes], page).items()
            if not int(cursor):
                return

    # --- per-operation pairs -----------------------------------------------------------------------------

    def _op(self, operation: str) -> str:
        return f"{self._base}:op:{self.keys.index('op', operation)}"

    def remember(self, operation: str, pairs: Sequence[Pair], ttl: float) -> None:
        name = self._op(operation)
        aad = name.encode()
        sealed = [self.keys.seal(orjson.dumps([real, token]), aad) for real, token in pairs]
        pipe = self.client.pipeline(transaction=True)
        pipe.rpush(name, *sealed)
        pipe.ltrim(name, -self.max_pairs, -1)
        pipe.expire(name, max(1, math.ceil(ttl)))
        self.breaker.call(pipe.execute)

    def recall(self, operation: str, ttl: float | None = None) -> list[Pair]:
        name = self._op(operation)
        pipe = self.client.pipeline(transaction=True)
        pipe.lrange(name, 0, -1)
        if ttl is not None:
            pipe.expire(name, max(1, math.ceil(ttl)))
        items = cast(list[bytes], self.breaker.call(pipe.execute)[0])
        aad = name.encode()
        out: list[Pair] = []
        for blob in items:
            plain = self.keys.open(blob, aad)
            if plain is None:
                continue
            real, token = orjson.loads(plain)
            pair = (str(real), str(token))
            if pair not in out:
                out.append(pair)
        return out

    def close(self) -> None:
        self.client.close()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
