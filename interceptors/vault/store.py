"""Where the vault keeps its mappings: the `VaultStore` interface and the in-memory default.

A store holds entries `(namespace, entity, value, token, created, last_used)`, indexed both ways:
token → entry (reversal) and (namespace, entity, value) → token (reuse). Every method that reads an entry
also applies the TTL: an entry unused for `ttl` seconds is gone for good (and removed when met), a live
one has its `last_used` renewed. `claim` is the only way to add an entry and is atomic, so several
threads (or, with a shared store, several processes) agree on which value a token stands for.

The store also keeps the per-operation `(real, token)` pairs the request phase restored, so the response
phase (a separate invocation, possibly another process with a shared store) can re-pseudonymise echoes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .keys import VaultKeys, fields_message

ClaimStatus = Literal["ok", "have", "taken"]
"""`ok`: registered now; `have`: the value already had a live token (returned); `taken`: the token belongs
to another value (try the next candidate)."""

Pair = tuple[str, str]
"""`(real, replacement)`: a value the input side restored and what the model had written instead."""


@dataclass(frozen=True, slots=True)
class Entry:
    namespace: str
    entity: str
    value: str
    token: str
    created: float
    last_used: float

    def as_row(self) -> list[str | float]:
        return [self.namespace, self.entity, self.value, self.token, self.created, self.last_used]

    def __repr__(self) -> str:  # the value is sensitive: keep it out of logs and tracebacks
        return f"Entry(namespace={self.namespace!r}, entity={self.entity!r}, token={self.token!r})"


def is_live(last_used: float, now: float, ttl: float | None) -> bool:
    return ttl is None or now - last_used < ttl


class StoreKeys:
    """What a store may do with the vault key: name things without revealing them, and seal values."""

    def __init__(self, keys: VaultKeys) -> None:
        self.key_id = keys.key_id
        self._index = keys.subkey("store-index")
        self._aead = AESGCM(keys.subkey("store-encryption"))

    def __repr__(self) -> str:
        return f"StoreKeys(key_id={self.key_id!r})"

    def index(self, *parts: str) -> str:
        """A keyed fingerprint (32 hex) of the parts: stable, and says nothing about them without the key."""
        return hmac.new(self._index, fields_message(*parts), hashlib.sha256).hexdigest()[:32]

    def seal(self, data: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, data, aad)

    def open(self, blob: bytes, aad: bytes) -> bytes | None:
        """The plaintext, or None when the blob was not sealed by this key for this place (`aad`)."""
        if len(blob) < 28:
            return None
        try:
            return self._aead.decrypt(blob[:12], blob[12:], aad)
        except InvalidTag:
            return None


@runtime_checkable
class VaultStore(Protocol):
    """The storage behind a `TokenVault`. Implementations must be safe to call from several threads."""

    name: str

    def bind(self, keys: StoreKeys) -> None:
        """Called once by the vault before any other call."""
        ...

    def find(self, namespace: str, entity: str, value: str, now: float, ttl: float | None) -> str | None:
        """The live token of `value` as `entity` (renewed), or None."""
        ...

    def claim(self, entry: Entry, ttl: float | None) -> tuple[ClaimStatus, str]:
        """Register `entry` unless its value already has a live token or its token is taken by another value."""
        ...

    def reverse(self, namespace: str, tokens: Sequence[str], now: float, ttl: float | None) -> dict[str, Entry]:
        """The live entries among `tokens` (renewed); expired ones are dropped."""
        ...

    def entries(self, namespace: str | None = None) -> Iterator[Entry]:
        """Every stored entry (live or not), of one namespace or all."""
        ...

    def put(self, entries: Iterable[Entry], overwrite: bool) -> int:
        """Import entries; a token already present is replaced only with `overwrite`. Returns how many were added."""
        ...

    def purge(self, now: float, ttl: float | None) -> int:
        """Remove every expired entry; how many were removed."""
        ...

    def count(self) -> int: ...

    def max_token_length(self) -> int:
        """An upper bound of the length of any stored token (bounds the text scanner's spans)."""
        ...

    def clear(self) -> None: ...

    def remember(self, operation: str, pairs: Sequence[Pair], ttl: float) -> None:
        """Add restored pairs to an operation (expiring `ttl` seconds after the last call)."""
        ...

    def recall(self, operation: str, ttl: float | None = None) -> list[Pair]:
        """The pairs of an operation, oldest first; a `ttl` resets its expiry."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    """Process-local dictionaries under one lock. The default store."""

    name = "memory"

    def __init__(self, *, max_operations: int = 16_384, max_pairs: int = 4_096) -> None:
        self._lock = threading.RLock()
        self._tokens: dict[tuple[str, str], Entry] = {}
        self._values: dict[tuple[str, str, str], str] = {}
        self._max_len = 0
        self._ops: OrderedDict[str, tuple[float, list[Pair]]] = OrderedDict()
        self.max_operations = max_operations
        self.max_pairs = max_pairs
        self._keys: StoreKeys | None = None

    def __repr__(self) -> str:
        return f"MemoryStore(entries={len(self._tokens)})"

    def bind(self, keys: StoreKeys) -> None:
        self._keys = keys

    # --- entries ---------------------------------------------------------------------------------------

    def _live(self, key: tuple[str, str], now: float, ttl: float | None) -> Entry | None:
        entry = self._tokens.get(key)
        if entry is None:
            return None
        if not is_live(entry.last_used, now, ttl):
            self._drop(entry)
            return None
        if entry.last_used != now:
            entry = Entry(entry.namespace, entry.entity, entry.value, entry.token, entry.created, now)
            self._tokens[key] = entry
        return entry

    def _drop(self, entry: Entry) -> None:
        self._tokens.pop((entry.namespace, entry.token), None)
        index = (entry.namespace, entry.entity, entry.value)
        if self._values.get(index) == entry.token:
            del self._values[index]

    def find(self, namespace: str, entity: str, value: str, now: float, ttl: float | None) -> str | None:
        with self._lock:
            token = self._values.get((namespace, entity, value))
            if token is None:
                return None
            entry = self._live((namespace, token), now, ttl)
            if entry is None or entry.value != value:
                self._values.pop((namespace, entity, value), None)
                return None
            return token

    def claim(self, entry: Entry, ttl: float | None) -> tuple[ClaimStatus, str]:
        ns, now = entry.namespace, entry.last_used
        with self._lock:
            have = self.find(ns, entry.entity, entry.value, now, ttl)
            if have is not None:
                return "have", have
            current = self._live((ns, entry.token), now, ttl)
            if current is not None and current.value != entry.value:
                return "taken", ""
            if current is None:
                self._tokens[(ns, entry.token)] = entry
                self._max_len = max(self._max_len, len(entry.token))
            self._values[(ns, entry.entity, entry.value)] = entry.token
            return "ok", entry.token

    def reverse(self, namespace: str, tokens: Sequence[str], now: float, ttl: float | None) -> dict[str, Entry]:
        found: dict[str, Entry] = {}
        with self._lock:
            table = self._tokens
            for token in tokens:
                if (namespace, token) in table:
                    entry = self._live((namespace, token), now, ttl)
                    if entry is not None:
                        found[token] = entry
        return found

    def entries(self, namespace: str | None = None) -> Iterator[Entry]:
        with self._lock:
            snapshot = list(self._tokens.values())
        return iter([e for e in snapshot if namespace is None or e.namespace == namespace])

    def put(self, entries: Iterable[Entry], overwrite: bool) -> int:
        added = 0
        with self._lock:
            for entry in entries:
                key = (entry.namespace, entry.token)
                old = self._tokens.get(key)
                if old is not None and not overwrite:
                    continue
                if old is not None:
                    self._drop(old)
                self._tokens[key] = entry
                self._values.setdefault((entry.namespace, entry.entity, entry.value), entry.token)
                self._max_len = max(self._max_len, len(entry.token))
                added += 1
        return added

    def purge(self, now: float, ttl: float | None) -> int:
        if ttl is None:
            return 0
        with self._lock:
            stale = [e for e in self._tokens.values() if not is_live(e.last_used, now, ttl)]
            for entry in stale:
                self._drop(entry)
            return len(stale)

    def count(self) -> int:
        return len(self._tokens)

    def max_token_length(self) -> int:
        return self._max_len

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()
            self._values.clear()
            self._ops.clear()
            self._max_len = 0

    # --- per-operation pairs -------------------------------------------------------------------------------

    def remember(self, operation: str, pairs: Sequence[Pair], ttl: float) -> None:
        now = time.monotonic()
        with self._lock:
            _, old = self._ops.pop(operation, (0.0, []))
            merged = old + [p for p in pairs if p not in old]
            self._ops[operation] = (now + ttl, merged[-self.max_pairs :])
            while len(self._ops) > self.max_operations:
                self._ops.popitem(last=False)

    def recall(self, operation: str, ttl: float | None = None) -> list[Pair]:
        now = time.monotonic()
        with self._lock:
            item = self._ops.get(operation)
            if item is None:
                return []
            expires, pairs = item
            if expires <= now:
                del self._ops[operation]
                return []
            if ttl is not None:
                self._ops[operation] = (now + ttl, pairs)
                self._ops.move_to_end(operation)
            return list(pairs)

    def close(self) -> None:
        return None


def rows_to_entries(rows: Iterable[object], where: str = "entries") -> list[Entry]:
    """Checked entries from `[namespace, entity, value, token, created, last_used]` rows (all or nothing)."""
    out: list[Entry] = []
    for index, row in enumerate(rows):
        if not isinstance(row, list | tuple) or len(row) != 6:
            raise ValueError(
                f"row {index + 1} ({where}[{index}]): must be [namespace, entity, value, token, created, last_used]"
            )
        ns, entity, value, token, created, used = row
        if not all(isinstance(x, str) for x in (ns, entity, value, token)) or not token or not ns:
            raise ValueError(f"row {index + 1} ({where}[{index}]): namespace, entity, value and token must be strings")
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (created, used)):
            raise ValueError(f"row {index + 1} ({where}[{index}]): created and last_used must be numbers")
        out.append(Entry(ns, entity, value, token, float(created), float(used)))
    return out
