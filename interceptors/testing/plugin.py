"""The pytest plugin of `interceptors.testing` (entry point `pytest11`).

- Hypothesis profiles `default`, `ci` and `thorough` are registered when the plugin loads, before
  Hypothesis's own plugin reads `--hypothesis-profile`; `HYPOTHESIS_PROFILE=NAME` selects one too.
- The marker `@pytest.mark.redaction_rules(policy, *, profile=None, properties=None, options=None)` runs the
  standard redaction properties against a policy: through the `redaction_suite` fixture, or by itself after
  the test body when the test does not ask for that fixture.
- Fixtures (all factories; nothing from the MCP SDK is imported until one of them is used):
  `interceptor_host(*registries)` an in-process `InterceptorHost`; `local_chain(*sources)` a `LocalChain`
  (registries, servers, or policies, which become the policy and transform stages); `interceptor_gateway(
  command, *sources)` a gateway around an upstream command; `policy_file(path)` a `Policy` read from a file
  next to the test; `redaction_suite` the marker's suite.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from .profiles import register_profiles
from .properties import RedactionSuite, RedactionTarget

register_profiles()

MARKER = "redaction_rules"
_MARKER_HELP = (
    "redaction_rules(policy, *, profile=None, properties=None, options=None): run the standard redaction "
    "properties of interceptors.testing against a policy (a profile name, a file next to the test, a dict)"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)
    chosen = config.getoption("--hypothesis-profile", None)
    wanted = os.environ.get("HYPOTHESIS_PROFILE")
    if wanted and not chosen:
        settings.load_profile(wanted)


def _resolve(source: Any, base: Path) -> Any:
    """A relative file name is looked up next to the test first; anything else is passed on as it is."""
    if isinstance(source, str | os.PathLike):
        candidate = base / Path(source)
        if candidate.is_file():
            return str(candidate)
    return source


def _test_dir(request: pytest.FixtureRequest) -> Path:
    return Path(str(request.node.path)).parent


def policy_registries(policy: Any) -> list[Any]:
    """The policy stage and the transform stages of a policy (as `mcp-interceptors proxy --policy` builds them)."""
    from interceptors.policy import PolicyEngine, policy_registry, transforms_selector
    from interceptors.transforms import transforms_registry

    engine = PolicyEngine(policy)
    return [policy_registry(engine), transforms_registry(engine.policy.document, select=transforms_selector(engine))]


def _sources(sources: Sequence[Any], base: Path) -> list[Any]:
    """Registries and servers as they are; policies (names, files, dicts, `Policy`) as their two stages."""
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer

    from interceptors import Registry

    out: list[Any] = []
    for source in sources:
        if isinstance(source, Registry | Server | MCPServer):
            out.append(source)
        elif isinstance(source, list | tuple):
            out.extend(_sources(source, base))
        else:
            out.extend(policy_registries(_resolve(source, base)))
    return out


def _suite(item: pytest.Item) -> RedactionSuite:
    """The suite a `redaction_rules` marker describes."""
    marker = item.get_closest_marker(MARKER)
    if marker is None or not marker.args:
        raise pytest.UsageError(f"{item.nodeid}: use @pytest.mark.{MARKER}(policy, ...) to choose the policy")
    unknown = set(marker.kwargs) - {"profile", "properties", "options"}
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: {MARKER} takes profile, properties and options, not {sorted(unknown)}")
    source = _resolve(marker.args[0], Path(str(item.path)).parent)
    options = marker.kwargs.get("options") or {}
    properties = marker.kwargs.get("properties")
    return RedactionSuite(
        RedactionTarget.load(source),
        marker.kwargs.get("profile"),
        {name: dict(value) for name, value in options.items()},
        None if properties is None else tuple(properties),
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    __tracebackhide__ = True
    outcome = yield
    if item.get_closest_marker(MARKER) is not None and "redaction_suite" not in getattr(item, "fixturenames", ()):
        _suite(item).run()
    return outcome


@pytest.fixture
def redaction_suite(request: pytest.FixtureRequest) -> RedactionSuite:
    """The standard properties against the policy named by the test's `redaction_rules` marker.

    `redaction_suite.run()` runs every applicable property (or those the marker's `properties` names);
    `redaction_suite.check("no_leak", formats=...)` runs one; `redaction_suite.target` is the policy.
    """
    return _suite(request.node)


@pytest.fixture
def policy_file(request: pytest.FixtureRequest) -> Callable[[str | os.PathLike[str]], Any]:
    """`policy_file("policy.yaml")`: a `Policy` loaded from a file next to the test (or a profile name)."""
    from interceptors.policy import load_policy

    base = _test_dir(request)

    def load(path: str | os.PathLike[str]) -> Any:
        return load_policy(_resolve(path, base))

    return load


@pytest.fixture
def interceptor_host() -> Callable[..., Any]:
    """`interceptor_host(registry, ...)`: an in-process `InterceptorHost` (`host.list()`, `await host.invoke()`)."""
    from interceptors_server import InterceptorHost

    def make(*registries: Any, **options: Any) -> Any:
        return InterceptorHost(*registries, **options)

    return make


@pytest.fixture
def local_chain(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """`async with local_chain(registry_or_policy, ...) as chain:` a connected `Chain` over in-memory servers.

    Sources are registries, servers with interceptors installed, or policies (profile names, files next to
    the test, dicts, `Policy` objects), which become the policy and transform stages. Keyword arguments go
    to `LocalChain` (`mode`, `overrides`, `default_timeout_ms`, …).
    """
    from interceptors_server import LocalChain

    base = _test_dir(request)

    def make(*sources: Any, **options: Any) -> Any:
        return LocalChain(*_sources(sources, base), **options)

    return make


@pytest.fixture
def interceptor_gateway(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """`async with interceptor_gateway([cmd, *args], registry_or_policy, ...) as gateway:` the gateway in front of
    an upstream started from `cmd` (stdio), with a chain of the given sources (none: a pass-through).

    Talk to it with `mcp.Client(gateway.server)`. Keyword arguments: `cwd`, `env` (for the upstream), `expose`
    (registries the mirror also serves), `context_provider`.
    """
    base = _test_dir(request)

    @asynccontextmanager
    async def make(command: Sequence[str], *sources: Any, cwd: str | os.PathLike[str] | None = None,
                   env: dict[str, str] | None = None, **options: Any) -> AsyncIterator[Any]:  # fmt: skip
        from mcp import StdioServerParameters

        from integrations.gateway import Gateway
        from interceptors_chain import Chain
        from interceptors_server import LocalChain

        if not command:
            raise ValueError("the upstream command is empty")
        params = StdioServerParameters(
            command=str(command[0]), args=[str(a) for a in command[1:]], cwd=None if cwd is None else str(cwd), env=env
        )
        registries = _sources(sources, base)
        if registries:
            async with LocalChain(*registries) as chain, Gateway(params, chain, **options) as gateway:
                yield gateway
        else:
            async with Gateway(params, Chain(), **options) as gateway:
                yield gateway

    return make
