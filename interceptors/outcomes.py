"""What handlers return, and how each return value becomes a flat SEP-2624 result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._fastinit import fast_init
from .enums import Phase, Severity
from .errors import InterceptorsError, error_object
from .wire import MutationResult, Suggestion, ValidationMessage, ValidationResult

REQUESTER_ERROR_KEY = "io.mcp-interceptors/error"
"""In a rejecting validator's `info`: `{code, message, data?}`, the JSON-RPC error the requester should see."""
SUBSTITUTE_RESULT_KEY = "io.mcp-interceptors/result"
"""In a rejecting validator's `info`: a result to answer with instead of an error (e.g. an empty completion)."""


@fast_init
@dataclass(frozen=True, slots=True)
class Verdict:
    """A validator's answer. Use `Verdict.allow()`, `Verdict.deny(...)` or `Verdict.warn(...)`."""

    valid: bool
    severity: str | None = None
    messages: tuple[ValidationMessage, ...] | None = None
    suggestions: tuple[Suggestion, ...] | None = None
    info: Mapping[str, Any] | None = None

    @classmethod
    def allow(cls, info: Mapping[str, Any] | None = None) -> Verdict:
        if info is None and cls is Verdict:
            return _ALLOW  # immutable, so one shared instance (the commonest answer, one per validator call)
        return cls(True, info=info)

    @classmethod
    def deny(
        cls,
        message: str,
        *,
        severity: Severity | str = Severity.ERROR,
        path: str | None = None,
        suggestions: Sequence[Suggestion] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Verdict:
        sev = str(severity.value if isinstance(severity, Severity) else severity)
        return cls(
            False,
            sev,
            (ValidationMessage(message, sev, path),),
            None if suggestions is None else tuple(suggestions),
            info,
        )

    @classmethod
    def refuse(
        cls,
        message: str,
        *,
        code: int,
        data: Mapping[str, Any] | None = None,
        substitute: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Verdict:
        """A blocking rejection that also chooses what the requester sees: this JSON-RPC error, or a
        substitute result. Invokers of this project honour it; others see an ordinary rejection."""
        error = error_object(code, message, dict(data) if data is not None else None)
        extra: dict[str, Any] = {**(info or {}), REQUESTER_ERROR_KEY: error}
        if substitute is not None:
            extra[SUBSTITUTE_RESULT_KEY] = dict(substitute)
        return cls.deny(message, info=extra)

    @classmethod
    def warn(cls, message: str, *, path: str | None = None, info: Mapping[str, Any] | None = None) -> Verdict:
        """An invalid result that never blocks."""
        return cls.deny(message, severity=Severity.WARN, path=path, info=info)


@fast_init
@dataclass(frozen=True, slots=True)
class Mutation:
    """A mutator's answer: the new payload. `modified=None` means "compare with the input"."""

    payload: Any
    modified: bool | None = None
    info: Mapping[str, Any] | None = None

    @classmethod
    def unchanged(cls, info: Mapping[str, Any] | None = None) -> Mutation:
        if info is None and cls is Mutation:
            return _NO_CHANGE  # immutable, so one shared instance
        return cls(_UNCHANGED, False, info)


class _Unchanged:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"


_UNCHANGED: Any = _Unchanged()
_ALLOW = Verdict(True)
_NO_CHANGE = Mutation(_UNCHANGED, False)
PLAIN_ALLOW = _ALLOW
"""What `Verdict.allow()` returns: a host may answer it (or None, or True) without building anything else."""
PLAIN_UNCHANGED = _NO_CHANGE
"""What `Mutation.unchanged()` returns: likewise, with None."""


class MalformedHandlerResult(InterceptorsError, TypeError):
    """A handler returned something that cannot be turned into a result (a bug in the handler)."""


def to_validation_result(raw: Any, interceptor: str, phase: Phase) -> ValidationResult:
    """Accept a Verdict, a ValidationResult, a bool, or None (= valid)."""
    if raw is None or raw is True:
        return ValidationResult(interceptor, phase, True)
    if raw is False:
        return ValidationResult(interceptor, phase, False, "error", (ValidationMessage("rejected", "error"),))
    if isinstance(raw, Verdict):
        if raw.valid:
            return ValidationResult(interceptor, phase, True, None, raw.messages, raw.suggestions, None, raw.info)
        return ValidationResult(
            interceptor, phase, False, raw.severity or "error", raw.messages, raw.suggestions, None, raw.info
        )
    if isinstance(raw, ValidationResult):
        return ValidationResult(
            interceptor, phase, raw.valid, raw.severity, raw.messages, raw.suggestions, None, raw.info
        )
    raise MalformedHandlerResult(f"validator returned {type(raw).__name__}")


def to_mutation_result(raw: Any, interceptor: str, phase: Phase, payload: Any) -> MutationResult:
    """Accept a Mutation, a MutationResult, None (= unchanged) or a bare new payload."""
    info: Mapping[str, Any] | None = None
    modified: bool | None = None
    if raw is None:
        new = _UNCHANGED
    elif isinstance(raw, Mutation | MutationResult):
        new, modified, info = raw.payload, raw.modified, raw.info
    else:
        new = raw
    if new is _UNCHANGED:
        return MutationResult(interceptor, phase, False, payload, None, info)
    if modified is None:
        modified = new != payload
    if not modified and new != payload:
        raise MalformedHandlerResult("mutator said modified=false but changed the payload")
    return MutationResult(interceptor, phase, modified, new if modified else payload, None, info)
