"""Each package's public API is what its `__all__` says and nothing more (as httpx asserts its exports): adding a
name is a decision this test makes visible; machinery (the express lane, the SDK adapters, the stdio pipe) is
imported from its module, never from the package."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "interceptors": {
        "CAPABILITY", "Compat", "Direction", "Hook", "INTERNAL_ERROR", "INVALID_PARAMS", "INVOKE_METHOD",
        "InterceptorInfo", "InterceptorRpcError", "InterceptorType", "InterceptorsError", "Invocation",
        "InvocationContext", "InvokeParams", "InvokeResult", "LIST_METHOD", "METHOD_NOT_FOUND", "Mode", "Mutation",
        "MutationResult", "Phase", "Principal", "Priority", "RegisteredInterceptor", "Registry", "RequesterError",
        "SERVER_INFO_EVENT", "Severity", "Suggestion", "ValidationMessage", "ValidationResult", "Verdict",
        "WILDCARD", "WireError", "canonical", "dumps", "dumps_exact", "hooks_match", "is_context_operation",
        "loads", "loads_exact", "pattern_matches", "result_from_wire",
    },
    "interceptors_chain": {
        "AbortInfo", "AbortKind", "Chain", "Connection", "DiscoveryError", "ExecutionHandler", "ExecutionResult",
        "HandlerOutcome", "InterceptorOverride", "InvocationRecord", "InvokeCall", "NextInvoke", "Plan",
        "PlanEntry", "RemoteServer", "ServerEntry", "ServerUnavailable", "SessionConnection", "Slots", "Status",
        "ValidationSummary", "abort_to_error", "compile_plan", "strip_envelope",
    },
    "interceptors_server": {
        "DEFAULT_MAX_PAYLOAD_BYTES", "HostConnection", "InterceptorHost", "LocalChain", "host_of", "install",
        "interceptor_server", "to_mcp_error",
    },
}  # fmt: skip


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_package_exports_exactly_its_public_api(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) == PUBLIC[package]
    assert all(hasattr(module, name) for name in module.__all__)
