"""What one chain execution produced, and how a block is shown to the requester."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from interceptors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Direction,
    InterceptorRpcError,
    InterceptorType,
    Mode,
    Phase,
)


class Status(StrEnum):
    SUCCESS = "success"
    VALIDATION_FAILED = "validation_failed"
    MUTATION_FAILED = "mutation_failed"
    TIMEOUT = "timeout"


class AbortKind(StrEnum):
    """Why an interceptor blocked: an explicit rejection, an invocation failure, or a timeout."""

    REJECTED = "rejected"
    FAILED = "failed"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class AbortInfo:
    interceptor: str
    server: str
    type: InterceptorType
    phase: Phase
    kind: AbortKind
    reason: str
    messages: tuple[str, ...] = ()
    requester_error: Mapping[str, Any] | None = None
    """The error the rejecting validator chose for the requester (`Verdict.refuse`), if any."""
    substitute: Mapping[str, Any] | None = None
    """A result the rejecting validator chose to answer with instead of an error, if any."""

    def to_wire(self) -> dict[str, Any]:
        return {
            "interceptor": self.interceptor,
            "server": self.server,
            "type": self.type.value,
            "phase": self.phase.value,
            "kind": self.kind.value,
            "reason": self.reason,
        }


@dataclass(slots=True)
class InvocationRecord:
    """One invoke in plan order: its wire result, or the reason it failed (never payload content)."""

    interceptor: str
    server: str
    type: InterceptorType
    mode: Mode
    result: dict[str, Any] | None
    error: str | None = None
    error_kind: AbortKind | None = None
    applied: bool = False
    duration_ms: float = 0.0
    requester_error: Mapping[str, Any] | None = None
    """For a failure: the error an in-process handler chose for the requester (`RequesterError`), if any."""

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "interceptor": self.interceptor,
            "server": self.server,
            "type": self.type.value,
            "mode": self.mode.value,
            "durationMs": self.duration_ms,
        }
        if self.result is not None:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = self.error
        if self.type is InterceptorType.MUTATION:
            out["applied"] = self.applied
        return out


@dataclass(slots=True)
class ValidationSummary:
    errors: int = 0
    warnings: int = 0
    infos: int = 0

    def to_wire(self) -> dict[str, int]:
        return {"errors": self.errors, "warnings": self.warnings, "infos": self.infos}


@dataclass(slots=True)
class ExecutionResult:
    """Block iff `aborted_at` is non-empty. `final_payload` is set only when applied mutations changed it."""

    status: Status
    event: str
    phase: Phase
    direction: Direction
    results: list[InvocationRecord] = field(default_factory=list)
    final_payload: Any = None
    modified: bool = False
    validation_summary: ValidationSummary = field(default_factory=ValidationSummary)
    aborted_at: list[AbortInfo] = field(default_factory=list)
    total_duration_ms: float = 0.0

    @property
    def blocked(self) -> bool:
        return bool(self.aborted_at)

    def payload_or(self, original: Any) -> Any:
        """The payload to forward: the mutated one if mutations applied, else the original."""
        return self.final_payload if self.modified else original

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status.value,
            "event": self.event,
            "phase": self.phase.value,
            "direction": self.direction.value,
            "results": [record.to_wire() for record in self.results],
            "validationSummary": self.validation_summary.to_wire(),
            "totalDurationMs": self.total_duration_ms,
        }
        if self.modified:
            out["finalPayload"] = self.final_payload
        if self.aborted_at:
            out["abortedAt"] = [abort.to_wire() for abort in self.aborted_at]
        return out


def abort_to_error(result: ExecutionResult, *, expose_messages: bool = False) -> InterceptorRpcError:
    """The requester-visible JSON-RPC error for a blocked execution.

    A validator's explicit rejection is -32602; any invocation failure or timeout is -32603. Data is
    `{interceptor, reason}`; validator messages cross the boundary only when `expose_messages` is set.
    A rejection that chose its own requester-visible error (`Verdict.refuse`) gets exactly that error.
    """
    if not result.aborted_at:
        raise ValueError("the execution was not blocked")
    first = result.aborted_at[0]
    chosen = first.requester_error
    if chosen is not None and isinstance(chosen.get("code"), int) and isinstance(chosen.get("message"), str):
        return InterceptorRpcError(chosen["code"], chosen["message"], chosen.get("data"))
    data: dict[str, Any] = {"interceptor": first.interceptor, "reason": first.reason}
    if first.kind is AbortKind.REJECTED:
        if expose_messages and first.messages:
            data["messages"] = list(first.messages)
        return InterceptorRpcError(INVALID_PARAMS, f"blocked by interceptor {first.interceptor!r}", data)
    return InterceptorRpcError(INTERNAL_ERROR, f"interceptor {first.interceptor!r} failed", data)
