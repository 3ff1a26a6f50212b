"""An interceptor server for the express-lane tests, served over stdio by `serve_stdio`.

python -m tests.servers.express_host          the lane answers `interceptor/invoke` (2026 era)
python -m tests.servers.express_host --sdk    a pass-through middleware turns the lane off: the SDK answers

Every invoke the lane answers is logged to stderr as `lane NAME`. The sync handlers are registered `inline`, as the
built-in stages are: the lane answers them as it reads them (`answer_now`); `express/slow` takes a task.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_server.serving import build_server, serve_stdio

SLOW_S = 1.0

registry = Registry()


@registry.validator("express/allow", events="tools/call", phase="both", inline=True)
def allow(invocation: Invocation) -> Verdict:
    return Verdict.allow({"seen": invocation.payload})


@registry.validator("express/deny", events="tools/call", phase="request", inline=True)
def deny(invocation: Invocation) -> Verdict:
    return Verdict.deny("never allowed", path="/arguments")


@registry.mutator("express/upper", events="tools/call", phase="request", inline=True)
def upper(invocation: Invocation) -> Mutation:
    payload = dict(invocation.payload)
    payload["name"] = str(payload.get("name", "")).upper()
    return Mutation(payload)


@registry.validator("express/raise", events="tools/call", phase="request", inline=True)
def explode(invocation: Invocation) -> Verdict:
    raise RuntimeError("secret payload text must not reach the wire")


@registry.validator("express/slow", events="tools/call", phase="request")
async def slow(invocation: Invocation) -> Verdict:
    seconds = invocation.payload.get("sleep", SLOW_S) if isinstance(invocation.payload, dict) else SLOW_S
    await anyio.sleep(float(seconds))
    return Verdict.allow()


class PassThrough:
    """Does nothing but call on; its presence alone takes the express lane away."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        return await call_next(ctx)


def log_lane_answers() -> None:
    """Each invoke the lane answers is logged to stderr (`lane NAME`): the tests see which path answered."""
    from interceptors_server import express

    invoke = express.ExpressLane._invoke

    def logged(self: express.ExpressLane, request_id: int | str, params: dict[str, Any], *rest: Any) -> None:
        print(f"lane {params.get('name')}", file=sys.stderr, flush=True)
        invoke(self, request_id, params, *rest)

    express.ExpressLane._invoke = logged  # type: ignore[method-assign]


def main() -> None:
    server = build_server([registry], name="express-host")
    if "--sdk" in sys.argv[1:]:
        server.middleware.append(PassThrough())
    log_lane_answers()  # (never called with --sdk: no lane)
    print("express host starting", file=sys.stderr, flush=True)
    anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
