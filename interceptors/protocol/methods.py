"""The one table of MCP methods: what every layer needs to know about each request and notification.

Why one table: which methods are calls, which key names their target, which are safe to send twice, which
results carry caching hints, which channel a message is and which built-in stage sees it used to be written out
in nine lists across eight modules, and adding a method meant finding all of them. Every such list is now
derived from `METHODS` (`MethodTable.names`, `MethodTable.mapping`); a test derives each stage's and the
router's method set from it and fails on a method the table does not know.

Pure: no I/O, no MCP SDK. The SDK publishes its own method sets (`mcp_types.methods`); a test checks that
the table knows every method the SDK does and that the caching hints agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypeVar

SERVER_INFO_EVENT: Final = "gateway/initialize"
"""The event a gateway runs the initialize (or discover) result it relays under: SEP-2624 gives `initialize` no
event, yet its `instructions` and `serverInfo` are text a model reads, written by the server behind the gateway."""


_T = TypeVar("_T")


class Sender(StrEnum):
    """Who sends the message: the client, the server, or either side (`ping`, progress, cancellation)."""

    CLIENT = "client"
    SERVER = "server"
    EITHER = "either"


class Channel(StrEnum):
    """What a message is to the chain: a request, a result of some shape, or a side channel."""

    REQUEST = "request"
    RESULT = "result"
    INITIALIZE = "initialize"
    LIST = "list"
    CONTENTS = "contents"
    MESSAGES = "messages"
    COMPLETION = "completion"
    TASK = "task"
    ERROR = "error"
    PROGRESS = "progress"
    LOG = "log"
    RESOURCE_UPDATED = "resources/updated"
    TASK_STATUS = "tasks/status"
    LIST_CHANGED = "list_changed"
    SERVER_REQUEST = "server-request"
    CLIENT_RESULT = "client-result"


class Stage(StrEnum):
    """The built-in stages' interceptors, by what they see (doc/DESIGN.md, "The built-in stages")."""

    POLICY = "policy"
    """The access decision, rate limits and audit of a call (request phase)."""
    POLICY_LISTS = "policy-lists"
    """Hiding what the principal may not see in a list result."""
    VAULT = "vault"
    """Tokens back to real values in the request, restored values back to tokens in the response."""
    OUTPUT = "transforms/output"
    """Content results: sanitize, redact, project, annotate, cap (and the request's secret guard)."""
    METADATA = "transforms/metadata"
    """Results that are metadata (lists, server info, task records, relayed logs and updates): scrubbed."""
    OUTBOUND = "transforms/outbound"
    """A server's request to the client: its params scrubbed on the way out."""
    ANSWERS = "transforms/answers"
    """The client's answer to a server's request: judged by the secret guard."""


@dataclass(frozen=True, slots=True)
class Method:
    """One row: a method and everything a layer decides by its name."""

    name: str
    sender: Sender
    notification: bool = False
    call: bool = False
    """A context operation on one primitive (or reference) that the policy decides on."""
    target: str | None = None
    """The params member naming the primitive the request acts on (`name`, `uri`)."""
    channel: Channel | None = None
    """A client's request: its result's channel; a server's request: SERVER_REQUEST (its answer is a
    CLIENT_RESULT); a notification: its side channel (None: the gateway does not relay it through a chain)."""
    cacheable: bool = False
    """A 2026-07-28 result must carry caching hints (`cacheScope`, `ttlMs`)."""
    retry_safe: bool = False
    """Safe to send again on a new session or connection: reads, lists, idempotent settings."""
    hookable: bool = True
    """A context operation: an interceptor's hook may name it (never lifecycle or the interceptor methods)."""
    server_info: bool = False
    """Its result describes the server (instructions, server info): its chain runs under SERVER_INFO_EVENT."""
    local: bool = False
    """Answered by each hop itself (the handshake is per hop): the router has a handler for it."""
    names_task: bool = False
    """Its params name a task (`taskId`) that only the session (or principal) that made it may reach."""
    capability: str | None = None
    """The capability it belongs to: the client's for a server's request, the server's for list_changed."""
    items: str | None = None
    """A list result's member holding the listed primitives."""
    stages: frozenset[Stage] = frozenset()

    @property
    def response_event(self) -> str | None:
        """The event its result's chain runs under (None: none does)."""
        if self.server_info:
            return SERVER_INFO_EVENT
        return self.name if self.hookable and not self.notification else None


