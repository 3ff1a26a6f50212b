"""The audit trail as a Redis stream (extra `redis`), next to the JSONL file, for every gateway process.

Each record is the very entry the file gets (already hashed and redacted by `AuditTrail`: no argument
value, no secret), as one field `record` holding its JSON, appended with `XADD … MAXLEN ~ N` so the stream
stays bounded. Records are written by a thread of the stream's own from a bounded queue (`MAX_QUEUED`; more
are dropped and counted: the file has them), so a call never waits on Redis to be audited. A Redis failure
is logged once per outage and never breaks the call it records; after one, the stream is not written for
`RETRY_S` (those records are in the file only), so a Redis that hangs costs one socket timeout per
`RETRY_S` on the writer's thread, not one per call.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ..store_breaker import redis_client

logger = logging.getLogger("interceptors.policy")

DEFAULT_STREAM = "mcp-interceptors:audit"
DEFAULT_MAXLEN = 100_000
RETRY_S = 5.0
MAX_QUEUED = 10_000
_STOP: Any = object()


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
        self.client = redis_client(client)
        self.stream = stream
        self.maxlen = maxlen
        self._failing = False
        self._retry_at = 0.0
        self.clock = clock
        self.dropped = 0
        """Records not written because the queue was full (the file has them)."""
        self._queue: queue.Queue[Any] = queue.Queue(MAX_QUEUED)
        self._writer: threading.Thread | None = None
        self._start = threading.Lock()

    def __call__(self, entry: Mapping[str, Any]) -> None:
        if self._failing and self.clock() < self._retry_at:
            return  # failed a moment ago: the file has the record, the stream is asked again later
        if self._writer is None:
            with self._start:
                if self._writer is None:  # a daemon: a write hanging on Redis never holds up the exit
                    self._writer = threading.Thread(target=self._write, name="audit-stream", daemon=True)
                    self._writer.start()
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            self.dropped += 1

    def _write(self) -> None:
        while True:
            entry = self._queue.get()
            try:
                if entry is _STOP:
                    return
                if self._failing and self.clock() < self._retry_at:
                    continue  # queued before the failure: the file has it
                try:
                    self.client.xadd(self.stream, {"record": orjson.dumps(entry)}, maxlen=self.maxlen, approximate=True)
                except Exception as exc:  # redis.RedisError, a closed socket: the file still has the record
                    if not self._failing:
                        logger.warning("audit stream unavailable: %s", type(exc).__name__)
                    self._failing = True
                    self._retry_at = self.clock() + RETRY_S
                    continue
                self._failing = False
            finally:
                self._queue.task_done()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued record is written or skipped; False if `timeout` passed first."""
        done = self._queue.all_tasks_done
        with done:
            return done.wait_for(lambda: self._queue.unfinished_tasks == 0, timeout)

    def close(self) -> None:
        """Write what is queued (at most 2 s: Redis may hang), then stop the writer."""
        if self._writer is not None:
            self.flush(2.0)
            with contextlib.suppress(queue.Full):  # a full queue: the daemon writer ends with the process
                self._queue.put_nowait(_STOP)
