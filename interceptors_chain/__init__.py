"""The chain engine: discovery, compiled execution plans, trust-boundary ordering, invoker policy."""

from .chain import Chain, DiscoveryError
from .concurrency import Slots
from .connection import Connection, SessionConnection, strip_envelope
from .plan import Plan, PlanEntry, ServerEntry, compile_plan
from .policy import ExecutionHandler, HandlerOutcome, InterceptorOverride, InvokeCall, NextInvoke
from .remote import RemoteServer, ServerUnavailable
from .result import (
    AbortInfo,
    AbortKind,
    ExecutionResult,
    InvocationRecord,
    Status,
    ValidationSummary,
    abort_to_error,
)

__all__ = [
    "AbortInfo",
    "AbortKind",
    "Chain",
    "Connection",
    "DiscoveryError",
    "ExecutionHandler",
    "ExecutionResult",
    "HandlerOutcome",
    "InterceptorOverride",
    "InvocationRecord",
    "InvokeCall",
    "NextInvoke",
    "Plan",
    "PlanEntry",
    "RemoteServer",
    "ServerEntry",
    "ServerUnavailable",
    "SessionConnection",
    "Slots",
    "Status",
    "ValidationSummary",
    "abort_to_error",
    "compile_plan",
    "strip_envelope",
]