class MethodTable(Mapping[str, Method]):
    """The rows by name, in table order (derived tuples keep that order)."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Iterable[Method]) -> None:
        self._rows: dict[str, Method] = {}
        for row in rows:
            if row.name in self._rows:
                raise ValueError(f"method {row.name!r} is in the table twice")
            self._rows[row.name] = row

    def __getitem__(self, name: str) -> Method:
        return self._rows[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, name: object) -> bool:  # the dict's own, not Mapping's try/except
        return name in self._rows

    def get(self, name: str, default: Method | None = None) -> Method | None:  # type: ignore[override]
        return self._rows.get(name, default)

    def with_rows(self, *rows: Method) -> MethodTable:
        """This table with more rows (a new method is one row; see doc/DESIGN.md)."""
        return MethodTable((*self._rows.values(), *rows))

    def names(self, where: Stage | Callable[[Method], bool]) -> tuple[str, ...]:
        """The methods a stage sees, or that a predicate holds for, in table order."""
        test = (lambda row: where in row.stages) if isinstance(where, Stage) else where
        return tuple(name for name, row in self._rows.items() if test(row))

    def mapping(self, value: Callable[[Method], _T | None]) -> dict[str, _T]:
        """Method -> value for every row where the value is not None, in table order."""
        out: dict[str, _T] = {}
        for name, row in self._rows.items():
            got = value(row)
            if got is not None:
                out[name] = got
        return out

    def response_events(self, stage: Stage) -> tuple[str, ...]:
        """The events a response-phase stage hooks: each row's response event, once, in table order."""
        events: dict[str, None] = {}
        for row in self._rows.values():
            event = row.response_event
            if stage in row.stages and event is not None:
                events.setdefault(event, None)
        return tuple(events)


_CALL_STAGES: Final = frozenset({Stage.POLICY, Stage.VAULT, Stage.OUTPUT})
_LIST_STAGES: Final = frozenset({Stage.POLICY_LISTS, Stage.METADATA})
_CLIENT, _SERVER, _EITHER = Sender.CLIENT, Sender.SERVER, Sender.EITHER

