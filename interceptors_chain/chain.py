"""The chain engine (the invoker): discovers interceptors on MCP servers and runs them around operations.

Sending side: mutate, then validate what leaves. Receiving side: validate what arrived, then mutate.
Validators run concurrently and all complete; mutators run one at a time and atomically; audit never
blocks and is never applied; failures block unless the interceptor is audit or failOpen.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from interceptors import (
    INTERNAL_ERROR,
    INVOKE_METHOD,
    LIST_METHOD,
    Direction,
    InterceptorInfo,
    InterceptorRpcError,
    InterceptorType,
    InvocationContext,
    Mode,
    MutationResult,
    Phase,
    RequesterError,
    ValidationResult,
    WireError,
)
from interceptors.errors import InterceptorsError
from interceptors.outcomes import REQUESTER_ERROR_KEY, SUBSTITUTE_RESULT_KEY

from . import tracing as _tracing
from .concurrency import gather
from .connection import Connection, LocalReply, PassMemo, SessionConnection, is_timeout_answer
from .failures import InvokerFailure, describe
from .plan import Plan, PlanEntry, ServerEntry, compile_plan
from .policy import ExecutionHandler, HandlerOutcome, InterceptorOverride, InvokeCall
from .remote import RemoteServer
from .result import AbortInfo, AbortKind, ExecutionResult, InvocationRecord, Status

logger = logging.getLogger("interceptors.chain")

_MAX_CACHED_PLANS = 4096

_GENERAL, _LOCAL, _INLINE = 0, 1, 2
"""How a run invokes (`Chain._run_kind`)."""


class DiscoveryError(InterceptorsError, RuntimeError):
    """An interceptor server could not be listed."""


_Attempt = tuple[InvocationRecord, ValidationResult | MutationResult | None]
"""The outcome of one invoke: its record (`applied` still False), and its result when it has one."""


def _phase_of(value: Phase | str) -> Phase:
    if isinstance(value, Phase):
        return value
    if value == "request":
        return Phase.REQUEST
    if value == "response":
        return Phase.RESPONSE
    raise ValueError(f"unknown phase {value!r}: must be 'request' or 'response'")


_DIRECTIONS = {member.value: member for member in Direction}


def _direction_of(value: str) -> Direction:
    """`Direction(value)` without the enum machinery for its two spellings (anything else: the enum's error)."""
    found = _DIRECTIONS.get(value) if isinstance(value, str) else None
    return found if found is not None else Direction(value)


class Chain:
    """An invoker over any number of interceptor servers, each reached through its own connection."""

    def __init__(
        self,
        *,
        overrides: Mapping[str, InterceptorOverride] | None = None,
        execution_handler: ExecutionHandler | None = None,
        default_timeout_ms: int | None = None,
        deadline_ms: int | None = None,
        protocol_version: str | None = None,
    ) -> None:
        self._servers: list[ServerEntry] = []
        self._overrides: dict[str, InterceptorOverride] = dict(overrides or {})
        self.execution_handler = execution_handler
        self.default_timeout_ms = default_timeout_ms
        self.deadline_ms = deadline_ms
        self.protocol_version = protocol_version
        self._plans: dict[tuple[str, Phase, Direction], Plan] = {}
        self._run_kinds: dict[tuple[str, Phase, Direction], int] = {}
        """`_run_kind`'s answer for each cached plan's interceptors (cleared with the plans)."""
        self.generation = 0
        """Bumped whenever servers, descriptors or overrides change: callers may cache plans per generation."""
        self.in_flight = 0
        """Executions with work under way (a plan that is not empty): what a caller that replaces this chain waits
        to see at 0 (`wait_idle`) before it stops the servers only this chain used."""
        self._idle: anyio.Event | None = None  # made only when someone waits: not on every execution

    # Discovery --------------------------------------------------------------------------------
    async def add_session(
        self, session: ClientSession, name: str | None = None, *, timeout_ms: int | None = None
    ) -> ServerEntry:
        return await self.add_connection(SessionConnection(session), name, timeout_ms=timeout_ms)

    async def add_connection(
        self, connection: Connection, name: str | None = None, *, timeout_ms: int | None = None
    ) -> ServerEntry:
        """Register a server in configured order and list its interceptors once."""
        name = name or f"server-{len(self._servers)}"
        if any(server.name == name for server in self._servers):
            raise ValueError(f"a server named {name!r} is already in the chain")
        entry = ServerEntry(name, len(self._servers), connection, timeout_ms=timeout_ms)
        entry.interceptors = await self._discover(entry)
        _check_overrides([(name, entry.interceptors)], self._overrides)  # refuse before anything is registered
        self._servers.append(entry)
        self._invalidate()
        return entry

    async def add_remote(self, remote: RemoteServer, *, timeout_ms: int | None = None) -> ServerEntry:
        """Add a supervised remote server; after each restart it is listed again."""
        entry = await self.add_connection(remote, remote.name, timeout_ms=timeout_ms)

        async def rediscover() -> None:
            await self.refresh(remote.name)

        remote.on_restart = rediscover
        return entry

    async def refresh(self, name: str | None = None) -> None:
        """List again (all servers, or one): the descriptors and every cached plan are replaced."""
        fresh = {
            server.name: await self._discover(server) for server in self._servers if name is None or server.name == name
        }
        _check_overrides(fresh.items(), self._overrides)
        for server in self._servers:
            server.interceptors = fresh.get(server.name, server.interceptors)
        self._invalidate()

    async def _discover(self, server: ServerEntry) -> tuple[InterceptorInfo, ...]:
        try:
            listed = await server.connection.request(LIST_METHOD, {}, None)
        except InvokerFailure as exc:
            raise DiscoveryError(f"interceptors/list failed on {server.name!r}: {exc.error.message}") from None
        except MCPError as exc:
            raise DiscoveryError(f"interceptors/list failed on {server.name!r}: error {exc.error.code}") from None
        except Exception as exc:
            raise DiscoveryError(f"interceptors/list failed on {server.name!r}: {describe(exc)}") from None
        raw = listed.get("interceptors")
        if not isinstance(raw, list):
            raise DiscoveryError(f"interceptors/list on {server.name!r} returned no interceptors array")
        infos: dict[str, InterceptorInfo] = {}
        for index, item in enumerate(raw):
            try:
                info = InterceptorInfo.from_wire(item, f"interceptors[{index}]")
            except WireError as exc:
                logger.warning("skipping an interceptor of %r: %s", server.name, exc)
                continue
            if info.name in infos:
                logger.warning("skipping a duplicate interceptor name on %r", server.name)
                continue
            infos[info.name] = info
        return tuple(infos.values())

    @property
    def servers(self) -> tuple[ServerEntry, ...]:
        return tuple(self._servers)

    def interceptors(self) -> list[tuple[str, InterceptorInfo]]:
        """Every discovered (server name, descriptor), in configured server order."""
        return [(server.name, info) for server in self._servers for info in server.interceptors]

    # Policy -----------------------------------------------------------------------------------
    def set_override(self, name: str, override: InterceptorOverride | None) -> None:
        """Override one interceptor by `name` or `server:name`; None removes the override."""
        if override is None:
            self._overrides.pop(name, None)
        else:
            _check_overrides(
                [(s.name, s.interceptors) for s in self._servers], {name: override}
            )  # a refused override is never installed
            self._overrides[name] = override
        self._invalidate()

    def _invalidate(self) -> None:
        self._plans.clear()
        self._run_kinds.clear()
        self.generation += 1

    def plan(self, event: str, phase: Phase | str, direction: Direction | str) -> Plan:
        """The compiled plan, cached until servers or overrides change."""
        phase = _phase_of(phase)
        if not isinstance(direction, Direction):
            direction = Direction(direction)
        key = (event, phase, direction)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= _MAX_CACHED_PLANS:
                self._plans.clear()
            plan = self._plans[key] = compile_plan(
                self._servers, self._overrides, event, phase, direction, self.protocol_version
            )
        return plan

    def movable(self, event: str, phase: Phase | str, direction: Direction | str) -> bool:
        """Whether an execution of this plan may start on the caller's task and, should it suspend, go on in
        another task: nothing it runs enters an anyio cancel scope (which must be left on the task that entered
        it). True when the plan is empty or its runs are `_INLINE` (a payload above the inline size waits on a
        plain future, see the host's worker threads)."""
        phase = _phase_of(phase)
        direction = direction if isinstance(direction, Direction) else _direction_of(direction)
        key = (event, phase, direction)
        plan = self._plans.get(key) or self.plan(event, phase, direction)
        return plan.empty or self._run_kind(key, plan) == _INLINE

    def _run_kind(self, key: tuple[str, Phase, Direction], plan: Plan) -> int:
        """How an execution of `plan` may invoke, when no setting of the chain needs a cancel scope or a coroutine
        around an invoke (a timeout, a deadline, an execution handler, tracing): `_LOCAL` when every interceptor
        is in process with no timeout of its own (each invoke a bare call of `LocalStart`, awaited only when its
        handler may suspend), `_INLINE` when each also has a sync handler registered `inline` (each a function
        call, and the validators run one after another rather than gathered); else `_GENERAL`. The plan's part is
        found once per plan (hosts only ever add interceptors, so a planned one keeps its handler); the chain's
        settings are read each time."""
        if self.execution_handler is not None or _tracing.TRACER is not None or self.deadline_ms is not None:
            return _GENERAL
        if self.default_timeout_ms:
            return _GENERAL
        kind = self._run_kinds.get(key)  # cleared with the plans: a hit is this plan's answer
        if kind is None:
            if len(self._run_kinds) >= _MAX_CACHED_PLANS:  # event names come from callers: bounded
                self._run_kinds.clear()
            entries = (*plan.validators, *plan.mutators)
            if not all(entry.server.local is not None and not entry.timeout_ms for entry in entries):
                kind = _GENERAL
            else:
                kind = _INLINE if all(_entry_runs_inline(entry) for entry in entries) else _LOCAL
            self._run_kinds[key] = kind
        return kind

    # Execution --------------------------------------------------------------------------------
    async def execute(
        self,
        event: str,
        phase: Phase | str,
        payload: Any,
        *,
        direction: Direction | str,
        context: InvocationContext | None = None,
        deadline_ms: int | None = None,
    ) -> ExecutionResult:
        """Run every matching interceptor around one operation. The caller blocks iff `result.blocked`."""
        phase = _phase_of(phase)
        if not isinstance(direction, Direction):
            direction = _direction_of(direction)
        key = (event, phase, direction)
        plan = self._plans.get(key) or self.plan(event, phase, direction)
        if plan.empty:
            return ExecutionResult(Status.SUCCESS, event, phase, direction)
        self.in_flight += 1
        try:
            started = time.perf_counter()
            budget = deadline_ms if deadline_ms is not None else self.deadline_ms
            deadline = None if budget is None else started + budget / 1000
            run = _Run(
                self, event, phase, context, deadline, _GENERAL if deadline is not None else self._run_kind(key, plan)
            )
            if len(plan.validators) + len(plan.mutators) > 1 and run.local:
                run.memo = PassMemo()  # (one invoke has nothing to share)
            if _tracing.TRACER is not None:
                run.span = _tracing.start_chain(event, phase, direction, plan, run.wire_context())
            result = ExecutionResult(Status.SUCCESS, event, phase, direction)
            current = payload
            validators, mutators = plan.validators, plan.mutators
            if plan.mutate_first:  # sending: mutate, then validate what leaves
                if mutators:
                    current = await run.mutate(mutators, current, payload, result)
                if validators and not result.aborted_at:
                    await run.validate(validators, current, result)
            else:  # receiving: validate what arrived, then mutate
                if validators:
                    await run.validate(validators, current, result)
                if mutators and not result.aborted_at:
                    current = await run.mutate(mutators, current, payload, result)
            if result.aborted_at:
                first = result.aborted_at[0]
                if first.kind is AbortKind.TIMEOUT:
                    result.status = Status.TIMEOUT
                elif first.type is InterceptorType.VALIDATION:
                    result.status = Status.VALIDATION_FAILED
                else:
                    result.status = Status.MUTATION_FAILED
                result.final_payload, result.modified = None, False
            result.total_duration_ms = round((time.perf_counter() - started) * 1000, 3)
            if run.span is not None:
                _tracing.end_chain(run.span, result)
            return result
        finally:
            self.in_flight -= 1
            if not self.in_flight and self._idle is not None:
                self._idle.set()

    async def wait_idle(self) -> None:
        """Until no execution is in flight (at once when none is)."""
        while self.in_flight:
            if self._idle is None or self._idle.is_set():
                self._idle = anyio.Event()
            await self._idle.wait()

    async def invoke(self, entry: PlanEntry, run: _Run, payload: Any) -> _Attempt:
        """One invoke with every failure turned into a failed record (never raised)."""
        started = time.perf_counter()
        mode = entry.mode
        timeout_ms = entry.timeout_ms or self.default_timeout_ms
        limit = None if timeout_ms is None else timeout_ms / 1000
        deadline = run.deadline
        if deadline is not None:
            remaining = deadline - started
            if remaining <= 0:
                return _failed(entry, "deadline exceeded before invocation", AbortKind.TIMEOUT, mode, 0.0)
            limit = remaining if limit is None else min(limit, remaining)
        server = entry.server
        local = server.local
        if local is not None and self.execution_handler is None:
            # The connection's typed in-process path: the same outcomes, no wire dicts.
            if limit is None:
                return await run.local_attempt(entry, payload)
            try:
                with anyio.fail_after(limit):
                    started_reply = local(
                        entry.info.name, run.event, run.phase, payload, entry.config, run.context, run.memo
                    )
                    reply = started_reply if isinstance(started_reply, tuple) else await started_reply
            except TimeoutError:
                return _failed(entry, "timeout", AbortKind.TIMEOUT, mode, _since(started))
            except Exception as exc:
                return _host_failure(entry, exc, mode, started)
            return _local_attempt(entry, reply, payload, mode, started)
        event, phase = run.event, run.phase
        params: dict[str, Any] = {
            "name": entry.info.name,
            "event": event,
            "phase": phase.value,
            "payload": payload,
        }
        if timeout_ms is not None:
            params["timeoutMs"] = int(timeout_ms)
        if entry.config is not None:
            params["config"] = dict(entry.config)
        if run.context is not None:
            params["context"] = run.wire_context()
        if _tracing.TRACER is not None:
            _tracing.inject(params)
        try:
            with anyio.fail_after(limit) if limit is not None else nullcontext():
                if self.execution_handler is None:
                    wire = await server.connection.request(INVOKE_METHOD, params, limit)
                else:
                    call = InvokeCall(server.name, entry.info, mode, entry.fail_open, params)

                    async def next_invoke(rewritten: dict[str, Any]) -> dict[str, Any]:
                        return await server.connection.request(INVOKE_METHOD, rewritten, limit)

                    outcome = await self.execution_handler(call, next_invoke)
                    if isinstance(outcome, HandlerOutcome):
                        wire, mode = outcome.result, outcome.mode or mode
                    else:
                        wire = outcome
        except TimeoutError:
            return _failed(entry, "timeout", AbortKind.TIMEOUT, mode, _since(started))
        except InvokerFailure as exc:  # our own words, naming the server (unavailable, malformed reply)
            return _failed(entry, exc.error.message, AbortKind.FAILED, mode, _since(started))
        except MCPError as exc:
            return _error_attempt(entry, exc.error.code, exc.error.data, mode, started)
        except Exception as exc:
            reason = f"server {server.name!r} failed: {describe(exc)}"
            return _failed(entry, reason, AbortKind.FAILED, mode, _since(started))
        return _checked(entry, phase, payload, wire, mode, _since(started))


def _entry_runs_inline(entry: PlanEntry) -> bool:
    """In process with a synchronous path, no timeout of its own, and a sync handler registered `inline`."""
    server = entry.server
    if server.local is None or server.runs_inline is None or entry.timeout_ms:
        return False
    return server.runs_inline(entry.info.name)


def _local_attempt(
    entry: PlanEntry,
    reply: tuple[ValidationResult | MutationResult, dict[str, Any]],
    payload: Any,
    mode: Mode,
    started: float,
) -> _Attempt:
    """An in-process host's reply as an attempt, after the invoker's `modified: false` check (the host built the
    result itself, so M1 holds by construction)."""
    result, wire = reply
    duration = (time.perf_counter() - started) * 1000
    if isinstance(result, MutationResult) and not result.modified and result.payload != payload:
        reason = "malformed result: result.payload: differs from the input although modified is false"
        return _failed(entry, reason, AbortKind.FAILED, mode, duration)
    info = entry.info  # positional: records are built on every invoke, keywords cost half as much again
    return InvocationRecord(info.name, entry.server.name, info.type, mode, wire, None, None, False, duration), result


async def _awaited_attempt(
    entry: PlanEntry, reply: Coroutine[Any, Any, LocalReply], payload: Any, started: float
) -> _Attempt:
    try:
        answer = await reply
    except Exception as exc:
        return _host_failure(entry, exc, entry.mode, started)
    return _local_attempt(entry, answer, payload, entry.mode, started)


def _itself(coroutine: Coroutine[Any, Any, _Attempt]) -> Coroutine[Any, Any, _Attempt]:
    return coroutine


def _failed(entry: PlanEntry, reason: str, kind: AbortKind, mode: Mode, duration: float) -> _Attempt:
    """A failed invoke's attempt: the reason (never payload content) and no result."""
    info = entry.info
    return InvocationRecord(info.name, entry.server.name, info.type, mode, None, reason, kind, False, duration), None


def _host_failure(entry: PlanEntry, exc: Exception, mode: Mode, started: float) -> _Attempt:
    """An in-process host's raised error as an attempt: its JSON-RPC error, or for a host bug what the host's MCP
    binding answers (-32603), never the exception text."""
    if isinstance(exc, InterceptorRpcError):
        attempt = _error_attempt(entry, exc.code, exc.data, mode, started)
        if isinstance(exc, RequesterError):  # the handler chose what the requester sees
            attempt[0].requester_error = exc.to_wire()
        return attempt
    return _error_attempt(entry, INTERNAL_ERROR, None, mode, started)


def _check_overrides(
    servers: Iterable[tuple[str, Sequence[InterceptorInfo]]], overrides: Mapping[str, InterceptorOverride]
) -> None:
    """Raise ValueError if any override widens the hooks of an interceptor it applies to."""
    for server_name, infos in servers:
        for info in infos:
            for key in (info.name, f"{server_name}:{info.name}"):
                override = overrides.get(key)
                if override is not None:
                    override.check_narrows(info)


def _error_attempt(entry: PlanEntry, code: int, data: Any, mode: Mode, started: float) -> _Attempt:
    """A host's JSON-RPC error as an attempt: a timeout answer (see `is_timeout_answer`), else a failure."""
    if is_timeout_answer(code, data):
        return _failed(entry, "timeout", AbortKind.TIMEOUT, mode, _since(started))
    reason = f"server {entry.server.name!r} returned error {code}"
    return _failed(entry, reason, AbortKind.FAILED, mode, _since(started))


def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _checked(entry: PlanEntry, phase: Phase, payload: Any, wire: Any, mode: Mode, duration: float) -> _Attempt:
    """Apply M1 (the result must echo interceptor, type and phase) and the `modified: false` rule."""
    try:
        if not isinstance(wire, dict):
            raise WireError("result", "must be an object")
        if entry.info.type is InterceptorType.VALIDATION:
            result: ValidationResult | MutationResult = ValidationResult.from_wire(wire)
        else:
            result = MutationResult.from_wire(wire)
            if not result.modified and result.echoed and result.payload != payload:
                raise WireError("result.payload", "differs from the input although modified is false")
        if result.interceptor != entry.info.name:
            raise WireError("result.interceptor", "does not echo the invoked interceptor")
        if result.phase is not phase:
            raise WireError("result.phase", "does not echo the invoked phase")
    except WireError as exc:
        return _failed(entry, f"malformed result: {exc}", AbortKind.FAILED, mode, duration)
    info = entry.info
    return InvocationRecord(info.name, entry.server.name, info.type, mode, wire, None, None, False, duration), result


class _Run:
    """The state of one execution: event, phase, context and the aggregate deadline."""

    __slots__ = (
        "_wire_context", "attempt", "chain", "context", "deadline", "event", "inline", "local", "memo", "phase", "span"
    )  # fmt: skip

    def __init__(
        self,
        chain: Chain,
        event: str,
        phase: Phase,
        context: InvocationContext | None,
        deadline: float | None,
        kind: int = _GENERAL,
    ) -> None:
        self.chain = chain
        self.event = event
        self.phase = phase
        self.context = context
        self.deadline = deadline
        self.local = kind != _GENERAL
        """Every invoke a bare call of the in-process host (`start`), awaited only when it must be."""
        self.inline = kind == _INLINE
        """Every invoke's handler runs on the caller's stack: the validators one after another (`_attempts`)."""
        self.attempt = self.local_attempt if self.local else self._general_attempt
        """One invoke, awaited."""
        self.memo: PassMemo | None = None
        """What the in-process hosts encode once per payload and context, when the run has more than one invoke
        (see `PassMemo`)."""
        self._wire_context: dict[str, Any] | None = None
        self.span: Any = None  # the execution's span when tracing is on

    def wire_context(self) -> dict[str, Any] | None:
        """The context as sent, built once per execution (and only when some invoke goes over a wire)."""
        if self._wire_context is None and self.context is not None:
            self._wire_context = self.context.to_wire()
        return self._wire_context

    async def _general_attempt(self, entry: PlanEntry, payload: Any) -> _Attempt:
        if self.span is not None:
            return await _tracing.invoke(self.span, self.chain, entry, self, payload)
        return await self.chain.invoke(entry, self, payload)

    async def local_attempt(self, entry: PlanEntry, payload: Any) -> _Attempt:
        """One invoke of an in-process host (`LocalStart`) with no timeout or deadline around it."""
        attempt = self.start(entry, payload)
        return attempt if isinstance(attempt, tuple) else await attempt

    def start(self, entry: PlanEntry, payload: Any) -> _Attempt | Coroutine[Any, Any, _Attempt]:
        """`local_attempt` as far as it goes on the caller's stack: the attempt when the handler ran here, else a
        coroutine to await for it."""
        local = entry.server.local
        assert local is not None
        started = time.perf_counter()
        try:
            reply = local(entry.info.name, self.event, self.phase, payload, entry.config, self.context, self.memo)
        except Exception as exc:
            return _host_failure(entry, exc, entry.mode, started)
        if isinstance(reply, tuple):
            return _local_attempt(entry, reply, payload, entry.mode, started)
        return _awaited_attempt(entry, reply, payload, started)

    async def _attempts(self, entries: tuple[PlanEntry, ...], payload: Any) -> list[_Attempt]:
        """Every validator's attempt, in plan order, concurrently. Each starts on the caller's task (see `gather`):
        one that completes without suspending, as an in-process validator usually does, costs no task. On an
        inline run each is a function call, in the context `gather` would give it (the first in the caller's,
        each other in its own copy); those the host must await (a payload above its inline size: for every one
        alike) are then gathered."""
        if self.inline:
            base = contextvars.copy_context() if len(entries) > 1 else None  # taken before the first one runs
            found = [self.start(entries[0], payload)]
            if base is not None:
                found.extend(base.copy().run(self.start, entry, payload) for entry in entries[1:])
            waiting = [index for index, attempt in enumerate(found) if not isinstance(attempt, tuple)]
            if waiting:
                done = await gather([functools.partial(_itself, found[index]) for index in waiting])  # type: ignore[arg-type]
                for index, attempt in zip(waiting, done, strict=True):
                    found[index] = attempt
            return found  # type: ignore[return-value]
        return await gather([functools.partial(self.attempt, entry, payload) for entry in entries])

    async def validate(self, entries: tuple[PlanEntry, ...], payload: Any, out: ExecutionResult) -> None:
        """Every validator runs to completion, concurrently; outcomes are judged in plan order."""
        if not entries:
            return
        attempts = await self._attempts(entries, payload)
        summary = out.validation_summary
        for entry, (record, result) in zip(entries, attempts, strict=True):
            out.results.append(record)
            if record.error is not None:
                if record.mode is Mode.ACTIVE and not entry.fail_open:
                    out.aborted_at.append(
                        _abort(entry, self.phase, record.error_kind or AbortKind.FAILED, record.error, record)
                    )
                continue
            assert isinstance(result, ValidationResult)
            for message in result.messages or ():
                if message.severity == "warn":
                    summary.warnings += 1
                elif message.severity == "info":
                    summary.infos += 1
                else:
                    summary.errors += 1
            if result.blocks and record.mode is Mode.ACTIVE:
                texts = tuple(m.message for m in result.messages or ())
                info = result.info or {}
                chosen, substitute = info.get(REQUESTER_ERROR_KEY), info.get(SUBSTITUTE_RESULT_KEY)
                out.aborted_at.append(
                    AbortInfo(
                        entry.info.name, entry.server.name, entry.info.type, self.phase, AbortKind.REJECTED,
                        "rejected by validator", texts,
                        chosen if isinstance(chosen, Mapping) else None,
                        substitute if isinstance(substitute, Mapping) else None,
                    )
                )  # fmt: skip

    async def mutate(self, entries: tuple[PlanEntry, ...], payload: Any, original: Any, out: ExecutionResult) -> Any:
        """Mutators in order; a blocking failure stops the pass and releases nothing partial."""
        current = payload
        for entry in entries:
            if self.local:
                attempt = self.start(entry, current)
                record, result = attempt if isinstance(attempt, tuple) else await attempt
            else:
                record, result = await self.attempt(entry, current)
            out.results.append(record)
            if record.error is None:
                if record.mode is Mode.ACTIVE:
                    assert isinstance(result, MutationResult)
                    if result.modified:
                        current = result.payload
                        out.final_payload, out.modified = current, True
                        record.applied = True
            elif record.mode is Mode.ACTIVE and not entry.fail_open:
                out.aborted_at.append(
                    _abort(entry, self.phase, record.error_kind or AbortKind.FAILED, record.error, record)
                )
                return original
        return current


def _abort(
    entry: PlanEntry, phase: Phase, kind: AbortKind, reason: str, record: InvocationRecord | None = None
) -> AbortInfo:
    chosen = record.requester_error if record is not None else None
    return AbortInfo(entry.info.name, entry.server.name, entry.info.type, phase, kind, reason, (), chosen)
