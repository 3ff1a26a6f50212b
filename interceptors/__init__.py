"""mcp-interceptors core: SEP-2624 types, wire models and authoring API. Never imports an MCP SDK."""

from .codec import canonical, dumps, dumps_exact, loads, loads_exact
from .enums import Direction, InterceptorType, Mode, Phase, Severity
from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    InterceptorRpcError,
    InterceptorsError,
    RequesterError,
    WireError,
)
from .events import SERVER_INFO_EVENT, WILDCARD, hooks_match, is_context_operation, pattern_matches
from .outcomes import Mutation, Verdict
from .priority import Priority
from .registry import Invocation, RegisteredInterceptor, Registry
from .wire import (
    Compat,
    Hook,
    InterceptorInfo,
    InvocationContext,
    InvokeParams,
    InvokeResult,
    MutationResult,
    Principal,
    Suggestion,
    ValidationMessage,
    ValidationResult,
    result_from_wire,
)

CAPABILITY = "io.modelcontextprotocol/interceptors"
LIST_METHOD = "interceptors/list"
INVOKE_METHOD = "interceptor/invoke"

__all__ = [
    "CAPABILITY",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVOKE_METHOD",
    "LIST_METHOD",
    "METHOD_NOT_FOUND",
    "SERVER_INFO_EVENT",
    "WILDCARD",
    "Compat",
    "Direction",
    "Hook",
    "InterceptorInfo",
    "InterceptorRpcError",
    "InterceptorType",
    "InterceptorsError",
    "Invocation",
    "InvocationContext",
    "InvokeParams",
    "InvokeResult",
    "Mode",
    "Mutation",
    "MutationResult",
    "Phase",
    "Principal",
    "Priority",
    "RegisteredInterceptor",
    "Registry",
    "RequesterError",
    "Severity",
    "Suggestion",
    "ValidationMessage",
    "ValidationResult",
    "Verdict",
    "WireError",
    "canonical",
    "dumps",
    "dumps_exact",
    "hooks_match",
    "is_context_operation",
    "loads",
    "loads_exact",
    "pattern_matches",
    "result_from_wire",
]
