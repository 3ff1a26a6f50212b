"""Policy stage: access, hiding, rate limits and audit for MCP operations, as interceptors.

Pure Python: never imports an MCP SDK. See doc/POLICY.md.
"""

from .access import AccessLists, CompiledRule, Match, decide
from .audit import AuditSink, AuditTrail, JsonlAuditFile
from .document import ENV_POLICY, LoadedDocument, load_document
from .engine import CALL_METHODS, EMPTY_COMPLETION, LIST_METHODS, Decision, PolicyEngine, refusal_from_info
from .errors import ACCESS_DENIED, NOT_FOUND, RATE_LIMITED, PolicyError, PolicyRefusal
from .globs import Globs
from .interceptors import policy_registry
from .merge import merge_documents
from .metadata import (
    META_CAPABILITIES,
    META_CATEGORY,
    META_SENSITIVITY,
    META_TAGS,
    Catalog,
    MetadataStore,
    PrimitiveSpec,
    build_spec,
    derive_from_annotations,
)
from .policy import Policy, load_policy
from .principal import BearerTokens, principal_for_stdio, principal_id, roles_of
from .profiles import DEFAULT_PROFILE, PROFILES
from .ratelimit import RateLimit, RateLimiter
from .safetext import log_safe
from .schema import CAPABILITIES, SENSITIVITIES, check_document
from .selection import transforms_selector
from .show import mask_secrets, policy_check, policy_show

__all__ = [
    "ACCESS_DENIED",
    "CALL_METHODS",
    "CAPABILITIES",
    "DEFAULT_PROFILE",
    "EMPTY_COMPLETION",
    "ENV_POLICY",
    "LIST_METHODS",
    "META_CAPABILITIES",
    "META_CATEGORY",
    "META_SENSITIVITY",
    "META_TAGS",
    "NOT_FOUND",
    "PROFILES",
    "RATE_LIMITED",
    "SENSITIVITIES",
    "AccessLists",
    "AuditSink",
    "AuditTrail",
    "BearerTokens",
    "Catalog",
    "CompiledRule",
    "Decision",
    "Globs",
    "JsonlAuditFile",
    "LoadedDocument",
    "Match",
    "MetadataStore",
    "Policy",
    "PolicyEngine",
    "PolicyError",
    "PolicyRefusal",
    "PrimitiveSpec",
    "RateLimit",
    "RateLimiter",
    "build_spec",
    "check_document",
    "decide",
    "derive_from_annotations",
    "load_document",
    "load_policy",
    "log_safe",
    "mask_secrets",
    "merge_documents",
    "policy_check",
    "policy_registry",
    "policy_show",
    "principal_for_stdio",
    "principal_id",
    "refusal_from_info",
    "roles_of",
    "transforms_selector",
]
