"""Ready-made policy sections mirroring the reference's `standard` and `strict` profiles (transforms only)."""

from __future__ import annotations

from typing import Any

STANDARD_TRANSFORMS: dict[str, Any] = {
    "name": "standard",
    "honor_hints": True,
    "transforms": [
        {"type": "sanitize", "on_suspicious": "fence", "max_free_text": 2000},
        {
            "type": "redact",
            "strategies": {
                "secret": "redact",
                "private_key": "drop",
                "credential": {"strategy": "mask", "keep_first": 4, "keep_last": 4},
            },
        },
        {"type": "project", "exclude": ["**.raw_data", "**._raw"], "max_string": 20000, "max_chars": 120000},
        "annotate",
    ],
    "input_transforms": [{"type": "guard_secrets", "action": "reject"}],
}
"""Fence injected text, redact secrets, drop private keys, mask credentials, trim, annotate; refuse secret args."""

STRICT_TRANSFORMS: dict[str, Any] = {
    "name": "strict",
    "honor_hints": True,
    "transforms": [
        {"type": "sanitize", "on_suspicious": "fence", "max_free_text": 1000},
        {
            "type": "redact",
            "strategies": {
                "secret": "redact",
                "private_key": "drop",
                "credential": "redact",
                "identifier": "pseudonymize",
                "uuid": "keep",
                "network": "pseudonymize",
                "special_ip": "keep",
                "special_cidr": "keep",
                "pii": "pseudonymize",
                "free_text": "pseudonymize",
                "temporal": "keep",
            },
        },
        {
            "type": "project",
            "exclude": ["**.raw_data", "**._raw", "**.user_data"],
            "max_string": 4000,
            "max_chars": 100000,
        },
        "annotate",
    ],
    "input_transforms": [{"type": "guard_secrets", "action": "reject"}],
}
"""Standard, plus pseudonymised identifiers, addresses and personal data."""

OPEN_TRANSFORMS: dict[str, Any] = {"name": "open", "transforms": [], "input_transforms": []}
"""Nothing is transformed."""
