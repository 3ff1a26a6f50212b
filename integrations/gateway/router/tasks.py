"""Task ownership: which session (or principal) may reach a task the upstream created.

A task outlives the request that made it, and its id is the upstream's: without a book of owners, any client
could read or cancel another's task by guessing its id. A handshake session sees only the tasks its own
requests created; at 2026-07-28 each exchange is its own session and none stands open, so a modern task is its
principal's, reachable from any later modern exchange of that principal while it is remembered. Bounded, the
oldest forgotten first (as if it expired): `MAX_TASKS_PER_SESSION` per session and per modern principal,
`MAX_TASK_PRINCIPALS` modern principals.

Pure: ids in, answers out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final

from .actions import SessionId

MAX_TASKS_PER_SESSION: Final = 1024
"""Tasks a session's requests created that the router remembers (for ownership); the oldest is forgotten."""
MAX_TASK_PRINCIPALS: Final = 4096
"""2026-07-28 tasks outlive their exchange, remembered per principal; this many principals at most."""


@dataclass(slots=True)
class TaskOwner:
    """Who may see a task the upstream created: its session; at 2026-07-28 (each exchange its own session,
    none standing) any later exchange of the same principal, for as long as the task is remembered."""

    session: SessionId | None  # None: its 2026-07-28 exchange is over
    principal: Hashable
    modern: bool
    method: str  # the request that created it (its per-tool rules follow it)


class TaskBook:
    """The owners of the tasks the upstream created, bounded per session and per modern principal."""

    __slots__ = ("_by_principal", "_by_session", "_owners")

    def __init__(self) -> None:
        self._owners: dict[str, TaskOwner] = {}
        self._by_session: dict[SessionId, deque[str]] = {}  # oldest first
        self._by_principal: dict[Hashable, deque[str]] = {}  # modern only; the most recent principal last

    def remember(self, task_id: str, session: SessionId, principal: Hashable, *, modern: bool, method: str) -> None:
        """Task `task_id` was created by `method` of `session` (a 2026-07-28 one when `modern`)."""
        self._owners[task_id] = TaskOwner(session, principal, modern, method)
        mine = self._by_session.setdefault(session, deque())
        mine.append(task_id)
        if not modern:
            while len(mine) > MAX_TASKS_PER_SESSION:
                self._owners.pop(mine.popleft(), None)
            return
        if len(mine) > MAX_TASKS_PER_SESSION:
            mine.popleft()  # the principal's bound below forgets it
        ids = self._by_principal.pop(principal, None) or deque()
        self._by_principal[principal] = ids
        ids.append(task_id)
        while len(ids) > MAX_TASKS_PER_SESSION:
            self._owners.pop(ids.popleft(), None)
        while len(self._by_principal) > MAX_TASK_PRINCIPALS:
            oldest = next(iter(self._by_principal))
            for forgotten in self._by_principal.pop(oldest):
                self._owners.pop(forgotten, None)

    def visible(self, task_id: object, session: SessionId, principal: Hashable, *, modern: bool) -> bool:
        """Whether `session` (of `principal`, a 2026-07-28 one when `modern`) may reach the task."""
        owner = self._owners.get(task_id) if isinstance(task_id, str) else None
        if owner is None:
            return False
        if owner.session == session:
            return True
        return owner.modern and modern and owner.principal == principal

    def owner(self, task_id: object) -> TaskOwner | None:
        return self._owners.get(task_id) if isinstance(task_id, str) else None

    def session_closed(self, session: SessionId) -> None:
        """A handshake session's tasks go with it; a modern exchange's stay its principal's."""
        for task_id in self._by_session.pop(session, ()):
            owner = self._owners.get(task_id)
            if owner is not None and owner.session == session:
                if owner.modern:
                    owner.session = None
                else:
                    del self._owners[task_id]

    def clear(self) -> None:
        """The upstream went away, and every task with it (a new upstream does not know them)."""
        self._owners.clear()
        self._by_session.clear()
        self._by_principal.clear()

    def __len__(self) -> int:
        return len(self._owners)
