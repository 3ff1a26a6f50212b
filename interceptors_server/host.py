"""The interceptor host: answers `interceptors/list` and `interceptor/invoke` from registries.

Transport-free: takes and returns plain dicts and raises `InterceptorRpcError` exactly as the SEP-2624
error table says. `install` binds it to an MCP server.
"""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from interceptors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    InterceptorInfo,
    InterceptorRpcError,
    InterceptorType,
    Invocation,
    InvocationContext,
    InvokeParams,
    Phase,
    Principal,
    RegisteredInterceptor,
    Registry,
    WireError,
    dumps,
    hooks_match,
    loads,
)
from interceptors.enums import PHASE_TEXT
from interceptors.events import is_pattern
from interceptors.outcomes import (
    PLAIN_ALLOW,
    PLAIN_UNCHANGED,
    MalformedHandlerResult,
    to_mutation_result,
    to_validation_result,
)
from interceptors.wire import InvokeResult, MutationResult, ValidationResult
from interceptors_chain.concurrency import on_asyncio
from interceptors_chain.connection import PassMemo

from .workers import in_worker

logger = logging.getLogger("interceptors.host")


def log_traceback(log: logging.Logger, exc: BaseException) -> None:
    """Under -v, where a handler crashed: frames and source lines only (its message may quote the payload)."""
    if log.isEnabledFor(logging.INFO):
        frames = "".join(traceback.format_tb(exc.__traceback__)).rstrip()
        log.info("traceback of the %s (its message is not shown: it may quote the payload):\n%s",
                 type(exc).__name__, frames)  # fmt: skip


DEFAULT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
INLINE_MAX_PAYLOAD_BYTES = 64 * 1024
"""A sync handler registered `inline=True` runs on the event loop up to this payload size (its JSON), and in a
worker thread above it: cheap CPU-bound stages skip the thread hop (~100 µs) on ordinary payloads, while a
10 MB result still cannot stall the loop (redaction scans ~13 MB/s: 64 KiB is about 5 ms)."""


class _Compiled:
    """Per-interceptor data derived once: the config validator and the hooks as wire JSON."""

    __slots__ = ("_covers", "admitted", "advertised_hooks", "borrows", "config_validator", "entry", "runs_inline")

    def __init__(self, entry: RegisteredInterceptor) -> None:
        self.entry = entry
        self._covers: dict[tuple[str, str], bool] = {}
        self.admitted: set[tuple[str, Phase]] = set()
        """(event, phase) pairs `_admit` accepted without a config: the same checks would pass again."""
        self.runs_inline = entry.inline and not entry.is_async
        self.borrows = entry.borrows
        """The handler takes an in-process caller's objects as they are (`RegisteredInterceptor.borrows`)."""
        self.advertised_hooks = [hook.to_wire() for hook in entry.info.hooks]
        self.config_validator: Any = None
        if entry.info.config_schema is not None:
            from jsonschema import validators

            cls = validators.validator_for(entry.info.config_schema)
            cls.check_schema(entry.info.config_schema)
            self.config_validator = cls(entry.info.config_schema)

    def covers(self, event: str, phase: str) -> bool:
        """Hook coverage, memoised per (event, phase); bounded because events come from callers."""
        key = (event, phase)
        found = self._covers.get(key)
        if found is None:
            if len(self._covers) > 256:
                self._covers.clear()
            found = self._covers[key] = hooks_match(self.entry.info.hooks, event, phase)
        return found


