"""The router: one state machine for every message between downstream sessions and one upstream.

Sans-IO (the h11 idea): the shell hands in bytes and chain outcomes, and gets back `Action`s to perform in
order. Nothing here waits, reads a clock or touches a socket, so the whole protocol is testable with
tables of messages in and actions out (doc/ROUTER.md).

Transitions are looked up, never laddered: a request each hop answers itself in `Router.LOCAL_HANDLERS`, a
forwarded request's way upstream in `SEND_HANDLERS`, its result's special handling in `RESULT_HANDLERS` and
`CHECKED_RESULT_HANDLERS`, a client notification in `CLIENT_NOTIFICATIONS`, an upstream notification or request
in `UPSTREAM_NOTIFICATIONS` / `UPSTREAM_REQUESTS` by method, else by the channel the method table gives it
(`..._CHANNELS`), and a chain's answer in `RESUME` by the type of the continuation record (`continuations.py`)
its ticket waits with. The records it keeps: `model.py`; output
streams: `slots.Streams`; task owners: `tasks.TaskBook`; resource subscriptions: `subscriptions.Subscriptions`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from interceptors import Direction, Phase
from interceptors.codec import dumps_exact
from interceptors.protocol.eras import (
    LATEST_HANDSHAKE,
    LATEST_MODERN,
    LOG_LEVELS,
    MODERN_VERSIONS,
    Era,
    downstream_result,
    level_at_least,
    modern_envelope,
    negotiate,
    upstream_params,
)
from interceptors.protocol.messages import (
    BATCH_REASON,
    BATCH_REASON_2025_03_26,
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LOG_LEVEL_META_KEY,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    Kind,
    Message,
    RequestId,
    parse,
)
from interceptors.protocol.messages import error_object as _error
from interceptors.protocol.methods import METHODS, MethodTable

from .actions import (
    Action,
    AnswerLocally,
    CatalogChanged,
    ChainBlocked,
    ChainOutcome,
    ChainPassed,
    Close,
    Dropped,
    RequestState,
    RunChain,
    SendDownstream,
    SendUpstream,
    SessionId,
)
from .channels import (
    CARRIER_EVENTS,
    LIST_CHANGED,
    SERVER_REQUESTS,
    STREAM_META_KEY,
    Channel,
    MalformedPayload,
    from_side_payload,
    params_from_request_payload,
    request_event,
    request_payload,
    response_event,
    result_channel,
    side_payload,
)
from .continuations import (
    AnswerClient,
    AnswerClientError,
    AnswerFromRouter,
    AnswerUpstream,
    AnswerUpstreamError,
    Continuation,
    DeliverNotification,
    ForwardRequest,
    RelayToClient,
)
from .model import HoldBack, Outgoing, Pending, Session, Upstream, UpstreamPhase
from .slots import StreamKey, Streams
from .subscriptions import Subscriptions, honor
from .tasks import MAX_TASK_PRINCIPALS, MAX_TASKS_PER_SESSION, TaskBook

__all__ = [
    "DEFAULT_MISSING",
    "MAX_TASKS_PER_SESSION",
    "MAX_TASK_PRINCIPALS",
    "MissingAnswer",
    "Router",
    "RouterConfig",
    "UpstreamPhase",
    "with_local_tools",
]

UPSTREAM_CLOSED_MESSAGE: Final = "upstream server closed the connection"
RELAYED_CAPABILITIES: Final = frozenset(SERVER_REQUESTS.values())
"""The client capabilities the gateway can serve upstream: a request of the upstream's goes to a client."""
ALL_RELAYED: Final = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
MAX_HELD_REQUESTS: Final = 16
"""Upstream requests to the client held while no session can take them yet (more are refused at once)."""
REQUEST_TIMEOUT: Final = -32001
"""The SDK's code for a request that got no answer in time."""
TIMEOUT_REASON: Final = "upstream timeout"
BLOCKED_MESSAGE: Final = "blocked by interceptor"
INVALID_RESULT_MESSAGE: Final = "the upstream server returned an invalid result"
INVALID_MUTATION_MESSAGE: Final = "interceptor chain failed"
_NOT_YET_READY: Final = frozenset({UpstreamPhase.IDLE, UpstreamPhase.DISCOVERING, UpstreamPhase.INITIALIZING})
"""Upstream phases in which a client's request or notification waits in the backlog."""

HasWork = Callable[[str, Phase, Direction], bool]
ResultCheck = Callable[[str, dict[str, Any], str | None], dict[str, Any] | None]
"""(method, result, protocol version) -> None when valid, else the error `data` naming what is wrong."""


def _always(event: str, phase: Phase, direction: Direction) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class MissingAnswer:
    """How the upstream answers a request for a primitive it does not have (a hidden one gets the same)."""

    code: int
    message: str  # `{target}` is replaced by the name or URI asked for
    data_key: str | None = None  # when set, data is `{data_key: target}`


DEFAULT_MISSING: Final = {
    (Era.HANDSHAKE, "tools/call"): MissingAnswer(INVALID_PARAMS, "Unknown tool: {target}"),
    (Era.MODERN, "tools/call"): MissingAnswer(INVALID_PARAMS, "Unknown tool: {target}"),
    (Era.HANDSHAKE, "prompts/get"): MissingAnswer(INVALID_PARAMS, "Unknown prompt: {target}"),
    (Era.MODERN, "prompts/get"): MissingAnswer(INVALID_PARAMS, "Unknown prompt: {target}"),
    (Era.HANDSHAKE, "resources/read"): MissingAnswer(-32002, "Resource not found", "uri"),
    (Era.MODERN, "resources/read"): MissingAnswer(INVALID_PARAMS, "Resource not found", "uri"),
}
"""What SDK servers answer; the catalog replaces an entry once it has seen its upstream answer one."""

_STREAMED: Final = {Channel.PROGRESS: "message", Channel.LOG: "data"}
"""The streaming channels a secret can be cut across, and the member that carries their text."""
LISTEN_METHOD: Final = "subscriptions/listen"
SUBSCRIBE_METHOD: Final = "resources/subscribe"
LISTEN_ACK: Final = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_ID_META_KEY: Final = "io.modelcontextprotocol/subscriptionId"


@dataclass(frozen=True, slots=True)
class RouterConfig:
    client_info: dict[str, Any] = field(default_factory=lambda: {"name": "mcp-interceptors-gateway", "version": "0"})
    upstream_era: Era | None = None
    """None: ask `server/discover` first and fall back to `initialize` (what an auto client does)."""
    prefer_handshake: bool = False
    """With `upstream_era=None`: `initialize` first, `server/discover` only when the upstream refuses it. The
    handshake era carries what the router relays only there (list_changed, resources/updated, server requests)."""
    methods: MethodTable = field(default_factory=lambda: METHODS)
    """The method table the router dispatches by: target keys, task ownership, caching hints, and which methods
    the router answers itself (each such row needs a handler in `Router.LOCAL_HANDLERS`)."""
    local_methods: frozenset[str] = frozenset()
    """Methods the shell answers itself (`AnswerLocally`), e.g. the exposed interceptor methods."""
    local_tools: tuple[dict[str, Any], ...] = ()
    """Tools the shell answers itself (their `tools/list` descriptors): added to the first page of the
    upstream's tools/list before its response chain (so the policy can hide them); their calls are
    `AnswerLocally`, outside the chain (the shell asks the policy itself)."""
    extra_capabilities: dict[str, Any] = field(default_factory=dict)
    """Merged into the capabilities mirrored downstream (the interceptors extension, for one)."""
    has_work: HasWork = _always
    """Whether the chain has a plan for (event, phase, direction); False skips the RunChain round trip."""
    missing: dict[tuple[Era, str], MissingAnswer] = field(default_factory=lambda: dict(DEFAULT_MISSING))
    check_result: ResultCheck | None = None
    """The spec check (the shell's: the router knows no schema): every upstream result at the upstream's
    version, and every result a response mutator changed at the client's."""
    hold_back: Callable[[], HoldBack] | None = None
    """A secret cut across two progress (or log) messages of one request: a new hold-back per request and
    channel (`interceptors.transforms.stream.StreamHoldBack`) holds a message whose end could start one until
    the next message or the request's end, and hands each message to the chain with its neighbours' text as
    context (`_meta[STREAM_META_KEY]`): text never moves between messages. None: off (no policy)."""


LocalHandler = Callable[["Router", Session, Message], list[Action]]
"""How the router answers a request it answers itself (a table row with `local=True`)."""
SendHandler = Callable[["Router", int, Pending, "dict[str, Any] | None"], list[Action]]
"""How a forwarded request goes upstream once its request chain passed: (router, key, pending, params)."""
ResultHandler = Callable[["Router", Session, Pending, "dict[str, Any]"], "dict[str, Any]"]
"""What the router does with a forwarded request's result before its response chain (the result it runs)."""
NotificationHandler = Callable[["Router", Session, str, "dict[str, Any]"], list[Action]]
"""A client's notification: (router, session, method, params)."""
UpstreamNotificationHandler = Callable[["Router", str, "dict[str, Any]", "int | None"], list[Action]]
"""An upstream notification: (router, method, params, related request)."""
UpstreamRequestHandler = Callable[["Router", Message, "int | None"], list[Action]]
"""An upstream request: (router, message, related request)."""
Transition = Callable[["Router", Any, ChainOutcome], list[Action]]
"""A chain answered: (router, the continuation record its ticket waited with, the outcome)."""


