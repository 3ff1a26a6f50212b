"""The intercepting client: the chain on the client side of a connection.

Outgoing requests are sent (mutate, then validate what leaves; payload `{method, params}`), incoming
results are received (validate, then mutate; payload = the result object). Requests the server sends
to the client (`sampling/createMessage`, `elicitation/create`, `roots/list`) swap roles: the request is
received, the client's answer is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import anyio.abc
from mcp import Client
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions, DispatchContext, OnNotify, OnNotifyIntercept, OnRequest
from mcp.shared.exceptions import MCPError
from mcp.shared.transport_context import TransportContext

from interceptors import INTERNAL_ERROR, Direction, InvocationContext, Phase, is_context_operation
from interceptors_chain import Chain, ExecutionResult, abort_to_error
from interceptors_chain._sdk import wrap_dispatcher

ClientContextProvider = Callable[[str], InvocationContext | None]


def _no_context(method: str) -> InvocationContext | None:
    return None


class InterceptingDispatcher:
    """Wraps any SDK dispatcher: `ClientSession(dispatcher=InterceptingDispatcher(inner, chain))`."""

    def __init__(
        self,
        inner: Any,
        chain: Chain,
        *,
        context_provider: ClientContextProvider = _no_context,
        expose_messages: bool = False,
    ) -> None:
        self.inner = inner
        self.chain = chain
        self.context_provider = context_provider
        self.expose_messages = expose_messages

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(
        self,
        on_request: OnRequest,
        on_notify: OnNotify,
        on_notify_intercept: OnNotifyIntercept | None = None,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        async def intercepted(
            dctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
        ) -> dict[str, Any]:
            if not is_context_operation(method):
                return await on_request(dctx, method, params)

            async def answer(new_params: Mapping[str, Any] | None) -> dict[str, Any]:
                return await on_request(dctx, method, new_params)

            # The server asks, the client answers: the request is received, the answer is sent.
            return await self._around(method, params, answer, Direction.RECEIVING, Direction.SENDING)

        await self.inner.run(intercepted, on_notify, on_notify_intercept, task_status=task_status)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        if not is_context_operation(method):
            return await self.inner.send_raw_request(method, params, opts)  # type: ignore[no-any-return]

        async def send(new_params: Mapping[str, Any] | None) -> dict[str, Any]:
            return await self.inner.send_raw_request(method, new_params, opts)  # type: ignore[no-any-return]

        return await self._around(method, params, send, Direction.SENDING, Direction.RECEIVING)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        await self.inner.notify(method, params, opts)

    async def _around(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        call: Callable[[Mapping[str, Any] | None], Any],
        request_direction: Direction,
        result_direction: Direction,
    ) -> dict[str, Any]:
        chain = self.chain
        request_plan = chain.plan(method, Phase.REQUEST, request_direction)
        result_plan = chain.plan(method, Phase.RESPONSE, result_direction)
        if request_plan.empty and result_plan.empty:
            return await call(params)  # type: ignore[no-any-return]
        context = self.context_provider(method)
        if not request_plan.empty:
            payload = {"method": method, "params": None if params is None else dict(params)}
            outcome = await chain.execute(method, Phase.REQUEST, payload, direction=request_direction, context=context)
            self._raise_if_blocked(outcome)
            if outcome.modified:
                params = _params_of(method, outcome.final_payload)
        result: dict[str, Any] = await call(params)
        if result_plan.empty:
            return result
        outcome = await chain.execute(method, Phase.RESPONSE, result, direction=result_direction, context=context)
        self._raise_if_blocked(outcome)
        if outcome.modified:
            if not isinstance(outcome.final_payload, dict):
                raise MCPError(
                    INTERNAL_ERROR, "interceptor chain failed", {"reason": "a mutated result is not an object"}
                )
            return outcome.final_payload
        return result

    def _raise_if_blocked(self, outcome: ExecutionResult) -> None:
        if outcome.blocked:
            error = abort_to_error(outcome, expose_messages=self.expose_messages)
            raise MCPError(error.code, error.message, error.data)


def _params_of(method: str, payload: Any) -> Mapping[str, Any] | None:
    if not isinstance(payload, Mapping) or payload.get("method") != method:
        raise MCPError(INTERNAL_ERROR, "interceptor chain failed", {"reason": "a request mutator changed the method"})
    params = payload.get("params")
    if params is not None and not isinstance(params, Mapping):
        raise MCPError(INTERNAL_ERROR, "interceptor chain failed", {"reason": "mutated params are not an object"})
    return params


class InterceptingClient(Client):
    """`mcp.Client` with the chain on its side of the connection.

    `InterceptingClient.wrap(server, chain, mode=..., sampling_callback=...)` takes the same arguments
    as `mcp.Client`, plus the chain.
    """

    interceptor_chain: Chain
    interceptor_context: ClientContextProvider = staticmethod(_no_context)

    @classmethod
    def wrap(
        cls, server: Any, chain: Chain, *, context_provider: ClientContextProvider | None = None, **options: Any
    ) -> InterceptingClient:
        client = cls(server, **options)
        client.interceptor_chain = chain
        if context_provider is not None:
            client.interceptor_context = context_provider
        return client

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        session = await super()._build_session(exit_stack)
        chain, context = self.interceptor_chain, self.interceptor_context
        wrap_dispatcher(session, lambda inner: InterceptingDispatcher(inner, chain, context_provider=context))
        return session
