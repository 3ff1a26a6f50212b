"""A property-based testing kit for redaction rules and interceptor chains (the one this project uses itself).

Hypothesis strategies for every detector format (generated from the detector's pattern, so a custom
detector gets one for free), decoys that must not be redacted, 28 embedding syntaxes, MCP payloads of every
channel, interceptor plans with injected faults; assertions that search every spelling of a secret and
never print one; the standard properties of a policy's redaction rules; and a pytest plugin
(entry point `integrations.pytest_plugin`) with fixtures, a marker and Hypothesis profiles. See doc/TESTING.md.

Importing this package imports Hypothesis but never pytest, the MCP SDK or the layers above the core: what
runs real chains, hosts and gateways (`run_plan`, `check_chain_model`, the fixtures' factories) is
`integrations.testing`. It needs the `testing` extra: `pip install "mcp-interceptors[testing]"`.
"""

try:
    import hypothesis as _hypothesis  # noqa: F401  (fails early, naming the extra)
except ImportError as _missing:
    raise ImportError(
        "interceptors.testing needs Hypothesis, which is not installed: "
        'pip install "mcp-interceptors[testing]" (the testing extra: hypothesis and pytest)',
        name="hypothesis",
    ) from _missing

from .assertions import (
    FalsePositiveError,
    LeakError,
    RoundtripError,
    assert_no_leak,
    assert_not_redacted,
    assert_roundtrip,
    find_leaks,
    haystacks,
)
from .benign import altered, benign_corpus
from .boundaries import TokenShape, boundary_samples, documented_shape, token_shape
from .chains import (
    ChainPlan,
    Expected,
    InterceptorSpec,
    Observed,
    assert_matches_model,
    build_registries,
    chain_cases,
    chain_plans,
    expected_outcome,
)
from .contexts import CONTEXTS, CONTEXTS_BY_NAME, ENCODED_CONTEXTS, NEUTRAL_KEYS, Context, Embedded, embedded, render
from .formats import (
    BUILTIN_FORMATS,
    KNOWN_FALSE_POSITIVES,
    NEAR_MISS_FAMILIES,
    Decoy,
    Secret,
    SecretFormat,
    decoys,
    derived_near_misses,
    format_for,
    formats_for_detectors,
    identifiers,
    keyed_secrets,
    known_false_positives,
    near_misses,
    placeholders,
    secret_looking_values,
    secrets,
    sensitive_keys,
    sensitive_values,
    spec_samples,
)
from .payloads import KINDS, TRANSFORMED_KINDS, McpCase, json_values, mcp_payloads, payload_for, tool_call_requests
from .profiles import PROFILES, register_profiles
from .properties import (
    MIN_SECRET_LENGTH,
    STANDARD_PROPERTIES,
    PropertiesNotApplicable,
    PropertyFailures,
    RedactionSuite,
    RedactionTarget,
    UndocumentedFormat,
    check_redaction_rules,
    property_settings,
    redacts_nothing,
    run_property,
)
from .regexgen import SAFE_UNIVERSE, Generated, UnsupportedPattern, one_of_evenly, regex_strategy, uniform

__all__ = [
    "BUILTIN_FORMATS",
    "CONTEXTS",
    "CONTEXTS_BY_NAME",
    "ENCODED_CONTEXTS",
    "KINDS",
    "KNOWN_FALSE_POSITIVES",
    "MIN_SECRET_LENGTH",
    "NEAR_MISS_FAMILIES",
    "NEUTRAL_KEYS",
    "PROFILES",
    "SAFE_UNIVERSE",
    "STANDARD_PROPERTIES",
    "TRANSFORMED_KINDS",
    "ChainPlan",
    "Context",
    "Decoy",
    "Embedded",
    "Expected",
    "FalsePositiveError",
    "Generated",
    "InterceptorSpec",
    "LeakError",
    "McpCase",
    "Observed",
    "PropertiesNotApplicable",
    "PropertyFailures",
    "RedactionSuite",
    "RedactionTarget",
    "RoundtripError",
    "Secret",
    "SecretFormat",
    "TokenShape",
    "UndocumentedFormat",
    "UnsupportedPattern",
    "altered",
    "assert_matches_model",
    "assert_no_leak",
    "assert_not_redacted",
    "assert_roundtrip",
    "benign_corpus",
    "boundary_samples",
    "build_registries",
    "chain_cases",
    "chain_plans",
    "check_redaction_rules",
    "decoys",
    "derived_near_misses",
    "documented_shape",
    "embedded",
    "expected_outcome",
    "find_leaks",
    "format_for",
    "formats_for_detectors",
    "haystacks",
    "identifiers",
    "json_values",
    "keyed_secrets",
    "known_false_positives",
    "mcp_payloads",
    "near_misses",
    "one_of_evenly",
    "payload_for",
    "placeholders",
    "property_settings",
    "redacts_nothing",
    "regex_strategy",
    "register_profiles",
    "render",
    "run_property",
    "secret_looking_values",
    "secrets",
    "sensitive_keys",
    "sensitive_values",
    "spec_samples",
    "token_shape",
    "tool_call_requests",
    "uniform",
]
