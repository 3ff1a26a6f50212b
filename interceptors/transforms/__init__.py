"""Transform stages (sanitize, redact, substitute, project, annotate, guard_secrets) as interceptors.

Pure Python on the core: never imports an MCP SDK. Policies are read as plain dicts.
"""

from .assembly import assemble_input, assemble_output, check_transform_sections, deep_merge
from .base import IDENTITY, META_KEY, Pipeline, Transform, TransformContext, merge_report, render_json
from .catalog import BUILTIN_DETECTORS
from .channels import (
    CHANNEL_META_KEY,
    transform_completion_result,
    transform_metadata,
    transform_payload,
    transform_prompt_result,
    transform_resource_result,
    transform_tool_result,
)
from .conformance import SecretlessHandler, secret_handle, secretless_handler
from .detectors import Detector, Finding, Scanner, detector_from_config
from .guard import SecretGuard, SecretsRefused
from .keyrules import BUILTIN_KEY_RULES, KeyRule
from .mutators import CallFacts, Selection, TransformStages, transforms_registry
from .profiles import OPEN_TRANSFORMS, STANDARD_TRANSFORMS, STRICT_TRANSFORMS
from .redactor import Redactor
from .sanitize import CLOSE_FENCE, OPEN_FENCE, Sanitizer
from .specs import Spec, build_transform, normalize_spec, register_transform
from .strategies import DROP, KeyedHasher, Pseudonymizer, Strategy

__all__ = [
    "BUILTIN_DETECTORS",
    "BUILTIN_KEY_RULES",
    "CHANNEL_META_KEY",
    "CLOSE_FENCE",
    "DROP",
    "IDENTITY",
    "META_KEY",
    "OPEN_FENCE",
    "OPEN_TRANSFORMS",
    "STANDARD_TRANSFORMS",
    "STRICT_TRANSFORMS",
    "CallFacts",
    "Detector",
    "Finding",
    "KeyRule",
    "KeyedHasher",
    "Pipeline",
    "Pseudonymizer",
    "Redactor",
    "Sanitizer",
    "Scanner",
    "SecretGuard",
    "SecretlessHandler",
    "SecretsRefused",
    "Selection",
    "Spec",
    "Strategy",
    "Transform",
    "TransformContext",
    "TransformStages",
    "assemble_input",
    "assemble_output",
    "build_transform",
    "check_transform_sections",
    "deep_merge",
    "detector_from_config",
    "merge_report",
    "normalize_spec",
    "register_transform",
    "render_json",
    "secret_handle",
    "secretless_handler",
    "transform_completion_result",
    "transform_metadata",
    "transform_payload",
    "transform_prompt_result",
    "transform_resource_result",
    "transform_tool_result",
    "transforms_registry",
]
