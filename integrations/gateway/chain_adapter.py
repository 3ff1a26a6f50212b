"""The router's `RunChain` performed with `Chain.execute`, and the outcome mapped back for `chain_done`.

Per-request state: stages remember what a request's chain learned under the context's trace id (the
transforms keep their rule selection for the response under it). Every pass of one request runs with the
trace id of the request's call number (`gateway-call-N`, N = `RequestState.call`): the request, its
result and its error, and its progress and logs too, so a per-tool rule holds on all of them. The
transforms read the memo for a progress or log payload (marked with its channel) without consuming it;
only the final reply ends it. A server-to-client request of the request (sampling, elicitation) and what
belongs to no request run with a trace id of their own.

A client's W3C trace context (`_meta.traceparent`, and `tracestate`, of the request) is carried instead:
every pass of that request runs with the client's trace id and a span id of the request's own (derived
from its call number with a per-gateway key), so two concurrent requests of one trace never share what
the stages remember, and remote interceptor servers see the client's trace. With tracing on, the chain
spans are children of the client's span. A malformed traceparent is ignored (the request keeps its
`gateway-call-N`), never logged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Final

from interceptors import INTERNAL_ERROR, Direction, InvocationContext, Phase
from interceptors_chain import Chain, ExecutionResult, abort_to_error, tracing

from .router import ChainBlocked, ChainOutcome, ChainPassed, RunChain
from .router.channels import Channel

logger = logging.getLogger("interceptors.gateway")

SIDE_CHANNELS: Final = frozenset({Channel.SERVER_REQUEST, Channel.CLIENT_RESULT, Channel.TASK_STATUS})
"""Passes of a request that run under a trace id of their own (progress and logs share the request's)."""
NOT_FOUND_OUTCOME: Final = "not_found"
TRACE_LEARNED: Final = "io.mcp-interceptors/client-trace"
"""The key, in `RequestState.learned`, of the client's trace context its request pass read."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClientTrace:
    """A client's W3C trace context, and the span id this gateway gives the one request that carried it."""

    trace_id: str
    parent_span_id: str
    """The client's span (the `traceparent`'s parent id): the chain spans' parent when tracing is on."""
    sampled: bool
    tracestate: str | None
    span_id: str
    """The request's own span id (16 hex digits, never zero): what stages and remote servers see."""


def _request_params(payload: Any) -> Any:
    return payload.get("params") if isinstance(payload, dict) else None


class ChainAdapter:
    """`has_work` for `RouterConfig`; `await run(action)` for every `RunChain`."""

    def __init__(self, chain: Chain, *, expose_messages: bool = False, on_refusal: Any = None) -> None:
        """`on_refusal(principal, event, payload, result)`: for a client request the chain refused, the error to
        answer with (or None to keep the chain's); the policy stage audits the refusal there (`Stages.refused`)."""
        self.chain = chain
        self.expose_messages = expose_messages
        self.on_refusal = on_refusal
        self._work: dict[tuple[str, Phase, Direction], bool] = {}
        self._generation = chain.generation
        self._side_runs = 0
        self._span_key = os.urandom(16)

    def has_work(self, event: str, phase: Phase, direction: Direction) -> bool:
        """Whether the chain has a plan for this crossing: an empty plan costs one dict lookup.

        A request's own pass is also run when only its response has a plan: it reads the client's trace
        context for the later passes (and executes nothing)."""
        if self._plan_has_work(event, phase, direction):
            return True
        return (
            phase == Phase.REQUEST
            and direction == Direction.RECEIVING
            and (self._plan_has_work(event, Phase.RESPONSE, Direction.SENDING))
        )

    def _plan_has_work(self, event: str, phase: Phase, direction: Direction) -> bool:
        if self.chain.generation != self._generation:
            self._work.clear()
            self._generation = self.chain.generation
        key = (event, phase, direction)
        work = self._work.get(key)
        if work is None:
            if len(self._work) > 4096:  # event names come from clients: keep the cache bounded
                self._work.clear()
            work = self._work[key] = not self.chain.plan(event, phase, direction).empty
        return work

    def use_chain(self, chain: Chain) -> None:
        """Swap in another chain (a reload): the next `has_work` and `run` use it; no plan of the old one is kept
        (a new chain may well have the old one's generation number)."""
        self.chain = chain
        self._work.clear()
        self._generation = chain.generation

    def client_trace(self, action: RunChain, request_pass: bool | None = None) -> ClientTrace | None:
        """The client's trace context of the request this pass belongs to (None: none, or a side pass).
        `request_pass`: `_is_request_pass(action)`, when the caller already knows it."""
        state = action.request
        if state is None or action.channel in SIDE_CHANNELS:
            return None
        if not (_is_request_pass(action) if request_pass is None else request_pass):
            known = state.learned.get(TRACE_LEARNED)
            return known if isinstance(known, ClientTrace) else None
        params = _request_params(action.payload)
        parsed = tracing.parse_traceparent(tracing.traceparent_of(params))
        if parsed is None:
            return None
        trace_id, parent, sampled = parsed
        return ClientTrace(trace_id, parent, sampled, tracing.tracestate_of(params), self._span_of(state.call))

    def _span_of(self, call: int) -> str:
        """The request's span id: keyed per gateway, so two gateways (or restarts) never hand out the same one."""
        digest = hashlib.blake2b(call.to_bytes(8, "big"), key=self._span_key, digest_size=8).hexdigest()
        return digest if digest != "0" * 16 else "0" * 15 + "1"

    def context_for(self, action: RunChain, trace: ClientTrace | None = None) -> InvocationContext | None:
        context = action.context if isinstance(action.context, InvocationContext) else None
        state = action.request
        span: str | None = None
        if state is None:
            self._side_runs += 1
            trace_id = f"gateway-free-{self._side_runs}"
        elif action.channel in SIDE_CHANNELS:
            self._side_runs += 1
            trace_id = f"gateway-call-{state.call}-side-{self._side_runs}"
        elif trace is not None:
            trace_id, span = trace.trace_id, trace.span_id
        else:
            trace_id = f"gateway-call-{state.call}"
        if context is None:
            return InvocationContext(trace_id=trace_id, span_id=span)
        # built directly (`dataclasses.replace` costs several times more, twice per call)
        return InvocationContext(context.principal, trace_id, span, context.timestamp, context.session_id)

    def movable(self, action: RunChain) -> bool:
        """Whether `run(action)` may start on the caller's task and go on in another (see `Chain.movable`)."""
        if _is_request_pass(action) and not self._plan_has_work(action.event, action.phase, action.direction):
            return True  # it only reads the trace context
        return self.chain.movable(action.event, action.phase, action.direction)

    async def run(self, action: RunChain) -> ChainOutcome:
        request_pass = _is_request_pass(action)
        trace = self.client_trace(action, request_pass)
        if request_pass and not self._plan_has_work(action.event, action.phase, action.direction):
            # run only to learn the trace context for the response passes (see `has_work`)
            return ChainPassed(action.payload, learned={TRACE_LEARNED: trace} if trace is not None else None)
        parent: Any = nullcontext()
        if trace is not None and tracing.TRACER is not None:
            parent = tracing.remote_parent(trace.trace_id, trace.parent_span_id, trace.sampled, trace.tracestate)
        try:
            with parent:
                result = await self.chain.execute(
                    action.event,
                    action.phase,
                    action.payload,
                    direction=action.direction,
                    context=self.context_for(action, trace),
                )
        except Exception as exc:  # a broken chain blocks: fail closed
            logger.warning("the chain failed on %s (%s): %s", action.event, action.channel, type(exc).__name__)
            return ChainBlocked({"code": INTERNAL_ERROR, "message": "interceptor chain failed"})
        outcome = self.outcome(result, action.payload)
        refusable = request_pass or _is_client_answer(action)
        if refusable and result.blocked and self.on_refusal is not None and isinstance(outcome, ChainBlocked):
            outcome = self._refused(action, result, outcome)
        if request_pass and trace is not None and isinstance(outcome, ChainPassed):
            outcome = dataclasses.replace(outcome, learned={**(outcome.learned or {}), TRACE_LEARNED: trace})
        return outcome

    def _refused(self, action: RunChain, result: ExecutionResult, outcome: ChainBlocked) -> ChainOutcome:
        """A refused client request (or client answer to a server's request): audited by the policy stage, answered
        with the reason it gives (an answer's refusal goes to the server)."""
        if outcome.error is None:  # hidden (not found) or a substitute result: the policy's own, already audited
            return outcome
        context = action.context if isinstance(action.context, InvocationContext) else None
        try:
            error = self.on_refusal(
                None if context is None else context.principal, action.event, action.payload, result
            )
        except Exception as exc:  # auditing must never change a refusal into something else
            logger.warning("recording a refusal failed: %s", type(exc).__name__)
            return outcome
        return ChainBlocked(error) if isinstance(error, dict) else outcome

    def outcome(self, result: ExecutionResult, payload: Any) -> ChainOutcome:
        if not result.blocked:
            if result.modified:
                return ChainPassed(result.final_payload, modified=True)
            return ChainPassed(payload)
        first = result.aborted_at[0]
        if first.substitute is not None:
            return ChainBlocked(substitute=dict(first.substitute))
        if _outcome_of(result, first.interceptor) == NOT_FOUND_OUTCOME:
            return ChainBlocked(not_found=True)
        error = abort_to_error(result, expose_messages=self.expose_messages)
        wire: dict[str, Any] = {"code": error.code, "message": _unnamed(error.message)}
        if error.data is not None:
            data = error.data
            reason = data.get("reason") if isinstance(data, dict) else None
            if isinstance(reason, str) and _SERVER_NAME.search(reason):
                _failures.warning("an interceptor failed: %s", reason)  # the operator sees which server
                data = {**data, "reason": _unnamed(reason)}
            wire["data"] = data
        return ChainBlocked(wire)


_SERVER_NAME: Final = re.compile(r"(?:interceptor )?server '[^']*'")


def _unnamed(text: str) -> str:
    """`text` without the names of the gateway's interceptor servers (`local-0`, a chain file's names): a
    client learns that an interceptor failed, never how the gateway is put together."""
    return _SERVER_NAME.sub("an interceptor server", text)


class RateLimitedLog:
    """One warning line per `period` seconds, with the count of the lines it held back since the last one:
    a failure repeated on every call (a store that is down) never floods the log."""

    def __init__(self, period: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.period = period
        self.clock = clock
        self._last = -period
        self._held = 0

    def warning(self, message: str, *args: Any) -> None:
        now = self.clock()
        if now - self._last < self.period:
            self._held += 1
            return
        held, self._held, self._last = self._held, 0, now
        if held:
            logger.warning(message + " (and %d more like it since the last line)", *args, held)
        else:
            logger.warning(message, *args)


_failures = RateLimitedLog()


def _is_request_pass(action: RunChain) -> bool:
    """The pass of a client's request itself (its params hold the client's `_meta`)."""
    return action.channel == Channel.REQUEST and action.phase == Phase.REQUEST and action.request is not None


def _is_client_answer(action: RunChain) -> bool:
    """The client's answer to a request of the upstream's (sampling, elicitation, roots): a result or an error."""
    return (
        action.phase == Phase.RESPONSE
        and action.direction == Direction.RECEIVING
        and action.channel in (Channel.CLIENT_RESULT, Channel.ERROR)
    )


def _outcome_of(result: ExecutionResult, interceptor: str) -> str | None:
    """The policy's decision (`info.outcome`) in the wire result of the interceptor that blocked."""
    for record in result.results:
        if record.interceptor != interceptor or record.result is None:
            continue
        info = record.result.get("info")
        if isinstance(info, dict) and isinstance(info.get("outcome"), str):
            outcome: str = info["outcome"]
            return outcome
    return None
