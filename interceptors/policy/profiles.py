"""The built-in profiles: YAML documents shipped next to this module, looked up by name."""

from __future__ import annotations

from pathlib import Path

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
PROFILES = ("open", "standard", "strict", "read_only", "airgapped", "audit", "soc-analyst")
DEFAULT_PROFILE = "standard"

_BY_KEY = {name.replace("-", "_"): name for name in PROFILES}


def profile_name(text: str) -> str | None:
    """The canonical profile name for `text`, where `-` and `_` are interchangeable; None if not a profile."""
    return _BY_KEY.get(text.strip().lower().replace("-", "_"))


def profile_path(name: str) -> Path:
    canonical = profile_name(name)
    if canonical is None:
        raise KeyError(name)
    return PROFILE_DIR / f"{canonical}.yaml"