class Router:
    """`receive_downstream`, `receive_upstream`, `chain_done`, plus session open/close and upstream start/close."""

    LOCAL_HANDLERS: ClassVar[Mapping[str, LocalHandler]] = {}
    """The requests each hop answers itself, by method: set below the class; a subclass may add one."""
    SEND_HANDLERS: ClassVar[Mapping[str, SendHandler]] = {}
    """A forwarded request whose way upstream depends on the router's state (shared subscriptions), by method;
    any other goes as it is (`_send_upstream`)."""
    RESULT_HANDLERS: ClassVar[Mapping[str, ResultHandler]] = {}
    """A forwarded request's result the router reads before its response chain, by method."""
    CHECKED_RESULT_HANDLERS: ClassVar[Mapping[str, ResultHandler]] = {}
    """Likewise, after the spec check (what the router adds of its own is not the upstream's to be checked)."""
    CLIENT_NOTIFICATIONS: ClassVar[Mapping[str, NotificationHandler]] = {}
    """The client notifications the router acts on, by method; any other is dropped."""
    UPSTREAM_NOTIFICATIONS: ClassVar[Mapping[str, UpstreamNotificationHandler]] = {}
    """The upstream notifications the router acts on by method; others by their channel (below), or dropped."""
    UPSTREAM_NOTIFICATION_CHANNELS: ClassVar[Mapping[Channel | None, UpstreamNotificationHandler]] = {}
    """The upstream notifications the router relays, by the side channel the method table gives them."""
    UPSTREAM_REQUESTS: ClassVar[Mapping[str, UpstreamRequestHandler]] = {}
    """The upstream requests the router answers itself, by method; others by their channel (below), or -32601."""
    UPSTREAM_REQUEST_CHANNELS: ClassVar[Mapping[Channel | None, UpstreamRequestHandler]] = {}
    """The upstream requests the router relays to a client (`Channel.SERVER_REQUEST`), by channel."""
    RESUME: ClassVar[Mapping[type, Transition]] = {}
    """What a chain's answer does, by the type of the continuation record its ticket waited with."""

    def __init__(self, config: RouterConfig | None = None) -> None:
        self.config = config or RouterConfig()
        table = self.config.methods
        local = set(table.names(lambda row: row.local and not row.notification))
        if local != set(self.LOCAL_HANDLERS):
            raise ValueError(
                f"the method table's local methods {sorted(local)} and the router's handlers "
                f"{sorted(self.LOCAL_HANDLERS)} differ"
            )
        self._target_keys = table.mapping(lambda row: row.target)
        self._task_methods = frozenset(table.names(lambda row: row.names_task))
        self._cacheable = frozenset(table.names(lambda row: row.cacheable))
        self._channel_of: dict[str, Channel] = table.mapping(lambda row: row.channel)
        self._read_results = frozenset(self.RESULT_HANDLERS) | frozenset(self.CHECKED_RESULT_HANDLERS)
        """The methods whose result the router reads before its response chain (one lookup for the rest)."""
        self.upstream = Upstream()
        self.sessions: dict[SessionId, Session] = {}
        self.pending: dict[int, Pending] = {}  # by upstream id (or by call number before it has one)
        self._by_client: dict[tuple[SessionId, RequestId], int] = {}
        self._by_token: dict[int, int] = {}  # upstream progress token -> call
        self._outgoing: dict[tuple[SessionId, str], Outgoing] = {}
        self._internal: dict[int, Callable[[Message], list[Action]]] = {}
        self._tasks = TaskBook()
        self.subscriptions = Subscriptions()
        self._tickets: dict[int, tuple[SessionId, Continuation]] = {}
        self._streams = Streams()
        self._backlog: list[tuple[SessionId, Message]] = []
        self._held_requests: list[Message] = []
        """Upstream requests to the client (roots, sampling, elicitation) sent while no client could take them
        yet (before or during a handshake): given to the first session that completes it (bounded)."""
        self.declared: dict[str, Any] | None = None
        """The client capabilities the upstream handshake declares: None, all the gateway can relay."""
        self._next_id = 0
        self._next_call = 0
        self._next_ticket = 0
        self._local_tools = frozenset(str(tool.get("name")) for tool in self.config.local_tools)

    # Counters -----------------------------------------------------------------------------------
    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # Upstream lifecycle -------------------------------------------------------------------------
    def start(self, client_capabilities: dict[str, Any] | None = None) -> list[Action]:
        """Open the upstream hop: `server/discover` (modern or auto) or `initialize`.

        `client_capabilities`: what the client declared (a shell with one client that waited for its first
        message); the upstream is told only the ones the gateway can relay (roots, sampling, elicitation), so
        it offers the client what it would offer it directly. Kept for a restart's handshake."""
        if client_capabilities is not None:
            self.declared = {
                key: value
                for key, value in client_capabilities.items()
                if key in RELAYED_CAPABILITIES and isinstance(value, dict)
            }
        self.upstream.restarting = False
        if self.config.upstream_era is Era.HANDSHAKE or (
            self.config.upstream_era is None and self.config.prefer_handshake
        ):
            return self._send_initialize()
        return self._send_discover()

    def _send_discover(self) -> list[Action]:
        self.upstream.phase = UpstreamPhase.DISCOVERING
        envelope = self._upstream_envelope(None)
        return [self._internal_request("server/discover", {"_meta": envelope}, self._on_discover)]

    def _internal_request(
        self, method: str, params: dict[str, Any] | None, then: Callable[[Message], list[Action]] | None = None
    ) -> SendUpstream:
        """A request of the router's own; its reply goes to `then` (None: the reply is not read)."""
        upstream_id = self._new_id()
        self._internal[upstream_id] = then or _unread
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": upstream_id, "method": method}
        if params is not None:
            body["params"] = params
        return SendUpstream(dumps_exact(body), upstream_id)

    def upstream_request(
        self, method: str, params: dict[str, Any] | None, then: Callable[[Message], list[Action]]
    ) -> list[Action]:
        """A request of the shell's own (the catalog re-listing the upstream): its reply goes to `then`, never
        downstream. Sent in the upstream's era (a modern upstream gets the hop's envelope)."""
        if self.upstream.phase is not UpstreamPhase.READY:
            return [Dropped("an internal request while the upstream is not ready", method)]
        if self.upstream.era is Era.MODERN:
            params = upstream_params(params, Era.MODERN, self._upstream_envelope(None), None)
        return [self._internal_request(method, params, then)]

    def _upstream_envelope(self, log_level: str | None) -> dict[str, Any]:
        envelope = {
            PROTOCOL_VERSION_META_KEY: LATEST_MODERN,
            CLIENT_INFO_META_KEY: self.config.client_info,
            CLIENT_CAPABILITIES_META_KEY: {},
        }
        if log_level is not None:
            envelope[LOG_LEVEL_META_KEY] = log_level
        return envelope

    def _on_discover(self, message: Message) -> list[Action]:
        result = message.result if message.kind is Kind.RESPONSE else None
        versions = result.get("supportedVersions") if result is not None else None
        if isinstance(versions, list) and any(v in MODERN_VERSIONS for v in versions):
            assert result is not None
            self.upstream.era = Era.MODERN
            self.upstream.version = next(v for v in MODERN_VERSIONS if v in versions)
            return self._ready(result)
        if self.config.upstream_era is Era.MODERN or self.config.prefer_handshake:
            return self.upstream_closed("the upstream does not speak the 2026-07-28 protocol")
        return self._send_initialize()

    def _send_initialize(self) -> list[Action]:
        self.upstream.phase = UpstreamPhase.INITIALIZING
        params = {
            "protocolVersion": LATEST_HANDSHAKE,
            "capabilities": dict(ALL_RELAYED if self.declared is None else self.declared),
            "clientInfo": self.config.client_info,
        }
        return [self._internal_request("initialize", params, self._on_initialize)]

    def _on_initialize(self, message: Message) -> list[Action]:
        if message.kind is not Kind.RESPONSE:
            if self.config.upstream_era is None and self.config.prefer_handshake:
                return self._send_discover()
            return self.upstream_closed("the upstream refused the handshake")
        result = message.result
        self.upstream.era = Era.HANDSHAKE
        self.upstream.version = (
            result.get("protocolVersion") if isinstance(result.get("protocolVersion"), str) else None
        )
        initialized = SendUpstream(dumps_exact({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return [initialized, *self._ready(result)]

    def _ready(self, result: dict[str, Any]) -> list[Action]:
        up = self.upstream
        up.phase = UpstreamPhase.READY
        capabilities = result.get("capabilities")
        up.capabilities = capabilities if isinstance(capabilities, dict) else {}
        info = result.get("serverInfo")
        if not isinstance(info, dict):  # a 2026-07-28 discover result carries it in the stamp
            meta = result.get("_meta")
            info = meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
        up.server_info = info if isinstance(info, dict) else {}
        instructions = result.get("instructions")
        up.instructions = instructions if isinstance(instructions, str) else None
        actions: list[Action] = []
        backlog, self._backlog = self._backlog, []
        for session_id, message in backlog:
            if session_id in self.sessions:
                actions += self._downstream(self.sessions[session_id], message)
        return actions

    def upstream_closed(self, reason: str = UPSTREAM_CLOSED_MESSAGE, *, restarting: bool = False) -> list[Action]:
        """The upstream went away: every request still waiting is answered, then the shell closes (or, with
        `restarting`, starts another: requests meanwhile get -32603 whose data says so; `start()` again).

        What lived only in the old upstream is forgotten: its tasks (a new upstream does not know them: "Task
        not found", as if they expired) and the requests it had sent the clients (a late answer is dropped)."""
        self.upstream.phase = UpstreamPhase.CLOSED
        self.upstream.restarting = restarting
        self._tasks.clear()
        self._outgoing.clear()
        self._held_requests.clear()  # their upstream is gone: nobody waits for the answers
        actions: list[Action] = []
        for pending in list(self.pending.values()):
            actions += self._final_error(pending, _error(INTERNAL_ERROR, UPSTREAM_CLOSED_MESSAGE))
        for session in self.sessions.values():  # listen streams end gracefully: their result, stamped
            for listen_id in list(session.listens):
                del session.listens[listen_id]
                result = {"_meta": {SUBSCRIPTION_ID_META_KEY: listen_id}}
                data = self._encode_result(listen_id, result)
                actions.append(SendDownstream(session.id, data, listen_id, True))
        backlog, self._backlog = self._backlog, []
        for session_id, message in backlog:
            if message.kind is Kind.REQUEST and message.id is not None:
                actions.append(
                    self._reply_error(session_id, message.id, _error(INTERNAL_ERROR, UPSTREAM_CLOSED_MESSAGE))
                )
        self._internal.clear()
        actions.append(Close(reason))
        return actions

    def awaiting(self, upstream_id: int) -> bool:
        """Whether a request sent upstream with this id still waits for the upstream's reply."""
        if upstream_id in self._internal:
            return True
        pending = self.pending.get(upstream_id)
        return pending is not None and not pending.answered

    def progress_seen(self, upstream_id: int) -> int:
        """How many progress notifications the upstream sent for this request so far (a shell may give a
        request that reports progress more time)."""
        pending = self.pending.get(upstream_id)
        return pending.progress_seen if pending is not None else 0

    def upstream_timeout(self, upstream_id: int, seconds: float) -> list[Action]:
        """The shell's clock ran out for a request sent upstream: it is cancelled upstream and answered
        -32001 (`data.reason` "upstream timeout"); a late reply is dropped. Nothing when it was answered."""
        if not self.awaiting(upstream_id):
            return []
        error = _error(REQUEST_TIMEOUT, "Request timed out", {"reason": TIMEOUT_REASON, "timeoutSeconds": seconds})
        actions: list[Action] = []
        if self.upstream.phase is UpstreamPhase.READY:
            actions.append(_cancel_upstream(upstream_id, TIMEOUT_REASON))
        internal = self._internal.pop(upstream_id, None)
        if internal is not None:
            return actions + internal(parse(dumps_exact({"jsonrpc": "2.0", "id": upstream_id, "error": error})))
        return actions + self._final_error(self.pending[upstream_id], error)

    # Sessions -----------------------------------------------------------------------------------
    def open_session(self, session_id: SessionId, *, context: Any = None, principal: Hashable = None) -> None:
        """A downstream client connected; `context` goes to its chain runs, `principal` bounds log delivery."""
        if session_id in self.sessions:
            raise ValueError(f"session {session_id!r} is already open")
        self.sessions[session_id] = Session(session_id, context, principal)

    def close_session(self, session_id: SessionId) -> list[Action]:
        """The client left: its upstream requests are cancelled, its subscriptions released, its state gone."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return []
        actions: list[Action] = []
        for key, pending in list(self.pending.items()):
            if pending.session == session_id:
                if pending.upstream_id is not None and self.upstream.phase is UpstreamPhase.READY:
                    actions.append(_cancel_upstream(pending.upstream_id))
                self._forget(key, pending)
        for out_key, outgoing in list(self._outgoing.items()):
            if outgoing.session == session_id:
                del self._outgoing[out_key]
                actions.append(_upstream_error(outgoing.upstream_id, _error(INTERNAL_ERROR, "the client went away")))
        for uri in self.subscriptions.session_closed(session_id):
            actions += self._release_subscription(session_id, uri)
        self._tasks.session_closed(session_id)
        self._streams.drop_session(session_id)
        self._backlog = [(sid, message) for sid, message in self._backlog if sid != session_id]
        if self._held_requests and self.sessions and not self._client_may_come():
            actions += self._release_held()  # the session in its handshake left: the others answer, or -32601
        return actions

    def undeliverable(self, session_id: SessionId, down_id: RequestId) -> list[Action]:
        """The shell could not deliver request `down_id` to the client (no stream can carry it: a JSON-only
        response, no GET stream): the upstream's request is answered, never left waiting."""
        outgoing = self._outgoing.pop((session_id, down_id), None) if isinstance(down_id, str) else None
        if outgoing is None:
            return []
        reason = {"reason": "the client has no stream open that can carry this request"}
        return [_upstream_error(outgoing.upstream_id, _error(INTERNAL_ERROR, "Internal error", reason))]

    # Downstream ---------------------------------------------------------------------------------
    def receive_downstream(self, session_id: SessionId, raw: bytes | str) -> list[Action]:
        session = self.sessions.get(session_id)
        if session is None:
            raise KeyError(f"no open session {session_id!r}")
        return self._downstream(session, parse(raw))

    def receive_downstream_message(self, session_id: SessionId, message: Message) -> list[Action]:
        """`receive_downstream` for a message the shell already parsed (HTTP reads the kind and id first)."""
        session = self.sessions.get(session_id)
        if session is None:
            raise KeyError(f"no open session {session_id!r}")
        return self._downstream(session, message)

    def _downstream(self, session: Session, message: Message) -> list[Action]:
        kind = message.kind
        if kind is Kind.INVALID:
            return self._client_invalid(session, message)
        if kind is Kind.RESPONSE or kind is Kind.ERROR:
            return self._client_answer(session, message)
        if self.upstream.phase in _NOT_YET_READY:
            self._backlog.append((session.id, message))
            return []
        if kind is Kind.NOTIFICATION:
            method = message.method
            assert method is not None
            handler = self.CLIENT_NOTIFICATIONS.get(method)
            if handler is None:
                return [Dropped("a client notification the upstream hop does not carry", method)]
            return handler(self, session, method, message.params or {})
        return self._client_request(session, message)

    def _client_invalid(self, session: Session, message: Message) -> list[Action]:
        answered = message.id if message.method is None and isinstance(message.id, str) else None
        if answered is not None and (session.id, answered) in self._outgoing:
            # a malformed answer to a request of the upstream's: the upstream still gets an answer
            outgoing = self._outgoing.pop((session.id, answered))
            assert message.problem is not None
            reason = {"reason": f"the client's answer was malformed: {_reason(message)}"}
            return [_upstream_error(outgoing.upstream_id, _error(INTERNAL_ERROR, "Internal error", reason))]
        if not message.answer_id_known:
            return [Dropped(_reason(message), message.method)]
        assert message.problem is not None
        problem = message.problem
        data = problem.data
        if data.get("reason") == BATCH_REASON and session.version == "2025-03-26":
            data = {**data, "reason": BATCH_REASON_2025_03_26}
        return [self._reply_error(session.id, message.id, _error(problem.code, problem.message, data))]

    def _client_request(self, session: Session, message: Message) -> list[Action]:
        method, client_id = message.method, message.id
        assert method is not None and client_id is not None
        if self.upstream.phase is UpstreamPhase.CLOSED:
            data = {"reason": "the upstream server is restarting", "retry": True} if self.upstream.restarting else None
            return [self._reply_error(session.id, client_id, _error(INTERNAL_ERROR, UPSTREAM_CLOSED_MESSAGE, data))]
        if (session.id, client_id) in self._by_client or client_id in session.listens:
            reason = {"reason": "this id is already in use by a request in flight"}
            return [self._reply_error(session.id, client_id, _error(INVALID_REQUEST, "Invalid Request", reason))]
        era = self._era_of(session, message)
        if isinstance(era, dict):
            return [self._reply_error(session.id, client_id, era)]
        handler = self.LOCAL_HANDLERS.get(method)
        if handler is not None:
            return handler(self, session, message)
        if method in self.config.local_methods or (
            method == "tools/call" and self._local_tools and self._target(method, message.params) in self._local_tools
        ):
            return [AnswerLocally(session.id, client_id, method, message.params)]
        if method in self._task_methods and not self._owns_task(session, message.params):
            target = (message.params or {}).get("taskId")
            return [self._reply_error(session.id, client_id, _error(INVALID_PARAMS, f"Task not found: {target}"))]
        return self._forward_request(session, message, era)

    def _era_of(self, session: Session, message: Message) -> Era | dict[str, Any]:
        """The request's era, fixing the session's on its first request; an error object when it is wrong."""
        modern = message.protocol_version is not None
        if session.probing and not modern and message.method == "initialize":
            # The probe's fallback: the discover reply goes unread, the session starts over in the handshake era.
            session.era, session.version, session.capabilities, session.probing = None, None, {}, False
        if session.era is None:
            if message.method == "initialize":
                session.era = Era.HANDSHAKE
            elif modern:
                session.era = Era.MODERN
                session.probing = message.method == "server/discover"
            elif message.method != "ping":
                return _error(
                    INVALID_REQUEST, "Invalid Request", {"reason": "initialize first, or send the 2026-07-28 envelope"}
                )
            else:
                return Era.HANDSHAKE
        if session.era is Era.MODERN:
            return self._modern_request(session, message)
        return session.era

    def _modern_request(self, session: Session, message: Message) -> Era | dict[str, Any]:
        """A 2026-07-28 request: its envelope checked, the session's version and capabilities its."""
        if message.method != "server/discover":
            session.probing = False
        version, problem = modern_envelope(message.params)
        if problem is not None:
            return _error(INVALID_PARAMS, problem)
        if version not in MODERN_VERSIONS:
            return _error(
                -32022, "Unsupported protocol version", {"supported": list(MODERN_VERSIONS), "requested": version}
            )
        meta = message.meta or {}
        session.version = version
        session.capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) or {}
        return Era.MODERN

    def _mirrored_capabilities(self) -> dict[str, Any]:
        capabilities = dict(self.upstream.capabilities)
        for key, value in self.config.extra_capabilities.items():
            if isinstance(value, dict) and isinstance(capabilities.get(key), dict):
                capabilities[key] = {**capabilities[key], **value}
            else:
                capabilities[key] = value
        return capabilities

    # Requests each hop answers itself (LOCAL_HANDLERS) ------------------------------------------
    def _answer_initialize(self, session: Session, message: Message) -> list[Action]:
        assert message.id is not None
        params = message.params or {}
        if session.initialized or session.version is not None:
            reason = {"reason": "initialize was already sent"}
            return [self._reply_error(session.id, message.id, _error(INVALID_REQUEST, "Invalid Request", reason))]
        session.version = negotiate(params.get("protocolVersion"))
        capabilities = params.get("capabilities")
        session.capabilities = capabilities if isinstance(capabilities, dict) else {}
        result: dict[str, Any] = {
            "protocolVersion": session.version,
            "capabilities": self._mirrored_capabilities(),
            "serverInfo": self.upstream.server_info,
        }
        if self.upstream.instructions is not None:
            result["instructions"] = self.upstream.instructions
        return self._lone_reply(session, message.id, "initialize", result)

    def _answer_discover(self, session: Session, message: Message) -> list[Action]:
        assert message.id is not None
        result: dict[str, Any] = {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": self._mirrored_capabilities(),
            "serverInfo": self.upstream.server_info,
        }
        if self.upstream.instructions is not None:
            result["instructions"] = self.upstream.instructions
        return self._lone_reply(session, message.id, "server/discover", result)

    def _answer_ping(self, session: Session, message: Message) -> list[Action]:
        assert message.id is not None
        return [self._reply(session, message.id, {})]

    def _lone_reply(self, session: Session, client_id: RequestId, method: str, result: dict[str, Any]) -> list[Action]:
        """A reply the router makes itself, after the response chain of its channel (initialize, discover)."""
        key: StreamKey = (session.id, client_id)
        then = AnswerFromRouter(session, client_id, method, self._streams.open(key), key)
        event = response_event(method) or method
        return self._chain(event, Phase.RESPONSE, Direction.SENDING, Channel.INITIALIZE, result, session, None, then)

    def _resume_from_router(self, then: AnswerFromRouter, outcome: ChainOutcome) -> list[Action]:
        slot, client_id = then.slot, then.client_id
        if isinstance(outcome, ChainBlocked):
            slot.data = self._encode_error(client_id, _error(INTERNAL_ERROR, BLOCKED_MESSAGE))
        else:
            era = then.session.era or Era.HANDSHAKE
            cacheable = then.method in self._cacheable
            shaped = downstream_result(outcome.payload, era, self.upstream.server_info, cacheable)
            slot.data = self._encode_result(client_id, shaped)
        slot.done = slot.final = True
        return self._streams.flush(then.key)

    def _listen(self, session: Session, message: Message) -> list[Action]:
        """`subscriptions/listen` (2026-07-28): the router serves the stream itself — acknowledged first with
        the honored filter, then the upstream's list_changed and resources/updated it asked for, each stamped
        with the stream's id, until the client cancels or leaves (or the upstream goes: the graceful end)."""
        assert message.id is not None
        if session.era is not Era.MODERN:
            return [self._reply_error(session.id, message.id, _error(METHOD_NOT_FOUND, "Method not found"))]
        wanted = (message.params or {}).get("notifications")
        if not isinstance(wanted, dict):
            reason = {"reason": "params.notifications must be an object"}
            return [self._reply_error(session.id, message.id, _error(INVALID_PARAMS, "Invalid params", reason))]
        honored, listen = honor(wanted, self.upstream.capabilities)
        session.listens[message.id] = listen
        meta = {SUBSCRIPTION_ID_META_KEY: message.id}
        ack = {"method": LISTEN_ACK, "params": {"notifications": honored, "_meta": meta}}
        actions: list[Action] = [self._stamped(session, message.id, ack)]
        for uri in honored.get("resourceSubscriptions", ()):
            if self.subscriptions.holds(session.id, uri):
                continue
            if self.subscriptions.hold(session.id, uri):
                actions.append(self._internal_request("resources/subscribe", {"uri": uri}))
        return actions

    def _stamped(self, session: Session, listen_id: RequestId, body: dict[str, Any]) -> SendDownstream:
        """A frame of listen stream `listen_id` (on that request's own stream, never its end)."""
        return SendDownstream(session.id, dumps_exact({"jsonrpc": "2.0", **body}), listen_id)

    def _end_listen(self, session: Session, listen_id: RequestId) -> list[Action]:
        listen = session.listens.pop(listen_id, None)
        if listen is None:
            return []
        still = {uri for other in session.listens.values() for uri in other.uris}
        actions: list[Action] = []
        for uri in listen.uris - still:
            actions += self._release_subscription(session.id, uri)
        return actions

    def _set_level(self, session: Session, message: Message) -> list[Action]:
        assert message.id is not None
        if "logging" not in self.upstream.capabilities:
            not_found = _error(METHOD_NOT_FOUND, "Method not found", "logging/setLevel")
            return [self._reply_error(session.id, message.id, not_found)]
        level = (message.params or {}).get("level")
        if not isinstance(level, str):
            reason = {"reason": "level must be a string"}
            return [self._reply_error(session.id, message.id, _error(INVALID_PARAMS, "Invalid params", reason))]
        session.log_level = level
        actions: list[Action] = [self._reply(session, message.id, {})]
        wanted = _most_verbose(s.log_level for s in self.sessions.values())
        if self.upstream.era is Era.HANDSHAKE and wanted != self.upstream.log_level and wanted is not None:
            self.upstream.log_level = wanted
            actions.append(self._internal_request("logging/setLevel", {"level": wanted}))
        return actions

    # Tasks --------------------------------------------------------------------------------------
    def _owns_task(self, session: Session, params: dict[str, Any] | None) -> bool:
        return self._task_visible(session, (params or {}).get("taskId"))

    def _task_visible(self, session: Session, task_id: Any) -> bool:
        return self._tasks.visible(task_id, session.id, session.principal, modern=session.era is Era.MODERN)

    def _target(self, method: str, params: dict[str, Any] | None) -> str | None:
        key = self._target_keys.get(method)
        value = (params or {}).get(key) if key is not None else None
        return value if isinstance(value, str) else None

    # Forwarded requests -------------------------------------------------------------------------
    def _forward_request(self, session: Session, message: Message, era: Era) -> list[Action]:
        method, client_id, params = message.method, message.id, message.params
        assert method is not None and client_id is not None
        self._next_call += 1
        call = self._next_call
        meta = message.meta or {}
        level = meta.get(LOG_LEVEL_META_KEY)
        pending = Pending(
            session.id,
            client_id,
            method,
            era,
            RequestState(call, method, self._target(method, params)),
            params,
            client_token=message.progress_token,
            log_level=level if isinstance(level, str) else None,
        )
        key = -call  # negative until it has an upstream id
        self.pending[key] = pending
        self._by_client[(session.id, client_id)] = key
        if request_event(method) is None:
            return self._send(key, pending, params)
        payload = request_payload(method, params)
        then = ForwardRequest(pending)
        return self._chain(method, Phase.REQUEST, Direction.RECEIVING, Channel.REQUEST, payload, session, pending, then)

    def _resume_forward(self, then: ForwardRequest, outcome: ChainOutcome) -> list[Action]:
        pending = then.pending
        if pending.cancelled:
            return []
        if isinstance(outcome, ChainBlocked):
            return self._request_blocked(pending, outcome)
        if outcome.learned:
            pending.state.learned.update(outcome.learned)
        params = pending.params
        try:
            new_params = params_from_request_payload(pending.method, outcome.payload) if outcome.modified else params
        except MalformedPayload as exc:
            return self._final_error(pending, _error(INTERNAL_ERROR, "interceptor chain failed", {"reason": str(exc)}))
        pending.params = new_params
        key = self._by_client[(pending.session, pending.client_id)]
        handler = self.SEND_HANDLERS.get(pending.method)
        if handler is not None:
            return handler(self, key, pending, new_params)
        return self._send_upstream(key, pending, new_params)

    def _send(self, key: int, pending: Pending, params: dict[str, Any] | None) -> list[Action]:
        """The request goes upstream, through its method's send handler when it has one."""
        handler = self.SEND_HANDLERS.get(pending.method)
        if handler is not None:
            return handler(self, key, pending, params)
        return self._send_upstream(key, pending, params)

    def _request_blocked(self, pending: Pending, outcome: ChainBlocked) -> list[Action]:
        if outcome.substitute is not None:
            return self._final_result(pending, outcome.substitute)
        if outcome.not_found:
            return self._final_error(pending, self._missing(pending))
        return self._final_error(pending, outcome.error or _error(INTERNAL_ERROR, BLOCKED_MESSAGE))

    def _missing(self, pending: Pending) -> dict[str, Any]:
        answer = self.config.missing.get((self.upstream.era, pending.method))
        target = pending.state.target or ""
        if answer is None:
            return _error(INVALID_PARAMS, "Invalid params")
        data = {answer.data_key: target} if answer.data_key is not None else None
        return _error(answer.code, answer.message.replace("{target}", target), data)

    def _send_upstream(self, key: int, pending: Pending, params: dict[str, Any] | None) -> list[Action]:
        session = self.sessions[pending.session]
        self._next_id += 1  # `_new_id`, inline on the path every forwarded request takes
        upstream_id = self._next_id
        del self.pending[key]
        self.pending[upstream_id] = pending
        self._by_client[(pending.session, pending.client_id)] = upstream_id
        pending.upstream_id = upstream_id
        if pending.client_token is not None:
            pending.upstream_token = upstream_id
            self._by_token[upstream_id] = upstream_id
        level = pending.log_level or session.log_level
        envelope = self._upstream_envelope(level)
        out = upstream_params(params, self.upstream.era, envelope, pending.upstream_token)
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": upstream_id, "method": pending.method}
        if out is not None:
            body["params"] = out
        try:
            data = dumps_exact(body)
        except (TypeError, ValueError, UnicodeEncodeError):  # a request mutator's value with no JSON form
            reason = {"reason": "a request mutator produced a value with no JSON form"}
            return self._final_error(pending, _error(INTERNAL_ERROR, "interceptor chain failed", reason))
        return [SendUpstream(data, upstream_id)]

    # Subscriptions (SEND_HANDLERS) --------------------------------------------------------------
    def _subscribe(self, key: int, pending: Pending, params: dict[str, Any] | None) -> list[Action]:
        """A resource another session holds already is the client's at once (the upstream is asked once)."""
        uri = (params or {}).get("uri")
        if isinstance(uri, str) and self.subscriptions.held(uri):
            self.subscriptions.hold(pending.session, uri)
            return self._final_result(pending, {})
        return self._send_upstream(key, pending, params)

    def _unsubscribe(self, key: int, pending: Pending, params: dict[str, Any] | None) -> list[Action]:
        """The upstream is told only when the last holder lets go."""
        uri = (params or {}).get("uri")
        self.subscriptions.release(pending.session, uri)
        if self.subscriptions.held(uri):
            return self._final_result(pending, {})  # another session still wants updates
        return self._send_upstream(key, pending, params)

    def _release_subscription(self, session_id: SessionId, uri: str) -> list[Action]:
        if self.subscriptions.release(session_id, uri) and self.upstream.phase is UpstreamPhase.READY:
            return [self._internal_request("resources/unsubscribe", {"uri": uri})]
        return []

    # Client notifications (CLIENT_NOTIFICATIONS) ------------------------------------------------
    def _client_initialized(self, session: Session, method: str, params: dict[str, Any]) -> list[Action]:
        session.initialized = True
        return self._release_held() if self._held_requests else []

    def _client_cancelled(self, session: Session, method: str, params: dict[str, Any]) -> list[Action]:
        request_id = params.get("requestId")
        if isinstance(request_id, int | str) and request_id in session.listens:
            return self._end_listen(session, request_id)  # the stream just ends (no result after a cancel)
        key = self._by_client.get((session.id, request_id)) if isinstance(request_id, int | str) else None
        if key is None:
            return [Dropped("a cancellation for no request in flight", method)]
        pending = self.pending[key]
        pending.cancelled = True
        self._forget(key, pending)
        if pending.upstream_id is None:
            return []
        return [_cancel_upstream(pending.upstream_id, params.get("reason"))]

    def _client_roots_changed(self, session: Session, method: str, params: dict[str, Any]) -> list[Action]:
        return [SendUpstream(dumps_exact({"jsonrpc": "2.0", "method": method}))]

    # Client answers to upstream requests --------------------------------------------------------
    def _client_answer(self, session: Session, message: Message) -> list[Action]:
        """The client's reply to a request the upstream sent it: through the chain (receiving), then upstream."""
        down_id = message.id
        outgoing = self._outgoing.pop((session.id, down_id), None) if isinstance(down_id, str) else None
        if outgoing is None:
            return [Dropped("a reply to no request of ours")]
        upstream_id, method = outgoing.upstream_id, outgoing.method
        if message.kind is Kind.ERROR:
            error = message.error
            payload = side_payload(Channel.ERROR, error)
            then_error = AnswerUpstreamError(upstream_id, error)
            return self._chain(
                method, Phase.RESPONSE, Direction.RECEIVING, Channel.ERROR, payload, session, None, then_error
            )
        then = AnswerUpstream(upstream_id)
        result = message.result
        return self._chain(
            method, Phase.RESPONSE, Direction.RECEIVING, Channel.CLIENT_RESULT, result, session, None, then
        )

    def _resume_answer_upstream(self, then: AnswerUpstream, outcome: ChainOutcome) -> list[Action]:
        upstream_id = then.upstream_id
        if isinstance(outcome, ChainBlocked):
            return [_upstream_error(upstream_id, outcome.error or _error(INTERNAL_ERROR, BLOCKED_MESSAGE))]
        body = {"jsonrpc": "2.0", "id": upstream_id, "result": outcome.payload}
        return [SendUpstream(self._encode(body, upstream_id))]

    def _resume_answer_upstream_error(self, then: AnswerUpstreamError, outcome: ChainOutcome) -> list[Action]:
        return [_upstream_error(then.upstream_id, self._passed_error(then.error, outcome))]

    # Upstream -----------------------------------------------------------------------------------
    def receive_upstream(self, raw: bytes | str, *, related: int | None = None) -> list[Action]:
        """One message from the upstream; `related`: the upstream request it came with (an HTTP response stream)."""
        return self.receive_upstream_message(parse(raw), related=related)

    def receive_upstream_message(self, message: Message, *, related: int | None = None) -> list[Action]:
        """`receive_upstream` of a message the shell already parsed."""
        kind = message.kind
        if kind is Kind.RESPONSE or kind is Kind.ERROR:
            assert message.id is not None
            internal = self._internal.pop(message.id, None) if isinstance(message.id, int) else None
            if internal is not None:
                return internal(message)
            pending = self.pending.get(message.id) if isinstance(message.id, int) else None
            if pending is None or pending.answered:
                return [Dropped("a reply to no request in flight")]
            return self._upstream_reply(pending, message)
        if kind is Kind.INVALID:
            return self._upstream_invalid(message)
        method = message.method
        assert method is not None
        channel = self._channel_of.get(method)
        if kind is Kind.REQUEST:
            request = self.UPSTREAM_REQUESTS.get(method) or self.UPSTREAM_REQUEST_CHANNELS.get(channel)
            if request is None:
                assert message.id is not None
                return [_upstream_error(message.id, _error(METHOD_NOT_FOUND, "Method not found", method))]
            return request(self, message, related)
        notification = self.UPSTREAM_NOTIFICATIONS.get(method) or self.UPSTREAM_NOTIFICATION_CHANNELS.get(channel)
        if notification is None:
            return [Dropped("an upstream notification the router does not relay", method)]
        return notification(self, method, message.params or {}, related)

    def _upstream_invalid(self, message: Message) -> list[Action]:
        assert message.problem is not None
        internal = self._internal.pop(message.id, None) if isinstance(message.id, int) else None
        if internal is not None:  # the router's own request: its continuation gets the error, never a stall
            error = _error(INTERNAL_ERROR, INVALID_RESULT_MESSAGE, message.problem.data)
            return internal(parse(dumps_exact({"jsonrpc": "2.0", "id": message.id, "error": error})))
        pending = self.pending.get(message.id) if isinstance(message.id, int) else None
        if pending is not None and not pending.answered:
            return self._final_error(pending, _error(INTERNAL_ERROR, INVALID_RESULT_MESSAGE, message.problem.data))
        if message.method is not None and message.id is not None:  # a request of the upstream's: tell it
            problem = message.problem
            return [_upstream_error(message.id, _error(problem.code, problem.message, problem.data))]
        return [Dropped(f"an invalid upstream message: {message.problem.data.get('reason', message.problem.message)}")]

    def _upstream_reply(self, pending: Pending, message: Message) -> list[Action]:
        session = self.sessions[pending.session]
        pending.answered = True
        if pending.streams:  # ordered before the reply: its slot opens first
            return self._flush_held(pending) + self._upstream_reply(pending, message)
        if message.kind is Kind.ERROR:
            error = message.error
            payload = side_payload(Channel.ERROR, error)
            then_error = AnswerClientError(pending, error)
            return self._chain(
                pending.method, Phase.RESPONSE, Direction.SENDING, Channel.ERROR, payload, session, pending, then_error
            )
        result = message.result
        task = result.get("task")
        if isinstance(task, dict) and isinstance(task.get("taskId"), str):
            modern = session.era is Era.MODERN
            self._tasks.remember(
                task["taskId"], pending.session, session.principal, modern=modern, method=pending.method
            )
        method = pending.method
        special = method in self._read_results
        before = self.RESULT_HANDLERS.get(method) if special else None
        if before is not None:
            result = before(self, session, pending, result)
        check = self.config.check_result
        if check is not None:
            problem = check(method, result, self.upstream.version)
            if problem is not None:
                return self._final_error(pending, _error(INTERNAL_ERROR, INVALID_RESULT_MESSAGE, problem))
        after = self.CHECKED_RESULT_HANDLERS.get(method) if special else None
        if after is not None:
            result = after(self, session, pending, result)
        then = AnswerClient(pending, _subscribed(pending) if special else None)
        if response_event(pending.method) is None:
            return self._resume_answer(then, ChainPassed(result))
        channel = result_channel(pending.method)
        return self._chain(pending.method, Phase.RESPONSE, Direction.SENDING, channel, result, session, pending, then)

    def _visible_tasks(self, session: Session, pending: Pending, result: dict[str, Any]) -> dict[str, Any]:
        """`tasks/list`: only the tasks this session may reach."""
        if not isinstance(result.get("tasks"), list):
            return result
        return {**result, "tasks": [t for t in result["tasks"] if self._task_visible(session, _task_id(t))]}

    def _subscribe_answered(self, session: Session, pending: Pending, result: dict[str, Any]) -> dict[str, Any]:
        """`resources/subscribe`: updates that come while its response chain runs wait for its outcome."""
        subscribed = _subscribed(pending)
        if subscribed is not None:
            self.subscriptions.wait(session.id, subscribed)
        return result

    def _with_local_tools(self, session: Session, pending: Pending, result: dict[str, Any]) -> dict[str, Any]:
        """`tools/list`: the shell's own tools join the first page, before its chain (the policy may hide them)."""
        if self._local_tools and not (pending.params or {}).get("cursor"):
            return with_local_tools(result, self.config.local_tools)
        return result

    def _resume_answer(self, then: AnswerClient, outcome: ChainOutcome) -> list[Action]:
        pending, subscribed = then.pending, then.subscribed
        if subscribed is None:
            if isinstance(outcome, ChainBlocked):
                return self._request_blocked(pending, outcome)
            return self._final_result(pending, outcome.payload, check=outcome.modified)
        session = self.sessions[pending.session]
        early = self.subscriptions.take(session.id, subscribed)
        if isinstance(outcome, ChainBlocked):
            if not self.subscriptions.held(subscribed):
                # the client never learns of the subscription: release it upstream, and no update follows
                release = self._internal_request("resources/unsubscribe", {"uri": subscribed})
                return [release, *self._request_blocked(pending, outcome)]
            return self._request_blocked(pending, outcome)
        self.subscriptions.hold(session.id, subscribed)  # held only once the client is told it holds it
        actions = self._final_result(pending, outcome.payload, check=outcome.modified)
        for update in early:
            actions += self._side(Channel.RESOURCE_UPDATED, "notifications/resources/updated", update, session, None)
        return actions

    def _resume_answer_error(self, then: AnswerClientError, outcome: ChainOutcome) -> list[Action]:
        return self._final_error(then.pending, self._passed_error(then.error, outcome))

    def _passed_error(self, error: dict[str, Any], outcome: ChainOutcome) -> dict[str, Any]:
        """An error after its chain: the upstream's code always; message and data as the chain left them."""
        if isinstance(outcome, ChainBlocked):
            return _error(INTERNAL_ERROR, BLOCKED_MESSAGE)
        try:
            back = from_side_payload(Channel.ERROR, error, outcome.payload)
        except MalformedPayload:
            return _error(INTERNAL_ERROR, BLOCKED_MESSAGE)
        back["code"] = error["code"]
        back.pop("_meta", None)
        return back

    # Upstream requests (UPSTREAM_REQUESTS) ------------------------------------------------------
    def _upstream_ping(self, message: Message, related: int | None) -> list[Action]:
        return [SendUpstream(dumps_exact({"jsonrpc": "2.0", "id": message.id, "result": {}}))]

    def _upstream_request(self, message: Message, related: int | None) -> list[Action]:
        """A request of the upstream's to the client (sampling, elicitation, roots): to the session it belongs
        to, through its chain (request phase, sending), as a request id of the router's own."""
        method, upstream_id = message.method, message.id
        assert method is not None and upstream_id is not None
        row = self.config.methods.get(method)
        capability = row.capability if row is not None else None
        if capability is None:
            return [_upstream_error(upstream_id, _error(METHOD_NOT_FOUND, "Method not found", method))]
        owner = self._owner(related, lambda s: s.era is Era.HANDSHAKE and capability in s.capabilities)
        if owner is None and related is None and self._one_principal():
            owner = self._ready_session(capability)
            if owner is None and self._client_may_come() and len(self._held_requests) < MAX_HELD_REQUESTS:
                self._held_requests.append(message)  # before or during the client's handshake: it waits
                return []
        if owner is None:
            reason = {"reason": f"no client in flight declared {capability}"}
            return [_upstream_error(upstream_id, _error(METHOD_NOT_FOUND, "Method not found", reason))]
        session, pending = owner
        session.next_outgoing += 1
        down_id = f"gateway-{session.next_outgoing}"
        outgoing = Outgoing(session.id, down_id, upstream_id, method, pending.client_id if pending else None)
        self._outgoing[(session.id, down_id)] = outgoing
        params = message.params
        key: StreamKey = (session.id, outgoing.related)
        then = RelayToClient(key, self._streams.open(key), session.id, down_id, upstream_id, method, params)
        payload = request_payload(method, params)
        return self._chain(
            method, Phase.REQUEST, Direction.SENDING, Channel.SERVER_REQUEST, payload, session, pending, then
        )

    def _resume_relay(self, then: RelayToClient, outcome: ChainOutcome) -> list[Action]:
        then.slot.done = True
        data = self._relayed_request(then, outcome)
        if data is None:
            self._outgoing.pop((then.session, then.down_id), None)
            error = outcome.error if isinstance(outcome, ChainBlocked) else None
            return [_upstream_error(then.upstream_id, error or _error(INTERNAL_ERROR, BLOCKED_MESSAGE)),
                    *self._streams.flush(then.key)]  # fmt: skip
        then.slot.data = data
        then.slot.outgoing = then.down_id
        return self._streams.flush(then.key)

    @staticmethod
    def _relayed_request(then: RelayToClient, outcome: ChainOutcome) -> bytes | None:
        """The request to the client as its chain left it; None when blocked or when it has no message form."""
        if isinstance(outcome, ChainBlocked):
            return None
        try:
            params = params_from_request_payload(then.method, outcome.payload) if outcome.modified else then.params
        except MalformedPayload:
            return None
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": then.down_id, "method": then.method}
        if params is not None:
            body["params"] = params
        try:
            return dumps_exact(body)
        except (TypeError, ValueError, UnicodeEncodeError):  # a mutator's value with no JSON form
            return None

    def _owner(self, related: int | None, eligible: Callable[[Session], bool]) -> tuple[Session, Pending | None] | None:
        """The one session (and request) an upstream message without a request id of its own belongs to.

        With `related` (the upstream said which request), that request's. Otherwise the oldest request in
        flight, but only when every open session belongs to one principal: a guess never crosses principals,
        not even towards the only principal with a request in flight (the message may belong to no request).
        """
        if related is not None:
            pending = self.pending.get(related)
            if pending is None or not eligible(self.sessions[pending.session]):
                return None
            return self.sessions[pending.session], pending
        in_flight = [p for p in self.pending.values() if p.upstream_id is not None and not p.cancelled]
        if not in_flight or not self._one_principal():
            return None
        for pending in sorted(in_flight, key=lambda p: p.state.call):
            session = self.sessions[pending.session]
            if eligible(session):
                return session, pending
        return None

    def _ready_session(self, capability: str) -> tuple[Session, None] | None:
        """With nothing in flight to tie it to: the first initialized handshake session that declared
        `capability` (only one principal is open, so the request cannot cross principals)."""
        for session in self.sessions.values():
            if session.era is Era.HANDSHAKE and session.initialized and capability in session.capabilities:
                return session, None
        return None

    def _client_may_come(self) -> bool:
        """No session open yet, or one still in its handshake: a held request may find its client."""
        return not self.sessions or any(not s.initialized and s.era is not Era.MODERN for s in self.sessions.values())

    def _release_held(self) -> list[Action]:
        """A session completed its handshake (or left): the held upstream requests are tried again."""
        held, self._held_requests = self._held_requests, []
        actions: list[Action] = []
        for message in held:
            actions += self._upstream_request(message, None)
        return actions

    def _one_principal(self) -> bool:
        """Whether every open session belongs to one principal (so a message the upstream did not tie to a
        request can only be that principal's)."""
        principals = {session.principal for session in self.sessions.values()}
        return len(principals) <= 1

    # Upstream notifications (UPSTREAM_NOTIFICATIONS, UPSTREAM_NOTIFICATION_CHANNELS) -------------
    def _upstream_cancelled(self, method: str, params: dict[str, Any], related: int | None) -> list[Action]:
        """The upstream gave up a request it sent a client: the client is told, by the id it knows."""
        request_id = params.get("requestId")
        for out_key, outgoing in list(self._outgoing.items()):
            if outgoing.upstream_id == request_id:
                del self._outgoing[out_key]
                # only the id: the upstream's free-text `reason` has no stage to check it, so it is not relayed
                cancel = {"jsonrpc": "2.0", "method": method, "params": {"requestId": outgoing.down_id}}
                # on the request's own stream, so it never overtakes the request whose chain still runs
                stream: StreamKey = (outgoing.session, outgoing.related)
                self._streams.open(stream, dumps_exact(cancel))
                return self._streams.flush(stream)
        return [Dropped("a cancellation for no relayed request", method)]

    def _list_changed(self, method: str, params: dict[str, Any], related: int | None) -> list[Action]:
        """A list changed: the catalog re-learns it, every handshake session and every listen that asked is told."""
        kind = LIST_CHANGED[method]
        relay: list[Action] = [CatalogChanged(kind)]
        handshake = [s for s in self.sessions.values() if s.era is Era.HANDSHAKE and s.version]
        meta = params.get("_meta")
        if isinstance(meta, dict) and meta:
            # its `_meta` is the upstream's to fill: it passes each session's chain, like any side message
            for session in handshake:
                relay += self._side(Channel.LIST_CHANGED, method, {"_meta": meta}, session, None, event=f"{kind}/list")
        else:
            # nothing but the kind, which the gateway states itself (no other member is relayed)
            changed = dumps_exact({"jsonrpc": "2.0", "method": method})
            relay += [SendDownstream(s.id, changed) for s in handshake]
        for session in self.sessions.values():
            for listen_id, listen in session.listens.items():
                if kind in listen.kinds:
                    frame = {"method": method, "params": {"_meta": {SUBSCRIPTION_ID_META_KEY: listen_id}}}
                    relay.append(self._stamped(session, listen_id, frame))
        return relay

    def _progress(self, method: str, params: dict[str, Any], related: int | None) -> list[Action]:
        """Progress goes to the one request whose token it names, with the client's own token."""
        token = params.get("progressToken")
        call = self._by_token.get(token) if isinstance(token, int) else None
        pending = self.pending.get(call) if call is not None else None
        if pending is None or pending.client_token is None:
            return [Dropped("progress for no request in flight", method)]
        pending.progress_seen += 1
        relayed = {**params, "progressToken": pending.client_token}
        return self._side(Channel.PROGRESS, method, relayed, self.sessions[pending.session], pending)

    def _task_status(self, method: str, params: dict[str, Any], related: int | None) -> list[Action]:
        """A task's status goes to the session that created it, under the event of the request that did."""
        owner = self._tasks.owner(params.get("taskId"))
        if owner is None or owner.session is None or owner.session not in self.sessions:
            return [Dropped("a task status for no known task", method)]
        session = self.sessions[owner.session]
        return self._side(Channel.TASK_STATUS, method, params, session, None, event=owner.method)

    def _resource_updated(self, method: str, params: dict[str, Any], related: int | None) -> list[Action]:
        """An update goes to every session holding the resource (a 2026-07-28 one on each listen holding it); one
        whose subscribe is still in its chain gets it if that passes."""
        uri = params.get("uri")
        holders = self.subscriptions.holders(uri)
        actions: list[Action] = []
        for session_id in holders:
            holder = self.sessions[session_id]
            if holder.era is not Era.MODERN:
                actions += self._side(Channel.RESOURCE_UPDATED, method, params, holder, None)
                continue
            for listen_id, listen in holder.listens.items():  # a 2026-07-28 session holds it through its listens
                if uri in listen.uris:
                    stamped = {**params, "_meta": {**(params.get("_meta") or {}), SUBSCRIPTION_ID_META_KEY: listen_id}}
                    actions += self._side(Channel.RESOURCE_UPDATED, method, stamped, holder, None, stream=listen_id)
        waiting = self.subscriptions.defer(uri, params, holders)
        if actions or waiting:
            return actions
        return [Dropped("an update for a resource no session holds", method)]

    def _log(self, method: str, params: dict[str, Any], related: int | None) -> list[Action]:
        """A log goes to the request it belongs to, at the level that request (or its session) asked for; one
        outside any request to every handshake session that asked for logging, with one principal open."""
        level = params.get("level")
        in_flight = any(p.upstream_id is not None and not p.cancelled for p in self.pending.values())
        if related is None and not in_flight:
            return self._log_outside_requests(method, params, level)
        owner = self._owner(related, lambda s: True)
        if owner is None:
            return [
                Dropped("a log the upstream did not tie to a request, with several principals, has no owner", method)
            ]
        session, pending = owner
        assert pending is not None
        wanted = pending.log_level if pending.era is Era.MODERN else session.log_level
        if (pending.era is Era.MODERN and wanted is None) or not level_at_least(level, wanted):
            return [Dropped("a log below the level its request asked for", method)]
        return self._side(Channel.LOG, method, params, session, pending)

    def _log_outside_requests(self, method: str, params: dict[str, Any], level: Any) -> list[Action]:
        if not self._one_principal():
            return [Dropped("a log outside any request with sessions of several principals has no owner", method)]
        actions: list[Action] = []
        for session in self.sessions.values():
            if (
                session.era is Era.HANDSHAKE
                and session.log_level is not None
                and level_at_least(level, session.log_level)
            ):
                actions += self._side(Channel.LOG, method, params, session, None)
        return actions or [Dropped("a log outside any request, and no session asked for logging", method)]

    # Side messages ------------------------------------------------------------------------------
    def _side(
        self,
        channel: Channel,
        method: str,
        params: dict[str, Any],
        session: Session,
        pending: Pending | None,
        *,
        event: str | None = None,
        stream: RequestId | None = None,
        flushed: bool = False,
        context: dict[str, str] | None = None,
    ) -> list[Action]:
        """One notification for one session, after its chain, in order on its request's stream (`stream`: a
        listen stream's id, for what rides one; `context`: a streamed message's neighbours, for the chain)."""
        if pending is not None and channel in _STREAMED and self.config.hold_back is not None and not flushed:
            actions: list[Action] = []
            for release in self._held_back(pending, channel, params):
                actions += self._side(channel, method, release.message, session, pending, flushed=True,
                                      context=release.context())  # fmt: skip
            return actions
        related = pending.client_id if pending is not None else stream
        key: StreamKey = (session.id, related)
        then = DeliverNotification(key, self._streams.open(key), channel, method, params, pending)
        chain_event = pending.method if pending is not None else (event or CARRIER_EVENTS[channel])
        payload = side_payload(channel, params)
        if context is not None:
            payload["_meta"][STREAM_META_KEY] = context
        return self._chain(chain_event, Phase.RESPONSE, Direction.SENDING, channel, payload, session, pending, then)

    def _resume_deliver(self, then: DeliverNotification, outcome: ChainOutcome) -> list[Action]:
        slot = then.slot
        slot.done = True
        pending = then.pending
        if isinstance(outcome, ChainPassed) and not (pending is not None and pending.cancelled):
            try:
                back = from_side_payload(then.channel, then.params, outcome.payload)
            except MalformedPayload:
                back = None
            if back is not None:
                try:
                    slot.data = dumps_exact({"jsonrpc": "2.0", "method": then.method, "params": back})
                except (TypeError, ValueError, UnicodeEncodeError):  # a mutator's value with no JSON form
                    slot.data = None  # dropped, like a blocked notification
        return self._streams.flush(then.key)

    def _held_back(self, pending: Pending, channel: Channel, params: dict[str, Any]) -> list[Any]:
        """The messages of the channel to send now (`Release`s: each whole, as the upstream sent it, with its
        context): a held one first, then this one unless it is held in turn."""
        text = params.get(_STREAMED[channel])
        held = pending.streams.get(channel)
        if held is None:
            assert self.config.hold_back is not None
            held = (self.config.hold_back(), params)
        stream = held[0]
        pending.streams[channel] = (stream, params)
        return stream.push(params, text if isinstance(text, str) else "")

    def _flush_held(self, pending: Pending) -> list[Action]:
        """The request is over: what its streams still hold goes out, through the chain, before the reply."""
        actions: list[Action] = []
        streams, pending.streams = pending.streams, {}
        for channel, (stream, _) in streams.items():
            method = "notifications/progress" if channel is Channel.PROGRESS else "notifications/message"
            for release in stream.flush():
                actions += self._side(channel, method, release.message, self.sessions[pending.session], pending,
                                      flushed=True, context=release.context())  # fmt: skip
        return actions

    # The chain ----------------------------------------------------------------------------------
    def _chain(
        self,
        event: str,
        phase: Phase,
        direction: Direction,
        channel: Channel,
        payload: Any,
        session: Session,
        pending: Pending | None,
        then: Continuation,
    ) -> list[Action]:
        """Run the chain for the event (a `RunChain` the shell performs), `then` waiting under its ticket; when
        no plan has work for it, `then` at once with the payload unchanged."""
        if not self.config.has_work(event, phase, direction):
            return self.RESUME[type(then)](self, then, ChainPassed(payload))
        self._next_ticket += 1
        ticket = self._next_ticket
        self._tickets[ticket] = (session.id, then)
        state = pending.state if pending is not None else None
        return [RunChain(ticket, event, phase, direction, str(channel), payload, session.context, state)]

    def chain_done(self, ticket: int, outcome: ChainOutcome) -> list[Action]:
        """The shell finished a `RunChain`; an unknown or repeated ticket is refused (ValueError)."""
        waiting = self._tickets.pop(ticket, None)
        if waiting is None:
            raise ValueError(f"no chain run {ticket} is waiting")
        session_id, then = waiting
        if session_id not in self.sessions:  # the client left while its chain ran: close_session did the rest
            return [Dropped("a chain outcome for a session that closed")]
        return self.RESUME[type(then)](self, then, outcome)

    def waiting(self) -> dict[int, Continuation]:
        """The chain runs the router waits for, by ticket, and what each will do when it answers."""
        return {ticket: then for ticket, (_, then) in self._tickets.items()}

    def reply_local(
        self, session_id: SessionId, request_id: RequestId, *, result: Any = None, error: dict[str, Any] | None = None
    ) -> list[Action]:
        """The shell's answer to an `AnswerLocally`."""
        session = self.sessions.get(session_id)
        if session is None:
            return []
        if error is not None:
            return [self._reply_error(session_id, request_id, error)]
        return [self._reply(session, request_id, result if isinstance(result, dict) else {})]

    # Replies and streams ------------------------------------------------------------------------
    def _final_result(self, pending: Pending, result: Any, *, check: bool = False) -> list[Action]:
        """The reply to a request; `check`: a mutator changed it, so it is checked at the client's version."""
        if not isinstance(result, dict):
            reason = {"reason": "a response mutator produced a result that is not an object"}
            return self._final_error(pending, _error(INTERNAL_ERROR, "interceptor chain failed", reason))
        shaped = downstream_result(result, pending.era, self.upstream.server_info, pending.method in self._cacheable)
        checker = self.config.check_result
        session = self.sessions.get(pending.session)
        if check and checker is not None and session is not None:
            problem = checker(pending.method, shaped, session.version)
            if problem is not None:
                problem = {**problem, "reason": f"a response mutator produced an invalid result: {problem['reason']}"}
                return self._final_error(pending, _error(INTERNAL_ERROR, INVALID_MUTATION_MESSAGE, problem))
        return self._final(pending, self._encode_result(pending.client_id, shaped))

    def _final_error(self, pending: Pending, error: dict[str, Any]) -> list[Action]:
        return self._final(pending, self._encode_error(pending.client_id, error))

    def _final(self, pending: Pending, data: bytes) -> list[Action]:
        key = self._by_client.get((pending.session, pending.client_id))
        if key is None or self.pending.get(key) is not pending:
            return []  # cancelled, or its session left
        self._forget(key, pending)
        stream: StreamKey = (pending.session, pending.client_id)
        self._streams.open(stream, data).final = True
        return self._streams.flush(stream)

    def _forget(self, key: int, pending: Pending) -> None:
        self.pending.pop(key, None)
        self._by_client.pop((pending.session, pending.client_id), None)
        if pending.upstream_token is not None:
            self._by_token.pop(pending.upstream_token, None)

    def _reply(self, session: Session, client_id: RequestId, result: dict[str, Any]) -> SendDownstream:
        shaped = downstream_result(result, session.era or Era.HANDSHAKE, self.upstream.server_info)
        return SendDownstream(session.id, self._encode_result(client_id, shaped), client_id, True)

    def _reply_error(self, session_id: SessionId, client_id: RequestId | None, error: dict[str, Any]) -> SendDownstream:
        return SendDownstream(session_id, self._encode_error(client_id, error), client_id, True)

    def _encode_result(self, client_id: RequestId, result: dict[str, Any]) -> bytes:
        return self._encode({"jsonrpc": "2.0", "id": client_id, "result": result}, client_id)

    def _encode_error(self, client_id: RequestId | None, error: dict[str, Any]) -> bytes:
        return self._encode({"jsonrpc": "2.0", "id": client_id, "error": error}, client_id)

    @staticmethod
    def _encode(body: dict[str, Any], request_id: RequestId | None) -> bytes:
        """The one serialisation of a message out; a value that has no JSON form becomes a -32603 instead."""
        try:
            return dumps_exact(body)
        except (TypeError, ValueError, UnicodeEncodeError):
            error = _error(INTERNAL_ERROR, "the reply could not be serialised")
            return dumps_exact({"jsonrpc": "2.0", "id": request_id, "error": error})


# The tables ---------------------------------------------------------------------------------------
Router.LOCAL_HANDLERS = {
    "initialize": Router._answer_initialize,
    "server/discover": Router._answer_discover,
    "ping": Router._answer_ping,
    "logging/setLevel": Router._set_level,
    LISTEN_METHOD: Router._listen,
}
Router.SEND_HANDLERS = {"resources/subscribe": Router._subscribe, "resources/unsubscribe": Router._unsubscribe}
Router.RESULT_HANDLERS = {"tasks/list": Router._visible_tasks}
Router.CHECKED_RESULT_HANDLERS = {
    "tools/list": Router._with_local_tools,
    "resources/subscribe": Router._subscribe_answered,
}
Router.CLIENT_NOTIFICATIONS = {
    "notifications/initialized": Router._client_initialized,
    "notifications/cancelled": Router._client_cancelled,
    "notifications/roots/list_changed": Router._client_roots_changed,
}
Router.UPSTREAM_NOTIFICATIONS = {"notifications/cancelled": Router._upstream_cancelled}
Router.UPSTREAM_NOTIFICATION_CHANNELS = {
    Channel.LIST_CHANGED: Router._list_changed,
    Channel.PROGRESS: Router._progress,
    Channel.TASK_STATUS: Router._task_status,
    Channel.RESOURCE_UPDATED: Router._resource_updated,
    Channel.LOG: Router._log,
}
Router.UPSTREAM_REQUESTS = {"ping": Router._upstream_ping}
Router.UPSTREAM_REQUEST_CHANNELS = {Channel.SERVER_REQUEST: Router._upstream_request}
Router.RESUME = {
    ForwardRequest: Router._resume_forward,
    AnswerClient: Router._resume_answer,
    AnswerClientError: Router._resume_answer_error,
    AnswerFromRouter: Router._resume_from_router,
    DeliverNotification: Router._resume_deliver,
    RelayToClient: Router._resume_relay,
    AnswerUpstream: Router._resume_answer_upstream,
    AnswerUpstreamError: Router._resume_answer_upstream_error,
}


def with_local_tools(result: dict[str, Any], tools: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """A first tools/list page with the shell's own tools added (an upstream tool of the same name gives way)."""
    names = {tool.get("name") for tool in tools}
    listed = result.get("tools")
    listed = listed if isinstance(listed, list) else []
    kept = [tool for tool in listed if not (isinstance(tool, dict) and tool.get("name") in names)]
    return {**result, "tools": [*kept, *tools]}


def _unread(message: Message) -> list[Action]:
    """The continuation of an internal request whose reply nothing reads (subscribe, unsubscribe, setLevel)."""
    return []


def _subscribed(pending: Pending) -> str | None:
    """The URI a `resources/subscribe` in flight asks for (None: not a subscribe, or no URI)."""
    if pending.method != SUBSCRIBE_METHOD:
        return None
    uri = (pending.params or {}).get("uri")
    return uri if isinstance(uri, str) else None


def _upstream_error(upstream_id: RequestId, error: dict[str, Any]) -> SendUpstream:
    try:
        return SendUpstream(dumps_exact({"jsonrpc": "2.0", "id": upstream_id, "error": error}))
    except (TypeError, ValueError, UnicodeEncodeError):  # data a mutator left with no JSON form
        bare = _error(INTERNAL_ERROR, "the error could not be serialised")
        return SendUpstream(dumps_exact({"jsonrpc": "2.0", "id": upstream_id, "error": bare}))


def _cancel_upstream(upstream_id: int, reason: Any = None) -> SendUpstream:
    params: dict[str, Any] = {"requestId": upstream_id}
    if isinstance(reason, str):
        params["reason"] = reason
    return SendUpstream(dumps_exact({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}))


def _most_verbose(levels: Iterable[str | None]) -> str | None:
    known = [level for level in levels if level in LOG_LEVELS]
    return min(known, key=LOG_LEVELS.index) if known else None


def _reason(message: Message) -> str:
    problem = message.problem
    return f"an invalid message without a recoverable id: {problem.data.get('reason') if problem else 'unknown'}"


def _task_id(task: Any) -> Any:
    return task.get("taskId") if isinstance(task, dict) else None
