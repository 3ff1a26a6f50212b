"""The router gateway inside this process: an upstream subprocess behind the router, SDK clients in memory.

For tests, the testing kit (`integrations.testing.gateway_for`) and the demo: the same router, chain
adapter, catalog and local answers as `mcp-interceptors proxy`, with no stdio of its own. Each
`Client(gateway.server)` is one router session (the local user's principal, as on stdio); several may be
open at once. The caller owns the chain and the stages; the gateway owns the upstream process.

    async with LocalChain(registry) as chain, InProcessGateway([sys.executable, "server.py"], chain) as gateway:
        async with Client(gateway.server, mode="legacy") as client:
            ...
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

from interceptors import INTERNAL_ERROR, InvocationContext, Registry
from interceptors.codec import dumps_exact
from interceptors.errors import InterceptorsError
from interceptors.protocol.messages import Kind, parse
from interceptors_chain import Chain

from .catalog import Catalog
from .chain_adapter import ChainAdapter
from .command import router_for
from .local import LocalAnswers
from .router import SendDownstream
from .runner import UPSTREAM_GONE, NoDownstream, Runner, declared_capabilities
from .upstream_stdio import StdioUpstream

logger = logging.getLogger("interceptors.gateway")

DEFAULT_UPSTREAM_TIMEOUT_S = 300.0


class GatewayClosedError(InterceptorsError, RuntimeError):
    """The upstream went away before the gateway started (or it was used after leaving its `async with`). Its
    handshake waits for the first client, whose `initialize` gets -32603 when the upstream fails it."""


class InProcessGateway:
    """`async with InProcessGateway(command, chain, stages=..., exposed=..., roles=...) as gateway`.

    `gateway.server` is a new in-memory `Transport` each time it is read: `Client(gateway.server)`.
    `stages` is what `gateway.stages.build_stages` made (its engine learns the upstream's catalog, its
    local tools are offered); `exposed` registries answer `interceptors/list` and `interceptor/invoke`.
    """

    def __init__(
        self,
        command: Sequence[str],
        chain: Chain,
        *,
        stages: Any = None,
        exposed: Sequence[Registry] | None = None,
        roles: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        upstream_timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT_S,
    ) -> None:
        if not command:
            raise ValueError("the upstream command is empty")
        self.command = [str(part) for part in command]
        self.chain = chain
        self.stages = stages
        self.exposed = exposed
        self.roles = list(roles)
        self.env = env
        self.cwd = cwd
        self.upstream_timeout = upstream_timeout
        self.upstream: StdioUpstream | None = None
        self._runner: _MemoryRunner | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self._ids = itertools.count(1)

    async def __aenter__(self) -> InProcessGateway:
        from interceptors.policy import principal_for_stdio

        stages = self.stages
        adapter = ChainAdapter(self.chain, on_refusal=getattr(stages, "refused", None))
        local = LocalAnswers(self.exposed, getattr(stages, "local_tools", ()), getattr(stages, "authorize", None))
        router = router_for(adapter, local)
        engine = getattr(stages, "engine", None)
        catalog = Catalog(router, engine.learn) if engine is not None else None
        self.upstream = await StdioUpstream.start(self.command, self.env, cwd=self.cwd)
        self.principal = principal_for_stdio(self.roles)
        runner = _MemoryRunner(
            router, adapter, self.upstream, catalog=catalog, timeout=self.upstream_timeout, local=local
        )
        self._runner = runner
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        try:
            ready = await self._tasks.start(runner.serve)
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        if not ready:
            await self.__aexit__(None, None, None)
            raise GatewayClosedError(UPSTREAM_GONE)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        runner, tasks, self._runner, self._tasks = self._runner, self._tasks, None, None
        if runner is not None:
            runner.stop()
        try:
            if tasks is not None:
                return await tasks.__aexit__(exc_type, exc, tb)
            return None
        finally:
            if self.upstream is not None:
                with anyio.CancelScope(shield=True):
                    await self.upstream.aclose()

    @property
    def server(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        """A new client connection (an SDK `Transport`): one router session while it is open."""
        return self._connect()

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[tuple[Any, Any]]:
        runner = self._runner
        if runner is None:
            raise GatewayClosedError("the gateway is not running")
        session = f"memory-{next(self._ids)}"
        to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](math.inf)
        client_writes, from_client = anyio.create_memory_object_stream[SessionMessage](math.inf)
        context = InvocationContext(principal=self.principal, session_id=session)
        runner.sessions[session] = to_client
        runner.router.open_session(session, context=context, principal=self.principal.id)

        async def pump() -> None:
            async with from_client:
                async for item in from_client:
                    line = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
                    if not await runner.upstream_for(declared_capabilities(line)):  # the first starts its handshake
                        gone = _error_reply(line, {"code": INTERNAL_ERROR, "message": UPSTREAM_GONE})
                        if gone is not None:
                            runner.send_downstream(SendDownstream(session, gone))
                        continue
                    try:
                        actions = runner.router.receive_downstream(session, line)
                    except Exception as exc:  # a router defect: logged, the request answered, the session goes on
                        logger.error("the router failed on a client message: %s", type(exc).__name__)
                        request_id = getattr(item.message, "id", None)
                        error = {"code": INTERNAL_ERROR, "message": "Internal error"}
                        reply = {"jsonrpc": "2.0", "id": request_id, "error": error}
                        actions = [SendDownstream(session, dumps_exact(reply))]
                    runner.perform(actions)
                    await runner.upstream.drain()

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(pump)
                try:
                    yield client_reads, client_writes
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            runner.sessions.pop(session, None)
            to_client.close()
            client_writes.close()
            if self._runner is runner:  # the client left: its requests are cancelled upstream
                runner.perform(runner.router.close_session(session))
                with anyio.CancelScope(shield=True):
                    await runner.upstream.drain()


class _MemoryRunner(Runner):
    """The `Runner` with in-memory sessions in place of the stdio downstream."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        router, adapter, upstream = args
        super().__init__(router, adapter, upstream, NoDownstream(), **kwargs)
        self.sessions: dict[str, MemoryObjectSendStream[SessionMessage | Exception]] = {}

    def send_downstream(self, action: SendDownstream) -> None:
        stream = self.sessions.get(action.session)
        if stream is None:
            return
        try:
            message: SessionMessage | Exception = SessionMessage(
                types.jsonrpc_message_adapter.validate_json(action.data)
            )
        except ValueError as exc:  # what the client's own transport would report
            message = exc
        try:
            stream.send_nowait(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.sessions.pop(action.session, None)

    def stop(self) -> None:
        """End the gateway (the owner leaves its `async with`): status 0 unless the upstream went away first."""
        self._finish(0)

    async def serve(self, *, task_status: anyio.abc.TaskStatus[bool] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start the upstream's pump; report whether clients may come (its handshake and catalog wait for the
        first client's first message); run until finished."""
        async with anyio.create_task_group() as tasks:
            # the upstream's handshake waits for the first client's first message (`upstream_for`), so it is
            # told that client's capabilities; the upstream pump runs from the start (a death is noticed at once)
            self._start_tasks(tasks)
            task_status.started(not self._done.is_set())
            await self._done.wait()
            for run in self._chain_runs:
                run.cancel()
            tasks.cancel_scope.cancel()


def _error_reply(line: bytes, error: dict[str, Any]) -> bytes | None:
    """The error answering a client request (None for a notification)."""
    message = parse(line)
    if message.kind is not Kind.REQUEST:
        return None
    return dumps_exact({"jsonrpc": "2.0", "id": message.id, "error": error})
