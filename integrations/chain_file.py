"""The chain file (YAML or JSON): which interceptor servers to use, in which order, with which overrides.

Validated at start; an invalid file is refused with a message naming the bad field (never its value:
a chain file can hold secrets).
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from interceptors import Hook, Phase, Registry
from interceptors.errors import InterceptorsError
from interceptors_chain import Chain, InterceptorOverride, RemoteServer
from interceptors_server import DEFAULT_MAX_PAYLOAD_BYTES, HostConnection, InterceptorHost
from interceptors_server.serving import RegistryLoadError, load_registry


class ChainFileError(InterceptorsError, ValueError):
    """The chain file is unreadable or invalid; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HookSpec(_Strict):
    events: list[str] = Field(min_length=1)
    phase: Literal["request", "response"]


class OverrideSpec(_Strict):
    mode: Literal["active", "audit", "enforce"] | None = None
    fail_open: bool | None = None
    priority: int | dict[str, int] | None = None
    timeout_ms: int | None = Field(default=None, gt=0)
    config: dict[str, Any] | None = None
    hooks: list[HookSpec] | None = None
    enabled: bool = True

    def build(self) -> InterceptorOverride:
        return InterceptorOverride.build(
            mode=self.mode,
            fail_open=self.fail_open,
            priority=self.priority,
            timeout_ms=self.timeout_ms,
            config=self.config,
            hooks=None if self.hooks is None else [Hook(tuple(h.events), Phase(h.phase)) for h in self.hooks],
            enabled=self.enabled,
        )


class ServerSpec(_Strict):
    """One interceptor server: a command (stdio), a URL (Streamable HTTP) or an in-process registry."""

    name: str = Field(min_length=1)
    command: list[str] | None = None
    url: str | None = None
    registry: str | None = None
    env: dict[str, str] | None = None
    cwd: str | None = None
    timeout_ms: int | None = Field(default=None, gt=0)
    max_concurrency: int = Field(default=64, ge=1)
    mode: Literal["auto", "legacy"] = "auto"
    restart_after_timeouts: int | None = Field(default=3, ge=1)
    """A server whose invokes time out this many times in a row, answering nothing, is restarted (null: never)."""

    @field_validator("command", mode="before")
    @classmethod
    def _split_command(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value

    def remote(self) -> RemoteServer:
        """The remote interceptor server this entry describes (a command or a URL), not yet started."""
        return RemoteServer(
            self.name,
            command=self.command,
            url=self.url,
            env=self.env,
            cwd=self.cwd,
            mode=self.mode,
            max_concurrency=self.max_concurrency,
            restart_after_timeouts=self.restart_after_timeouts,
        )

    @model_validator(mode="after")
    def _one_kind(self) -> ServerSpec:
        kinds = [kind for kind in (self.command, self.url, self.registry) if kind is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of command, url or registry")
        if self.command is not None and not self.command:
            raise ValueError("command must not be empty")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must be an http:// or https:// URL")
        return self


class ChainFile(_Strict):
    servers: list[ServerSpec] = Field(default_factory=list)
    overrides: dict[str, OverrideSpec] = Field(default_factory=dict)
    deadline_ms: int | None = Field(default=None, gt=0)
    default_timeout_ms: int | None = Field(default=None, gt=0)
    policy: str | None = None
    tokens: list[dict[str, Any]] | None = None
    """Bearer tokens for HTTP clients (`{id, roles, type?, token | token_env | token_sha256}` each)."""

    @model_validator(mode="after")
    def _unique_names(self) -> ChainFile:
        names = [server.name for server in self.servers]
        if len(names) != len(set(names)):
            raise ValueError("server names must be unique")
        return self


def _describe(error: ValidationError) -> str:
    """Field paths and messages only: pydantic's default text would echo the offending values."""
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def parse_chain_file(data: Any, source: str = "chain file") -> ChainFile:
    if not isinstance(data, Mapping):
        raise ChainFileError(f"{source}: the top level must be a mapping")
    try:
        parsed = ChainFile.model_validate(data)
    except ValidationError as exc:
        raise ChainFileError(f"{source}: {_describe(exc)}") from None
    if parsed.tokens is not None:
        from interceptors.policy import BearerTokens  # validates the entries; never echoes a token

        try:
            BearerTokens.from_entries(parsed.tokens, source)
        except ValueError as exc:
            raise ChainFileError(str(exc)) from None
    return parsed


def load_chain_file(path: str | Path) -> ChainFile:
    """Read YAML (or JSON, a subset of YAML; `.json` files are read strictly as JSON)."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ChainFileError(f"cannot read chain file {file}: {exc.strerror}") from None
    try:
        data = orjson.loads(raw) if file.suffix == ".json" else yaml.safe_load(raw)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ChainFileError(f"{file}: not valid {'JSON' if file.suffix == '.json' else 'YAML'}{where}") from None
    return parse_chain_file(data, str(file))


@asynccontextmanager
async def open_chain(
    spec: ChainFile, registries: Sequence[Registry] = (), *, max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES
) -> AsyncIterator[Chain]:
    """Connect every server of the file, in order, then the extra in-process registries; yield the chain.

    `max_payload_bytes` bounds what the in-process hosts accept (the gateway passes its line limit: whatever
    it took in, its own stages can transform)."""
    chain = Chain(
        overrides={name: override.build() for name, override in spec.overrides.items()},
        deadline_ms=spec.deadline_ms,
        default_timeout_ms=spec.default_timeout_ms,
    )
    async with AsyncExitStack() as stack:
        for server in spec.servers:
            if server.registry is not None:
                try:
                    registry = load_registry(server.registry)
                except RegistryLoadError as exc:
                    raise ChainFileError(f"servers[{server.name}].registry: {exc}") from None
                # In this process: the in-process transport (the wire's copies and checks, no MCP round trip).
                await chain.add_connection(
                    HostConnection(InterceptorHost(registry, max_payload_bytes=max_payload_bytes)),
                    server.name,
                    timeout_ms=server.timeout_ms,
                )
                continue
            remote = server.remote()
            await stack.enter_async_context(remote)
            await chain.add_remote(remote, timeout_ms=server.timeout_ms)
        for index, registry in enumerate(registries):
            host = InterceptorHost(registry, max_payload_bytes=max_payload_bytes)
            await chain.add_connection(HostConnection(host), f"local-{index}")
        yield chain