METHODS: Final = MethodTable(
    (
        # Calls: the policy decides, the vault reverses and restores, the transforms judge and rewrite.
        Method("tools/call", _CLIENT, call=True, target="name", channel=Channel.RESULT, stages=_CALL_STAGES),
        Method(
            "resources/read",
            _CLIENT,
            call=True,
            target="uri",
            channel=Channel.CONTENTS,
            cacheable=True,
            retry_safe=True,
            stages=_CALL_STAGES,
        ),
        Method(
            "prompts/get",
            _CLIENT,
            call=True,
            target="name",
            channel=Channel.MESSAGES,
            retry_safe=True,
            stages=_CALL_STAGES,
        ),
        Method(
            "completion/complete", _CLIENT, call=True, channel=Channel.COMPLETION, retry_safe=True, stages=_CALL_STAGES
        ),
        # Lists: the policy hides, the transforms scrub descriptions.
        Method(
            "tools/list",
            _CLIENT,
            channel=Channel.LIST,
            cacheable=True,
            retry_safe=True,
            capability="tools",
            items="tools",
            stages=_LIST_STAGES,
        ),
        Method(
            "prompts/list",
            _CLIENT,
            channel=Channel.LIST,
            cacheable=True,
            retry_safe=True,
            capability="prompts",
            items="prompts",
            stages=_LIST_STAGES,
        ),
        Method(
            "resources/list",
            _CLIENT,
            channel=Channel.LIST,
            cacheable=True,
            retry_safe=True,
            capability="resources",
            items="resources",
            stages=_LIST_STAGES,
        ),
        Method(
            "resources/templates/list",
            _CLIENT,
            channel=Channel.LIST,
            cacheable=True,
            retry_safe=True,
            capability="resources",
            items="resourceTemplates",
            stages=_LIST_STAGES,
        ),
        # The handshake (per hop): its result describes the server.
        Method(
            "initialize",
            _CLIENT,
            channel=Channel.INITIALIZE,
            hookable=False,
            server_info=True,
            local=True,
            stages=frozenset({Stage.METADATA}),
        ),
        Method(
            "server/discover",
            _CLIENT,
            channel=Channel.INITIALIZE,
            cacheable=True,
            hookable=False,
            server_info=True,
            local=True,
            stages=frozenset({Stage.METADATA}),
        ),
        # Tasks: a stored result is metadata to the output stage; only the task's owner may reach it.
        Method(
            "tasks/get",
            _CLIENT,
            channel=Channel.TASK,
            retry_safe=True,
            names_task=True,
            stages=frozenset({Stage.METADATA}),
        ),
        Method(
            "tasks/result",
            _CLIENT,
            channel=Channel.TASK,
            retry_safe=True,
            names_task=True,
            stages=frozenset({Stage.METADATA}),
        ),
        Method("tasks/list", _CLIENT, channel=Channel.TASK, retry_safe=True, stages=frozenset({Stage.METADATA})),
        Method("tasks/cancel", _CLIENT, channel=Channel.TASK, names_task=True, stages=frozenset({Stage.METADATA})),
        # Settings and subscriptions: they carry what the gateway relays outside any request (logs, updates).
        Method(
            "logging/setLevel",
            _CLIENT,
            channel=Channel.RESULT,
            retry_safe=True,
            local=True,
            stages=frozenset({Stage.METADATA}),
        ),
        Method(
            "resources/subscribe", _CLIENT, channel=Channel.RESULT, retry_safe=True, stages=frozenset({Stage.METADATA})
        ),
        Method("resources/unsubscribe", _CLIENT, channel=Channel.RESULT, retry_safe=True),
        Method("subscriptions/listen", _CLIENT, channel=Channel.RESULT, local=True),
        Method("ping", _EITHER, channel=Channel.RESULT, retry_safe=True, hookable=False, local=True),
        # SEP-2624's own methods: never a context operation.
        Method("interceptors/list", _CLIENT, channel=Channel.RESULT, hookable=False),
        Method("interceptor/invoke", _CLIENT, channel=Channel.RESULT, hookable=False),
        # Requests a server sends the client, and the client capability each needs.
        Method(
            "sampling/createMessage",
            _SERVER,
            channel=Channel.SERVER_REQUEST,
            capability="sampling",
            stages=frozenset({Stage.OUTBOUND, Stage.ANSWERS}),
        ),
        Method(
            "elicitation/create",
            _SERVER,
            channel=Channel.SERVER_REQUEST,
            capability="elicitation",
            stages=frozenset({Stage.OUTBOUND, Stage.ANSWERS}),
        ),
        Method(
            "roots/list",
            _SERVER,
            channel=Channel.SERVER_REQUEST,
            capability="roots",
            stages=frozenset({Stage.ANSWERS}),
        ),
        # Notifications: lifecycle, and the side channels the gateway relays through the chain.
        Method("notifications/initialized", _CLIENT, notification=True, hookable=False),
        Method("notifications/cancelled", _EITHER, notification=True, hookable=False),
        Method("notifications/roots/list_changed", _CLIENT, notification=True, hookable=False),
        Method("notifications/progress", _EITHER, notification=True, hookable=False, channel=Channel.PROGRESS),
        Method("notifications/message", _SERVER, notification=True, hookable=False, channel=Channel.LOG),
        Method(
            "notifications/resources/updated",
            _SERVER,
            notification=True,
            hookable=False,
            channel=Channel.RESOURCE_UPDATED,
        ),
        Method("notifications/tasks/status", _SERVER, notification=True, hookable=False, channel=Channel.TASK_STATUS),
        Method(
            "notifications/tools/list_changed",
            _SERVER,
            notification=True,
            hookable=False,
            channel=Channel.LIST_CHANGED,
            capability="tools",
        ),
        Method(
            "notifications/prompts/list_changed",
            _SERVER,
            notification=True,
            hookable=False,
            channel=Channel.LIST_CHANGED,
            capability="prompts",
        ),
        Method(
            "notifications/resources/list_changed",
            _SERVER,
            notification=True,
            hookable=False,
            channel=Channel.LIST_CHANGED,
            capability="resources",
        ),
        Method("notifications/subscriptions/acknowledged", _SERVER, notification=True, hookable=False),
        Method("notifications/elicitation/complete", _SERVER, notification=True, hookable=False),
    )
)
"""Every MCP method and notification the project knows (doc/DESIGN.md, "Adding a method")."""
