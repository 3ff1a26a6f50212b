"""The `pytest11` entry point of mcp-interceptors: the testing kit's hooks and fixtures, or nothing at all.

Installed without the `testing` extra (no Hypothesis), it defines no hook and no fixture, so pytest runs in
any other project of that environment as if it were absent. With it: the hooks of
`interceptors.testing.plugin` (profiles, the `redaction_rules` marker, `redaction_suite`, `policy_file`) and
three factories that import the MCP SDK only when a test uses them:

- `interceptor_host(*registries)`: an in-process `InterceptorHost`;
- `local_chain(*sources)`: a `LocalChain` of registries, servers or policies (profile names, files next to
  the test, dicts, `Policy` objects: they become the policy and transform stages);
- `interceptor_gateway(command, *sources)`: the gateway in front of an upstream command.

The entry point carries this module's own name, so `-p integrations.pytest_plugin` (a checkout that is not
installed) never registers it twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

try:
    import hypothesis  # noqa: F401  (the `testing` extra: without it this plugin stays empty)
except ImportError:
    __all__: list[str] = []
else:
    import pytest

    from interceptors.testing.plugin import (
        directory_of_test,
        policy_file,
        pytest_configure,
        pytest_runtest_call,
        redaction_suite,
    )

    __all__ = [
        "interceptor_gateway",
        "interceptor_host",
        "local_chain",
        "policy_file",
        "pytest_configure",
        "pytest_runtest_call",
        "redaction_suite",
    ]

    @pytest.fixture
    def interceptor_host() -> Callable[..., Any]:
        """`interceptor_host(registry, ...)`: an in-process `InterceptorHost` (`host.list()`, `await host.invoke()`)."""
        from integrations.testing import host_for

        return host_for

    @pytest.fixture
    def local_chain(request: pytest.FixtureRequest) -> Callable[..., Any]:
        """`async with local_chain(registry_or_policy, ...) as chain:` a connected `Chain` over in-process hosts.

        Keyword arguments go to `LocalChain` (`mode`, `overrides`, `default_timeout_ms`, …)."""
        from integrations.testing import local_chain_for

        base = directory_of_test(request)
        return lambda *sources, **options: local_chain_for(sources, base, **options)

    @pytest.fixture
    def interceptor_gateway(request: pytest.FixtureRequest) -> Callable[..., Any]:
        """`async with interceptor_gateway([cmd, *args], registry_or_policy, ...) as gateway:` the gateway in front
        of an upstream started from `cmd` (stdio), with a chain of the given sources (none: a pass-through).

        It is the router gateway in this process (`InProcessGateway`); each `mcp.Client(gateway.server)` is a new
        client session. Keyword arguments: `cwd`, `env` (for the upstream), `exposed` (registries that answer
        `interceptors/list` and `interceptor/invoke`; `expose` is the old name), `roles` (the local user's),
        `upstream_timeout`."""
        from integrations.testing import gateway_for

        base = directory_of_test(request)

        def make(command: Sequence[str], *sources: Any, **options: Any) -> Any:
            return gateway_for(command, sources, base, **options)

        return make
