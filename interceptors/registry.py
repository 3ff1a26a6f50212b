"""Authoring: a registry of interceptors declared with `@validator` / `@mutator` decorators."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Required, TypedDict, TypeVar, Unpack

from ._fastinit import fast_init
from .enums import InterceptorType, Mode, Phase
from .priority import Priority
from .wire import Compat, Hook, InterceptorInfo, InvocationContext

PhaseSpec = Phase | Literal["request", "response", "both"]
Handler = Callable[["Invocation"], Any] | Callable[["Invocation"], Awaitable[Any]]
H = TypeVar("H", bound=Callable[..., Any])


@fast_init  # built once per invoke: the descriptor-writing __init__ (see `_fastinit`)
@dataclass(frozen=True, slots=True)
class Invocation:
    """What a handler receives. Read-only: validators run concurrently on the same payload."""

    interceptor: str
    event: str
    phase: Phase
    payload: Any
    config: Mapping[str, Any] | None = None
    context: InvocationContext | None = None

    @classmethod
    def build(
        cls,
        interceptor: str,
        event: str,
        phase: Phase,
        payload: Any,
        config: Mapping[str, Any] | None,
        context: InvocationContext | None,
    ) -> Invocation:
        """The constructor with every field given (kept for callers; `fast_init` made the constructor as cheap)."""
        return cls(interceptor, event, phase, payload, config, context)

    @property
    def params(self) -> Any:
        """A request's params whatever shape the caller sent: SEP-2624's `{method, params}` request payload, or
        the bare params object that Go and the working group's SDKs send. Anything else (a response's result)
        is the payload itself. Read `invocation.params["name"]` to serve every invoker alike."""
        payload = self.payload
        if self.phase is Phase.REQUEST and isinstance(payload, Mapping) and "method" in payload:
            params = payload.get("params")
            if isinstance(params, Mapping):
                return params
        return payload


@dataclass(frozen=True, slots=True)
class RegisteredInterceptor:
    """A descriptor and the handler that implements it."""

    info: InterceptorInfo
    handler: Handler
    is_async: bool
    inline: bool = False
    """Run a sync handler on the event loop, not in a worker thread (only for trivial, non-blocking code)."""
    borrows: bool = False
    """The handler never edits what it is given and keeps none of it (the built-in stages, tested so): an in-process
    host hands it the caller's payload, config and context instead of private copies, and takes its result as it
    is. A result may then share unchanged parts with the payload it was given."""

    @property
    def name(self) -> str:
        return self.info.name


def expand_phases(phase: PhaseSpec | Sequence[PhaseSpec]) -> tuple[Phase, ...]:
    """`both` is sugar for a request hook and a response hook, request first."""
    specs = [phase] if isinstance(phase, str) else list(phase)
    out: list[Phase] = []
    for spec in specs:
        if spec == "both":
            out.extend((Phase.REQUEST, Phase.RESPONSE))
        else:
            try:
                out.append(Phase(spec))
            except ValueError:
                raise ValueError(f"phase must be 'request', 'response' or 'both', not {spec!r}") from None
    return tuple(dict.fromkeys(out))


def _check_events(events: str | Sequence[str]) -> tuple[str, ...]:
    names = (events,) if isinstance(events, str) else tuple(events)
    if not names:
        raise ValueError("an interceptor needs at least one event")
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError("events must be non-empty strings")
        if "*" in name and name != "*" and not (name.endswith("/*") and name.count("*") == 1):
            raise ValueError(f"event pattern {name!r} must be '*' or 'namespace/*'")
    return names


class InterceptorOptions(TypedDict, total=False):
    """The keyword options of `@registry.validator(...)` and `@registry.mutator(...)`."""

    events: Required[str | Sequence[str]]
    phase: PhaseSpec | Sequence[PhaseSpec]
    priority: int | Priority | Mapping[str, int] | None
    mode: Mode | str
    fail_open: bool
    config_schema: Mapping[str, Any] | None
    description: str | None
    version: str | None
    compat: Compat | None
    inline: bool
    borrows: bool


class Registry:
    """An ordered set of interceptors with unique names. Hosts serve registries over MCP."""

    changes: ClassVar[int] = 0
    """Bumped on every change of any registry: a host serving several finds with one comparison, on every invoke,
    that none of them changed (and looks at each one's `version` only when some registry did)."""

    def __init__(self, *interceptors: RegisteredInterceptor) -> None:
        self._entries: dict[str, RegisteredInterceptor] = {}
        self._version = 0
        for entry in interceptors:
            self.add(entry)

    def add(self, entry: RegisteredInterceptor) -> RegisteredInterceptor:
        if entry.name in self._entries:
            raise ValueError(f"an interceptor named {entry.name!r} is already registered")
        self._entries[entry.name] = entry
        self._version += 1
        Registry.changes += 1
        return entry

    def register(
        self,
        handler: Handler,
        *,
        name: str,
        type: InterceptorType | str,
        events: str | Sequence[str],
        phase: PhaseSpec | Sequence[PhaseSpec] = "request",
        priority: int | Priority | Mapping[str, int] | None = None,
        mode: Mode | str = Mode.ACTIVE,
        fail_open: bool = False,
        config_schema: Mapping[str, Any] | None = None,
        description: str | None = None,
        version: str | None = None,
        compat: Compat | None = None,
        inline: bool = False,
        borrows: bool = False,
    ) -> RegisteredInterceptor:
        """Register a handler imperatively; the decorators call this."""
        if not isinstance(name, str) or not name:
            raise ValueError("an interceptor needs a non-empty name")
        if config_schema is not None:
            _check_schema(config_schema)
        names = _check_events(events)
        info = InterceptorInfo(
            name=name,
            type=InterceptorType(type),
            hooks=tuple(Hook(names, p) for p in expand_phases(phase)),
            version=version,
            description=description,
            priority_hint=Priority.of(priority),
            compat=compat,
            config_schema=config_schema,
            mode=Mode.parse(mode),
            fail_open=bool(fail_open),
        )
        is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)  # noqa: B004 - callable objects with async __call__
        )
        return self.add(RegisteredInterceptor(info, handler, is_async, inline, borrows))

    def validator(self, name: str, **options: Unpack[InterceptorOptions]) -> Callable[[H], H]:
        """Decorate `def check(inv: Invocation) -> Verdict | bool | None` (sync or async).

        Options as for `register`: events (required), phase, priority, mode, fail_open, config_schema,
        description, version, compat, inline, borrows (see `RegisteredInterceptor.borrows`).
        """
        return self._decorator(name, InterceptorType.VALIDATION, options)

    def mutator(self, name: str, **options: Unpack[InterceptorOptions]) -> Callable[[H], H]:
        """Decorate `def rewrite(inv: Invocation) -> Mutation | new_payload | None` (sync or async).

        Options as for `validator`.
        """
        return self._decorator(name, InterceptorType.MUTATION, options)

    def _decorator(self, name: str, kind: InterceptorType, options: InterceptorOptions) -> Callable[[H], H]:
        def decorate(handler: H) -> H:
            self.register(handler, name=name, type=kind, **options)
            return handler

        return decorate

    def get(self, name: str) -> RegisteredInterceptor | None:
        return self._entries.get(name)

    def __iter__(self) -> Iterator[RegisteredInterceptor]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    @property
    def version(self) -> int:
        """Bumped on every change, so hosts can cache what they derive from the registry."""
        return self._version

    def infos(self) -> list[InterceptorInfo]:
        return [entry.info for entry in self._entries.values()]


def _check_schema(schema: Mapping[str, Any]) -> None:
    if not isinstance(schema, Mapping):
        raise ValueError("config_schema must be a JSON Schema object")
    if schema.get("type", "object") != "object":
        raise ValueError("config_schema must describe an object (type: object)")
