"""The router gateway of `proxy --policy NAME --role ROLE -- CMD` in this process, for tests of what the policy
and the router decide (the upstream stays a real process). One process-level test per behaviour goes through
`mcp-interceptors proxy` itself; the others save a gateway process start (the SDK's imports) each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from tests.conftest import ROOT


@asynccontextmanager
async def routed(upstream: Sequence[str], policy: str = "standard", roles: Sequence[str] = ()) -> AsyncIterator[Any]:
    """An `InProcessGateway` with the stages `proxy --policy policy` builds: `Client(gateway.server)`."""
    from integrations.gateway.inprocess import InProcessGateway
    from integrations.gateway.stages import build_stages
    from interceptors_server import LocalChain

    stages = build_stages(policy, None)
    try:
        async with (
            LocalChain(*stages.registries) as chain,
            InProcessGateway(upstream, chain, stages=stages, roles=roles, cwd=str(ROOT)) as gateway,
        ):
            yield gateway
    finally:
        stages.close()
