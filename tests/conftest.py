"""Shared test configuration: asyncio via anyio's pytest plugin, hypothesis profiles, fixture paths."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent

# The suite is deterministic by default: the README's test command and CI (`HYPOTHESIS_PROFILE=ci`, set by
# .ci/run) draw the same examples on every machine and hash seed, with no example database that could replay
# an old failure into another test. `--hypothesis-profile=thorough` explores (random draws, a database):
# every failure it finds becomes an `@example` next to its property.
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
_FIXED = {"derandomize": True, "database": None, "print_blob": True, "deadline": None, "suppress_health_check": _QUIET}
settings.register_profile("default", max_examples=60, **_FIXED)
settings.register_profile("ci", max_examples=60, **_FIXED)
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=_QUIET)
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


@pytest.fixture
def exporter() -> Iterator[Any]:
    """The chain's tracing on, into an in-memory exporter (the OpenTelemetry SDK, the dev extra); off after."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from interceptors_chain import tracing

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    assert tracing.enable(provider)
    try:
        yield memory
    finally:
        tracing.disable()
        provider.shutdown()
