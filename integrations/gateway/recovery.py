"""When the upstream is lost: a dead one restarted (`--restart-upstream`), and what a new upstream session
needs so the clients' sessions go on as if nothing happened.

`SupervisedUpstream` is the upstream shell the runner sees with `--restart-upstream`: its `lines()` are the
current upstream's, then `DOWN` when it dies (the runner answers what was in flight and refuses new
requests at once), then — after a backoff, at most `max_restarts` starts within `window_s` — `RESTARTED`
with a new one (the runner redoes the handshake). Past the bound `lines()` ends: the gateway exits 1.

`Renewal` is what a new upstream session (a restart, or an HTTP session the server had forgotten) needs
once it is ready: the resources the gateway's clients still subscribe to, subscribed again; the log
level the clients asked for, set again; the catalog read again and compared with what it was, and a
`list_changed` for each kind that differs (so clients, and the policy's catalog, learn it again).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio
import orjson

from interceptors.protocol.eras import Era
from interceptors.protocol.messages import Kind, Message
from interceptors.protocol.methods import METHODS, Channel

from .router import Action, Dropped, Router

logger = logging.getLogger("interceptors.gateway")


class Renewed:
    """In an upstream's `lines()`: a new upstream session is open (the server had forgotten the old one)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "RENEWED"


class UpstreamDown:
    """In `SupervisedUpstream.lines()`: the upstream died; a replacement is being started."""

    __slots__ = ()


class UpstreamRestarted:
    """In `SupervisedUpstream.lines()`: a replacement upstream runs; its handshake is still to be done."""

    __slots__ = ()


RENEWED: Final = Renewed()
DOWN: Final = UpstreamDown()
RESTARTED: Final = UpstreamRestarted()

DEFAULT_MAX_RESTARTS: Final = 5
RESTART_WINDOW_S: Final = 60.0


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """At most `max_restarts` starts within `window_s`; the pause before each doubles from `first_delay_s`
    to `max_delay_s`, and falls back once a restarted upstream has completed its handshake."""

    max_restarts: int = DEFAULT_MAX_RESTARTS
    window_s: float = RESTART_WINDOW_S
    first_delay_s: float = 0.5
    max_delay_s: float = 8.0


