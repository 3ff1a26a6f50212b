"""The policy's decision record: a bounded ring buffer, counters, a logger and optional JSONL files.

Entries never hold argument values: each argument is a 12-hex keyed hash of its canonical JSON. Every
client-chosen string is escaped (`log_safe`) so no name or argument key can forge a log line.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ..codec import canonical
from .safetext import log_safe

logger = logging.getLogger("interceptors.policy.audit")

DECISIONS = ("allowed", "denied", "rate_limited", "rejected", "not_found")
COUNTERS = ("allowed", "denied", "rate_limited", "rejected", "hidden", "reveal")
ADMIN_ROLES = frozenset({"admin", "privacy-admin"})
MAX_ARGUMENTS = 64
NAME_LIMIT = 200
REASON_LIMIT = 300

AuditSink = Callable[[Mapping[str, Any]], None]
"""Receives each entry as it is recorded (a JSONL file, a queue, a test list)."""


def derive_key(secret: bytes, label: str = "audit") -> bytes:
    """A sub-key per purpose, so the audit hash never equals any other keyed value made from the secret."""
    return hmac.new(secret, f"mcp-interceptors/{label}".encode(), hashlib.sha256).digest()


def _canonical(value: Any) -> bytes:
    try:
        return canonical(value).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError):
        return repr(value).encode("utf-8", "surrogatepass")


def hidden_uri(uri: str, key: bytes) -> str:
    """Keep a probed URI's scheme and first segment; hash the rest, so a guessed name is never logged."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        scheme, sep, rest = uri.partition(":")
        return f"{scheme}:#{_digest(key, rest)}" if sep else f"#{_digest(key, uri)}"
    first, _, tail = rest.partition("/")
    return f"{scheme}://{first}/#{_digest(key, tail)}" if tail else f"{scheme}://{first}"


def _digest(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:12]


