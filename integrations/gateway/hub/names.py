"""Reversible namespacing of the merged catalog: one definition of how a server's names look from outside.

Tools, prompts and task ids become `PREFIX__NAME`; resource URIs and templates become `PREFIX+URI` (the
prefix joins the URI's scheme, so `file:///a` is `fs+file:///a`, still a URI). A prefix holds only
letters, digits and `-` and starts with a letter, so the first `_` of a namespaced name and the first `+` of
a namespaced URI end the prefix: nothing a server names can move that boundary, two servers' names can
never collide, and every name maps back to exactly one server and its own name.
"""

from __future__ import annotations

import re
from typing import Final

SEPARATOR: Final = "__"
URI_SEPARATOR: Final = "+"
MAX_PREFIX: Final = 32
_PREFIX: Final = re.compile(r"[A-Za-z][A-Za-z0-9-]*")


def prefix_problem(prefix: str) -> str | None:
    """Why `prefix` cannot be one (None when it can)."""
    if not _PREFIX.fullmatch(prefix):
        return f"{prefix!r} cannot prefix names: use letters, digits and '-' only, starting with a letter"
    if len(prefix) > MAX_PREFIX:
        return f"{prefix!r} is longer than {MAX_PREFIX} characters"
    return None


def name_out(prefix: str, name: str) -> str:
    return f"{prefix}{SEPARATOR}{name}"


def name_in(namespaced: str) -> tuple[str, str] | None:
    """(prefix, the server's own name), or None when `namespaced` names no server."""
    prefix, separator, name = namespaced.partition("_")
    if not separator or not name.startswith("_") or not _PREFIX.fullmatch(prefix):
        return None
    return prefix, name[1:]


def uri_out(prefix: str, uri: str) -> str:
    return f"{prefix}{URI_SEPARATOR}{uri}"


def uri_in(namespaced: str) -> tuple[str, str] | None:
    prefix, separator, uri = namespaced.partition(URI_SEPARATOR)
    if not separator or not _PREFIX.fullmatch(prefix):
        return None
    return prefix, uri
