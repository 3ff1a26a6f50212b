"""Resource subscriptions, shared between sessions, and the filters of 2026-07-28 listen streams.

The upstream is one hop for every session, so a resource is subscribed upstream once, by its first holder,
and released upstream when its last holder unsubscribes or leaves. A subscription counts only once the
client is told it holds it (its subscribe passed its response chain); updates that come while that chain
runs wait here and are released only if it passes.

Pure: the book says when the upstream must be asked or told; the router sends the requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .actions import SessionId

LIST_KINDS: Final = ("tools", "prompts", "resources")
"""The lists whose `list_changed` a listen stream may ask for (`<kind>ListChanged`)."""


class Subscriptions:
    """Who holds which resource, and the updates waiting for a subscribe's chain."""

    __slots__ = ("_holders", "_of", "_waiting")

    def __init__(self) -> None:
        self._holders: dict[str, set[SessionId]] = {}
        self._of: dict[SessionId, set[str]] = {}
        self._waiting: dict[SessionId, dict[str, list[dict[str, Any]]]] = {}

    def hold(self, session: SessionId, uri: str) -> bool:
        """`session` holds `uri` now; True when it is the first holder (the upstream must be asked)."""
        holders = self._holders.get(uri)
        first = not holders
        if holders is None:
            holders = self._holders[uri] = set()
        holders.add(session)
        self._of.setdefault(session, set()).add(uri)
        return first

    def release(self, session: SessionId, uri: object) -> bool:
        """`session` no longer holds `uri`; True when it was the last holder (the upstream must be told)."""
        if not isinstance(uri, str):
            return False
        mine = self._of.get(session)
        if mine is not None:
            mine.discard(uri)
        holders = self._holders.get(uri)
        if holders is None:
            return False
        holders.discard(session)
        if holders:
            return False
        del self._holders[uri]
        return True

    def held(self, uri: object) -> bool:
        """Whether any session holds `uri`."""
        return isinstance(uri, str) and bool(self._holders.get(uri))

    def holds(self, session: SessionId, uri: str) -> bool:
        return uri in self._of.get(session, ())

    def holders(self, uri: object) -> list[SessionId]:
        """The sessions holding `uri`, in a stable order."""
        return sorted(self._holders.get(uri, ())) if isinstance(uri, str) else []

    def of(self, session: SessionId) -> list[str]:
        """The resources `session` holds."""
        return list(self._of.get(session, ()))

    def uris(self) -> set[str]:
        """Every resource some session holds (what a new upstream session must be asked for again)."""
        return set(self._holders)

    def wait(self, session: SessionId, uri: str) -> None:
        """`session`'s subscribe to `uri` is in its response chain: updates for it wait for the outcome."""
        self._waiting.setdefault(session, {}).setdefault(uri, [])

    def defer(self, uri: object, update: dict[str, Any], delivered: Iterable[SessionId]) -> bool:
        """An update for `uri`: kept for each session whose subscribe is still deciding (and that did not get it
        as a holder); True when any session waits for `uri`."""
        if not isinstance(uri, str):
            return False
        skip = set(delivered)
        waited = False
        for session, waiting in self._waiting.items():
            held = waiting.get(uri)
            if held is not None:
                waited = True
                if session not in skip:
                    held.append(update)
        return waited

    def take(self, session: SessionId, uri: str) -> list[dict[str, Any]]:
        """The subscribe's chain answered: the updates that waited for it (sent if it passed)."""
        waiting = self._waiting.get(session)
        if waiting is None:
            return []
        updates = waiting.pop(uri, [])
        if not waiting:
            del self._waiting[session]
        return updates

    def session_closed(self, session: SessionId) -> list[str]:
        """The session left: its waiting updates go; the resources it held are returned, to release each."""
        self._waiting.pop(session, None)
        return list(self._of.pop(session, ()))


@dataclass(frozen=True, slots=True)
class Listen:
    """One `subscriptions/listen` stream: what the client asked for that the router honors."""

    kinds: frozenset[str]  # "tools", "prompts", "resources": their list_changed
    uris: frozenset[str]  # resources/updated for these


def honor(wanted: Mapping[str, Any], offered: Mapping[str, Any]) -> tuple[dict[str, Any], Listen]:
    """A listen request's `notifications` filter against what the upstream offers: the honored filter (for the
    acknowledgement) and the stream's `Listen`. A kind only when the upstream has that list, resource
    subscriptions only when it can subscribe, each URI once."""
    honored: dict[str, Any] = {}
    kinds: set[str] = set()
    for kind in LIST_KINDS:
        if wanted.get(f"{kind}ListChanged") is True and isinstance(offered.get(kind), dict):
            honored[f"{kind}ListChanged"] = True
            kinds.add(kind)
    uris = wanted.get("resourceSubscriptions")
    resources = offered.get("resources")
    can_subscribe = isinstance(resources, dict) and resources.get("subscribe") is True
    chosen = list(dict.fromkeys(u for u in uris if isinstance(u, str))) if isinstance(uris, list) else []
    if chosen and can_subscribe:
        honored["resourceSubscriptions"] = chosen
    return honored, Listen(frozenset(kinds), frozenset(chosen if can_subscribe else ()))
