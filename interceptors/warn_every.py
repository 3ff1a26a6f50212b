"""One warning line per interval for an event that can repeat on every call, with the count it held back: a
stalled store or a client probing the vault must not turn the log into a flood (or a disk-filling attack)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

WARN_EVERY_S = 10.0


class WarnEvery:
    """`warn(message, *args)` logs at most once per `every_s` seconds; the next line that gets through says how
    many it held back (`(and N more <what> since the last warning)`). Thread-safe."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        every_s: float = WARN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.every_s = every_s
        self.clock = clock
        self._lock = threading.Lock()
        self._warned_at = -every_s
        self._held = 0

    def warn(self, message: str, *args: object) -> bool:
        """Log now, or count it for the next line; whether it was logged."""
        now = self.clock()
        with self._lock:
            if now - self._warned_at < self.every_s:
                self._held += 1
                return False
            held, self._held, self._warned_at = self._held, 0, now
        more = f" (and {held} more {self.what} since the last warning)" if held else ""
        self.logger.warning(message + "%s", *args, more)
        return True
