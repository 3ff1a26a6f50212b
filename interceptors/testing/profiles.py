"""Hypothesis profiles for property suites built with this kit.

- `default`: 100 examples, no deadline (local runs);
- `ci`: 100 examples, derandomised (the same draws on every run and machine), no example database, failure
  blobs printed (the standard suite against `standard` stays well under 120 s on 2 cores);
- `thorough`: 1000 examples (release checks: `--hypothesis-profile=thorough` or `HYPOTHESIS_PROFILE=thorough`).

Redaction properties scale `max_examples` by their weight (see `properties.STANDARD_PROPERTIES`).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PROFILES = ("default", "ci", "thorough")
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]


def register_profiles(*, replace: bool = True) -> None:
    """Register `default`, `ci` and `thorough` (the plugin does, when it loads).

    With `replace=False` (what the kit does when used without the plugin), profiles that already exist are
    kept, and Hypothesis's own `default` is never touched.
    """
    definitions = {
        "default": settings(max_examples=100, deadline=None, suppress_health_check=_SUPPRESSED),
        "ci": settings(max_examples=100, deadline=None, suppress_health_check=_SUPPRESSED, database=None,
                       print_blob=True, derandomize=True),
        "thorough": settings(max_examples=1000, deadline=None, suppress_health_check=_SUPPRESSED),
    }  # fmt: skip
    for name, value in definitions.items():
        if not replace and (name == "default" or _exists(name)):
            continue
        settings.register_profile(name, value)


def _exists(name: str) -> bool:
    try:
        settings.get_profile(name)
    except Exception:
        return False
    return True
