"""Output slots: what the router sends each session, released in the order it was decided on.

A message out may wait for its chain (a progress line, a result), yet a later message of the same request must
never overtake it. So each stream (one per downstream request, and one per session for what belongs to no
request) is a FIFO of slots: a slot opens when the router decides a message will go out, is filled (or left
empty: dropped) when its chain answers, and leaves only from the head, once it and every slot before it are done.

Pure: bytes in, `SendDownstream` out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from interceptors.protocol.messages import RequestId

from .actions import Action, SendDownstream, SessionId

StreamKey = tuple[SessionId, RequestId | None]
"""A session and the downstream request a stream carries (None: the session's own stream)."""


@dataclass(slots=True)
class Slot:
    """One message's place in its stream."""

    data: bytes | None = None
    """The serialised message; None while its chain runs, or for good when it was dropped."""
    done: bool = False
    final: bool = False
    """The reply that ends its request."""
    outgoing: RequestId | None = None
    """The id of the request to the client it holds (a shell that cannot deliver it says so)."""


class Streams:
    """Every session's output streams, by `StreamKey`; a stream with nothing left in it is removed."""

    __slots__ = ("_streams",)

    def __init__(self) -> None:
        self._streams: dict[StreamKey, deque[Slot]] = {}

    def open(self, key: StreamKey, data: bytes | None = None) -> Slot:
        """A new slot at the tail of stream `key`: ready at once when `data` is given, else when filled."""
        slot = Slot(data, data is not None)
        self._streams.setdefault(key, deque()).append(slot)
        return slot

    def flush(self, key: StreamKey) -> list[Action]:
        """Release the done slots at the head of stream `key`, in order (an empty slot sends nothing)."""
        stream = self._streams.get(key)
        if stream is None:
            return []
        out: list[Action] = []
        while stream and stream[0].done:
            slot = stream.popleft()
            if slot.data is not None:
                out.append(SendDownstream(key[0], slot.data, key[1], slot.final, slot.outgoing))
        if not stream:
            del self._streams[key]
        return out

    def drop_session(self, session: SessionId) -> None:
        """The session left: its streams go, whatever they still hold."""
        for key in [key for key in self._streams if key[0] == session]:
            del self._streams[key]

    def __len__(self) -> int:
        """Streams with a slot still waiting."""
        return len(self._streams)

    def __contains__(self, key: object) -> bool:
        return key in self._streams
