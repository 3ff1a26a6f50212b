"""Which server (trust boundary) an operation crosses, from its tool name, resource URI or event."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DEFAULT_ROSTER: Mapping[str, str] = {
    tool: server
    for server, tools in {
        "filesystem": ("read_file", "write_file", "move_file", "list_directory", "search_files"),
        "sqlite": ("read_query", "write_query", "list_tables", "describe_table"),
        "git": ("git_log", "git_show", "git_diff_unstaged"),
        "memory": ("read_graph", "create_entities", "add_observations"),
        "fetch": ("fetch",),
        "browser": ("browser_type", "browser_fill_form", "browser_snapshot"),
        "shell": ("execute_command",),
    }.items()
    for tool in tools
}

_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://([^/]*)")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


def _string_at(payload: Mapping[str, Any], key: str) -> str | None:
    params = payload.get("params")
    if isinstance(params, Mapping) and isinstance(params.get(key), str):
        return str(params[key])
    value = payload.get(key)
    return value if isinstance(value, str) else None


def server_of(event: str, payload: Any, roster: Mapping[str, str] = DEFAULT_ROSTER) -> str:
    """Tool name via the roster, else a resource URI's authority or scheme, else the event namespace."""
    data: Mapping[str, Any] = payload if isinstance(payload, Mapping) else {}
    tool = _string_at(data, "name")
    if tool is not None:
        return roster.get(tool, tool)
    uri = _string_at(data, "uri")
    if uri is not None:
        if match := _AUTHORITY.match(uri):
            return match.group(1)
        if match := _SCHEME.match(uri):
            return match.group(1)
    namespace = event.split("/", 1)[0]
    return namespace or "unknown"