class InterceptorHost:
    """Serves one or more registries; names must be unique across all of them."""

    def __init__(self, *registries: Registry, max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES) -> None:
        self._registries: list[Registry] = []
        self._compiled: dict[str, _Compiled] = {}
        self._seen_versions: tuple[int, ...] = ()
        self._seen_changes = -1
        """`Registry.changes` when the entries were last found current."""
        self.max_payload_bytes = max_payload_bytes
        for registry in registries:
            self.add_registry(registry)

    def add_registry(self, registry: Registry) -> None:
        self._registries.append(registry)
        self._recompile()

    def _recompile(self) -> None:
        compiled: dict[str, _Compiled] = {}
        for registry in self._registries:
            for entry in registry:
                if entry.name in compiled:
                    raise ValueError(f"interceptor name {entry.name!r} is registered twice on one host")
                compiled[entry.name] = _Compiled(entry)
        self._compiled = compiled
        self._seen_versions = tuple(r.version for r in self._registries)

    def _entries(self) -> dict[str, _Compiled]:
        """The compiled entries, rebuilt when any registry changed since the last look."""
        changes = Registry.changes
        if changes == self._seen_changes:
            return self._compiled  # no registry anywhere changed: one comparison per invoke
        for registry, seen in zip(self._registries, self._seen_versions, strict=True):
            if registry.version != seen:
                try:
                    self._recompile()
                except ValueError as exc:  # e.g. a name registered later in two registries
                    logger.error("interceptor host is misconfigured: %s", exc)
                    raise InterceptorRpcError(
                        INTERNAL_ERROR, "the interceptor host is misconfigured", {"reason": str(exc)}
                    ) from None
                break
        self._seen_changes = changes
        return self._compiled

    def infos(self) -> list[InterceptorInfo]:
        return [c.entry.info for c in self._entries().values()]

    def supported_events(self) -> list[str]:
        """The sorted union of hooked events: a deterministic capability hint."""
        return sorted({event for info in self.infos() for event in info.events})

    def capability(self) -> dict[str, Any]:
        return {"supportedEvents": self.supported_events()}

    # interceptors/list -------------------------------------------------------------------------
    def list(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        event = None if params is None else params.get("event")
        if event is not None:
            if not isinstance(event, str):
                raise InterceptorRpcError(INVALID_PARAMS, "event must be a string", {"field": "event"})
            if is_pattern(event):
                raise InterceptorRpcError(
                    INVALID_PARAMS,
                    "event filter must be one concrete event name, not a wildcard or pattern",
                    {"field": "event", "event": event},
                )
        infos = self.infos()
        if event:
            infos = [info for info in infos if hooks_match(info.hooks, event)]
        return {"interceptors": [info.to_wire() for info in infos]}

    # interceptor/invoke ------------------------------------------------------------------------
    # One core, `_pass`, runs every invoke: the payload encoded (its size checked) and copied once, the handler run
    # on the caller's stack when it never suspends (a sync handler registered `inline`, payload JSON up to
    # `INLINE_MAX_PAYLOAD_BYTES`), else awaited (`_awaited`: worker threads, async handlers, timeouts), and the
    # answer built by the edge's finisher. The edges differ only in what they read and write: wire params and a
    # wire result (`start`, `invoke`: the SDK binding, the stdio lane, the in-process request path), or typed
    # values and a result with its fresh wire form (`start_local`, `invoke_local`, `invoke_inline`: the chain).

    def _parse_invoke(self, params: Mapping[str, Any] | None, fresh: bool = False) -> tuple[InvokeParams, _Compiled]:
        raw = {} if params is None else params
        context = raw.get("context") if isinstance(raw, Mapping) else None
        if not fresh:
            owned = _own_claims(context)
            if owned is not context:
                raw = {**raw, "context": owned}
        entries = self._entries()
        name = raw.get("name") if isinstance(raw, Mapping) else None
        if isinstance(name, str) and name and name not in entries:
            raise InterceptorRpcError(INVALID_PARAMS, f"unknown interceptor {name!r}", {"name": name})
        try:
            invoke = InvokeParams.from_wire(raw)
        except WireError as exc:
            raise _invalid_params(exc) from None
        return invoke, _admit(entries[invoke.name], invoke.event, invoke.phase, invoke.config)

    def _encoded(self, payload: Any) -> bytes:
        """The payload's JSON, refused if it cannot be encoded or is oversized, before any handler runs."""
        try:
            encoded = dumps(payload)
        except TypeError:
            raise InterceptorRpcError(
                INVALID_PARAMS,
                "payload cannot be encoded as JSON (integers beyond 64 bits?)",
                {"field": "payload"},
            ) from None
        if self.max_payload_bytes is not None and len(encoded) > self.max_payload_bytes:
            raise self._oversized(encoded)
        return encoded

    def _oversized(self, encoded: bytes) -> InterceptorRpcError:
        return InterceptorRpcError(
            INVALID_PARAMS,
            "payload exceeds the host's maximum size",
            {"field": "payload", "size": len(encoded), "maxBytes": self.max_payload_bytes},
        )

    def start(
        self, params: Mapping[str, Any] | None, *, fresh: bool = False, payload_bound: int | None = None
    ) -> dict[str, Any] | Coroutine[Any, Any, dict[str, Any]]:
        """`interceptor/invoke` from wire params: the result dict when the handler ran on this stack (see `_pass`),
        else a coroutine to await for it. Every check runs before this returns, and raises its
        InterceptorRpcError here. `fresh`: the params were just decoded from a wire (the stdio lane): nothing in
        them is anyone else's, so the payload and config are the handler's without a copy. `payload_bound` (with
        `fresh`): at most how long the payload's JSON is (`codec.written_size_bound` of the line the params were
        read from); within the host's limits, the payload is not written again just to learn its size."""
        unwritten = (
            fresh
            and payload_bound is not None
            and payload_bound <= INLINE_MAX_PAYLOAD_BYTES
            and (self.max_payload_bytes is None or payload_bound <= self.max_payload_bytes)
        )
        if type(params) is dict:  # the common shape (a known name, no config or timeout), read directly
            entries = self._compiled if Registry.changes == self._seen_changes else self._entries()
            name = params.get("name")
            event = params.get("event")
            phase_text = params.get("phase")
            compiled = entries.get(name) if type(name) is str else None
            phase = _PHASES.get(phase_text) if type(phase_text) is str else None
            if (
                compiled is not None
                and phase is not None
                and type(event) is str
                and event
                and "payload" in params
                and params.get("timeoutMs") is None
                and params.get("config") is None
            ):
                context = params.get("context")
                if context is not None:
                    context = _context_of(context if fresh else _own_claims(context))
                if (event, phase) not in compiled.admitted:
                    self._admitted(name, event, phase, None)  # type: ignore[arg-type]
                payload = params["payload"]
                return self._pass(
                    compiled, event, phase, payload, None, context, None, _wire_answer, not fresh,
                    _UNWRITTEN if unwritten else None,
                )  # fmt: skip
        invoke, compiled = self._parse_invoke(params, fresh)  # any other shape: `from_wire` names what is wrong
        return self._pass(
            compiled, invoke.event, invoke.phase, invoke.payload, invoke.config, invoke.context, invoke.timeout_ms,
            _wire_answer, not fresh, _UNWRITTEN if unwritten else None,
        )  # fmt: skip

    async def invoke(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run one interceptor. Every failure is an InterceptorRpcError, never a "successful" result."""
        answer = self.start(params)
        return answer if isinstance(answer, dict) else await answer

    def runs_inline(self, name: str) -> bool:
        """Whether `name`'s handler runs on the caller's task without suspending (a sync handler registered
        `inline`), below `INLINE_MAX_PAYLOAD_BYTES` (above it, a worker thread waited on without a cancel scope):
        what `Chain.movable` asks before an execution may start on one task and go on in another."""
        try:
            compiled = self._entries().get(name)  # as an invoke would find it, after any registry change
        except InterceptorRpcError:  # misconfigured: the invoke itself will say so
            return False
        return compiled is not None and compiled.runs_inline

    def _admitted(self, name: str, event: str, phase: Phase, config: Mapping[str, Any] | None) -> _Compiled:
        """`name`'s entry, after the checks `_admit` makes (remembered per (event, phase) when there is no config)."""
        entries = self._compiled if Registry.changes == self._seen_changes else self._entries()  # (its fast path)
        compiled = entries.get(name)
        if compiled is None:
            raise InterceptorRpcError(INVALID_PARAMS, f"unknown interceptor {name!r}", {"name": name})
        if config is not None or (event, phase) not in compiled.admitted:
            _admit(compiled, event, phase, config)
            if config is None and len(compiled.admitted) < 256:  # events come from callers: bounded
                compiled.admitted.add((event, phase))
        return compiled

    def start_local(
        self,
        name: str,
        event: str,
        phase: Phase,
        payload: Any,
        config: Mapping[str, Any] | None,
        context: InvocationContext | None,
        memo: PassMemo | None = None,
    ) -> tuple[InvokeResult, dict[str, Any]] | Coroutine[Any, Any, tuple[InvokeResult, dict[str, Any]]]:
        """`start` for a caller in this process that holds typed values and enforces its own timeout: the result
        and its fresh wire form (nothing in either the handler's objects), or a coroutine to await for them.

        Nothing is parsed from or written to wire dicts but the reply; the same isolation and errors as `start`.
        `memo`: the caller's record for one execution (`interceptors_chain.connection.PassMemo`), so that the
        payload's JSON is made once per pass and the principal's claims' once per execution, however many
        interceptors get a copy decoded from them."""
        entries = self._compiled if Registry.changes == self._seen_changes else self._entries()  # (its fast path)
        compiled = entries.get(name)
        if compiled is None or config is not None or (event, phase) not in compiled.admitted:
            compiled = self._admitted(name, event, phase, config)
        borrows = compiled.borrows
        if context is not None and context.principal is not None and not borrows:
            # As over the wire: the principal's claims are the caller's objects (see `_own_claims`).
            context = _sent_context(context, memo)
        if memo is None:
            encoded = self._encoded(payload)
        elif memo.payload is payload and memo.encoded is not None:
            encoded = memo.encoded
            if self.max_payload_bytes is not None and len(encoded) > self.max_payload_bytes:
                raise self._oversized(encoded)
        else:
            encoded = memo.encoded = self._encoded(payload)
            memo.payload = payload
        if borrows:
            return self._pass(compiled, event, phase, payload, config, context, None, _lent_answer, False, encoded)
        return self._pass(compiled, event, phase, payload, config, context, None, _answer, True, encoded)

    async def invoke_local(
        self,
        name: str,
        event: str,
        phase: Phase,
        payload: Any,
        config: Mapping[str, Any] | None,
        context: InvocationContext | None,
        memo: PassMemo | None = None,
    ) -> tuple[InvokeResult, dict[str, Any]]:
        """`start_local`, awaited when it must be."""
        reply = self.start_local(name, event, phase, payload, config, context, memo)
        return reply if isinstance(reply, tuple) else await reply

    def _pass(
        self,
        compiled: _Compiled,
        event: str,
        phase: Phase,
        payload: Any,
        config: Mapping[str, Any] | None,
        context: InvocationContext | None,
        timeout_ms: int | None,
        finish: _Finish[_T],
        copy: bool,
        encoded: bytes | None = None,
    ) -> _T | Coroutine[Any, Any, _T]:
        """The core of every invoke, past its checks: the payload encoded and refused if oversized, the handler's
        private copies (`copy`: the payload from its JSON and the config, as a wire delivers them; in-memory
        callers hand over their own objects, and a handler must never change the invoker's payload, or another
        concurrent validator's), the handler run, and `finish`'s answer. A handler that never suspends runs here,
        whatever `timeoutMs` says (nothing could cut it on the loop); any other is left to `_awaited`. `encoded`:
        the payload's JSON when the caller has it, checked against the host's maximum already, or `_UNWRITTEN`
        from a wire edge that proved the payload within every limit (only with `_wire_answer`, which never reads
        the JSON, and without `copy`)."""
        entry = compiled.entry
        if encoded is None:
            encoded = self._encoded(payload)
        if copy:
            payload = loads(encoded)
            if config is not None:
                config = loads(dumps(config))
        invocation = Invocation(entry.info.name, event, phase, payload, config, context)
        if compiled.runs_inline and len(encoded) <= INLINE_MAX_PAYLOAD_BYTES:
            started = time.perf_counter()
            try:
                raw = entry.handler(invocation)
            except InterceptorRpcError:
                raise
            except Exception as exc:
                raise _handler_failure(entry.name, exc) from None
            return finish(entry, raw, phase, payload, encoded, started)
        return self._awaited(compiled, invocation, encoded, timeout_ms, finish)

    async def _awaited(
        self, compiled: _Compiled, invocation: Invocation, encoded: bytes, timeout_ms: int | None, finish: _Finish[_T]
    ) -> _T:
        """`_pass` for a handler that may suspend: an async one, a sync one in a worker thread, under `timeoutMs`."""
        entry = compiled.entry
        phase = invocation.phase
        started = time.perf_counter()
        raw: Any = None
        try:
            if timeout_ms is None:
                raw = await entry.handler(invocation) if entry.is_async else await _in_thread(entry, invocation)
            else:
                # A cancel scope, not fail_after: a TimeoutError the handler raises itself is a failure.
                with anyio.move_on_after(timeout_ms / 1000) as scope:
                    raw = await entry.handler(invocation) if entry.is_async else await _in_thread(entry, invocation)
                if scope.cancelled_caught:
                    raise InterceptorRpcError(
                        INTERNAL_ERROR,
                        f"interceptor {entry.name!r} timed out",
                        {"interceptor": entry.name, "reason": "timeout", "timeoutMs": timeout_ms,
                         "phase": phase.value},
                    )  # fmt: skip
        except (anyio.get_cancelled_exc_class(), InterceptorRpcError):
            raise
        except Exception as exc:
            raise _handler_failure(entry.name, exc) from None
        return finish(entry, raw, phase, invocation.payload, encoded, started)


_T = TypeVar("_T")
_Finish = Callable[[RegisteredInterceptor, Any, Phase, Any, bytes, float], _T]
"""An edge's answer from what a handler returned: (entry, raw, phase, the payload it got, the JSON that payload was
made from, when it started)."""


def _ms_since(started: float) -> float:
    """Milliseconds since `started` (a `perf_counter` reading) to the microsecond: a whole count of microseconds
    divided by 1000, the same number `round(ms, 3)` gives but without its decimal conversion (~2k instructions,
    once per invoke)."""
    return round((time.perf_counter() - started) * 1_000_000) / 1000


_PHASES: dict[str, Phase] = {"request": Phase.REQUEST, "response": Phase.RESPONSE}
_VALIDATION = InterceptorType.VALIDATION
"""Read once: on Python 3.11 an enum member read from its class goes through the enum type's `__getattr__`
(about ten times a plain class attribute), and every invoke's answer asks for it."""
_UNWRITTEN = b""
"""`_pass`'s `encoded` for a payload known to be small and writable (`start`'s `payload_bound`): never read."""


def _invalid_params(exc: WireError) -> InterceptorRpcError:
    return InterceptorRpcError(
        INVALID_PARAMS, f"invalid interceptor/invoke params: {exc.path}: {exc.problem}", {"field": exc.path}
    )


def _own_claims(context: Any) -> Any:
    """A wire context whose principal's claims are the caller's objects (an in-memory transport) as a JSON round
    trip delivers it: a handler appending to `claims["roles"]` must not grant the caller (or the next interceptor)
    anything. Anything not JSON is left as it is, for `from_wire` to refuse with the field's path."""
    if isinstance(context, dict) and isinstance(context.get("principal"), dict):
        with contextlib.suppress(TypeError):
            return loads(dumps(context))
    return context


def _context_of(context: Any) -> InvocationContext:
    try:
        return InvocationContext.from_wire(context, "params.context")
    except WireError as exc:
        raise _invalid_params(exc) from None


def _wire_answer(
    entry: RegisteredInterceptor, raw: Any, phase: Phase, payload: Any, encoded: bytes, started: float
) -> dict[str, Any]:
    """A wire edge's result (`_Finish`): a plain allow built at once, as `_result_of` and `to_wire` build it."""
    info = entry.info
    if info.type is _VALIDATION and (raw is PLAIN_ALLOW or raw is None or raw is True):
        duration = round((time.perf_counter() - started) * 1_000_000) / 1000  # (`_ms_since`, without its call)
        return {"interceptor": info.name, "type": "validation", "phase": PHASE_TEXT[phase], "valid": True,
                "durationMs": duration}  # fmt: skip
    return _result_of(entry, raw, phase, payload, started).to_wire()


def _handler_failure(name: str, exc: Exception) -> InterceptorRpcError:
    """A handler raised: -32603 naming its exception type. The text may quote the payload: never logged or sent."""
    logger.warning("interceptor %r failed: its handler raised %s", name, type(exc).__name__)
    log_traceback(logger, exc)
    reason = f"handler raised {type(exc).__name__}"
    return InterceptorRpcError(INTERNAL_ERROR, f"interceptor {name!r} failed", {"interceptor": name, "reason": reason})


def _result_of(entry: RegisteredInterceptor, raw: Any, phase: Phase, payload: Any, started: float) -> InvokeResult:
    """What a handler returned, as the result of its type (`payload`: the copy it got), timed from `started`."""
    try:
        result: InvokeResult
        info = entry.info
        if info.type is _VALIDATION:
            result = to_validation_result(raw, info.name, phase)
        else:
            result = to_mutation_result(raw, info.name, phase, payload)
    except MalformedHandlerResult as exc:
        raise InterceptorRpcError(
            INTERNAL_ERROR,
            f"interceptor {entry.name!r} returned a malformed result",
            {"interceptor": entry.name, "reason": f"malformed result: {exc}"},
        ) from None
    result.duration_ms = _ms_since(started)
    return result


def _answer(
    entry: RegisteredInterceptor, raw: Any, phase: Phase, payload: Any, encoded: bytes, started: float
) -> tuple[InvokeResult, dict[str, Any]]:
    """A local invoke's reply to what the handler returned (`payload`: the copy it got; `encoded`: the JSON it was
    made from). The two commonest answers, a plain allow and an unchanged mutation, are built at once, exactly as
    `_result_of` and `_reply` build them; any other goes through those two."""
    info = entry.info
    if info.type is _VALIDATION:
        if raw is PLAIN_ALLOW or raw is None or raw is True:
            duration = _ms_since(started)
            wire = {"interceptor": info.name, "type": "validation", "phase": PHASE_TEXT[phase], "valid": True,
                    "durationMs": duration}  # fmt: skip
            return ValidationResult(info.name, phase, True, None, None, None, duration), wire
    elif raw is PLAIN_UNCHANGED or raw is None:
        duration = _ms_since(started)
        unchanged = _unchanged_reply(info.name, phase, payload, encoded, duration)
        if unchanged is not None:
            return unchanged
    return _reply(info.name, _result_of(entry, raw, phase, payload, started), encoded)


def _lent_answer(
    entry: RegisteredInterceptor, raw: Any, phase: Phase, payload: Any, encoded: bytes, started: float
) -> tuple[InvokeResult, dict[str, Any]]:
    """`_answer` for a handler that borrows the caller's objects (`RegisteredInterceptor.borrows`): it edits none
    of them, so an unchanged mutation echoes the caller's payload itself, and any other result is taken as the
    handler built it, with no JSON round trip."""
    info = entry.info
    if info.type is not _VALIDATION and (raw is PLAIN_UNCHANGED or raw is None):
        duration = _ms_since(started)
        wire: dict[str, Any] = {"interceptor": info.name, "type": "mutation", "phase": PHASE_TEXT[phase],
                                "modified": False, "payload": payload, "durationMs": duration}  # fmt: skip
        return MutationResult(info.name, phase, False, payload, duration), wire
    if info.type is _VALIDATION and (raw is PLAIN_ALLOW or raw is None or raw is True):
        return _answer(entry, raw, phase, payload, encoded, started)
    result = _result_of(entry, raw, phase, payload, started)
    return result, result.to_wire()


def _reply(name: str, result: InvokeResult, encoded: bytes) -> tuple[InvokeResult, dict[str, Any]]:
    """A local invoke's reply: the result and its wire form, with nothing in either the handler's objects."""
    reply = _plain_reply(result, encoded)
    if reply is not None:
        return reply
    try:
        wire: dict[str, Any] = loads(dumps(result.to_wire()))
    except TypeError:  # a handler returned something JSON cannot carry: no wire could deliver it either
        raise InterceptorRpcError(
            INTERNAL_ERROR,
            f"interceptor {name!r} returned a malformed result",
            {"interceptor": name, "reason": "malformed result: not representable as JSON"},
        ) from None
    return _from_fresh_wire(result, wire), wire


def _sent_context(context: InvocationContext, memo: PassMemo | None = None) -> InvocationContext:
    """The context as a JSON round trip delivers it: the claims copied, every field checked as `from_wire` checks
    it. When every field is already a plain string (the common case), only the claims make the round trip. The
    JSON is made once per execution (`memo`, kept by the chain for its run) and read once per invoke: each handler
    gets claims of its own."""
    if memo is not None and memo.context is context:
        sent = memo.sent
    else:
        sent = _context_json(context)
        if memo is not None:
            memo.context, memo.sent = context, sent
    if sent is None:
        return context  # nothing in it is anyone's object: frozen, and strings only
    whole, encoded = sent
    try:
        if whole:
            return InvocationContext.from_wire(loads(encoded))
    except WireError as exc:
        raise _unsendable(exc.path) from None
    principal = context.principal
    assert principal is not None
    # Built directly: `dataclasses.replace` costs several times more, on every invoke of every chain.
    copied = Principal(principal.type, principal.id, loads(encoded))
    return InvocationContext(copied, context.trace_id, context.span_id, context.timestamp, context.session_id)


def _context_json(context: InvocationContext) -> tuple[bool, bytes] | None:
    """What `_sent_context` decodes per invoke: (True, the whole context's wire JSON) when some field is not a plain
    string, (False, the claims' JSON) when only the claims are anyone's objects, None when nothing is."""
    principal = context.principal
    assert principal is not None
    trace_id, span_id, session_id, claims = context.trace_id, context.span_id, context.session_id, principal.claims
    plain = (
        type(context.timestamp) is str
        and context.timestamp != ""
        and (trace_id is None or type(trace_id) is str)
        and (span_id is None or type(span_id) is str)
        and (session_id is None or type(session_id) is str)
        and (principal.id is None or type(principal.id) is str)
        and (claims is None or type(claims) is dict)
    )
    try:
        if not plain:
            return True, dumps(context.to_wire())
        return None if claims is None else (False, dumps(claims))
    except TypeError:
        raise _unsendable("context") from None


def _unsendable(field: str) -> InterceptorRpcError:
    return InterceptorRpcError(
        INVALID_PARAMS, "invalid interceptor/invoke params: context cannot be sent", {"field": field}
    )


def _admit(compiled: _Compiled, event: str, phase: Phase, config: Mapping[str, Any] | None) -> _Compiled:
    """The checks of an invoke past its params' shapes: a concrete hooked event, a config its schema accepts."""
    name = compiled.entry.name
    if is_pattern(event):
        raise InterceptorRpcError(
            INVALID_PARAMS, "event must be one concrete event name, not a pattern", {"field": "event"}
        )
    if not compiled.covers(event, phase):
        raise InterceptorRpcError(
            INVALID_PARAMS,
            f"interceptor {name!r} does not hook {event} on the {phase} phase",
            {"name": name, "event": event, "phase": phase.value, "advertisedHooks": compiled.advertised_hooks},
        )
    if compiled.config_validator is not None and config is not None:
        error = next(iter(compiled.config_validator.iter_errors(config)), None)
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(root)"
            raise InterceptorRpcError(
                INVALID_PARAMS,
                f"config does not satisfy the configSchema of {name!r} at {where}",
                {"name": name, "field": f"config/{where}", "rule": error.validator},
            )
    return compiled


def _plain_reply(built: InvokeResult, encoded: bytes) -> tuple[InvokeResult, dict[str, Any]] | None:
    """The reply of the two commonest results without a JSON round trip, when nothing in it can be the handler's:
    a validation result that is only its verdict, or an unchanged mutation whose payload the handler left as it
    got it (the echo is then a fresh decoding of the payload's JSON, equal to what the round trip would give).
    None for any other result: `invoke_local` copies those through JSON."""
    if built.info is not None:
        return None
    if isinstance(built, ValidationResult):
        if built.messages is not None or built.suggestions is not None or built.valid.__class__ is not bool:
            return None
        if built.severity is not None and built.severity.__class__ is not str:
            return None
        return built, built.to_wire()
    if built.modified or not built.echoed:
        return None
    return _unchanged_reply(built.interceptor, built.phase, built.payload, encoded, built.duration_ms)


def _unchanged_reply(
    name: str, phase: Phase, payload: Any, encoded: bytes, duration: float | None
) -> tuple[MutationResult, dict[str, Any]] | None:
    """An unchanged mutation's reply, its echo a fresh decoding of the payload's JSON (what a JSON round trip of the
    reply gives). None when the handler edited `payload` (its copy) in place although it answered unchanged: the
    round trip then reports the payload as it is."""
    pristine = loads(encoded)
    if payload != pristine:
        return None
    wire: dict[str, Any] = {"interceptor": name, "type": "mutation", "phase": PHASE_TEXT[phase], "modified": False,
                            "payload": pristine, "durationMs": duration}  # fmt: skip
    return MutationResult(name, phase, False, pristine, duration), wire


def _from_fresh_wire(built: InvokeResult, wire: dict[str, Any]) -> InvokeResult:
    """The result an invoker reads from `wire` (a fresh copy of `built.to_wire()`), without re-reading what the
    host built itself: only the parts that may hold a handler's objects come from the copy."""
    if isinstance(built, MutationResult):
        return MutationResult(
            built.interceptor, built.phase, built.modified, wire["payload"], built.duration_ms, wire.get("info")
        )
    if built.messages is not None or built.suggestions is not None:  # rare (a rejection): read it as sent
        return ValidationResult.from_wire(wire)
    return ValidationResult(built.interceptor, built.phase, built.valid, built.severity, None, None,
                            built.duration_ms, wire.get("info"))  # fmt: skip


async def _in_thread(entry: RegisteredInterceptor, invocation: Invocation) -> Any:
    """A sync handler that may block or ignore cancellation: in a worker thread we can abandon on timeout."""
    if on_asyncio():
        return await in_worker(entry.handler, invocation)
    return await anyio.to_thread.run_sync(entry.handler, invocation, abandon_on_cancel=True)
