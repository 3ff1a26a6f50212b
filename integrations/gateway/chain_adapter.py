"""The router's `RunChain` performed with `Chain.execute`, and the outcome mapped back for `chain_done`.

Per-request state: stages remember what a request's chain learned under the context's trace id (the
transforms keep their rule selection for the response under it). Every pass of one request runs with the
trace id of the request's call number (`gateway-call-N`, N = `RequestState.call`): the request, its
result and its error, and its progress and logs too, so a per-tool rule holds on all of them. The
transforms read the memo for a progress or log payload (marked with its channel) without consuming it;
only the final reply ends it. A server-to-client request of the request (sampling, elicitation) and what
belongs to no request run with a trace id of their own.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Final

from interceptors import INTERNAL_ERROR, Direction, InvocationContext, Phase
from interceptors_chain import Chain, ExecutionResult, abort_to_error

from .router import ChainBlocked, ChainOutcome, ChainPassed, RunChain
from .router.channels import Channel

logger = logging.getLogger("interceptors.gateway")

SIDE_CHANNELS: Final = frozenset({Channel.SERVER_REQUEST, Channel.CLIENT_RESULT, Channel.TASK_STATUS})
"""Passes of a request that run under a trace id of their own (progress and logs share the request's)."""
NOT_FOUND_OUTCOME: Final = "not_found"


class ChainAdapter:
    """`has_work` for `RouterConfig`; `await run(action)` for every `RunChain`."""

    def __init__(self, chain: Chain, *, expose_messages: bool = False) -> None:
        self.chain = chain
        self.expose_messages = expose_messages
        self._work: dict[tuple[str, Phase, Direction], bool] = {}
        self._generation = chain.generation
        self._side_runs = 0

    def has_work(self, event: str, phase: Phase, direction: Direction) -> bool:
        """Whether the chain has a plan for this crossing: an empty plan costs one dict lookup."""
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

    def context_for(self, action: RunChain) -> InvocationContext | None:
        context = action.context if isinstance(action.context, InvocationContext) else None
        state = action.request
        if state is None:
            self._side_runs += 1
            trace = f"gateway-free-{self._side_runs}"
        elif action.channel in SIDE_CHANNELS:
            self._side_runs += 1
            trace = f"gateway-call-{state.call}-side-{self._side_runs}"
        else:
            trace = f"gateway-call-{state.call}"
        if context is None:
            return InvocationContext(trace_id=trace)
        return dataclasses.replace(context, trace_id=trace)

    async def run(self, action: RunChain) -> ChainOutcome:
        try:
            result = await self.chain.execute(
                action.event,
                action.phase,
                action.payload,
                direction=action.direction,
                context=self.context_for(action),
            )
        except Exception as exc:  # a broken chain blocks: fail closed
            logger.warning("the chain failed on %s (%s): %s", action.event, action.channel, type(exc).__name__)
            return ChainBlocked({"code": INTERNAL_ERROR, "message": "interceptor chain failed"})
        return self.outcome(result, action.payload)

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
        wire: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.data is not None:
            wire["data"] = error.data
        return ChainBlocked(wire)


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
