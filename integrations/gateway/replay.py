"""SSE event ids and the bounded replay buffer of one response stream (resumability, 2025-era sessions).

Why a module of its own: the HTTP front frames and admits; what a stream remembers, how its event ids are
spelt and what a `Last-Event-ID` resolves to are rules, tested here as tables without a socket.

An event id is `<stream token>.<sequence>`: the token is 96 random bits drawn when the stream starts, so ids
are unique per session and stream and cannot be guessed from another session's (a session also only looks
its own tokens up, and a session is bound to its principal). Sequence 0 is the priming event (no data);
events count from 1. A buffer keeps the newest events only, bounded by count and by bytes (the newest event
is always kept, so a stream's final reply can be replayed whatever its size: at most one message over).
What is stored is what was sent: the bytes the chain already transformed, never re-run.
"""

from __future__ import annotations

import secrets
from collections import deque
from itertools import islice
from typing import Final

DEFAULT_MAX_REPLAY_EVENTS: Final = 256
DEFAULT_MAX_REPLAY_BYTES: Final = 1 << 20
DEFAULT_RESUME_WINDOW_S: Final = 300.0
"""Seconds a stream whose connection dropped is kept for its client to resume (after its reply, if any)."""
DEFAULT_MAX_DETACHED_PER_SESSION: Final = 32
"""Streams of one session kept for resumption once their reply is in (the oldest goes first)."""

_TOKEN_HEX: Final = 24
_MAX_SEQUENCE_DIGITS: Final = 18

Event = tuple[bytes, bool, int]
"""(data, final, sequence): one SSE event; `final` marks a request's reply, which ends its stream."""


class Unresolved:
    """Why a `Last-Event-ID` names no events to replay (test with `isinstance`: an empty replay is a list)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


UNKNOWN: Final = Unresolved("not an event id of this session's streams (never sent here, or no longer held)")
EXPIRED: Final = Unresolved("the events after this id are no longer held (the stream's replay buffer moved on)")


def new_token() -> str:
    return secrets.token_hex(_TOKEN_HEX // 2)


def event_id(token: str, sequence: int) -> str:
    return f"{token}.{sequence}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """(token, sequence) of an id this module spells, else None (anything a client may send is bounded here)."""
    token, dot, sequence = value.strip().partition(".")
    if not dot or len(token) != _TOKEN_HEX or not 0 < len(sequence) <= _MAX_SEQUENCE_DIGITS:
        return None
    if not sequence.isascii() or not sequence.isdigit() or any(c not in "0123456789abcdef" for c in token):
        return None
    return token, int(sequence)


class ReplayBuffer:
    """The newest events of one stream, by sequence, bounded by `max_events` and `max_bytes`."""

    __slots__ = ("_events", "bytes", "last", "max_bytes", "max_events", "token")

    def __init__(self, token: str, *, max_events: int, max_bytes: int) -> None:
        self.token = token
        self.max_events = max(1, max_events)
        self.max_bytes = max_bytes
        self._events: deque[Event] = deque()
        self.bytes = 0
        self.last = 0

    def __len__(self) -> int:
        return len(self._events)

    def append(self, data: bytes, final: bool) -> Event:
        """Number and keep one event; the oldest ones go when a bound is passed."""
        self.last += 1
        event = (data, final, self.last)
        events = self._events
        events.append(event)
        self.bytes += len(data)
        while len(events) > self.max_events or (self.bytes > self.max_bytes and len(events) > 1):
            self.bytes -= len(events.popleft()[0])
        return event

    def after(self, sequence: int) -> list[Event] | Unresolved:
        """The events after `sequence` (all of them, in order), or why there are none to give."""
        if sequence > self.last:
            return UNKNOWN  # an id this stream never sent: forged or another stream's
        events = self._events
        first = events[0][2] if events else self.last + 1
        if sequence + 1 < first:
            return EXPIRED
        return list(islice(events, sequence + 1 - first, None))