class JsonlAuditFile:
    """An append-only JSON-lines file, mode 0600, rotated by size (`path.1` … `path.N`).

    A write failure is logged once and never breaks the call it records.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = 10 * 1024 * 1024, backups: int = 3) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self._fd: int | None = None
        self._size = 0
        self._lock = threading.Lock()
        self._failed = False

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)  # an existing file keeps no wider mode than ours
        self._size = os.fstat(fd).st_size
        return fd

    def _rotate(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.backups <= 0:
            self.path.unlink(missing_ok=True)
            return
        for index in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{index + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))

    def __call__(self, entry: Mapping[str, Any]) -> None:
        line = orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = self._open()
                if self._size and self._size + len(line) > self.max_bytes:
                    self._rotate()
                    self._fd = self._open()
                os.write(self._fd, line)
                self._size += len(line)
            except OSError as exc:
                if not self._failed:
                    logger.error("cannot write the policy audit file %s: %s", log_safe(str(self.path)), exc.strerror)
                    self._failed = True

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


Redact = Callable[[str], str]
"""Masks secrets in a string (the policy's redaction of what leaves the gateway); the identity when absent."""


class AuditTrail:
    """Decisions as entries `{ts, decision, kind, name, principal, roles, arguments, reason?, policy}`.

    Retention in memory: at most `size` entries, none older than `max_age` seconds, and at most `per_decision`
    of any one decision (`not_found`, `denied`, …), so a flood of one kind (probing for hidden names) cannot
    push the others out. When the whole buffer is full, the oldest entry of the most numerous decision goes.
    `size` 0 keeps nothing in memory; the logger and sinks still get every entry.

    Every string written (names, URIs with their query strings, principal ids, roles, argument names, reasons)
    goes through `redact` first, then `log_safe`: a secret in a name is masked as on the output channel.
    """

    def __init__(
        self,
        size: int = 1000,
        *,
        key: bytes | None = None,
        sinks: Sequence[AuditSink] = (),
        policy: str = "",
        clock: Callable[[], float] = time.time,
        max_age: float | None = None,
        per_decision: int | None = None,
        redact: Redact | None = None,
    ) -> None:
        self._size = max(0, size)
        self.max_age = max_age
        self.per_decision = self._size if per_decision is None else max(0, min(per_decision, self._size))
        self._by_decision: dict[str, deque[tuple[int, dict[str, Any]]]] = {d: deque() for d in DECISIONS}
        self._count = 0
        self._seq = 0
        self._key = derive_key(key if key is not None else os.urandom(32))
        self.sinks = list(sinks)
        self.policy = policy
        self._clock = clock
        self._redact = redact
        self._lock = threading.Lock()
        self.counters = dict.fromkeys(COUNTERS, 0)

    def clean(self, text: str, limit: int) -> str:
        """A client-chosen string as it may be written: secrets redacted, then escaped and cut to `limit`."""
        if self._redact is not None and text:
            try:
                text = self._redact(text[: limit + 256])  # never cut a secret in two before looking at it
            except Exception:  # a broken redactor must not write the secret: keep nothing of the text
                text = f"#{_digest(self._key, text)}"
        return log_safe(text, limit)

    def _store(self, entry: dict[str, Any]) -> None:
        """Keep an entry under the retention rules (the lock is held)."""
        if self._size == 0 or self.per_decision == 0:
            return
        self._seq += 1
        bucket = self._by_decision.setdefault(entry["decision"], deque())
        bucket.append((self._seq, entry))
        self._count += 1
        if len(bucket) > self.per_decision:
            bucket.popleft()
            self._count -= 1
        while self._count > self._size:
            largest = max(self._by_decision.values(), key=len)
            largest.popleft()
            self._count -= 1
        self._expire()

    def _expire(self) -> None:
        if self.max_age is None:
            return
        oldest = self._clock() - self.max_age
        for bucket in self._by_decision.values():
            while bucket and bucket[0][1]["ts"] < oldest:
                bucket.popleft()
                self._count -= 1

    def _snapshot(self) -> list[dict[str, Any]]:
        """Every kept entry, oldest first (the lock is held)."""
        self._expire()
        merged = sorted((pair for bucket in self._by_decision.values() for pair in bucket), key=lambda p: p[0])
        return [entry for _, entry in merged]

    @property
    def size(self) -> int:
        return self._size

    def count(self, counter: str) -> None:
        with self._lock:
            self.counters[counter] += 1

    def hash_value(self, value: Any) -> str:
        return hmac.new(self._key, _canonical(value), hashlib.sha256).hexdigest()[:12]

    def hash_arguments(self, arguments: Any) -> dict[str, str]:
        """`{escaped name: keyed hash}`; values never leave this function."""
        if not isinstance(arguments, Mapping):
            return {} if arguments is None else {"<arguments>": self.hash_value(arguments)}
        out: dict[str, str] = {}
        for index, (name, value) in enumerate(arguments.items()):
            if index >= MAX_ARGUMENTS:
                out["<more>"] = str(len(arguments) - MAX_ARGUMENTS)
                break
            out[self.clean(str(name), 100)] = self.hash_value(value)
        return out

    def hide_uri(self, uri: str) -> str:
        return hidden_uri(uri, self._key)

    def record(
        self,
        decision: str,
        kind: str,
        name: str,
        principal: str,
        roles: Iterable[str],
        arguments: Any = None,
        reason: str = "",
        interceptor: str = "",
    ) -> dict[str, Any]:
        """Add an entry, log it at INFO and hand it to every sink. `interceptor`: who refused, when not the policy."""
        entry: dict[str, Any] = {
            "ts": self._clock(),
            "decision": decision,
            "kind": kind,
            "name": self.clean(name, NAME_LIMIT),
            "principal": self.clean(principal, NAME_LIMIT),
            "roles": sorted(self.clean(role, 100) for role in roles),
            "arguments": self.hash_arguments(arguments),
        }
        if reason:
            entry["reason"] = self.clean(reason, REASON_LIMIT)
        if interceptor:
            entry["interceptor"] = self.clean(interceptor, NAME_LIMIT)
        entry["policy"] = self.policy
        with self._lock:
            self._store(entry)
        self._emit(entry)
        return entry

    def record_rejection(
        self, kind: str, name: str, principal: str, roles: Iterable[str], arguments: Any, reason: str
    ) -> dict[str, Any]:
        """Turn the newest matching `allowed` entry into `rejected`, or add one; every sink gets a new line."""
        return self._amend("rejected", kind, name, principal, roles, arguments, reason, "")

    def record_refusal(
        self, kind: str, name: str, principal: str, roles: Iterable[str], arguments: Any, reason: str, interceptor: str
    ) -> dict[str, Any]:
        """Another interceptor refused a call the policy allowed: the newest matching `allowed` entry becomes
        `denied` with the interceptor and its reason (every sink gets the amended entry as a new line), or a new
        `denied` entry is added. Counted as `denied`."""
        return self._amend("denied", kind, name, principal, roles, arguments, reason, interceptor)

    def _amend(
        self,
        decision: str,
        kind: str,
        name: str,
        principal: str,
        roles: Iterable[str],
        arguments: Any,
        reason: str,
        interceptor: str,
    ) -> dict[str, Any]:
        """The newest `allowed` entry of the same call, changed to `decision` (its reason, and the interceptor
        when one is named), moved to that decision's ring and emitted again; else a new entry."""
        safe_name, safe_principal = self.clean(name, NAME_LIMIT), self.clean(principal, NAME_LIMIT)
        hashed = self.hash_arguments(arguments)
        with self._lock:
            self.counters[decision] += 1
            amended: dict[str, Any] | None = None
            allowed = self._by_decision["allowed"]
            for index in range(len(allowed) - 1, -1, -1):
                seq, entry = allowed[index]
                if entry["name"] == safe_name and entry["principal"] == safe_principal and entry["arguments"] == hashed:
                    entry["decision"] = decision
                    entry["reason"] = self.clean(reason, REASON_LIMIT)
                    if interceptor:
                        entry["interceptor"] = self.clean(interceptor, NAME_LIMIT)
                        entry["policy"] = entry.pop("policy", self.policy)  # keep `policy` last, as in new entries
                    del allowed[index]
                    ring = self._by_decision[decision]
                    ring.append((seq, entry))
                    if len(ring) > self.per_decision:
                        ring.popleft()
                        self._count -= 1
                    amended = entry
                    break
        if amended is None:
            return self.record(decision, kind, name, principal, roles, arguments, reason, interceptor)
        self._emit(amended)
        return amended

    def reveal_warning(self, kind: str, name: str, principal: str, roles: Iterable[str], arguments: Any) -> None:
        """Every allowed call to a primitive that reveals protected values, whatever the settings."""
        logger.warning(
            "REVEAL principal=%s roles=%s %s=%s args=%s policy=%s",
            self.clean(principal, NAME_LIMIT),
            ",".join(sorted(self.clean(role, 100) for role in roles)),
            kind,
            self.clean(name, NAME_LIMIT),
            orjson.dumps(self.hash_arguments(arguments)).decode(),
            self.policy,
        )

    def _emit(self, entry: Mapping[str, Any]) -> None:
        if logger.isEnabledFor(logging.INFO):
            logger.info(
                "%s %s %s principal=%s %s",
                entry["decision"],
                entry["kind"],
                entry["name"],
                entry["principal"],
                entry.get("reason", ""),
            )
        for sink in self.sinks:
            try:
                sink(entry)
            except Exception:  # an audit sink must never break the call it records
                logger.exception("policy audit sink failed")

    def entries(self, principal: str | None = None, roles: Iterable[str] = ()) -> list[dict[str, Any]]:
        """Newest last. Callers without an admin role see only their own entries."""
        with self._lock:
            snapshot = [dict(entry) for entry in self._snapshot()]
        if principal is None or not ADMIN_ROLES.isdisjoint(roles):
            return snapshot
        own = self.clean(principal, NAME_LIMIT)
        return [entry for entry in snapshot if entry["principal"] == own]

    def clear(self) -> None:
        with self._lock:
            for bucket in self._by_decision.values():
                bucket.clear()
            self._count = 0
