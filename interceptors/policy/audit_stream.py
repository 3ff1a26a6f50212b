"""The audit trail as a Redis stream (extra `redis`), next to the JSONL file, for every gateway process.

Each record is the very entry the file gets (already hashed and redacted by `AuditTrail`: no argument
value, no secret), as one field `record` holding its JSON, appended with `XADD … MAXLEN ~ N` so the stream
stays bounded. A Redis failure is logged once per outage and never breaks the call it records; after one,
the stream is not written for `RETRY_S` (those records are in the file only), so a Redis that hangs costs
one socket timeout per `RETRY_S`, not one per call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

logger = logging.getLogger("interceptors.policy")

DEFAULT_STREAM = "mcp-interceptors:audit"
DEFAULT_MAXLEN = 100_000
RETRY_S = 5.0


class RedisAuditStream:
    """An audit sink: `sink(entry)` appends the entry to a Redis stream."""

    def __init__(
        self,
        client: Any,
        *,
        stream: str = DEFAULT_STREAM,
        maxlen: int = DEFAULT_MAXLEN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(client, str):
            import redis

            client = redis.Redis.from_url(client, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.client = client
        self.stream = stream
        self.maxlen = maxlen
        self._failing = False
        self._retry_at = 0.0
        self.clock = clock

    def __call__(self, entry: Mapping[str, Any]) -> None:
        if self._failing and self.clock() < self._retry_at:
            return  # failed a moment ago: the file has the record, the stream is asked again later
        try:
            self.client.xadd(self.stream, {"record": orjson.dumps(entry)}, maxlen=self.maxlen, approximate=True)
        except Exception as exc:  # redis.RedisError, a closed socket: the file still has the record
            if not self._failing:
                logger.warning("audit stream unavailable: %s", type(exc).__name__)
            self._failing = True
            self._retry_at = self.clock() + RETRY_S
            return
        self._failing = False

    def close(self) -> None:
        """Nothing to flush: every record was sent when it was made."""
