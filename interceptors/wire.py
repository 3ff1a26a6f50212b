"""SEP-2624 wire models: strict readers, writers that omit defaults, and no dependency on any MCP SDK.

Readers raise `WireError` naming the field; writers produce plain JSON-ready dicts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ._fastinit import fast_init
from .enums import PHASE_TEXT, InterceptorType, Mode, Phase, Severity
from .errors import WireError, integral
from .priority import Priority

PRINCIPAL_TYPES = frozenset({"user", "service", "anonymous"})


def _where(path: str, key: str | None) -> str:
    """Error paths are built only when an error is raised: readers sit on the hot path."""
    return path if key is None else f"{path}.{key}" if path else key


def _obj(value: Any, path: str, key: str | None = None) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the slower ABC check
        return value
    if not isinstance(value, Mapping):
        raise WireError(_where(path, key), "must be an object")
    return value


def _str(value: Any, path: str, key: str | None = None, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise WireError(_where(path, key), "must be a string")
    if not allow_empty and not value:
        raise WireError(_where(path, key), "must not be empty")
    return value


def _opt_str(data: Mapping[str, Any], key: str, path: str) -> str | None:
    value = data.get(key)
    return None if value is None else _str(value, path, key, allow_empty=True)


def _phase(value: Any, path: str, key: str | None = None) -> Phase:
    if value == "request":
        return Phase.REQUEST
    if value == "response":
        return Phase.RESPONSE
    raise WireError(_where(path, key), "must be 'request' or 'response'")


_last_second: tuple[int, str] = (-1, "")


def utc_timestamp() -> str:
    """An ISO 8601 UTC timestamp with millisecond precision, as contexts carry it. The date and time are formatted
    once per second and the milliseconds appended (a context per request made formatting a visible share of a
    small call)."""
    global _last_second
    now = time.time_ns() // 1_000_000
    second, millis = divmod(now, 1000)
    last, prefix = _last_second
    if second != last:
        prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _last_second = (second, prefix)
    return f"{prefix}.{millis:03d}Z"


@dataclass(frozen=True, slots=True)
class Hook:
    """One (events, phase) pair an interceptor subscribes to."""

    events: tuple[str, ...]
    phase: Phase

    def to_wire(self) -> dict[str, Any]:
        return {"events": list(self.events), "phase": self.phase.value}

    @classmethod
    def from_wire(cls, value: Any, path: str = "hook") -> tuple[Hook, ...]:
        """Read one hook. A legacy `both` phase (Go hosts) expands to a request and a response hook."""
        data = _obj(value, path)
        events = data.get("events")
        if not isinstance(events, list) or not all(isinstance(e, str) and e for e in events):
            raise WireError(f"{path}.events", "must be an array of non-empty strings")
        if data.get("phase") == "both":
            return cls(tuple(events), Phase.REQUEST), cls(tuple(events), Phase.RESPONSE)
        return (cls(tuple(events), _phase(data.get("phase"), path, "phase")),)


@dataclass(frozen=True, slots=True)
class Compat:
    """Protocol versions an interceptor supports; binds selection."""

    min_protocol: str
    max_protocol: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"minProtocol": self.min_protocol}
        if self.max_protocol is not None:
            out["maxProtocol"] = self.max_protocol
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "compat") -> Compat:
        data = _obj(value, path)
        return cls(_str(data.get("minProtocol"), path, "minProtocol"), _opt_str(data, "maxProtocol", path))

    def admits(self, protocol_version: str | None) -> bool:
        """Protocol versions are ISO dates, so string order is version order."""
        if protocol_version is None:
            return True
        if protocol_version < self.min_protocol:
            return False
        return self.max_protocol is None or protocol_version <= self.max_protocol


@dataclass(frozen=True, slots=True)
class InterceptorInfo:
    """The descriptor `interceptors/list` returns. Defaults are omitted on the wire."""

    name: str
    type: InterceptorType
    hooks: tuple[Hook, ...]
    version: str | None = None
    description: str | None = None
    priority_hint: Priority = field(default_factory=Priority)
    compat: Compat | None = None
    config_schema: Mapping[str, Any] | None = None
    mode: Mode = Mode.ACTIVE
    fail_open: bool = False

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.type.value,
            "hooks": [hook.to_wire() for hook in self.hooks],
        }
        if self.version is not None:
            out["version"] = self.version
        if self.description is not None:
            out["description"] = self.description
        if not self.priority_hint.is_default:
            out["priorityHint"] = self.priority_hint.to_wire()
        if self.compat is not None:
            out["compat"] = self.compat.to_wire()
        if self.config_schema is not None:
            out["configSchema"] = dict(self.config_schema)
        if self.mode is not Mode.ACTIVE:
            out["mode"] = self.mode.value
        if self.fail_open:
            out["failOpen"] = True
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "interceptor") -> InterceptorInfo:
        """Read a descriptor. Unknown `type` or `mode` raise WireError: such interceptors are never run."""
        data = _obj(value, path)
        name = _str(data.get("name"), path, "name")
        try:
            kind = InterceptorType(str(data.get("type")))
        except ValueError:
            raise WireError(f"{path}.type", "unknown interceptor type") from None
        raw_hooks = data.get("hooks")
        if raw_hooks is None and "hook" in data:  # pre-PR-23 hosts sent a single `hook`
            raw_hooks = [data["hook"]]
        if not isinstance(raw_hooks, list):
            raise WireError(f"{path}.hooks", "must be an array")
        hooks: list[Hook] = []
        for index, raw in enumerate(raw_hooks):
            hooks.extend(Hook.from_wire(raw, f"{path}.hooks[{index}]"))
        mode_value = data.get("mode")
        try:
            mode = Mode.ACTIVE if mode_value in (None, "") else Mode.parse(mode_value)
        except ValueError:
            raise WireError(f"{path}.mode", "unknown mode") from None
        fail_open = data.get("failOpen", False)
        if not isinstance(fail_open, bool):
            raise WireError(f"{path}.failOpen", "must be a boolean")
        schema = data.get("configSchema")
        if schema is not None:
            _obj(schema, path, "configSchema")
        return cls(
            name=name,
            type=kind,
            hooks=tuple(hooks),
            version=_opt_str(data, "version", path),
            description=_opt_str(data, "description", path),
            priority_hint=Priority.from_wire(data.get("priorityHint", 0), f"{path}.priorityHint"),
            compat=None if data.get("compat") is None else Compat.from_wire(data["compat"], f"{path}.compat"),
            config_schema=schema,
            mode=mode,
            fail_open=fail_open,
        )

    @property
    def events(self) -> tuple[str, ...]:
        """Every event named by any hook, first occurrence first."""
        return tuple(dict.fromkeys(event for hook in self.hooks for event in hook.events))


@fast_init
@dataclass(frozen=True, slots=True)
class Principal:
    """Who the operation is for. Only the claims an interceptor needs should be sent."""

    type: str
    id: str | None = None
    claims: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.type not in PRINCIPAL_TYPES:
            raise WireError("principal.type", "must be 'user', 'service' or 'anonymous'")

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.id is not None:
            out["id"] = self.id
        if self.claims is not None:
            out["claims"] = dict(self.claims)
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "principal") -> Principal:
        data = _obj(value, path)
        if data.get("type") not in PRINCIPAL_TYPES:
            raise WireError(f"{path}.type", "must be 'user', 'service' or 'anonymous'")
        claims = data.get("claims")
        if claims is not None:
            _obj(claims, path, "claims")
        return cls(data["type"], _opt_str(data, "id", path), claims)


@fast_init
@dataclass(frozen=True, slots=True)
class InvocationContext:
    """Facts about the operation an interceptor may use; the timestamp is informational only.

    `session_id` is our extension (SEP-2624 removed it): session-scoped security interceptors need it.
    """

    principal: Principal | None = None
    trace_id: str | None = None
    span_id: str | None = None
    timestamp: str = field(default_factory=utc_timestamp)
    session_id: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.principal is not None:
            out["principal"] = self.principal.to_wire()
        if self.trace_id is not None:
            out["traceId"] = self.trace_id
        if self.span_id is not None:
            out["spanId"] = self.span_id
        out["timestamp"] = self.timestamp
        if self.session_id is not None:
            out["sessionId"] = self.session_id
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "context") -> InvocationContext:
        data = _obj(value, path)
        timestamp = _str(data.get("timestamp"), path, "timestamp")
        principal = data.get("principal")
        return cls(
            principal=None if principal is None else Principal.from_wire(principal, f"{path}.principal"),
            trace_id=_opt_str(data, "traceId", path),
            span_id=_opt_str(data, "spanId", path),
            timestamp=timestamp,
            session_id=_opt_str(data, "sessionId", path),
        )


@dataclass(frozen=True, slots=True)
class ValidationMessage:
    message: str
    severity: str = Severity.ERROR.value
    path: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message, "severity": self.severity}
        if self.path is not None:
            out["path"] = self.path
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "message") -> ValidationMessage:
        data = _obj(value, path)
        return cls(
            _str(data.get("message"), path, "message", allow_empty=True),
            _str(data.get("severity", Severity.ERROR.value), path, "severity"),
            _opt_str(data, "path", path),
        )


@dataclass(frozen=True, slots=True)
class Suggestion:
    path: str
    value: Any

    def to_wire(self) -> dict[str, Any]:
        return {"path": self.path, "value": self.value}

    @classmethod
    def from_wire(cls, value: Any, path: str = "suggestion") -> Suggestion:
        data = _obj(value, path)
        if "value" not in data:
            raise WireError(f"{path}.value", "is required")
        return cls(_str(data.get("path"), path, "path", allow_empty=True), data["value"])


def _duration(data: Mapping[str, Any]) -> float | None:
    value = data.get("durationMs")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError("durationMs", "must be a number")
    return value


def _info(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    value = data.get("info")
    return None if value is None else _obj(value, "info")


@dataclass(slots=True)  # built per invoke: a frozen init costs a setattr call per field
class ValidationResult:
    """Flat SEP-2624 validation result. A pass carries neither `severity` nor `messages`."""

    interceptor: str
    phase: Phase
    valid: bool
    severity: str | None = None
    messages: tuple[ValidationMessage, ...] | None = None
    suggestions: tuple[Suggestion, ...] | None = None
    duration_ms: float | None = None
    info: Mapping[str, Any] | None = None

    type = InterceptorType.VALIDATION

    @property
    def blocks(self) -> bool:
        """`valid: false` blocks unless its severity is warn or info (missing or unknown means error)."""
        return not self.valid and self.severity not in ("warn", "info")

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "interceptor": self.interceptor,
            "type": "validation",
            "phase": PHASE_TEXT[self.phase],
            "valid": self.valid,
        }
        if self.duration_ms is not None:
            out["durationMs"] = self.duration_ms
        if self.info is not None:
            out["info"] = dict(self.info)
        if self.severity is not None:
            out["severity"] = self.severity
        if self.messages is not None:
            out["messages"] = [m.to_wire() for m in self.messages]
        if self.suggestions is not None:
            out["suggestions"] = [s.to_wire() for s in self.suggestions]
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "result") -> ValidationResult:
        data = _obj(value, path)
        if data.get("type") != "validation":
            raise WireError(f"{path}.type", "must be 'validation'")
        valid = data.get("valid")
        if not isinstance(valid, bool):
            raise WireError(f"{path}.valid", "must be a boolean")
        severity = data.get("severity")
        if severity is not None and not isinstance(severity, str):
            raise WireError(f"{path}.severity", "must be a string")
        messages = data.get("messages")
        if messages is not None and not isinstance(messages, list):
            raise WireError(f"{path}.messages", "must be an array")
        suggestions = data.get("suggestions")
        if suggestions is not None and not isinstance(suggestions, list):
            raise WireError(f"{path}.suggestions", "must be an array")
        return cls(
            interceptor=_str(data.get("interceptor"), path, "interceptor"),
            phase=_phase(data.get("phase"), path, "phase"),
            valid=valid,
            severity=severity,
            messages=None
            if messages is None
            else tuple(ValidationMessage.from_wire(m, f"{path}.messages[{i}]") for i, m in enumerate(messages)),
            suggestions=None
            if suggestions is None
            else tuple(Suggestion.from_wire(s, f"{path}.suggestions[{i}]") for i, s in enumerate(suggestions)),
            duration_ms=_duration(data),
            info=_info(data),
        )


@dataclass(slots=True)  # built per invoke: a frozen init costs a setattr call per field
class MutationResult:
    """Flat SEP-2624 mutation result. `modified: false` must echo the input payload unchanged.

    For interop, `modified: false` without any `payload` is read as "unchanged" (the working group's Python
    SDK answers that way): `payload` is then None and `echoed` False; nothing is applied either way.
    """

    interceptor: str
    phase: Phase
    modified: bool
    payload: Any
    duration_ms: float | None = None
    info: Mapping[str, Any] | None = None
    echoed: bool = True
    """Whether the result carried a payload (always, when `modified` is true)."""

    type = InterceptorType.MUTATION

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "interceptor": self.interceptor,
            "type": "mutation",
            "phase": PHASE_TEXT[self.phase],
            "modified": self.modified,
        }
        if self.echoed:
            out["payload"] = self.payload
        if self.duration_ms is not None:
            out["durationMs"] = self.duration_ms
        if self.info is not None:
            out["info"] = dict(self.info)
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "result") -> MutationResult:
        data = _obj(value, path)
        if data.get("type") != "mutation":
            raise WireError(f"{path}.type", "must be 'mutation'")
        modified = data.get("modified")
        if not isinstance(modified, bool):
            raise WireError(f"{path}.modified", "must be a boolean")
        echoed = "payload" in data
        if modified and not echoed:
            raise WireError(f"{path}.payload", "is required when modified is true")
        return cls(
            interceptor=_str(data.get("interceptor"), path, "interceptor"),
            phase=_phase(data.get("phase"), path, "phase"),
            modified=modified,
            payload=data.get("payload"),
            duration_ms=_duration(data),
            info=_info(data),
            echoed=echoed,
        )


InvokeResult = ValidationResult | MutationResult


def result_from_wire(value: Any, path: str = "result") -> InvokeResult:
    """Read either result shape, dispatching on `type`."""
    data = _obj(value, path)
    kind = data.get("type")
    if kind == "validation":
        return ValidationResult.from_wire(data, path)
    if kind == "mutation":
        return MutationResult.from_wire(data, path)
    raise WireError(f"{path}.type", "must be 'validation' or 'mutation'")


@dataclass(slots=True)  # built per invoke: a frozen init costs a setattr call per field
class InvokeParams:
    """Params of `interceptor/invoke`. Mode and failOpen are never sent: the invoker applies them."""

    name: str
    event: str
    phase: Phase
    payload: Any
    timeout_ms: int | None = None
    config: Mapping[str, Any] | None = None
    context: InvocationContext | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "event": self.event,
            "phase": PHASE_TEXT[self.phase],
            "payload": self.payload,
        }
        if self.timeout_ms is not None:
            out["timeoutMs"] = self.timeout_ms
        if self.config is not None:
            out["config"] = dict(self.config)
        if self.context is not None:
            out["context"] = self.context.to_wire()
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "params") -> InvokeParams:
        data = _obj(value, path)
        name = _str(data.get("name"), path, "name")
        event = _str(data.get("event"), path, "event")
        phase = _phase(data.get("phase"), path, "phase")
        if "payload" not in data:
            raise WireError(f"{path}.payload", "is required")
        timeout = data.get("timeoutMs")
        if timeout is not None:
            timeout = integral(timeout)
            if timeout is None or timeout <= 0:
                raise WireError(f"{path}.timeoutMs", "must be a positive integer")
        config = data.get("config")
        if config is not None:
            _obj(config, path, "config")
        context = data.get("context")
        return cls(
            name=name,
            event=event,
            phase=phase,
            payload=data["payload"],
            timeout_ms=timeout,
            config=config,
            context=None if context is None else InvocationContext.from_wire(context, f"{path}.context"),
        )


def list_result_to_wire(infos: Sequence[InterceptorInfo]) -> dict[str, Any]:
    return {"interceptors": [info.to_wire() for info in infos]}
