"""The secretless redactor of the conformance suite: a thin configuration of the transforms redactor."""

from __future__ import annotations

from ..transforms.conformance import SecretlessHandler as SecretlessRedactor
from ..transforms.conformance import fnv1a32, secret_handle

__all__ = ["SecretlessRedactor", "fnv1a32", "secret_handle"]
