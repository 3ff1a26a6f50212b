"""Principals from transport facts only (the OS user on stdio, a bearer token on HTTP), never clientInfo."""

from __future__ import annotations

import difflib
import getpass
import hashlib
import hmac
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..wire import Principal
from .document import parse_text
from .errors import PolicyError

ANONYMOUS_ID = "anonymous"


def roles_of(principal: Principal | None) -> frozenset[str]:
    """`claims["roles"]`: a list of strings (a single string is one role); anything else means no roles."""
    if principal is None or principal.claims is None:
        return frozenset()
    roles = principal.claims.get("roles")
    if isinstance(roles, str):
        return frozenset((roles,))
    if isinstance(roles, list | tuple | frozenset | set):
        return frozenset(role for role in roles if isinstance(role, str))
    return frozenset()


def principal_id(principal: Principal | None) -> str:
    if principal is None or principal.id is None:
        return ANONYMOUS_ID
    return principal.id


def principal_for_stdio(roles: Sequence[str] = ()) -> Principal:
    """The local OS user: on stdio the only party is whoever started the process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (containers)
        user = f"uid:{os.getuid()}" if hasattr(os, "getuid") else "local"
    return Principal("user", user, {"roles": list(roles)})


@dataclass(frozen=True, slots=True)
class _Grant:
    digest: bytes
    type: str
    id: str
    roles: tuple[str, ...]

    def principal(self) -> Principal:
        """A fresh Principal per request: claims are a mutable dict, and no caller may edit another's roles."""
        return Principal(self.type, self.id, {"roles": list(self.roles)})

    def __repr__(self) -> str:
        return f"_Grant(id={self.id!r}, token=***)"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class BearerTokens:
    """HTTP bearer tokens → principals. Only SHA-256 digests are kept; comparison is constant time.

    `BearerTokens({"s3cret": ("alice", ["analyst"])})`, or `BearerTokens.from_file(path)` with entries
    `{id, roles, type?, token | token_env | token_sha256}`. Tokens never appear in reprs, logs or errors.
    """

    def __init__(self, tokens: Mapping[str, tuple[str, Sequence[str]]] | None = None) -> None:
        self._grants: list[_Grant] = []
        for token, (ident, roles) in (tokens or {}).items():
            self.add(token, ident, roles)

    def add(self, token: str, ident: str, roles: Iterable[str] = (), *, type: str = "user") -> None:
        if not token:
            raise ValueError("a bearer token must not be empty")
        self.add_digest(_digest(token), ident, roles, type=type)

    def add_digest(self, digest: bytes, ident: str, roles: Iterable[str] = (), *, type: str = "user") -> None:
        if len(digest) != 32:
            raise ValueError("a token digest is 32 bytes of SHA-256")
        Principal(type, ident)  # checks the type
        self._grants.append(_Grant(digest, type, ident, tuple(sorted(set(roles)))))

    def principal_for(self, token: str) -> Principal | None:
        """Every grant is compared (no early exit), so timing says nothing about which one matched."""
        candidate = _digest(token)
        found: _Grant | None = None
        for grant in self._grants:
            if hmac.compare_digest(grant.digest, candidate):
                found = grant
        return None if found is None else found.principal()

    def authenticate(self, authorization: str | None) -> Principal | None:
        """An `Authorization` header value → the principal, or None (the gateway answers 401)."""
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.principal_for(token.strip())

    def __len__(self) -> int:
        return len(self._grants)

    def __repr__(self) -> str:
        return f"BearerTokens({len(self._grants)} tokens)"

    @classmethod
    def from_entries(cls, entries: Any, source: str = "<tokens>") -> BearerTokens:
        """Entries as read from a tokens file; problems name entries and fields, never token text."""
        if isinstance(entries, Mapping) and set(entries) == {"tokens"}:
            entries = entries["tokens"]
        if not isinstance(entries, list):
            raise PolicyError(source, ["tokens: must be a list"], kind="tokens file")
        tokens = cls()
        problems: list[str] = []
        for index, entry in enumerate(entries):
            grant = _read_entry(entry, f"tokens[{index}]", problems)
            if grant is not None:
                tokens.add_digest(*grant[:3], type=grant[3])
        if problems:
            raise PolicyError(source, problems, kind="tokens file")
        return tokens

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BearerTokens:
        file = Path(path)
        text = file.read_text("utf-8")
        return cls.from_entries(parse_text(text, str(file), json_only=file.suffix.lower() == ".json"), str(file))


_ENTRY_KEYS = ("id", "roles", "type", "token", "token_env", "token_sha256")
_FIELD_NAME = re.compile(r"^[a-z][a-z_]{0,23}$")


def _unknown_keys(keys: set[Any]) -> str:
    """Names the unknown keys that look like field names (a typo: `tokn`, `role`), with the key meant; a key
    that could be a value (digits, mixed case, long: someone wrote `TOKEN: alice`) is counted, never shown."""
    shown, hidden = [], 0
    for key in sorted(keys, key=str):
        if isinstance(key, str) and _FIELD_NAME.match(key):
            close = difflib.get_close_matches(key, _ENTRY_KEYS, n=1, cutoff=0.6)
            shown.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        else:
            hidden += 1
    parts = [f"unknown key {', '.join(shown)}"] if shown else []
    if hidden:
        parts.append(f"{hidden} unknown key(s) not shown (they could be values)")
    return "; ".join(parts) + f"; the keys are: {', '.join(_ENTRY_KEYS)}"


def _read_entry(entry: Any, where: str, problems: list[str]) -> tuple[bytes, str, list[str], str] | None:
    """`(digest, id, roles, type)` of one tokens-file entry, or None after adding its problems."""
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: must be a mapping")
        return None
    before = len(problems)
    unknown = set(entry) - set(_ENTRY_KEYS)
    if unknown:
        problems.append(f"{where}: {_unknown_keys(unknown)}")
    ident, roles, kind = entry.get("id"), entry.get("roles", []), entry.get("type", "user")
    if not isinstance(ident, str) or not ident:
        problems.append(f"{where}.id: must be a non-empty string")
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        problems.append(f"{where}.roles: must be a list of strings")
    if kind not in ("user", "service"):
        problems.append(f"{where}.type: must be one of: user, service")
    sources = [key for key in ("token", "token_env", "token_sha256") if key in entry]
    if len(sources) != 1:
        problems.append(f"{where}: needs exactly one of token, token_env, token_sha256")
        return None
    value = entry[sources[0]]
    if not isinstance(value, str) or not value:
        problems.append(f"{where}.{sources[0]}: must be a non-empty string")
        return None
    digest: bytes | None = None
    if sources[0] == "token":
        digest = _digest(value)
    elif sources[0] == "token_env":
        secret = os.environ.get(value)
        if secret:
            digest = _digest(secret)
        else:
            problems.append(f"{where}.token_env: the variable is not set")
    else:
        try:
            digest = bytes.fromhex(value)
        except ValueError:
            digest = None
        if digest is None or len(digest) != 32:
            problems.append(f"{where}.token_sha256: must be 64 hex digits")
            digest = None
    if digest is None or len(problems) > before or not isinstance(ident, str) or not isinstance(roles, list):
        return None
    return digest, ident, roles, str(kind)
