"""The kit's pytest hooks that need neither the MCP SDK nor a chain: profiles, the marker, two fixtures.

Loaded by the entry point `integrations.pytest_plugin` (which adds the fixtures that run hosts, chains and
gateways, and does nothing at all when the `testing` extra is not installed).

- Hypothesis profiles `default`, `ci` and `thorough` are registered when the plugin loads, before
  Hypothesis's own plugin reads `--hypothesis-profile`; `HYPOTHESIS_PROFILE=NAME` selects one too.
- The marker `@pytest.mark.redaction_rules(policy, *, profile=None, properties=None, options=None,
  expect_no_redaction=False)` runs the
  standard redaction properties against a policy: through the `redaction_suite` fixture, or by itself after
  the test body when the test does not ask for that fixture.
- Fixtures: `policy_file(path)` a `Policy` read from a file next to the test; `redaction_suite` the marker's
  suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from .profiles import register_profiles
from .properties import RedactionSuite, RedactionTarget

register_profiles()

MARKER = "redaction_rules"
_MARKER_HELP = (
    "redaction_rules(policy, *, profile=None, properties=None, options=None, expect_no_redaction=False): run the "
    "standard redaction "
    "properties of interceptors.testing against a policy (a profile name, a file next to the test, a dict)"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)
    chosen = config.getoption("--hypothesis-profile", None)
    wanted = os.environ.get("HYPOTHESIS_PROFILE")
    if wanted and not chosen:
        settings.load_profile(wanted)


def resolve_source(source: Any, base: Path) -> Any:
    """A relative file name is looked up next to the test first; anything else is passed on as it is."""
    if isinstance(source, str | os.PathLike):
        candidate = base / Path(source)
        if candidate.is_file():
            return str(candidate)
    return source


def directory_of_test(request: pytest.FixtureRequest) -> Path:
    return Path(str(request.node.path)).parent


def _suite(item: pytest.Item) -> RedactionSuite:
    """The suite a `redaction_rules` marker describes."""
    marker = item.get_closest_marker(MARKER)
    if marker is None or not marker.args:
        raise pytest.UsageError(f"{item.nodeid}: use @pytest.mark.{MARKER}(policy, ...) to choose the policy")
    unknown = set(marker.kwargs) - {"profile", "properties", "options", "expect_no_redaction"}
    if unknown:
        raise pytest.UsageError(
            f"{item.nodeid}: {MARKER} takes profile, properties, options and expect_no_redaction, not {sorted(unknown)}"
        )
    source = resolve_source(marker.args[0], Path(str(item.path)).parent)
    options = marker.kwargs.get("options") or {}
    properties = marker.kwargs.get("properties")
    return RedactionSuite(
        RedactionTarget.load(source),
        marker.kwargs.get("profile"),
        {name: dict(value) for name, value in options.items()},
        None if properties is None else tuple(properties),
        expect_no_redaction=bool(marker.kwargs.get("expect_no_redaction", False)),
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

    base = directory_of_test(request)

    def load(path: str | os.PathLike[str]) -> Any:
        return load_policy(resolve_source(path, base))

    return load
