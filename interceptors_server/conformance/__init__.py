"""The SEP-2624 conformance runner and the behaviors it binds."""

from .behaviors import BEHAVIORS, FixtureError, build_registry
from .runner import FixtureReport, find_fixtures, run_conformance, run_fixture, scrub

__all__ = [
    "BEHAVIORS",
    "FixtureError",
    "FixtureReport",
    "build_registry",
    "find_fixtures",
    "run_conformance",
    "run_fixture",
    "scrub",
]
