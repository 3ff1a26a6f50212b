"""Token buckets: lazy refill, all-or-nothing across every bucket that applies to a call."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .globs import Globs
from .schema import PERIODS

Clock = Callable[[], float]
MAX_BUCKETS = 65_536


@dataclass(frozen=True, slots=True, eq=False)
class RateLimit:
    """One `rate_limits` entry. Identity equality: each entry has its own buckets."""

    rate: float
    per: str
    burst: int
    scope: str
    tools: Globs
    kinds: frozenset[str] | None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> RateLimit:
        rate = float(doc["rate"])
        kinds = frozenset(doc["kinds"]) if doc.get("kinds") else None
        if kinds is not None and "resource" in kinds:
            kinds = kinds | {"resource_template"}
        burst = doc.get("burst")
        return cls(
            rate=rate,
            per=doc.get("per", "minute"),
            burst=max(1, math.ceil(rate)) if burst is None else int(burst),
            scope=doc.get("scope", "principal_tool"),
            tools=Globs(doc.get("tools", ["*"])),
            kinds=kinds,
        )

    @property
    def period(self) -> float:
        return PERIODS[self.per]

    @property
    def label(self) -> str:
        return f"{self.rate:g}/{self.per}"

    def applies(self, kind: str, idents: Sequence[str]) -> bool:
        """A limit without `kinds` covers every kind, completions included."""
        return (self.kinds is None or kind in self.kinds) and self.tools.match_any(idents)


@dataclass(frozen=True, slots=True)
class Refusal:
    limit: RateLimit
    retry_after: float
    unavailable: bool = False
    """The shared store could not be asked (fail closed), not an empty bucket."""


class RateLimiter:
    """Buckets in memory, keyed by limit and scope; they start full and are lost on restart.

    Bounded: past `max_buckets`, full buckets (indistinguishable from new ones) are dropped first.
    """

    def __init__(self, clock: Clock = time.monotonic, max_buckets: int = MAX_BUCKETS) -> None:
        self._clock = clock
        self._max = max_buckets
        self._buckets: dict[tuple[RateLimit, str], list[float]] = {}  # key -> [tokens, last refill]
        self._lock = threading.Lock()

    @staticmethod
    def _key(limit: RateLimit, principal_id: str, ident: str) -> tuple[RateLimit, str]:
        scope = limit.scope
        if scope == "principal":
            return limit, principal_id
        if scope == "tool":
            return limit, ident
        if scope == "global":
            return limit, ""
        return limit, f"{principal_id}\x00{ident}"

    def acquire(self, limits: Sequence[RateLimit], principal_id: str, ident: str) -> Refusal | None:
        """Take one token from every bucket, or none if any bucket lacks a whole token."""
        if not limits:
            return None
        with self._lock:
            now = self._clock()
            buckets: list[list[float]] = []
            worst: Refusal | None = None
            for limit in limits:
                key = self._key(limit, principal_id, ident)
                bucket = self._buckets.get(key)
                if bucket is None:
                    if len(self._buckets) >= self._max:
                        self._sweep(now)
                    bucket = self._buckets[key] = [float(limit.burst), now]
                else:
                    elapsed = max(0.0, now - bucket[1])
                    bucket[0] = min(float(limit.burst), bucket[0] + elapsed * limit.rate / limit.period)
                    bucket[1] = now
                if bucket[0] < 1.0:
                    wait = max(0.01, round((1.0 - bucket[0]) * limit.period / limit.rate, 2))
                    if worst is None or wait > worst.retry_after:
                        worst = Refusal(limit, wait)
                buckets.append(bucket)
            if worst is not None:
                return worst
            for bucket in buckets:
                bucket[0] -= 1.0
            return None

    def _sweep(self, now: float) -> None:
        for key, (tokens, last) in list(self._buckets.items()):
            limit = key[0]
            if tokens + (now - last) * limit.rate / limit.period >= limit.burst:
                del self._buckets[key]
        if len(self._buckets) >= self._max:  # every bucket is in use: forget the oldest half
            for key in list(self._buckets)[: len(self._buckets) // 2]:
                del self._buckets[key]

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()

    def __len__(self) -> int:
        return len(self._buckets)
