"""The gateway file: the servers one gateway fronts (YAML or JSON), validated before anything starts.

Two spellings are read. The gateway's own, `servers:`, and the `mcpServers` object MCP hosts already use
(Claude Desktop, Cursor, VS Code's `servers`), so a user points the gateway at the file they have:

    {"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
                    "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ..."}}}}

Per server, besides `command`/`args`/`env`/`cwd` (stdio) or `url`/`headers` (Streamable HTTP): `policy`
(a profile or a policy file, default the file's `policy`, else `standard`), `chain` (a chain file), `start`
(`eager`, the default, or `on-first-use`), `roles` (who sees the server through the aggregated endpoint;
default everyone), `prefix` (its namespace there; default its name), `timeout` (seconds a request may
wait). Keys hosts add that mean nothing here (`autoApprove`, `alwaysAllow`, `description`, ...) are
accepted and ignored; `disabled: true` leaves the server out. Every error names the server and the key.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from interceptors.errors import InterceptorsError

from .names import SEPARATOR, prefix_problem

MAX_FILE_BYTES: Final = 1 << 20
START_MODES: Final = ("eager", "on-first-use")
SERVER_KEYS: Final = frozenset(
    {"command", "args", "env", "cwd", "url", "headers", "type", "policy", "chain", "start", "roles", "prefix",
     "timeout", "disabled"}
)  # fmt: skip
IGNORED_KEYS: Final = frozenset(
    {"autoApprove", "alwaysAllow", "description", "transportType", "envFile", "icon", "name", "notes", "gallery",
     "version", "enabled"}
)  # fmt: skip
"""Keys MCP hosts write into `mcpServers` entries for their own use: accepted, ignored."""
TOP_KEYS: Final = frozenset({"servers", "mcpServers", "policy", "audit_log", "timeout", "list_timeout"})
HTTP_TYPES: Final = ("http", "streamable-http", "streamableHttp", "streamable_http")


class GatewayFileError(InterceptorsError, ValueError):
    """The gateway file is unusable: one line naming the file, the server and the key."""


@dataclass(frozen=True)
class ServerSpec:
    """One upstream of the gateway file."""

    name: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    """Added to the gateway's environment (the upstream inherits it, as when a host starts it)."""
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    policy: str | None = None
    chain: str | None = None
    start: str = "eager"
    roles: tuple[str, ...] | None = None
    """Roles that see this server through the aggregated endpoint; None: every principal."""
    prefix: str = ""
    timeout: float | None = None

    @property
    def eager(self) -> bool:
        return self.start == "eager"

    def visible_to(self, roles: Sequence[str]) -> bool:
        return self.roles is None or any(role in self.roles for role in roles)


@dataclass(frozen=True)
class GatewayFile:
    """The whole file: its servers in file order, and the defaults they share."""

    servers: tuple[ServerSpec, ...]
    source: str = "<gateway file>"
    policy: str | None = None
    audit_log: str | None = None
    list_timeout: float = 5.0
    """Seconds the aggregated endpoint waits for one server's page of a merged list before leaving it out."""
    extra: dict[str, Any] = field(default_factory=dict)

    def server(self, name: str) -> ServerSpec:
        for server in self.servers:
            if server.name == name:
                return server
        known = ", ".join(s.name for s in self.servers) or "none"
        raise GatewayFileError(f"{self.source}: no server named {name!r} (servers: {known})")


