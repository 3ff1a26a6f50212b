"""The one task that pumps bytes between the shells and the router and performs its actions in order.

Everything the router returns is performed synchronously, in order (writes are queued on the pipes at
once), except `RunChain`, which runs as its own task and feeds its outcome back with `chain_done`: the
router's output streams keep the order of each request, and unrelated requests never wait for each other.
Router calls never interleave (one event loop, no await inside a router call).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import anyio
import anyio.abc

from interceptors import Phase
from interceptors._fastinit import fast_init
from interceptors.protocol.framing import MAX_LINE_BYTES, Oversized
from interceptors.protocol.messages import (
    CLIENT_CAPABILITIES_META_KEY,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Kind,
    Message,
    parse,
    recover_id,
)
from interceptors.protocol.messages import error_message as _error_line
from interceptors_chain.concurrency import start_eagerly

from .catalog import Catalog
from .chain_adapter import ChainAdapter
from .local import LocalAnswers
from .recovery import LIST_CHANGED_METHODS, Renewal, Renewed, SupervisedUpstream, UpstreamDown, UpstreamRestarted
from .router import (
    Action,
    AnswerLocally,
    CatalogChanged,
    Close,
    Dropped,
    Router,
    RunChain,
    SendDownstream,
    SendUpstream,
    UpstreamPhase,
)

logger = logging.getLogger("interceptors.gateway")

STDIO_SESSION: Final = "stdio"
UPSTREAM_GONE: Final = "upstream server closed the connection"
MAX_EXTENSIONS: Final = 10
"""A request that keeps reporting progress may run this many timeouts at most."""
DEADLINE_TICK_S: Final = 0.1
"""How often the request clocks are read: `--upstream-timeout` fires within this of its time."""
FLOW_BYTES: Final = 32 << 20
"""Progress queued for one request at most (bytes): beyond it the upstream's reader waits for the flows."""
FLOW_SLICE_S: Final = 0.002
"""The flows' server yields to the event loop after this much work."""
HANDSHAKE_S: Final = 60.0
"""The least time the upstream's handshake gets, whatever `--upstream-timeout` says (its process starts)."""


