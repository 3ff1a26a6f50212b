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


def _is_secret_key(key: str) -> bool:
    return key.lower().endswith(_SECRET_SUFFIXES)


def mask_secrets(value: Any) -> Any:
    """A copy where every non-mapping value under a key ending in key/secret/password/token is `***`.

    Mappings are walked rather than masked, so a role or catalog entry named e.g. `reveal_token` stays readable.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(item, Mapping) or not (isinstance(key, str) and _is_secret_key(key)):
                out[key] = mask_secrets(item)
            else:
                out[key] = MASK if item is not None else None
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
