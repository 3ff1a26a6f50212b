"""What the policy knows of the upstream's primitives: listed once before serving, re-listed on list_changed.

Why before serving: a hidden tool must already look missing on the first call, and a tool nobody listed
yet must not be judged on default metadata. The lists are internal requests of the router (their replies
never reach a client), walked page by page with a bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from interceptors.protocol.messages import Kind, Message

from .router import Action, Dropped, Router
from .router.state import with_local_tools

logger = logging.getLogger("interceptors.gateway")

LISTS: Final = (
    ("tools/list", "tools", "tools"),
    ("prompts/list", "prompts", "prompts"),
    ("resources/list", "resources", "resources"),
    ("resources/templates/list", "resources", "resources"),
)
"""(method, the capability that declares it, the `list_changed` kind that invalidates it)."""
MAX_PAGES: Final = 100


class Catalog:
    """Teaches `learn(method, result)` (the policy engine's) every page of every list the upstream declares."""

    def __init__(self, router: Router, learn: Callable[[str, Any], None]) -> None:
        self.router = router
        self.learn = learn
        self.local_tools = router.config.local_tools  # the gateway's own tools, on the first tools/list page
        self.outstanding = 0
        self.on_settled: Callable[[], None] | None = None
        self._schemas: dict[str, Any] = {}
        self._listing: dict[str, Any] = {}  # the tools of a listing still being walked, swapped in at its end

    def tool_schema(self, name: str) -> Any | None:
        """The input schema of the upstream's tool `name` as last listed (None: no such tool)."""
        return self._schemas.get(name)

    @property
    def settled(self) -> bool:
        return self.outstanding == 0

    def knows_tool(self, name: str) -> bool:
        """Whether the upstream listed tool `name` last time (a hidden tool too: only the policy hides it)."""
        return name in self._schemas

    def prime(self, kind: str | None = None, then: Callable[[], list[Action]] | None = None) -> list[Action]:
        """Internal requests for every declared list (of `kind` only, when given); `then()` once every page
        of this listing is in (or failed), so a shell can hold back what must follow the new catalog."""
        capabilities = self.router.upstream.capabilities
        listing = _Listing(then)
        actions: list[Action] = []
        for method, capability, changed in LISTS:
            if capability in capabilities and (kind is None or kind == changed):
                actions += self._page(method, None, 0, listing)
        if listing.outstanding == 0 and then is not None:
            actions += then()  # nothing to list (or the upstream is not ready): at once
        return actions

    def _page(self, method: str, cursor: str | None, page: int, listing: _Listing) -> list[Action]:
        params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
        actions = self.router.upstream_request(
            method, params, lambda reply: self._on_page(method, page, reply, listing)
        )
        if not any(isinstance(action, Dropped) for action in actions):
            self.outstanding += 1
            listing.outstanding += 1
        return actions

    def _on_page(self, method: str, page: int, reply: Message, listing: _Listing) -> list[Action]:
        self.outstanding -= 1
        listing.outstanding -= 1
        actions: list[Action] = []
        if reply.kind is Kind.RESPONSE:
            result = reply.result
            if method == "tools/list" and page == 0 and self.local_tools:
                result = with_local_tools(result, self.local_tools)
            self.learn(method, result)
            cursor = result.get("nextCursor")
            more = isinstance(cursor, str) and bool(cursor) and page + 1 < MAX_PAGES
            if method == "tools/list":
                self._learn_schemas(result, page, more)
            if more:
                actions += self._page(method, cursor, page + 1, listing)
        else:
            logger.warning("could not list %s upstream", method)
        if listing.outstanding == 0 and listing.then is not None:
            then, listing.then = listing.then, None
            actions += then()
        if self.settled and self.on_settled is not None:
            self.on_settled()
        return actions

    def _learn_schemas(self, result: dict[str, Any], page: int, more: bool) -> None:
        if page == 0:
            self._listing = {}
        tools = result.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                self._listing[tool["name"]] = tool.get("inputSchema")
        if not more:
            self._schemas, self._listing = self._listing, {}


class _Listing:
    """One `prime`: its pages still out, and what to do once none is."""

    __slots__ = ("outstanding", "then")

    def __init__(self, then: Callable[[], list[Action]] | None) -> None:
        self.outstanding = 0
        self.then = then
