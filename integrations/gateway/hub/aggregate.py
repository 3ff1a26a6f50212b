"""The aggregated endpoint: one catalog merging every leg's, namespaced, and every message routed back.

It is router-shaped for the fronts (`open_session`, `receive_downstream_message`, `close_session`,
`undeliverable`), so the stdio loop and the Streamable HTTP front (`HttpFront`) serve it as they serve a
`Router`. It owns no protocol state of the upstreams: each client session is one session in each leg's own
router (opened on first use with the client's `initialize`), so handshakes, ids, progress tokens, server
requests, subscriptions, log levels, timeouts and each server's policy stay the leg's. What it adds:

- `initialize` and `ping` answered here; lists fanned out to the legs the principal may see (the session's
  view: `roles` of the gateway file), merged with names and URIs namespaced (`names.py`), paged with a
  cursor that holds each leg's own, a leg that does not answer within `list_timeout` left out and named in
  `_meta["io.mcp-interceptors/unavailable"]`;
- a request naming a tool, prompt, resource, template or task goes to its leg with the server's own name; the
  client's id and progress token pass unchanged (each session is its own in the leg), so a reply passes
  through as bytes, unparsed, unless it is an error (it then names the server) or carries a task id;
- from a leg: logs get the server's name as their `logger`, `resources/updated` and task status their
  namespaced URI or id, requests to the client (sampling, elicitation, roots) an id of the aggregate's own
  that maps their answer back to the leg that asked;
- a leg that is down answers at once: an error naming the server (`data.server`, `data.retry`).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any, Final

import anyio
import anyio.abc
import orjson

from interceptors.codec import dumps_exact
from interceptors.protocol.eras import (
    LATEST_HANDSHAKE,
    MODERN_VERSIONS,
    Era,
    downstream_result,
    modern_envelope,
    negotiate,
)
from interceptors.protocol.messages import (
    CLIENT_CAPABILITIES_META_KEY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Kind,
    Message,
    RequestId,
    parse,
)
from interceptors.protocol.messages import error_object as _error
from interceptors.protocol.methods import METHODS

from ..router import Action, SendDownstream
from .legs import HUB_SESSION, Leg
from .names import SEPARATOR, URI_SEPARATOR, name_out, uri_out

logger = logging.getLogger("interceptors.gateway")

INTERNAL: Final = "io.mcp-interceptors/hub-"
"""Ids of the requests the aggregate sends a leg itself (their replies stay here)."""
INIT_ID: Final = INTERNAL + "initialize"
"""The id of the `initialize` the aggregate sends a leg for a client session (its reply is kept here)."""
UNAVAILABLE_META: Final = "io.mcp-interceptors/unavailable"
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"

# Per-method facts of the aggregate (which parameter names the target, which list holds what). Kept here, one
# table, until the core's method table says it.
TARGETS: Final = {
    "tools/call": ("name", "tool"),
    "prompts/get": ("name", "prompt"),
    "resources/read": ("uri", "resource"),
    "resources/subscribe": ("uri", "resource"),
    "resources/unsubscribe": ("uri", "resource"),
    "tasks/get": ("taskId", "task"),
    "tasks/result": ("taskId", "task"),
    "tasks/cancel": ("taskId", "task"),
}
LISTS: Final = {
    "tools/list": ("tools", "name", False),
    "prompts/list": ("prompts", "name", False),
    "resources/list": ("resources", "uri", True),
    "resources/templates/list": ("resourceTemplates", "uriTemplate", True),
    "tasks/list": ("tasks", "taskId", False),
}
REWRITES: Final = {"tasks/result": "taskresult", "tasks/get": "taskrecord", "tasks/cancel": "taskrecord"}
"""Replies whose task id is namespaced on the way back (a task-augmented `tools/call` too)."""
SUBSCRIPTIONS: Final = frozenset({"resources/subscribe", "resources/unsubscribe"})
_Route = tuple[str, str, str | None, str]
"""A routed method's facts, for the hot path: the parameter naming the target, its separator, the rewrite of
its reply (`task?`: when the call is task-augmented; `+`: a subscription's, none), what it names (for the
refusal)."""


def _route_of(method: str, key: str, what: str) -> _Route:
    decided = "+" if method in SUBSCRIPTIONS else "task?" if method == "tools/call" else None
    return (key, URI_SEPARATOR if key == "uri" else SEPARATOR, REWRITES.get(method, decided), what)


ROUTES: Final = {method: _route_of(method, key, what) for method, (key, what) in TARGETS.items()}
COMPLETE_PROMPT: Final = _route_of("completion/complete", "name", "prompt")
COMPLETE_RESOURCE: Final = _route_of("completion/complete", "uri", "resource")
BROADCAST: Final = frozenset({"logging/setLevel"})
BROADCAST_NOTIFICATIONS: Final = frozenset({"notifications/roots/list_changed"})
LIST_CHANGED: Final = (
    b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}',
    b'{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}',
    b'{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}',
)
BASE_CAPABILITIES: Final = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "logging": {},
    "completions": {},
}
MODERN_CAPABILITIES: Final[dict[str, dict[str, Any]]] = {
    "tools": {},
    "prompts": {},
    "resources": {},
    "logging": {},
    "completions": {},
}
"""What a 2026-07-28 client is told: no `listChanged` or `subscribe`, as the aggregate serves no
`subscriptions/listen` stream (each server's own endpoint does)."""
CACHEABLE: Final = frozenset(METHODS.names(lambda row: row.cacheable))
UNSUPPORTED_VERSION: Final = -32022
START_WAIT_S: Final = 1.0
"""How long a request waits for a leg that is being started again before it is answered unavailable."""
_INITIALIZED: Final = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


@dataclass
class _FanOut:
    """One client list request spread over the legs: their replies, in the legs' order."""

    method: str
    request_id: RequestId
    order: list[Leg]
    waiting: dict[str, Leg]
    replies: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Session:
    id: str
    leg_id: str
    """Its id in the legs' routers (`hub:` + id)."""
    context: Any
    principal: Hashable
    legs: dict[str, Leg]
    """The legs this session may see, by prefix (its principal's view)."""
    init: dict[str, Any] | None = None
    opened: dict[str, int] = field(default_factory=dict)
    routed: dict[RequestId, tuple[Leg, str | None]] = field(default_factory=dict)
    fanouts: dict[RequestId, _FanOut] = field(default_factory=dict)
    subscribed: dict[str, set[str]] = field(default_factory=dict)
    """The resources it subscribed to, by leg name (its own URIs): renewed on a leg's new process."""
    log_level: str | None = None
    outgoing: dict[int, tuple[Leg, int, RequestId]] = field(default_factory=dict)
    incoming: dict[tuple[str, RequestId], int] = field(default_factory=dict)
    initialized: bool = False
    era: Era | None = None
    """Fixed by the first request: `initialize` (handshake) or one with the 2026-07-28 envelope (modern)."""
    probing: bool = False
    """Modern by `server/discover` alone so far: an `initialize` may still follow (an auto client's fallback)."""
    capabilities: dict[str, Any] = field(default_factory=dict)
    """The client's, from `initialize` or the latest envelope (a leg started for it is told them)."""


class Aggregate:
    """The aggregated endpoint over `legs` (in the gateway file's order). `deliver` sends one message to a client
    (the front's); `tasks` runs the waits for legs that are starting."""

    def __init__(self, legs: list[Leg], *, list_timeout: float = 5.0, name: str = "mcp-interceptors-gateway") -> None:
        self.legs = legs
        self.list_timeout = list_timeout
        self.name = name
        self.sessions: dict[str, _Session] = {}
        self.server_info: Final = {"name": name, "version": _VERSION}
        self.deliver: Callable[[SendDownstream], None] = lambda action: None
        self._send_bytes: Callable[[bytes], None] | None = None
        self.tasks: anyio.abc.TaskGroup | None = None
        self._ids = itertools.count(1)
        self._touched: set[Leg] = set()
        self._waited = False
        self._by_leg_session: dict[str, _Session] = {}
        """Sessions by their id in the legs' routers (`hub:` + id)."""
        for leg in legs:
            leg.aggregate_deliver = self.from_leg
            leg.on_new_generation = self._new_generation

    # The router's face, for the fronts -------------------------------------------------------------
    def open_session(self, session_id: str, *, context: Any = None, principal: Hashable = None) -> None:
        roles = _roles(context)
        visible = {leg.prefix: leg for leg in self.legs if leg.spec.visible_to(roles)}
        leg_id = HUB_SESSION + session_id
        session = self.sessions[session_id] = _Session(session_id, leg_id, context, principal, visible)
        self._by_leg_session[leg_id] = session

    def close_session(self, session_id: str) -> list[Action]:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return []
        self._by_leg_session.pop(session.leg_id, None)
        for fan in session.fanouts.values():
            if fan.timer is not None:
                fan.timer.cancel()
        for leg in session.legs.values():
            if self._live(session, leg):
                assert leg.router is not None
                leg.perform(leg.router.close_session(session.leg_id))
        return []

    def undeliverable(self, session_id: str, down_id: RequestId) -> list[Action]:
        session = self.sessions.get(session_id)
        if session is None or not isinstance(down_id, int):
            return []
        entry = session.outgoing.pop(down_id, None)
        if entry is not None:
            leg, generation, leg_id = entry
            session.incoming.pop((leg.name, leg_id), None)
            if leg.generation == generation and self._live(session, leg):
                assert leg.router is not None
                leg.perform(leg.router.undeliverable(session.leg_id, leg_id))
        return []

    def receive_downstream(self, session_id: str, raw: bytes | str) -> list[Action]:
        return self.receive_downstream_message(session_id, parse(raw))

    def receive_downstream_message(self, session_id: str, message: Message) -> list[Action]:
        session = self.sessions.get(session_id)
        if session is None:
            return []
        kind = message.kind
        if kind is Kind.REQUEST:
            route = ROUTES.get(message.method)  # type: ignore[arg-type]
            if route is not None and session.init is not None:  # the hot path: a call, a read, a get
                # a request's body is an object, its params an object or absent (`parse` refuses the rest)
                self._route(session, message, message.body.get("params") or {}, route)  # type: ignore[union-attr]
            else:
                self._request(session, message)
        elif kind is Kind.NOTIFICATION:
            self._notification(session, message)
        elif kind in (Kind.RESPONSE, Kind.ERROR):
            self._client_answer(session, message)
        elif message.problem is not None:  # malformed: answered as the router answers it
            problem = message.problem
            self._reply(session, message.id, error=_error(problem.code, problem.message, problem.data))
        return []

    async def upstream_for(self, capabilities: dict[str, Any]) -> bool:
        """A session opens: the first one gives the eager servers up to `list_timeout` to finish starting (so
        `initialize` states their capabilities); a server that is down is not waited for, and later sessions
        wait for nothing. The aggregate answers whatever the servers do."""
        if self._waited:
            return True
        self._waited = True
        with anyio.move_on_after(self.list_timeout):
            while any(leg.spec.eager and leg.state in ("idle", "starting") for leg in self.legs):
                await anyio.sleep(0.02)
        return True

    def serve_one(self, send: Callable[[bytes], None]) -> None:
        """Deliver to one client (stdio) by `send`: its messages need no session named, so a leg's reply
        passes on as the bytes it is."""
        self._send_bytes = send
        self.deliver = lambda action: send(action.data)

    def drain(self) -> Awaitable[None]:
        """Wait for the write buffers of the legs written to since the last drain. One leg (a call's): the drain
        of its server's process of the moment (its `SupervisedUpstream`'s `current`), handed back, so awaiting it
        adds no coroutine of the aggregate's or the supervisor's."""
        touched = self._touched
        if len(touched) == 1:
            upstream = touched.pop().upstream
            current = upstream.current if upstream is not None else None
            if current is not None:
                return current.drain()  # type: ignore[no-any-return]
        return self._drain_all()

    async def _drain_all(self) -> None:
        touched = self._touched
        while touched:
            upstream = touched.pop().upstream
            if upstream is not None:
                await upstream.drain()

    # Client requests -----------------------------------------------------------------------------
    def _request(self, session: _Session, message: Message) -> None:
        method = message.method or ""
        params = message.params or {}
        if method == "initialize":
            if session.era is Era.MODERN and not session.probing:
                reason = "this session speaks 2026-07-28: no initialize"
                self._reply(session, message.id, error=_error(INVALID_REQUEST, "Invalid Request", {"reason": reason}))
            else:
                self._initialize(session, message)
            return
        if session.init is None and message.protocol_version is not None:  # 2026-07-28: the envelope on each
            if not self._modern(session, message):
                return
            if method == "server/discover":
                self._discover(session, message)
                return
        elif session.init is None and method != "ping":
            reason = "initialize first, or send the 2026-07-28 envelope"
            self._reply(session, message.id, error=_error(INVALID_REQUEST, "Invalid Request", {"reason": reason}))
            return
        if method == "ping":
            self._reply(session, message.id, result={})
        elif method in LISTS:
            self._fan_out(session, message, params.get("cursor"))
        elif method in BROADCAST:
            level = params.get("level")
            session.log_level = level if isinstance(level, str) else session.log_level
            self._fan_out(session, message, None)
        elif method in ROUTES:
            self._route(session, message, params, ROUTES[method])
        elif method == "completion/complete":
            ref = params.get("ref")
            resource = isinstance(ref, dict) and ref.get("type") == "ref/resource"
            route = COMPLETE_RESOURCE if resource else COMPLETE_PROMPT
            self._route(session, message, ref if isinstance(ref, dict) else {}, route)
        else:
            self._reply(session, message.id, error=_error(METHOD_NOT_FOUND, "Method not found", method))

    def _initialize(self, session: _Session, message: Message) -> None:
        params = dict(message.params or {})
        version = negotiate(params.get("protocolVersion"))
        params["protocolVersion"] = version
        session.init = params
        session.era, session.probing = Era.HANDSHAKE, False
        declared = params.get("capabilities")
        session.capabilities = declared if isinstance(declared, dict) else {}
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self._capabilities(session, BASE_CAPABILITIES),
            "serverInfo": self.server_info,
            "instructions": _instructions(session),
        }
        self._reply(session, message.id, result=result)

    def _modern(self, session: _Session, message: Message) -> bool:
        """A 2026-07-28 request's envelope checked as a server checks it (False: answered with the error). The
        session's legs check it again: each gets the request with its envelope, in a session of its own era."""
        version, problem = modern_envelope(message.params)
        if problem is not None:
            self._reply(session, message.id, error=_error(INVALID_PARAMS, problem))
            return False
        if version not in MODERN_VERSIONS:
            data = {"supported": list(MODERN_VERSIONS), "requested": version}
            self._reply(session, message.id, error=_error(UNSUPPORTED_VERSION, "Unsupported protocol version", data))
            return False
        if session.era is None:
            session.era, session.probing = Era.MODERN, message.method == "server/discover"
        elif message.method != "server/discover":
            session.probing = False
        meta = message.meta or {}
        declared = meta.get(CLIENT_CAPABILITIES_META_KEY)
        session.capabilities = declared if isinstance(declared, dict) else {}
        return True

    def _discover(self, session: _Session, message: Message) -> None:
        result: dict[str, Any] = {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": self._capabilities(session, MODERN_CAPABILITIES),
            "serverInfo": self.server_info,
            "instructions": _instructions(session),
        }
        self._reply(session, message.id, result=result, cacheable=True)

    def _capabilities(self, session: _Session, base: dict[str, Any]) -> dict[str, Any]:
        capabilities: dict[str, Any] = {key: dict(value) for key, value in base.items()}
        tasks: dict[str, Any] = {}
        for leg in session.legs.values():
            if leg.ready:
                assert leg.router is not None
                tasks.update(_task_capabilities(leg.router.upstream.capabilities.get("tasks")))
        if tasks:
            capabilities["tasks"] = tasks
        return capabilities

    def _route(self, session: _Session, message: Message, params: dict[str, Any], route: _Route) -> None:
        key, separator, rewrite, what = route
        target = params.get(key)
        leg = None
        if target.__class__ is str:  # a prefix holds no separator: the first one ends it (names.py)
            prefix, found, own = target.partition(separator)
            if found:
                leg = session.legs.get(prefix)
        if leg is None:
            self._reply(session, message.id, error=_unknown(what, target))
            return
        params[key] = own  # the message's own params (or its ref): the leg serialises them once
        if rewrite == "task?":  # a task-augmented call's reply holds a task id
            rewrite = "task" if "task" in params else None
        elif rewrite == "+":
            rewrite = self._subscription(session, message, leg, own)
        session.routed[message.id] = (leg, rewrite)  # type: ignore[index]
        runner = leg.runner
        if runner is not None and not runner.finished and session.opened.get(leg.name) == leg.generation:
            self._touched.add(leg)
            runner.perform(runner.router.receive_downstream_message(session.leg_id, message))
        else:
            self._send(session, leg, message)

    @staticmethod
    def _subscription(session: _Session, message: Message, leg: Leg, own: str) -> None:
        """The subscriptions a session holds, by leg (renewed on the leg's new process)."""
        held = session.subscribed.setdefault(leg.name, set())
        if message.method == "resources/subscribe":
            held.add(own)
        else:
            held.discard(own)

    def _fan_out(self, session: _Session, message: Message, cursor: Any) -> None:
        legs = list(session.legs.values())
        cursors: dict[str, Any] = {}
        if cursor is not None:
            decoded = _decode_cursor(cursor)
            if decoded is None:
                self._reply(session, message.id, error=_error(INVALID_PARAMS, "Invalid cursor", {"cursor": cursor}))
                return
            cursors = decoded
            legs = [leg for leg in legs if leg.prefix in cursors]
        fan = _FanOut(message.method or "", message.id, legs, {leg.prefix: leg for leg in legs})  # type: ignore[arg-type]
        assert message.id is not None
        session.fanouts[message.id] = fan
        if legs:
            fan.timer = asyncio.get_running_loop().call_later(self.list_timeout, self._expire, session, fan)
        for leg in legs:
            copy = _copy(message, cursors.get(leg.prefix))  # a leg's router may change what it is given
            self._send(session, leg, copy, fan)
        if not legs:
            self._finish(session, fan)

    # Client notifications and answers --------------------------------------------------------------
    def _notification(self, session: _Session, message: Message) -> None:
        method = message.method
        if method == "notifications/initialized":
            session.initialized = True
        elif method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            fan = session.fanouts.pop(request_id, None)  # type: ignore[arg-type]
            if fan is not None:
                if fan.timer is not None:
                    fan.timer.cancel()
                for leg in fan.waiting.values():
                    self._pass(session, leg, message)
                return
            route = session.routed.pop(request_id, None)  # type: ignore[arg-type]
            if route is not None:
                self._pass(session, route[0], message)
        elif method in BROADCAST_NOTIFICATIONS:
            for leg in session.legs.values():
                self._pass(session, leg, message)
        else:  # a progress of the client's, or one the legs would drop: passed on to the ones it names
            logger.debug("aggregate: dropped a client notification %s", method)

    def _client_answer(self, session: _Session, message: Message) -> None:
        """The client's answer to a server's request (sampling, elicitation, roots): back to that server."""
        down_id = message.id
        entry = session.outgoing.pop(down_id, None) if isinstance(down_id, int) else None
        if entry is None:
            return
        leg, generation, leg_id = entry
        session.incoming.pop((leg.name, leg_id), None)
        if leg.generation != generation or not self._live(session, leg):
            return
        body = dict(message.body or {})
        body["id"] = leg_id
        self._pass(session, leg, replace(message, body=body, id=leg_id))

    # To the legs -----------------------------------------------------------------------------------
    def _live(self, session: _Session, leg: Leg) -> bool:
        """This session is open in the leg's current router."""
        return session.opened.get(leg.name) == leg.generation and leg.runner is not None and not leg.runner.finished

    def _pass(self, session: _Session, leg: Leg, message: Message) -> None:
        """A notification or an answer, to a leg where the session is open (else nothing to tell)."""
        if self._live(session, leg):
            assert leg.router is not None
            self._touched.add(leg)
            leg.perform(leg.router.receive_downstream_message(session.leg_id, message))

    def _send(self, session: _Session, leg: Leg, message: Message, fan: _FanOut | None = None) -> None:
        """A request to a leg: now when its router runs (it waits there while the server's handshake runs, and
        is answered at once while the server restarts); a leg not started yet is started and waited for; a leg
        that is down fails at once (a fanned-out list leaves it out, a routed request gets an error)."""
        runner = leg.runner
        if runner is not None and not runner.finished:
            if session.opened.get(leg.name) != leg.generation:
                self._open_in(session, leg)
            self._touched.add(leg)
            runner.perform(runner.router.receive_downstream_message(session.leg_id, message))
            return
        if leg.state == "down" or self.tasks is None:
            self._failed(session, leg, message, fan, leg.unavailable_reason())
            return
        leg.ensure_started(session.capabilities)
        wait = self.list_timeout if leg.incarnations == 0 else START_WAIT_S

        async def later() -> None:
            if await leg.wait_ready(wait) and session.id in self.sessions:
                self._send(session, leg, message, fan)
            else:
                self._failed(session, leg, message, fan, leg.unavailable_reason())
            await self.drain()

        self.tasks.start_soon(later)

    def _failed(self, session: _Session, leg: Leg, message: Message, fan: _FanOut | None, reason: str) -> None:
        if fan is not None:
            self._collect(session, fan, leg, None, reason)
        else:
            self._fail(session, leg, message.id, reason)

    def _open_in(self, session: _Session, leg: Leg) -> None:
        if session.opened.get(leg.name) == leg.generation:
            return
        router = leg.router
        assert router is not None
        sid = session.leg_id
        router.open_session(sid, context=session.context, principal=session.principal)
        session.opened[leg.name] = leg.generation
        if session.era is Era.MODERN:  # no handshake: each request carries its envelope to the leg's session
            return
        params = session.init or {"protocolVersion": LATEST_HANDSHAKE, "capabilities": {}}
        params = {**params, "clientInfo": params.get("clientInfo") or {"name": "mcp-interceptors-hub", "version": "1"}}
        init = dumps_exact({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize", "params": params})
        leg.perform(router.receive_downstream_message(sid, parse(init)))
        leg.perform(router.receive_downstream_message(sid, parse(_INITIALIZED)))
        # A new process of the server (past its restart bound): what the session had asked of the old one
        renew: list[tuple[str, dict[str, Any]]] = [("resources/subscribe", {"uri": uri})
                                                   for uri in sorted(session.subscribed.get(leg.name, ()))]  # fmt: skip
        if session.log_level is not None:
            renew.append(("logging/setLevel", {"level": session.log_level}))
        for index, (method, renewed) in enumerate(renew):
            request = {"jsonrpc": "2.0", "id": f"{INTERNAL}renew-{index}", "method": method, "params": renewed}
            leg.perform(router.receive_downstream_message(sid, parse(dumps_exact(request))))

    def _fail(self, session: _Session, leg: Leg, request_id: RequestId | None, reason: str) -> None:
        if session.routed.pop(request_id, None) is None:  # type: ignore[arg-type]
            return  # answered or cancelled meanwhile
        data = {"server": leg.name, "reason": reason, "retry": True}
        self._reply(
            session, request_id, error=_error(INTERNAL_ERROR, f"server {leg.name!r} is unavailable: {reason}", data)
        )

    # From the legs ---------------------------------------------------------------------------------
    def from_leg(self, leg: Leg, action: SendDownstream) -> None:
        """A message a leg's router releases for an aggregate session (never raises into the leg's runner)."""
        try:
            session = self._by_leg_session.get(action.session)
            if session is None or session.opened.get(leg.name) != leg.generation:
                return
            if action.final:  # a reply: as is, unless it completes a list or must name the server
                related, data = action.related, action.data
                route = session.routed.pop(related, None)  # type: ignore[arg-type]
                if route is not None:
                    if route[1] is not None or data.find(b'"error":{', 0, 512) >= 0:
                        data = _reply_out(leg, data, route[1])
                    send = self._send_bytes
                    if send is not None:  # one client: no session to name
                        send(data)
                    else:
                        self.deliver(SendDownstream(session.id, data, related, True))
                    return
            self._from_leg(session, leg, action)
        except Exception as exc:  # a defect: logged; the leg and the other sessions go on
            logger.error("the aggregate failed on a message of server %s: %s", leg.name, type(exc).__name__)

    def _from_leg(self, session: _Session, leg: Leg, action: SendDownstream) -> None:
        related, data = action.related, action.data
        if action.final:
            if isinstance(related, str) and related.startswith(INTERNAL):
                return
            fan = session.fanouts.get(related)  # type: ignore[arg-type]
            if fan is not None and leg.prefix in fan.waiting:
                self._collect(session, fan, leg, data, None)
                return
            self.deliver(SendDownstream(session.id, data, related, True))
            return
        if b'"notifications/progress"' in data[:64]:  # the client's own token: as is
            self.deliver(action if action.session == session.id else replace(action, session=session.id))
            return
        body = _loads(data)
        if body is None:
            return
        outgoing = action.outgoing
        if outgoing is not None:  # a request to the client: an id of the aggregate's own
            agg_id = next(self._ids)
            session.outgoing[agg_id] = (leg, leg.generation, outgoing)
            session.incoming[(leg.name, outgoing)] = agg_id
            body["id"] = agg_id
            self.deliver(SendDownstream(session.id, dumps_exact(body), related, False, agg_id))
            return
        if not _notification_out(leg, body, session):
            return
        self.deliver(SendDownstream(session.id, dumps_exact(body), related))

    def _collect(self, session: _Session, fan: _FanOut, leg: Leg, data: bytes | None, reason: str | None) -> None:
        if fan.waiting.pop(leg.prefix, None) is None:
            return
        if data is not None:
            fan.replies[leg.prefix] = _loads(data)
        else:
            fan.failed[leg.prefix] = reason or "no answer"
        if not fan.waiting:
            self._finish(session, fan)

    def _expire(self, session: _Session, fan: _FanOut) -> None:
        if session.fanouts.get(fan.request_id) is not fan:
            return
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": fan.request_id}}
        for prefix, leg in list(fan.waiting.items()):
            fan.failed[prefix] = f"it did not answer within {self.list_timeout:g} s"
            self._pass(session, leg, parse(dumps_exact(cancel)))
        fan.waiting.clear()
        self._finish(session, fan)

    def _finish(self, session: _Session, fan: _FanOut) -> None:
        if session.fanouts.pop(fan.request_id, None) is not fan:
            return
        if fan.timer is not None:
            fan.timer.cancel()
        if fan.method in BROADCAST:
            self._reply(session, fan.request_id, result={})
            return
        key, field_name, is_uri = LISTS[fan.method]
        items: list[Any] = []
        cursors: dict[str, Any] = {}
        unavailable: dict[str, str] = {}
        for leg in fan.order:
            if leg.prefix in fan.failed:
                unavailable[leg.name] = fan.failed[leg.prefix]
                continue
            reply = fan.replies.get(leg.prefix)
            if not isinstance(reply, dict):
                unavailable[leg.name] = "an unreadable answer"
                continue
            if "error" in reply:
                error = reply["error"] if isinstance(reply["error"], dict) else {}
                if error.get("code") != METHOD_NOT_FOUND:  # a server without this kind of thing: simply none
                    unavailable[leg.name] = str(error.get("message", "an error"))
                continue
            result = reply.get("result")
            if not isinstance(result, dict):
                continue
            for item in result.get(key) or ():
                if isinstance(item, dict) and isinstance(item.get(field_name), str):
                    value = item[field_name]
                    item[field_name] = uri_out(leg.prefix, value) if is_uri else name_out(leg.prefix, value)
                    items.append(item)
            if result.get("nextCursor") is not None:
                cursors[leg.prefix] = result["nextCursor"]
        result_out: dict[str, Any] = {key: items}
        if cursors:
            result_out["nextCursor"] = _encode_cursor(cursors)
        if unavailable:
            result_out["_meta"] = {UNAVAILABLE_META: unavailable}
        self._reply(session, fan.request_id, result=result_out, cacheable=True)

    def _new_generation(self, leg: Leg) -> None:
        """A leg came back as a new process and router: its sessions are reopened on use; clients re-list."""
        for session in self.sessions.values():
            if leg.prefix in session.legs and session.initialized:
                for data in LIST_CHANGED:
                    self.deliver(SendDownstream(session.id, data))

    def _reply(
        self,
        session: _Session,
        request_id: RequestId | None,
        *,
        result: Any = None,
        error: Any = None,
        cacheable: bool = False,
    ) -> None:
        """An answer of the aggregate's own; a 2026-07-28 session's result gets the era's stamp (the gateway's
        server info; a routed result keeps its server's)."""
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            body["error"] = error
        elif session.era is Era.MODERN:
            body["result"] = downstream_result(result, Era.MODERN, self.server_info, cacheable)
        else:
            body["result"] = result
        self.deliver(SendDownstream(session.id, dumps_exact(body), request_id, True))


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mcp-interceptors")
    except Exception:
        return "unknown"


_VERSION: Final = _version()


def _task_capabilities(declared: Any) -> dict[str, Any]:
    """What a server declares of tasks, in the spec's shape only (this answer passes no leg's chain, so no
    member of the server's own is repeated)."""
    if not isinstance(declared, dict):
        return {}
    out: dict[str, Any] = {key: {} for key in ("list", "cancel") if isinstance(declared.get(key), dict)}
    requests = declared.get("requests")
    tools = requests.get("tools") if isinstance(requests, dict) else None
    if isinstance(tools, dict) and isinstance(tools.get("call"), dict):
        out["requests"] = {"tools": {"call": {}}}
    return out


def _copy(message: Message, cursor: Any) -> Message:
    body = dict(message.body or {})
    params = dict(message.params or {})
    if isinstance(params.get("_meta"), dict):
        params["_meta"] = dict(params["_meta"])
    if cursor is not None:
        params["cursor"] = cursor
    else:
        params.pop("cursor", None)
    body["params"] = params
    return replace(message, body=body)


def _instructions(session: _Session) -> str:
    """The servers' own instructions are not repeated: a leg's chain judges its initialize result per session
    (the policy may redact it), and this answer passes no leg's chain."""
    servers = ", ".join(f"{leg.prefix} ({leg.name})" for leg in session.legs.values())
    return (
        f"One gateway in front of: {servers or 'no server'}. Tools and prompts are named PREFIX__NAME, "
        "resources PREFIX+URI."
    )


def _roles(context: Any) -> list[str]:
    principal = getattr(context, "principal", None)
    claims = getattr(principal, "claims", None) or {}
    roles = claims.get("roles") if isinstance(claims, dict) else None
    return [role for role in roles if isinstance(role, str)] if isinstance(roles, list | tuple) else []


def _unknown(what: str, target: Any) -> dict[str, Any]:
    """What the SDK answers for a missing primitive (hidden equals missing: a server the principal may not see
    is answered the same)."""
    if what == "resource":
        return _error(INVALID_PARAMS, f"Resource not found: {target}", {"uri": target})
    if what == "task":
        return _error(INVALID_PARAMS, "Task not found")
    return _error(INVALID_PARAMS, f"Unknown {what}: {target}")


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _encode_cursor(cursors: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(cursors)).decode()


def _decode_cursor(cursor: Any) -> dict[str, Any] | None:
    if not isinstance(cursor, str):
        return None
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, orjson.JSONDecodeError):
        return None
    return decoded if isinstance(decoded, dict) else None


_UNKNOWN_PREFIXES: Final = ("Unknown tool: ", "Unknown prompt: ")


def _reply_out(leg: Leg, data: bytes, rewrite: str | None) -> bytes:
    """A leg's final reply to a routed request: as is, unless it is an error (it then names the server) or
    holds a task id (namespaced)."""
    body = _loads(data)
    if not isinstance(body, dict):
        return data
    error = body.get("error")
    if isinstance(error, dict):
        message = str(error.get("message", ""))
        if message.startswith(_UNKNOWN_PREFIXES):  # the name the client used, as the aggregate's own refusal
            head, _, name = message.partition(": ")
            error["message"] = f"{head}: {name_out(leg.prefix, name)}"
        else:
            error["message"] = f"server {leg.name!r}: {message}"
        data_field = error.get("data")
        if data_field is None:
            error["data"] = {"server": leg.name}
        elif isinstance(data_field, dict):
            data_field.setdefault("server", leg.name)
        return dumps_exact(body)
    result = body.get("result")
    if not isinstance(result, dict):
        return data
    if rewrite == "task" and isinstance(result.get("task"), dict):
        _name_field(result["task"], "taskId", leg)
    elif rewrite == "taskrecord":
        _name_field(result, "taskId", leg)
    meta = result.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get(RELATED_TASK), dict):
        _name_field(meta[RELATED_TASK], "taskId", leg)
    return dumps_exact(body)


def _name_field(holder: dict[str, Any], key: str, leg: Leg) -> None:
    if isinstance(holder.get(key), str):
        holder[key] = name_out(leg.prefix, holder[key])


def _notification_out(leg: Leg, body: dict[str, Any], session: _Session) -> bool:
    """A leg's notification as the client sees it through the aggregate (False: not for the client)."""
    method = body.get("method")
    params = body.get("params")
    if not isinstance(params, dict):
        return method is not None
    if method == "notifications/message":
        inner = params.get("logger")
        params["logger"] = f"{leg.name}/{inner}" if isinstance(inner, str) and inner else leg.name
    elif method == "notifications/resources/updated":
        if isinstance(params.get("uri"), str):
            params["uri"] = uri_out(leg.prefix, params["uri"])
    elif method == "notifications/tasks/status":
        _name_field(params, "taskId", leg)
    elif method == "notifications/cancelled":  # the server takes back a request it sent the client
        request_id = params.get("requestId")
        if not isinstance(request_id, int | str):
            return False
        agg_id = session.incoming.pop((leg.name, request_id), None)
        if agg_id is None:
            return False
        session.outgoing.pop(agg_id, None)
        params["requestId"] = agg_id
    return True
