"""Session-scoped security interceptors: the cross-boundary guard and the secretless redactor."""

from .guard import CrossBoundaryGuard
from .redactor import SecretlessRedactor, secret_handle
from .secrets import SECRET_FORMATS, SecretFormat, find_secrets
from .server_of import DEFAULT_ROSTER, server_of
from .taint import MemoryTaintStore, RedisTaintStore, TaintStore, TaintStoreUnavailable

__all__ = [
    "DEFAULT_ROSTER",
    "SECRET_FORMATS",
    "CrossBoundaryGuard",
    "MemoryTaintStore",
    "RedisTaintStore",
    "SecretFormat",
    "SecretlessRedactor",
    "TaintStore",
    "TaintStoreUnavailable",
    "find_secrets",
    "secret_handle",
    "server_of",
]
