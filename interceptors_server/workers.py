"""Worker threads for sync handlers, on asyncio: daemon threads, each result handed back as a plain future.

Not `anyio.to_thread`: it enters a cancel scope, so an invoke waiting there could not move to another task (see
`Chain.movable`: the gateway starts in-process chain runs on the pumping task). Not a `ThreadPoolExecutor`:
the interpreter joins its threads at exit, so one abandoned handler that never returns would keep the process
alive. Other anyio backends keep anyio's worker threads (the host decides, `on_asyncio`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

WORKER_THREADS = 40
"""At most this many worker threads for sync handlers (anyio's default limit, so blocking handlers queue as there)."""


class _Workers:
    """At most `limit` daemon threads; a thread is started whenever a queued job would otherwise wait."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._jobs: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0

    def submit(self, handler: Callable[[Any], Any], invocation: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((loop, future, contextvars.copy_context(), handler, invocation))
        with self._lock:
            self._queued += 1
            if self._queued > self._idle and self._threads < self._limit:  # every queued job finds a thread
                self._threads += 1
                threading.Thread(target=self._work, name=f"interceptor-{self._threads}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            loop, future, context, handler, invocation = self._jobs.get()
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            if future.cancelled():  # abandoned before it started (racy, harmless: the result is dropped anyway)
                continue
            try:
                outcome, failed = context.run(handler, invocation), False
            except StopIteration:  # no future can carry one; it is no less the handler's failure
                outcome, failed = RuntimeError("handler raised StopIteration"), True
            except Exception as exc:  # delivered to the caller, who turns it into the host's error
                outcome, failed = exc, True
            except BaseException:  # SystemExit, KeyboardInterrupt in a handler: a failure of the handler here
                outcome, failed = RuntimeError("handler raised a BaseException"), True
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
                loop.call_soon_threadsafe(_deliver, future, outcome, failed)
            del loop, future, context, handler, invocation, outcome  # nothing of a finished job is kept


def _deliver(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.cancelled():
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


_workers = _Workers(WORKER_THREADS)


async def in_worker(handler: Callable[[Any], Any], invocation: Any) -> Any:
    """The handler in a worker thread, in a copy of the caller's context, abandoned if the caller is cancelled.
    Waits on a plain future: an invoke that suspends here holds no cancel scope."""
    return await _workers.submit(handler, invocation)
