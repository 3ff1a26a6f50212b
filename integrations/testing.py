"""The testing kit's parts that run real chains, hosts and gateways (the pure kit is `interceptors.testing`).

`run_plan` and `check_chain_model` execute the kit's random interceptor plans through a `LocalChain` and
compare them with its reference model; the factories behind the pytest fixtures `interceptor_host`,
`local_chain` and `interceptor_gateway` live here too, so the core package never imports the layers above it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer

from interceptors import Registry
from interceptors.testing import ChainPlan, Observed, assert_matches_model, build_registries, expected_outcome
from interceptors.testing.chains import SLOW_TIMEOUT_MS, chain_cases
from interceptors.testing.plugin import resolve_source
from interceptors.testing.properties import property_settings, run_property
from interceptors_chain import Chain, InterceptorOverride
from interceptors_server import InterceptorHost, LocalChain
from interceptors_server.local import Transport

__all__ = [
    "check_chain_case",
    "check_chain_model",
    "gateway_for",
    "host_for",
    "local_chain_for",
    "policy_registries",
    "resolve_source",
    "run_plan",
]


async def run_plan(
    plan: ChainPlan, event: str, phase: str, direction: str, payload: Any, *, transport: Transport = "inprocess"
) -> tuple[Any, Observed]:
    """Execute `plan` through a `LocalChain` (over `transport`): the `ExecutionResult` and what the handlers saw."""
    log = Observed()
    overrides = {s.label: InterceptorOverride(timeout_ms=SLOW_TIMEOUT_MS) for s in plan.specs if s.behaviour == "slow"}
    async with LocalChain(*build_registries(plan, log), overrides=overrides, transport=transport) as engine:
        result = await engine.execute(event, phase, payload, direction=direction)
    return result, log


def check_chain_case(case: tuple[ChainPlan, str, str, str]) -> None:
    """One case: run it through a LocalChain and compare with the model."""
    plan, event, phase, direction = case
    payload = {"trail": [], "nested": {"keep": [1, 2, {"deep": "value"}]}}
    snapshot = copy.deepcopy(payload)

    async def run() -> tuple[Any, Observed]:
        return await run_plan(plan, event, phase, direction, payload)

    result, log = anyio.run(run)
    assert_matches_model(result, log, expected_outcome(plan, event, phase, direction), payload, snapshot)


def check_chain_model(*, profile: str | None = None, weight: float = 1.0, **plan_options: Any) -> None:
    """The property: random plans through a LocalChain agree with the model (raises on a counterexample)."""
    run_property(
        "chain_model", chain_cases(**plan_options), check_chain_case, property_settings(profile, weight=weight)
    )


def policy_registries(policy: Any) -> list[Any]:
    """The policy stage and the transform stages of a policy (as `mcp-interceptors proxy --policy` builds them)."""
    from interceptors.policy import PolicyEngine, policy_registry, transforms_selector
    from interceptors.transforms import transforms_registry

    engine = PolicyEngine(policy)
    return [policy_registry(engine), transforms_registry(engine.policy.document, select=transforms_selector(engine))]


def _sources(sources: Sequence[Any], base: Path) -> list[Any]:
    """Registries and servers as they are; policies (names, files, dicts, `Policy`) as their two stages."""
    out: list[Any] = []
    for source in sources:
        if isinstance(source, Registry | Server | MCPServer):
            out.append(source)
        elif isinstance(source, list | tuple):
            out.extend(_sources(source, base))
        else:
            out.extend(policy_registries(resolve_source(source, base)))
    return out


def host_for(*registries: Any, **options: Any) -> InterceptorHost:
    """An in-process `InterceptorHost` of `registries`."""
    return InterceptorHost(*registries, **options)


def local_chain_for(sources: Sequence[Any], base: Path, **options: Any) -> LocalChain:
    """A `LocalChain` of registries, servers or policies (files looked up in `base` first)."""
    return LocalChain(*_sources(sources, base), **options)


@asynccontextmanager
async def gateway_for(
    command: Sequence[str],
    sources: Sequence[Any],
    base: Path,
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    **options: Any,
) -> AsyncIterator[Any]:
    """The router gateway (as `mcp-interceptors proxy` runs it) in this process, in front of an upstream started
    from `command` (stdio), with a chain of `sources`. It yields an `InProcessGateway`: each
    `Client(gateway.server)` is a new client session; `options` are its keywords (`exposed`, `roles`,
    `upstream_timeout`; `expose` is the old name of `exposed`)."""
    from integrations.gateway.inprocess import InProcessGateway

    if "expose" in options:
        options["exposed"] = options.pop("expose")

    if not command:
        raise ValueError("the upstream command is empty")
    argv = [str(part) for part in command]
    where = None if cwd is None else str(cwd)
    registries = _sources(sources, base)
    chain = LocalChain(*registries) if registries else _empty_chain()
    async with chain as connected, InProcessGateway(argv, connected, env=env, cwd=where, **options) as gateway:
        yield gateway


@asynccontextmanager
async def _empty_chain() -> AsyncIterator[Chain]:
    yield Chain()
