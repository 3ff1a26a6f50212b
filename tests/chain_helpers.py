"""Shared helpers for the chain tests: hand-made interceptor servers and small result accessors.

A "raw" server is a bare `mcp` low-level server that answers `interceptors/list` and
`interceptor/invoke` with whatever dicts a test hands it, so the chain can be fed results that no
well-behaved host would ever produce.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import mcp
from mcp.server.lowlevel.server import Server

from interceptors import INVOKE_METHOD, LIST_METHOD
from interceptors_chain import Chain, ExecutionResult
from interceptors_server.install import OpenParams

EVENT = "tools/call"

Responder = Callable[[dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]]


def descriptor(
    name: str,
    type: str = "validation",
    *,
    events: Sequence[str] = (EVENT,),
    phase: str = "request",
    **extra: Any,
) -> dict[str, Any]:
    """A wire `InterceptorInfo` dict; `extra` keys are copied verbatim (e.g. mode=, failOpen=)."""
    return {"name": name, "type": type, "hooks": [{"events": list(events), "phase": phase}], **extra}


def validation_result(params: dict[str, Any], *, valid: bool = True, **extra: Any) -> dict[str, Any]:
    """A well-formed validation result echoing the invoke params."""
    return {
        "interceptor": params["name"],
        "type": "validation",
        "phase": params["phase"],
        "valid": valid,
        **extra,
    }


def mutation_result(params: dict[str, Any], payload: Any, *, modified: bool = True) -> dict[str, Any]:
    """A well-formed mutation result echoing the invoke params."""
    return {
        "interceptor": params["name"],
        "type": "mutation",
        "phase": params["phase"],
        "modified": modified,
        "payload": payload,
    }


class RawServer:
    """A low-level MCP server whose two interceptor methods answer with hand-made dicts.

    `listing` is what `interceptors/list` returns under `interceptors`; `respond(params)` builds each
    `interceptor/invoke` result (sync or async). Every invoke's params are kept in `invocations`.
    """

    def __init__(self, listing: list[Any], respond: Responder, name: str = "raw") -> None:
        self.listing = listing
        self.respond = respond
        self.invocations: list[dict[str, Any]] = []
        self.server: Server[Any] = Server(name)
        self.server.add_request_handler(LIST_METHOD, OpenParams, self._on_list)
        self.server.add_request_handler(INVOKE_METHOD, OpenParams, self._on_invoke)

    async def _on_list(self, ctx: Any, params: OpenParams) -> dict[str, Any]:
        return {"interceptors": list(self.listing)}

    async def _on_invoke(self, ctx: Any, params: OpenParams) -> dict[str, Any]:
        data = dict(params.model_extra or {})
        self.invocations.append(data)
        answer = self.respond(data)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    @property
    def invoked_names(self) -> list[str]:
        return [params["name"] for params in self.invocations]


@asynccontextmanager
async def raw_chain(raw: RawServer, name: str = "raw", **chain_options: Any) -> AsyncIterator[Chain]:
    """A `Chain()` connected to one raw server over the SDK's in-memory transport."""
    async with mcp.Client(raw.server) as client:
        chain = Chain(**chain_options)
        await chain.add_session(client.session, name)
        yield chain


def order(result: ExecutionResult) -> list[str]:
    """Interceptor names of the invocation records, in the order the result lists them."""
    return [record.interceptor for record in result.results]


def placed(result: ExecutionResult) -> list[tuple[str, str]]:
    """(server, interceptor) of the invocation records, in the order the result lists them."""
    return [(record.server, record.interceptor) for record in result.results]


def first_abort(result: ExecutionResult) -> tuple[str, str]:
    """(interceptor, kind) of the first abort."""
    assert result.aborted_at, "expected the execution to be blocked"
    abort = result.aborted_at[0]
    return abort.interceptor, abort.kind.value


def appender(tag: str) -> Callable[[Any], dict[str, Any]]:
    """A mutator handler that appends `tag` to the payload's `trail` list (returns a new payload)."""

    def handler(inv: Any) -> dict[str, Any]:
        return {**inv.payload, "trail": [*inv.payload["trail"], tag]}

    return handler


def crash(inv: Any) -> Any:
    """A handler that always raises."""
    raise RuntimeError("handler crashed on purpose")