class SupervisedUpstream:
    """The current upstream shell, replaced by `start()` when it dies (once the first one was ready)."""

    def __init__(
        self,
        current: Any,
        start: Callable[[], Awaitable[Any]],
        policy: RestartPolicy | None = None,
        *,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self.current: Any = current
        self.start = start
        self.policy = policy or RestartPolicy()
        self.on_restart = on_restart
        self.restartable = False
        """Set by the runner once the first upstream is ready: one that never started is not restarted."""
        self.restarts = 0
        self._starts: deque[float] = deque()
        self._failures = 0  # starts in a row whose upstream never became ready
        self._closing = False
        self._retiring: set[asyncio.Task[None]] = set()

    @property
    def max_line(self) -> Any:
        return getattr(self.current, "max_line", None)

    def send(self, data: bytes, request_id: int | None = None) -> None:
        if self.current is not None:
            self.current.send(data, request_id)

    async def drain(self) -> None:
        if self.current is not None:
            await self.current.drain()

    def ready(self) -> None:
        """The current upstream completed its handshake: it may be restarted, and the backoff falls back."""
        self.restartable = True
        self._failures = 0

    def fail(self) -> None:
        """The router gave up on the current upstream (its handshake failed): stop it, so it is replaced."""
        current = self.current
        if current is not None:
            task = asyncio.get_running_loop().create_task(_quietly_close(current))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    async def lines(self) -> Any:
        while True:
            current = self.current
            if current is not None:
                async for item in current.lines():
                    yield item
            if self._closing or not self.restartable:
                return
            yield DOWN
            self.current = None
            await _quietly_close(current)
            replacement = await self._replacement()
            if replacement is None:
                return
            self.current = replacement
            yield RESTARTED

    async def _replacement(self) -> Any:
        policy = self.policy
        while not self._closing:
            now = asyncio.get_running_loop().time()
            while self._starts and now - self._starts[0] > policy.window_s:
                self._starts.popleft()
            if len(self._starts) >= policy.max_restarts:
                logger.error(
                    "the upstream server died again: %d restarts within %g s, giving up",
                    policy.max_restarts,
                    policy.window_s,
                )
                return None
            delay = min(policy.first_delay_s * 2**self._failures, policy.max_delay_s)
            self._failures += 1
            await anyio.sleep(delay)
            self._starts.append(asyncio.get_running_loop().time())
            try:
                replacement = await self.start()
            except Exception as exc:  # e.g. the command cannot be started any more: try again, bounded
                logger.warning("could not restart the upstream server: %s", type(exc).__name__)  # never its text
                continue
            self.restarts += 1
            logger.warning("restarted the upstream server (restart %d)", self.restarts)
            if self.on_restart is not None:
                self.on_restart()
            return replacement
        return None

    async def aclose(self) -> Any:
        self._closing = True
        for task in list(self._retiring):
            with contextlib.suppress(Exception):
                await task
        if self.current is not None:
            return await self.current.aclose()
        return None


async def _quietly_close(upstream: Any) -> None:
    if upstream is None:
        return
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        await upstream.aclose()


LISTS: Final = tuple(
    (row.name, row.capability, row.items, row.capability)
    for row in map(METHODS.__getitem__, METHODS)
    if row.channel is Channel.LIST and row.capability is not None and row.items is not None
)
"""(method, the capability that declares it, the result's list, the `list_changed` kind it belongs to): the method
table's list rows."""
MAX_PAGES: Final = 100


class Renewal:
    """What a new upstream session needs (see the module's docstring). `snapshot()` reads the catalog as
    it is (at start, and after each `list_changed`); `renewed()` after a new session is ready; `changed`
    gets each kind whose catalog differs from the last snapshot (the runner relays its `list_changed`)."""

    def __init__(self, router: Router, changed: Callable[[str], None]) -> None:
        self.router = router
        self.changed = changed
        self.prints: dict[str, str | None] = {}
        """A digest of every item of each list, by method (None: it could not be read)."""
        self._walking: dict[str, int] = {}  # walks of each method not finished yet

    def snapshot(self, kind: str | None = None) -> list[Action]:
        return self._walk(kind, compare=False)

    def renewed(self) -> list[Action]:
        router = self.router
        actions: list[Action] = []
        uris = sorted(router.subscriptions.uris())
        for uri in uris:
            actions += router.upstream_request("resources/subscribe", {"uri": uri}, _logged("resources/subscribe"))
        for method, walking in self._walking.items():
            if walking:  # a walk the old session cut short: what the clients last saw is unknown
                self.prints[method] = None
        self._walking.clear()
        level = router.upstream.log_level
        if level is not None and router.upstream.era is Era.HANDSHAKE and "logging" in router.upstream.capabilities:
            actions += router.upstream_request("logging/setLevel", {"level": level}, _logged("logging/setLevel"))
        return actions + self._walk(None, compare=True)

    def _walk(self, kind: str | None, *, compare: bool) -> list[Action]:
        capabilities = self.router.upstream.capabilities
        actions: list[Action] = []
        kinds_done: dict[str, int] = {}
        walks = [entry for entry in LISTS if entry[1] in capabilities and (kind is None or kind == entry[3])]
        for _, _, _, changed in walks:
            kinds_done[changed] = kinds_done.get(changed, 0) + 1
        differs: set[str] = set()
        remaining = [len(walks)]

        def finished(method: str, changed: str, items: list[Any] | None) -> None:
            if self._walking.get(method):
                self._walking[method] -= 1
            digest = (
                None if items is None else hashlib.sha256(orjson.dumps(items, option=orjson.OPT_SORT_KEYS)).hexdigest()
            )
            before = self.prints.get(method)
            self.prints[method] = digest
            if compare and (digest is None or before is None or digest != before):
                differs.add(changed)
            kinds_done[changed] -= 1
            if kinds_done[changed] == 0 and changed in differs:
                self.changed(changed)
            remaining[0] -= 1
            if compare and remaining[0] == 0:
                outcome = ", ".join(sorted(differs)) + " differ" if differs else "unchanged"
                logger.info("the catalog of the new upstream session: %s", outcome)

        for method, _, key, changed in walks:
            self._walking[method] = self._walking.get(method, 0) + 1
            actions += self._page(method, key, None, 0, [], functools.partial(finished, method, changed))
        return actions

    def _page(
        self,
        method: str,
        key: str,
        cursor: str | None,
        page: int,
        items: list[Any],
        done: Callable[[list[Any] | None], None],
    ) -> list[Action]:
        params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}

        def then(reply: Message) -> list[Action]:
            if reply.kind is not Kind.RESPONSE:
                done(None)
                return []
            listed = reply.result.get(key)
            items.extend(listed if isinstance(listed, list) else [])
            next_cursor = reply.result.get("nextCursor")
            if isinstance(next_cursor, str) and next_cursor and page + 1 < MAX_PAGES:
                return self._page(method, key, next_cursor, page + 1, items, done)
            done(items)
            return []

        actions = self.router.upstream_request(method, params, then)
        if any(isinstance(action, Dropped) for action in actions):
            done(None)
        return actions


_Done = Callable[[list[Any] | None], None]


def _digest(items: list[Any]) -> str:
    return hashlib.sha256(orjson.dumps(items, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _logged(method: str) -> Callable[[Message], list[Action]]:
    def then(reply: Message) -> list[Action]:
        if reply.kind is not Kind.RESPONSE:
            logger.warning("the new upstream session refused %s", method)
        return []

    return then


LIST_CHANGED_METHODS: Final = {
    row.capability: row.name
    for row in map(METHODS.__getitem__, METHODS)
    if row.channel is Channel.LIST_CHANGED and row.capability is not None
}
