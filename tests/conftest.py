"""Shared test configuration: asyncio via anyio's pytest plugin, hypothesis profiles, fixture paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent

settings.register_profile("default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def shared_fixtures() -> Path | None:
    """The public conformance fixtures: $MCP_INTERCEPTORS_FIXTURES, else ../shared beside the checkout."""
    configured = os.environ.get("MCP_INTERCEPTORS_FIXTURES")
    candidates = [Path(configured)] if configured else []
    candidates.append(ROOT.parent / "shared" / "conformance" / "fixtures")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None
