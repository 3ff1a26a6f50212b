"""`policy show` and `policy check`: the effective policy as YAML with secrets masked, and a validator."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import yaml

from .document import DocumentSource
from .errors import PolicyError
from .policy import Policy, load_policy

MASK = "***"
_SECRET_SUFFIXES = ("key", "secret", "password", "token")
STRATEGY_NAMES = frozenset({"redact", "mask", "hash", "pseudonymize", "generalize", "drop", "keep"})
"""The redactor's strategies: a value that is one of these names a treatment, never a secret."""
_STRATEGY_TABLES = frozenset({"strategies"})
"""Mappings whose keys are entity or category names (`secret`, `private_key`, …), not secret fields."""


def _is_secret_key(key: str) -> bool:
    return key.lower().endswith(_SECRET_SUFFIXES)


def _is_secret_value(key: object, item: Any, table: bool) -> bool:
    """A real secret: a scalar under a secret-sounding key, outside a strategy table, that names no strategy."""
    if table or item is None or isinstance(item, Mapping | list | bool):
        return False
    if not (isinstance(key, str) and _is_secret_key(key)):
        return False
    return not (isinstance(item, str) and item in STRATEGY_NAMES)


def mask_secrets(value: Any, *, _table: bool = False) -> Any:
    """A copy where every real secret value (a key, a token, a password) is `***`.

    Masked: scalars under a key ending in key/secret/password/token. Not masked: mappings and lists (walked, so
    a role or catalog entry named e.g. `reveal_token` stays readable), anything in a redactor's `strategies`
    table (its keys are entity names such as `secret` and `private_key`), and strategy names.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if _is_secret_value(key, item, _table):
                out[key] = MASK
            else:
                out[key] = mask_secrets(item, _table=isinstance(key, str) and key in _STRATEGY_TABLES)
        return out
    if isinstance(value, list):
        return [mask_secrets(item) for item in value]
    return value


def policy_show(source: Policy | DocumentSource) -> str:
    """The effective (merged) policy as YAML, with a header naming its chain and fingerprint."""
    policy = load_policy(source)
    chain = " -> ".join((policy.name, *policy.extends_chain))
    header = f"# policy: {chain}\n# fingerprint: {policy.fingerprint}\n"
    body = yaml.safe_dump(mask_secrets(dict(policy.document)), sort_keys=False, allow_unicode=True, width=100)
    return header + body


def policy_check(source: str | os.PathLike[str]) -> list[str]:
    """Every problem with a policy file (or profile name); an empty list means it loads."""
    try:
        load_policy(source)
    except PolicyError as exc:
        return [f"{exc.source}: {problem}" for problem in exc.problems]
    except FileNotFoundError as exc:
        return [str(exc)]
    except OSError as exc:
        return [f"{os.fspath(source)}: cannot read ({exc.strerror})"]
    return []
