"""A driver for the sans-IO router in tests: a handshake-era upstream that answers, a chain that passes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from integrations.gateway.router import (
    Action,
    ChainOutcome,
    ChainPassed,
    Era,
    Router,
    RouterConfig,
    RunChain,
    SendDownstream,
    SendUpstream,
)

UPSTREAM_INFO = {"name": "upstream", "version": "1.0"}
UPSTREAM_CAPS = {"tools": {"listChanged": True}, "resources": {"subscribe": True}, "logging": {}, "tasks": {}}

Chain = Callable[[RunChain], ChainOutcome]


def passing(run: RunChain) -> ChainOutcome:
    return ChainPassed(run.payload)


def body(action: Action) -> dict[str, Any]:
    assert isinstance(action, SendUpstream | SendDownstream)
    decoded: dict[str, Any] = json.loads(action.data)
    return decoded


def line(**message: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


def settle(router: Router, actions: Iterable[Action], chain: Chain = passing) -> list[Action]:
    """Run every RunChain through `chain` (depth first, in order); the other actions, in order."""
    out: list[Action] = []
    queue = list(actions)
    while queue:
        action = queue.pop(0)
        if isinstance(action, RunChain):
            queue[0:0] = router.chain_done(action.ticket, chain(action))
        else:
            out.append(action)
    return out


def ready_router(
    config: RouterConfig | None = None,
    *,
    capabilities: dict[str, Any] | None = None,
    era: Era = Era.HANDSHAKE,
    kind: type[Router] = Router,
) -> Router:
    """A router (of `kind`) whose upstream completed its handshake in `era`."""
    from dataclasses import replace

    config = replace(config or RouterConfig(), upstream_era=era)
    router = kind(config)
    (start,) = router.start()
    sent = body(start)
    caps = UPSTREAM_CAPS if capabilities is None else capabilities
    if era is Era.HANDSHAKE:
        result = {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": UPSTREAM_INFO}
    else:
        result = {"supportedVersions": ["2026-07-28"], "capabilities": caps, "serverInfo": UPSTREAM_INFO}
    router.receive_upstream(line(id=sent["id"], result=result))
    return router


def handshake_session(router: Router, session: str, principal: object = None, **capabilities: Any) -> None:
    """Open `session` and complete a 2025-11-25 initialize on it."""
    router.open_session(session, context={"session": session}, principal=principal or session)
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "c", "version": "1"},
    }
    settle(router, router.receive_downstream(session, line(id=0, method="initialize", params=params)))
    settle(router, router.receive_downstream(session, line(method="notifications/initialized")))


def envelope(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        **extra,
    }


def upstream_bodies(actions: Iterable[Action]) -> list[dict[str, Any]]:
    return [body(a) for a in actions if isinstance(a, SendUpstream)]


def downstream(actions: Iterable[Action], session: str | None = None) -> list[dict[str, Any]]:
    return [body(a) for a in actions if isinstance(a, SendDownstream) and (session is None or a.session == session)]