class LineShell(Protocol):
    """A transport that only frames: queue one message, wait for its buffer, read whole lines."""

    def send(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def lines(self) -> Any: ...


class UpstreamShell(Protocol):
    """The upstream side: `send` learns the upstream id of a request (an HTTP shell reads its reply stream);
    `lines()` yields raw messages, or `(message, upstream id)` for one that came on a request's stream."""

    def send(self, data: bytes, request_id: int | None = None) -> None: ...

    async def drain(self) -> None: ...

    def lines(self) -> Any: ...


class NoDownstream:
    """The downstream slot of a `Runner` whose clients are served elsewhere (HTTP, memory): its `perform`
    delivers every `SendDownstream` itself, so nothing reaches this."""

    def send(self, data: bytes) -> None:  # pragma: no cover - SendDownstream never reaches it
        raise AssertionError("this runner's clients are served by its own front")

    async def drain(self) -> None:
        return None

    def lines(self) -> Any:  # pragma: no cover
        raise AssertionError("this runner's clients are served by its own front")


class Runner:
    """One upstream, one downstream stdio session. `await run()` returns the exit status."""

    def __init__(
        self,
        router: Router,
        adapter: ChainAdapter,
        upstream: UpstreamShell,
        downstream: LineShell,
        *,
        context: Any = None,
        principal: Hashable = None,
        catalog: Catalog | None = None,
        handle_signals: bool = False,
        timeout: float | None = None,
        local: LocalAnswers | None = None,
    ) -> None:
        self.router = router
        self.adapter = adapter
        self.upstream = upstream
        self.downstream = downstream
        self.context = context
        self.principal = principal
        self.catalog = catalog
        self.handle_signals = handle_signals
        self.timeout = timeout
        self.local = local
        self._deadlines: OrderedDict[int, _Deadline] = OrderedDict()  # by upstream id, in the order of expiry
        self._swept_size = 0
        self.exit_code: int | None = None
        self._done = anyio.Event()
        self._ready = anyio.Event()
        self._primed = anyio.Event()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._chain_runs: set[asyncio.Task[None]] = set()
        self._restarting = False  # the upstream died and is being replaced (`--restart-upstream`)
        self._refreshed_for: set[str] = set()  # unknown tool names already re-listed for (see `_refresh_tools`)
        self._tools_listing: anyio.Event | None = None
        self._flows: dict[int, _Flow] = {}  # progress floods by upstream request id, served in turn
        self._flows_waiting = asyncio.Event()
        self._last_flow = 0
        self._flows_served = asyncio.Event()
        self._handshook: anyio.Event | None = None  # set once the first client's handshake of the upstream ended
        self._handshake_ok = False

    renewal: Renewal | None = None
    """What a new upstream session needs (`recovery.Renewal`): set for an HTTP upstream or `--restart-upstream`."""

    def enable_renewal(self) -> None:
        """Renew subscriptions, the log level and the catalog whenever the upstream session is new."""
        self.renewal = Renewal(self.router, self._catalog_differs)

    def _catalog_differs(self, kind: str) -> None:
        """The new upstream session lists `kind` otherwise: relayed as the upstream's own `list_changed` (to
        clients, and to the policy's catalog), after the router call now running returns."""
        notification = b'{"jsonrpc":"2.0","method":"' + LIST_CHANGED_METHODS[kind].encode() + b'"}'
        logger.info("the new upstream session lists other %s: announcing list_changed", kind)
        asyncio.get_running_loop().call_soon(lambda: self.perform(self.router.receive_upstream(notification)))

    def _start_tasks(self, tasks: anyio.abc.TaskGroup) -> None:
        """The shell's own tasks: the upstream pump (a server that dies is noticed at once), deadlines, signals."""
        self._tasks = tasks
        tasks.start_soon(self._pump_upstream)
        tasks.start_soon(self._serve_flows)
        if self.timeout is not None:
            tasks.start_soon(self._watch_deadlines)
        if self.handle_signals:
            tasks.start_soon(self._watch_signals)

    async def _start(self, tasks: anyio.abc.TaskGroup) -> bool:
        """The shell's own tasks and the upstream's handshake; True when the upstream is ready (its catalog
        learnt) and clients may be let in."""
        self._start_tasks(tasks)
        return await self._handshake()

    async def _handshake(self, client_capabilities: dict[str, Any] | None = None) -> bool:
        """The upstream's handshake (declaring `client_capabilities` when the one client is known), then its
        catalog; True when clients may be let in."""
        self.perform(self.router.start(client_capabilities))
        await self.upstream.drain()
        await self._ready.wait()
        if self.router.upstream.phase is not UpstreamPhase.READY:
            return False
        await self._prime()
        if self.renewal is not None:
            self.perform(self.renewal.snapshot())  # what the catalog was, to compare a new session's with
        if isinstance(self.upstream, SupervisedUpstream):
            self.upstream.ready()
        return not self._done.is_set()  # the upstream may go away while its catalog is read

    async def upstream_for(self, capabilities: dict[str, Any]) -> bool:
        """A shell shared by sessions (HTTP, memory): the first client's first message starts the upstream's
        handshake, declaring what that client declared (`capabilities`), so the upstream offers through the
        gateway what it offers that client directly; every later caller waits for the same handshake (and the
        catalog). True when the upstream is ready. A later session that lacks a capability the first declared
        gets the upstream's request for it answered -32601 (the router's rule), as a client without it would."""
        if self._done.is_set():  # the upstream went away (or the gateway is stopping) before any client came
            return False
        if self._handshook is None:
            self._handshook = anyio.Event()
            assert self._tasks is not None, "the shell's tasks start before its clients come"
            self._tasks.start_soon(self._first_handshake, capabilities)
        await self._handshook.wait()
        return self._handshake_ok

    async def _first_handshake(self, capabilities: dict[str, Any]) -> None:
        try:  # a task of the runner's own: a client that leaves during the handshake does not cancel it
            self._handshake_ok = await self._handshake(capabilities)
        finally:
            assert self._handshook is not None
            self._handshook.set()

    async def run(self) -> int:
        async with anyio.create_task_group() as tasks:
            self._start_tasks(tasks)
            tasks.start_soon(self._serve_client)
            await self._done.wait()
            for run in self._chain_runs:
                run.cancel()
            tasks.cancel_scope.cancel()
        await self.downstream.drain()
        return self.exit_code or 0

    async def _serve_client(self) -> None:
        """The upstream's handshake waits for the client's first message, so the upstream is told what this
        client supports (a server offers tools by the client's capabilities) and a request it sends at once
        (the roots of a server that takes its folders from the client) finds the client's session open."""
        lines = aiter(self.downstream.lines())
        first = await anext(lines, None)
        if first is None:  # the client left without a word: the upstream is still checked (exit 1 if it fails)
            ready = await self._handshake()
            self._finish(0 if ready else 1)
            return
        self.router.open_session(STDIO_SESSION, context=self.context, principal=self.principal)
        held, reading = await self._handshake_watching(lines, declared_capabilities(first))
        if reading is not None:
            await self._pump_downstream(_after_handshake(held, reading, lines), first)

    async def _handshake_watching(
        self, lines: AsyncIterator[bytes | Oversized], capabilities: dict[str, Any] | None
    ) -> tuple[list[bytes | Oversized], asyncio.Future[bytes | Oversized | None] | None]:
        """The upstream's handshake while the client's next lines are read (up to `MAX_HELD_LINES`, kept for
        after it): a client that closes stdin before the upstream answers ends the gateway at once (status 0).
        Returns the lines held and the read in progress; (_, None) when clients may not be let in."""
        handshake = asyncio.ensure_future(self._handshake(capabilities))
        held: list[bytes | Oversized] = []
        reading: asyncio.Future[bytes | Oversized | None] | None = asyncio.ensure_future(anext(lines, None))
        while not handshake.done() and reading is not None and len(held) < MAX_HELD_LINES:
            await asyncio.wait((handshake, reading), return_when=asyncio.FIRST_COMPLETED)
            if handshake.done() or not reading.done():
                break
            line = reading.result()
            if line is None:
                logger.info("the client closed stdin before the upstream server finished its handshake")
                self._finish(0)
                reading = None
                break
            held.append(line)
            reading = asyncio.ensure_future(anext(lines, None))
        ready = await handshake
        return held, reading if ready else None

    async def _prime(self) -> None:
        catalog = self.catalog
        if catalog is None:
            return
        catalog.on_settled = self._primed.set
        self.perform(catalog.prime())
        await self.upstream.drain()
        if catalog.settled:
            return
        await self._primed.wait()
        catalog.on_settled = None

    def _finish(self, code: int) -> None:
        if self.exit_code is None:
            self.exit_code = code
        self._ready.set()
        self._primed.set()  # nothing waits for a catalog once the gateway is ending
        self._done.set()

    # Performing actions ---------------------------------------------------------------------------
    def perform(self, actions: list[Action]) -> None:
        chains: list[RunChain] = []
        relay: _Relay | None = None  # the list_changed of a CatalogChanged, held until the catalog is new
        for action in actions:
            if relay is not None and not relay.released and isinstance(action, SendDownstream):
                relay.items.append(action)
            elif isinstance(action, SendDownstream):
                self.send_downstream(action)
            elif isinstance(action, SendUpstream):
                self.upstream.send(action.data, action.request_id)
                if action.request_id is not None and self.timeout is not None:
                    timeout = self.timeout
                    if self.router.upstream.phase is not UpstreamPhase.READY:  # the server may still be starting
                        timeout = max(timeout, HANDSHAKE_S)
                    now = asyncio.get_running_loop().time()
                    self._deadlines[action.request_id] = _Deadline(now + timeout, now + timeout * MAX_EXTENSIONS, 0)
            elif isinstance(action, RunChain):
                chains.append(action)
            elif isinstance(action, Dropped):
                logger.info("dropped %s: %s", action.method or "a message", action.reason)
            elif isinstance(action, CatalogChanged):
                if action.kind == "tools":
                    self._refreshed_for.clear()
                if self.catalog is not None:
                    # the clients hear of the change once the policy knows the new catalog: a tool called
                    # right after list_changed is judged on its metadata, never refused as unknown
                    relay = _Relay()
                    self.perform(self.catalog.prime(action.kind, then=relay.release))
                if self.renewal is not None:
                    self.perform(self.renewal.snapshot(action.kind))
            elif isinstance(action, AnswerLocally):
                if self.local is None:
                    error = {"code": METHOD_NOT_FOUND, "message": "Method not found", "data": action.method}
                    self.perform(self.router.reply_local(action.session, action.request_id, error=error))
                else:
                    answer = asyncio.get_running_loop().create_task(self._answer_locally(action, self.local))
                    self._chain_runs.add(answer)
                    answer.add_done_callback(self._chain_runs.discard)
            elif isinstance(action, Close):
                if self._restarting and isinstance(self.upstream, SupervisedUpstream):
                    logger.error("the restarted upstream server failed: %s", action.reason)
                    self.upstream.fail()  # replaced again, within the restart bound
                    continue
                if action.reason != UPSTREAM_GONE:
                    logger.error("%s", action.reason)
                logger.error("the upstream server closed the connection")
                self._finish(1)
        for action in chains:
            self._start_chain(action)

    def send_downstream(self, action: SendDownstream) -> None:
        """Deliver one message to the client side (the seam a shell with other downstreams overrides)."""
        self.downstream.send(action.data)

    def _start_chain(self, action: RunChain) -> None:
        """A chain run, started after the rest of its batch is performed. One the chain can move between tasks
        (`Chain.movable`: in-process stages with inline sync handlers, no timeout) runs on the calling task until
        it first suspends, and usually ends there: no task, no turn of the loop. Any other (a remote interceptor,
        a timeout: a cancel scope that must end on the task that entered it) runs as a bare task (not a
        task-group child). The runner keeps each task until it ends and cancels what is left when it stops."""
        run: asyncio.Task[None] | None
        try:
            movable = asyncio.current_task() is not None and self.adapter.movable(action)  # (a callback has no task)
        except Exception as exc:  # never expected; a task is always safe
            logger.error("could not tell whether a chain run may start inline: %s", type(exc).__name__)
            movable = False
        if movable:
            try:
                run = start_eagerly(self._run_chain(action))
            except Exception as exc:  # never expected: `_run_chain` reports its failures; the gateway keeps running
                logger.error("a chain run failed: %s", type(exc).__name__)
                return
            if run is None:
                return
        else:
            run = asyncio.get_running_loop().create_task(self._run_chain(action))
        self._chain_runs.add(run)
        run.add_done_callback(self._chain_runs.discard)

    async def _run_chain(self, action: RunChain) -> None:
        name = self._unknown_tool(action)
        if name is not None:
            await self._refresh_tools(name)
        outcome = await self.adapter.run(action)
        try:
            actions = self.router.chain_done(action.ticket, outcome)
        except Exception as exc:  # a router defect: logged, never a crash of the whole gateway
            logger.error("the router failed on a chain outcome: %s", type(exc).__name__)
            return
        self.perform(actions)
        await self.upstream.drain()
        await self.downstream.drain()

    def _unknown_tool(self, action: RunChain) -> str | None:
        """A `tools/call` (request pass) of a name the catalog has not seen: the upstream may have added it a
        moment ago (its list_changed still on the way). A hidden tool is known: it is refused as before."""
        catalog, request = self.catalog, action.request
        if catalog is None or request is None or action.event != "tools/call" or action.phase is not Phase.REQUEST:
            return None
        name = request.target
        if name is None or catalog.knows_tool(name) or name in self._refreshed_for:
            return None
        return name

    async def _refresh_tools(self, name: str) -> None:
        """Re-list the tools once before the policy judges `name` (concurrent calls share one listing; a name
        gets at most one listing until the catalog changes again, so unknown names cannot flood the upstream)."""
        catalog = self.catalog
        assert catalog is not None
        if len(self._refreshed_for) >= MAX_REFRESHED_NAMES:
            self._refreshed_for.clear()
        self._refreshed_for.add(name)
        listing = self._tools_listing
        if listing is None:
            listing = self._tools_listing = anyio.Event()

            def settled() -> list[Action]:
                listing.set()
                self._tools_listing = None
                return []

            self.perform(catalog.prime("tools", then=settled))
            await self.upstream.drain()
        await listing.wait()

    async def _answer_locally(self, action: AnswerLocally, local: LocalAnswers) -> None:
        session = self.router.sessions.get(action.session)
        result, error = await local.answer(action, session.context if session is not None else None)
        self.perform(self.router.reply_local(action.session, action.request_id, result=result, error=error))
        await self.downstream.drain()

    # Pumps ----------------------------------------------------------------------------------------
    async def _pump_upstream(self) -> None:
        router = self.router
        async for item in self.upstream.lines():
            # Reading the upstream never waits on writing to it: a synchronous upstream blocked on its own
            # full stdout would never read what we wait to write (both pipes full, neither side moves). What
            # this pump queues for the upstream leaves as the upstream reads it; the clients' pumps and the
            # chain tasks wait for that drain, so a full upstream pushes back on them, never on its replies.
            if isinstance(item, Renewed | UpstreamDown | UpstreamRestarted):
                self._drain_flows()  # what came before goes first (a reply queued behind its progress)
                self._recover(item)
                continue
            if isinstance(item, Oversized):
                reply = _oversized_reply(item, router, getattr(self.upstream, "max_line", MAX_LINE_BYTES))
                if reply is None:
                    logger.warning("dropped an oversized upstream message (its request ends at the timeout)")
                    continue
                logger.warning("dropped an oversized upstream reply: its request is answered with an error")
                item = reply
            line, related = item if isinstance(item, tuple) else (item, None)
            message = parse(line)
            if self._flows or message.kind is Kind.NOTIFICATION:  # (a reply with no flow queued: at once)
                flow = self._flow_of(message, related)
                if flow is not None:  # progress (or what follows it): served in turn with other requests' flows
                    await self._enqueue(flow, line, related)
                    continue
            self._handle_upstream(message, related)
            await self.downstream.drain()
        self._drain_flows()
        self._restarting = False  # no replacement any more (the restart bound, or never restartable)
        if router.upstream.phase is not UpstreamPhase.CLOSED:
            self.perform(router.upstream_closed())
        await self.downstream.drain()
        self._finish(1)

    def _handle_upstream(self, message: Message, related: int | None) -> None:
        router = self.router
        try:
            actions = router.receive_upstream_message(message, related=related)
        except Exception as exc:
            logger.error("the router failed on an upstream message: %s", type(exc).__name__)
            return
        self.perform(actions)
        if not self._ready.is_set() and router.upstream.phase in (UpstreamPhase.READY, UpstreamPhase.CLOSED):
            self._ready.set()
        if self._restarting and router.upstream.phase is UpstreamPhase.READY:
            self._restarted()

    # Fairness: one request's notification flood never holds up the others ---------------------------
    def _flow_of(self, message: Message, related: int | None) -> int | None:
        """The request whose flow `message` joins: a progress notification of a request in flight (its token
        is the upstream id); while that flow holds messages, its reply and what came on its HTTP stream
        (`related`); and a message tied to no request (a log, a request to the client on stdio) while flows
        hold messages joins the one the upstream wrote to last, so a request's stream keeps the upstream's
        order (progress, then its logs, then its reply). Other replies are served at once, never behind a flood."""
        flows = self._flows
        if message.kind is Kind.NOTIFICATION and message.method == "notifications/progress":
            token = (message.params or {}).get("progressToken")
            if isinstance(token, int) and not isinstance(token, bool) and self.router.awaiting(token):
                return token
            return None
        if not flows:
            return None
        if message.kind in (Kind.RESPONSE, Kind.ERROR):
            return message.id if isinstance(message.id, int) and message.id in flows else None
        if related is not None:
            return related if related in flows else None
        return self._last_flow if self._last_flow in flows else None

    async def _enqueue(self, flow: int, line: bytes, related: int | None) -> None:
        """Queue `line` on its request's flow (raw bytes: parsed again when served). A flow over its bound makes
        this pump wait until the flows are served down (the one case where a flood slows the upstream's reader)."""
        queue = self._flows.get(flow)
        if queue is None:
            queue = self._flows[flow] = _Flow()
        queue.items.append((line, related))
        queue.size += len(line)
        self._last_flow = flow
        self._flows_waiting.set()
        if queue.size > FLOW_BYTES:
            while flow in self._flows and self._flows[flow].size > FLOW_BYTES // 2:
                self._flows_served.clear()
                await self._flows_served.wait()

    async def _serve_flows(self) -> None:
        """The queued flows, one message of each in turn, yielding to the event loop every `FLOW_SLICE_S` of
        work, so the upstream's reader (and the clients' requests) run between them."""
        loop = asyncio.get_running_loop()
        while True:
            await self._flows_waiting.wait()
            began = loop.time()
            while self._flows:
                for flow in list(self._flows):
                    if self._serve_one(flow):
                        await self.downstream.drain()
                if loop.time() - began >= FLOW_SLICE_S:
                    self._flows_served.set()
                    await asyncio.sleep(0)
                    began = loop.time()
            self._flows_waiting.clear()
            self._flows_served.set()

    def _serve_one(self, flow: int) -> bool:
        queue = self._flows.get(flow)
        if queue is None:
            return False
        line, related = queue.items.popleft()
        queue.size -= len(line)
        if not queue.items:
            del self._flows[flow]
        self._handle_upstream(parse(line), related)
        return True

    def _drain_flows(self) -> None:
        """Everything queued, now, in turn (before the upstream's end or a recovery step is handled)."""
        while self._flows:
            for flow in list(self._flows):
                self._serve_one(flow)
        self._flows_served.set()

    def _recover(self, item: Renewed | UpstreamDown | UpstreamRestarted) -> None:
        router = self.router
        if isinstance(item, Renewed):  # an HTTP session the server had forgotten, replaced by the shell
            if self.renewal is not None and router.upstream.phase is UpstreamPhase.READY:
                self.perform(self.renewal.renewed())
        elif isinstance(item, UpstreamDown):
            logger.warning("the upstream server went away: restarting it (requests in flight get an error)")
            self._restarting = True
            self._deadlines.clear()
            if router.upstream.phase is not UpstreamPhase.CLOSED:
                self.perform([a for a in router.upstream_closed(restarting=True) if not isinstance(a, Close)])
        else:  # a replacement runs: the handshake again (client sessions stay open, and wait for it)
            self.perform(router.start())

    def _restarted(self) -> None:
        """The replacement upstream completed its handshake."""
        self._restarting = False
        logger.warning("the restarted upstream server is ready")
        if isinstance(self.upstream, SupervisedUpstream):
            self.upstream.ready()
        if self.renewal is not None:  # (a catalog that differs re-teaches the policy through its list_changed)
            self.perform(self.renewal.renewed())
        elif self.catalog is not None:
            self.perform(self.catalog.prime())

    async def _pump_downstream(self, lines: AsyncIterator[bytes | Oversized], first: bytes | Oversized) -> None:
        router = self.router
        line: bytes | Oversized | None = first
        while line is not None:
            if isinstance(line, Oversized):
                self._oversized_request(line)
            else:
                try:
                    actions = router.receive_downstream(STDIO_SESSION, line)
                except Exception as exc:
                    logger.error("the router failed on a client message: %s", type(exc).__name__)
                    request_id = parse(line).id
                    self.downstream.send(_error_line(request_id, INTERNAL_ERROR, "Internal error"))
                else:
                    self.perform(actions)
                    await self.upstream.drain()
                    await self.downstream.drain()
            line = await anext(lines, None)
        # The client left: its requests are cancelled upstream, then the gateway stops.
        self.perform(router.close_session(STDIO_SESSION))
        await self.upstream.drain()
        self._finish(0)

    def _oversized_request(self, line: Oversized) -> None:
        """A client line over the limit: the error goes to its id when its first bytes name one (else id null,
        as JSON-RPC has it for an unreadable request), and one log line says what was dropped."""
        limit = getattr(self.downstream, "max_line", MAX_LINE_BYTES)
        request_id = recover_id(line.head)
        reason = f"a message larger than the {_size(limit)} line limit"
        if request_id is None:
            logger.warning("dropped a client message over the %s line limit (no id in its first bytes)", _size(limit))
        else:
            logger.warning("refused a client request over the %s line limit", _size(limit))
        self.downstream.send(_error_line(request_id, INVALID_REQUEST, "Invalid Request", {"reason": reason}))

    async def _watch_deadlines(self) -> None:
        """The clock the router does not have: a request the upstream leaves unanswered past the timeout is
        answered -32001 and cancelled upstream (a dropped oversized reply ends this way too). A request that
        reported progress since its clock started gets the timeout again, up to `MAX_EXTENSIONS` times it."""
        assert self.timeout is not None
        timeout = self.timeout
        loop = asyncio.get_running_loop()
        while True:
            await anyio.sleep(min(DEADLINE_TICK_S, timeout / 10))  # a timeout fires at most a tick late
            now = loop.time()
            deadlines = self._deadlines
            due: list[int] = []
            for upstream_id, deadline in deadlines.items():  # in order of their clocks, but for start-up ones
                if deadline.at > now and self.router.awaiting(upstream_id):
                    if deadline.at - now <= timeout:
                        break
                    continue  # a longer clock (sent while the upstream was starting): the ones after it may be due
                due.append(upstream_id)
            for upstream_id in due:
                deadline = deadlines.pop(upstream_id)
                if not self.router.awaiting(upstream_id):
                    continue
                progress = self.router.progress_seen(upstream_id)
                if progress != deadline.progress and now < deadline.limit:  # alive: another period (to the back)
                    deadlines[upstream_id] = _Deadline(min(now + timeout, deadline.limit), deadline.limit, progress)
                    continue
                logger.warning("the upstream did not answer a request within %g s", timeout)
                self.perform(self.router.upstream_timeout(upstream_id, timeout))
            if len(deadlines) > max(4096, 2 * self._swept_size):  # answered ones behind a long request
                for upstream_id in [key for key in deadlines if not self.router.awaiting(key)]:
                    del deadlines[upstream_id]
                self._swept_size = len(deadlines)
            await self.upstream.drain()
            await self.downstream.drain()

    on_reload: Callable[[], None] | None = None
    """SIGHUP: reload the policy and chain files (`reload.Reloader.request`); without it SIGHUP stops, as SIGTERM."""

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP and self.on_reload is not None:
                    self.on_reload()
                    continue
                self._finish(0)
                return


MAX_REFRESHED_NAMES: Final = 1024


class _Relay:
    """What a CatalogChanged batch sends the clients, held until its re-listing is in (`release`)."""

    __slots__ = ("items", "released")

    def __init__(self) -> None:
        self.items: list[Action] = []
        self.released = False

    def release(self) -> list[Action]:
        self.released = True
        items, self.items = self.items, []
        return items


@fast_init
@dataclass(frozen=True, slots=True)
class _Deadline:
    at: float
    limit: float  # progress never extends past this
    progress: int  # the request's progress count when this period started


def _oversized_reply(item: Oversized, router: Router, limit: int) -> bytes | None:
    """An upstream reply over the line limit, as the error reply its request gets at once (not at the timeout):
    when its first bytes name a request the router awaits and no method (an upstream request is no reply)."""
    if b'"method"' in item.head:
        return None
    upstream_id = parse(item.head).id
    if not isinstance(upstream_id, int) or isinstance(upstream_id, bool) or not router.awaiting(upstream_id):
        return None
    message = f"the upstream server sent a malformed reply: it is larger than the {_size(limit)} line limit"
    return _error_line(upstream_id, INTERNAL_ERROR, message)


MAX_HELD_LINES: Final = 64
"""Client lines read ahead while the upstream's handshake runs; past them the pipe holds the client back."""


async def _after_handshake(
    held: list[bytes | Oversized],
    reading: asyncio.Future[bytes | Oversized | None],
    lines: AsyncIterator[bytes | Oversized],
) -> AsyncIterator[bytes | Oversized]:
    """The client's lines in order: those read during the handshake, the read in progress, then the rest."""
    for line in held:
        yield line
    pending = await reading
    if pending is None:
        return
    yield pending
    async for line in lines:
        yield line


def declared_capabilities(first: bytes | Oversized | Message) -> dict[str, Any]:
    """What the client's first message declares: `initialize`'s capabilities, or a 2026-07-28 envelope's;
    nothing for anything else (the upstream then offers what needs no client capability)."""
    if isinstance(first, Oversized):
        return {}
    message = first if isinstance(first, Message) else parse(first)
    if message.kind is not Kind.REQUEST:
        return {}
    if message.method == "initialize":
        capabilities = (message.params or {}).get("capabilities")
    else:
        capabilities = (message.meta or {}).get(CLIENT_CAPABILITIES_META_KEY)
    return capabilities if isinstance(capabilities, dict) else {}


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"


@dataclass
class _Flow:
    """One request's queued upstream messages (its progress, then its reply) and their size in bytes."""

    items: deque[tuple[bytes, int | None]] = field(default_factory=deque)
    size: int = 0