def load_gateway_file(path: str | Path) -> GatewayFile:
    """Read and validate `path` (YAML, or JSON when it ends in .json); relative paths in it (a policy file, a
    chain file, a cwd) are taken from the file's own directory."""
    file = Path(path)
    source = str(path)
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise GatewayFileError(f"cannot read the gateway file {source!r}: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise GatewayFileError(f"{source}: larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GatewayFileError(f"{source}: not UTF-8 text") from None
    from interceptors.policy import PolicyError
    from interceptors.policy.document import parse_text

    try:
        document = parse_text(text, source, json_only=file.suffix.lower() == ".json")
    except PolicyError as exc:
        raise GatewayFileError(str(exc)) from None
    return parse_gateway(document, source, base=file.parent)


def parse_gateway(document: Any, source: str = "<gateway file>", *, base: Path | None = None) -> GatewayFile:
    """Validate a parsed gateway file (either spelling)."""
    if not isinstance(document, dict):
        raise GatewayFileError(f"{source}: the file must hold an object with 'servers' or 'mcpServers'")
    servers_key = [key for key in ("servers", "mcpServers") if key in document]
    if len(servers_key) != 1:
        what = "both 'servers' and 'mcpServers'" if servers_key else "no 'servers' or 'mcpServers' object"
        raise GatewayFileError(f"{source}: the file has {what}")
    hosts_file = servers_key[0] == "mcpServers"
    for key in document:
        if key not in TOP_KEYS and not hosts_file:  # a host's own file has its own top-level keys: left alone
            raise GatewayFileError(f"{source}: unknown key {key!r}{_suggest(key, TOP_KEYS)}")
    entries = document[servers_key[0]]
    if not isinstance(entries, dict) or not entries:
        raise GatewayFileError(f"{source}: '{servers_key[0]}' must be an object naming at least one server")
    policy = _optional_str(document.get("policy"), source, "policy")
    audit_log = _optional_str(document.get("audit_log"), source, "audit_log")
    list_timeout = _seconds(document.get("list_timeout", 5.0), source, "list_timeout") or 5.0
    default_timeout = _seconds(document.get("timeout"), source, "timeout")
    servers: list[ServerSpec] = []
    prefixes: dict[str, str] = {}
    for name, entry in entries.items():
        spec = _server(str(name), entry, source, base, default_timeout)
        if spec is None:
            continue
        other = prefixes.get(spec.prefix)
        if other is not None:
            raise GatewayFileError(
                f"{source}: servers {other!r} and {spec.name!r} have the same prefix {spec.prefix!r}: give one of "
                "them its own 'prefix'"
            )
        prefixes[spec.prefix] = spec.name
        servers.append(spec)
    if not servers:
        raise GatewayFileError(f"{source}: every server is disabled")
    if base is not None and policy is not None:
        policy = _relative(policy, base)
    return GatewayFile(tuple(servers), source, policy, audit_log, list_timeout)


def _server(name: str, entry: Any, source: str, base: Path | None, timeout: float | None) -> ServerSpec | None:
    where = f"{source}: server {name!r}"
    if not isinstance(entry, dict):
        raise GatewayFileError(f"{where}: must be an object with 'command' or 'url'")
    for key in entry:
        if key not in SERVER_KEYS and key not in IGNORED_KEYS:
            raise GatewayFileError(f"{where}: unknown key {key!r}{_suggest(key, SERVER_KEYS)}")
    if entry.get("disabled") is True or entry.get("enabled") is False:
        return None
    kind = entry.get("type")
    if kind is not None and kind not in ("stdio", *HTTP_TYPES):
        hint = " (the deprecated HTTP+SSE transport is not spoken: use the server's Streamable HTTP URL)"
        raise GatewayFileError(f"{where}: 'type' {kind!r} is not 'stdio' or 'http'{hint if kind == 'sse' else ''}")
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise GatewayFileError(f"{where}: give either 'command' (stdio) or 'url' (Streamable HTTP)")
    fields: dict[str, Any] = {"name": name}
    if command is not None:
        if kind in HTTP_TYPES:
            raise GatewayFileError(f"{where}: 'type' {kind!r} needs 'url', not 'command'")
        for key in ("url", "headers"):
            if key in entry:
                raise GatewayFileError(f"{where}: {key!r} is for a 'url' server, not a 'command' one")
        argv = [command] if isinstance(command, str) else command
        if not _strings(argv) or not argv or not argv[0]:
            raise GatewayFileError(f"{where}: 'command' must be a non-empty string")
        args = entry.get("args", [])
        if not _strings(args):
            raise GatewayFileError(f"{where}: 'args' must be a list of strings")
        fields["command"] = (*argv, *args)
        env = entry.get("env")
        if env is not None:
            if not isinstance(env, dict) or not all(isinstance(v, str | int | float) for v in env.values()):
                raise GatewayFileError(f"{where}: 'env' must map names to strings")
            fields["env"] = {str(k): str(v) for k, v in env.items()}
        cwd = _optional_str(entry.get("cwd"), where, "cwd")
        if cwd is not None:
            fields["cwd"] = str(base / Path(cwd).expanduser()) if base is not None else cwd
    else:
        if kind == "stdio":
            raise GatewayFileError(f"{where}: 'type' 'stdio' needs 'command', not 'url'")
        for key in ("args", "env", "cwd"):
            if key in entry:
                raise GatewayFileError(f"{where}: {key!r} is for a 'command' server, not a 'url' one")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise GatewayFileError(f"{where}: 'url' must be an http:// or https:// URL")
        fields["url"] = url
        headers = entry.get("headers", {})
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise GatewayFileError(f"{where}: 'headers' must map header names to strings")
        for header in headers:
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", str(header)):
                raise GatewayFileError(f"{where}: 'headers' has an invalid header name")  # never echo values
        fields["headers"] = tuple((str(k), v) for k, v in headers.items())
    for key in ("policy", "chain"):
        value = _optional_str(entry.get(key), where, key)
        if value is not None:
            fields[key] = _relative(value, base) if base is not None else value
    start = entry.get("start", "eager")
    if start not in START_MODES:
        raise GatewayFileError(f"{where}: 'start' must be 'eager' or 'on-first-use', not {start!r}")
    fields["start"] = start
    roles = entry.get("roles")
    if roles is not None:
        if isinstance(roles, str):
            roles = [roles]
        if not _strings(roles):
            raise GatewayFileError(f"{where}: 'roles' must be a list of role names")
        fields["roles"] = tuple(roles)
    prefix = entry.get("prefix", _default_prefix(name))
    problem = prefix_problem(prefix) if isinstance(prefix, str) else "must be a string"
    if problem is not None:
        key = "prefix" if "prefix" in entry else "name (its default prefix)"
        raise GatewayFileError(f"{where}: {key} {problem}")
    fields["prefix"] = prefix
    fields["timeout"] = _seconds(entry.get("timeout"), where, "timeout") if "timeout" in entry else timeout
    return ServerSpec(**fields)


def _default_prefix(name: str) -> str:
    """A name as a prefix: `_`, `.` and other characters a prefix cannot hold become `-` (`my_server`:
    `my-server`), so a host's file is accepted as is."""
    return re.sub(r"[^A-Za-z0-9-]", "-", name)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _optional_str(value: Any, where: str, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise GatewayFileError(f"{where}: {key!r} must be a non-empty string")
    return value


def _seconds(value: Any, where: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise GatewayFileError(f"{where}: {key!r} must be a positive number of seconds")
    return float(value)


def _relative(value: str, base: Path) -> str:
    """A path relative to the gateway file's directory; a profile name (no separator, no suffix) stays."""
    if "/" not in value and "." not in value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def _suggest(key: str, known: frozenset[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(known))})"


__all__ = ["SEPARATOR", "GatewayFile", "GatewayFileError", "ServerSpec", "load_gateway_file", "parse_gateway"]
