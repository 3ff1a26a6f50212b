"""A loaded policy: the effective document and its compiled form (globs, rules, limits, catalog)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from ..codec import canonical
from .access import AccessLists, CompiledRule, compile_rules
from .arguments import ArgumentRules
from .document import DocumentSource, LoadedDocument, load_document
from .errors import PolicyError
from .merge import merge_documents
from .metadata import Catalog
from .ratelimit import RateLimit
from .schema import check_document

DEFAULT_KEY_ENV = "MCP_INTERCEPTORS_VAULT_KEY"


class Policy:
    """Immutable once built. Build one with `load_policy(...)`; `derive(...)` makes a variant."""

    def __init__(self, loaded: LoadedDocument) -> None:
        doc = loaded.document
        self.document: Mapping[str, Any] = doc
        self.source = loaded.source
        self.extends_chain = loaded.extends_chain
        self.name: str = doc.get("name", "custom")
        self.description: str = doc.get("description", "")
        self.hide_denied: bool = doc.get("hide_denied", True)
        self.honor_hints: bool = doc.get("honor_hints", True)
        self.audit: bool = doc.get("audit", False)
        self.audit_size: int = doc.get("audit_size", 1000)
        self.audit_max_age: float | None = doc.get("audit_max_age")
        per_decision = doc.get("audit_per_decision")
        self.audit_per_decision: int = max(1, self.audit_size // 2) if per_decision is None else per_decision
        self.arguments = ArgumentRules(doc, self.source)
        """Argument rules (`arguments`, `paths`): `${VAR}` expanded now, so an unset variable fails the load."""
        self.fold_file_case = self.arguments.fold_case
        """`paths.case_insensitive` (default: whether this platform folds case): `file:` globs ignore case."""
        self.lists = AccessLists.from_document(doc, self.fold_file_case)
        # The effective deny set: the merged deny list minus the policy-level allow list.
        self.deny_capabilities = self.lists.deny_capabilities - self.lists.allow_capabilities
        self.rules: tuple[CompiledRule, ...] = compile_rules(doc, self.fold_file_case)
        self.uses_principals = any(rule.uses_principals for rule in self.rules)
        self.rate_limits = tuple(RateLimit.from_document(limit) for limit in doc.get("rate_limits") or ())
        self.catalog = Catalog(doc.get("catalog"))
        self.transforms: tuple[Any, ...] = tuple(doc.get("transforms") or ())
        self.input_transforms: tuple[Any, ...] = tuple(doc.get("input_transforms") or ())
        self.vault: Mapping[str, Any] = doc.get("vault") or {}

    @property
    def fingerprint(self) -> str:
        """16 hex of SHA-256 over the canonical document without the vault section."""
        body = {key: value for key, value in self.document.items() if key != "vault"}
        return hashlib.sha256(canonical(body).encode()).hexdigest()[:16]

    def secret_key(self) -> bytes | None:
        """The vault key (`vault.key`, else the variable named by `vault.key_env`), if any is configured."""
        key = self.vault.get("key") or os.environ.get(self.vault.get("key_env") or DEFAULT_KEY_ENV)
        return key.encode("utf-8") if key else None

    def derive(self, overrides: Mapping[str, Any]) -> Policy:
        """A variant merged by the `extends` rules (deny lists only grow); keeps the chain."""
        merged = merge_documents(self.document, overrides)
        problems = check_document(merged)
        if problems:
            raise PolicyError(f"{self.source} (derived)", problems)
        return Policy(LoadedDocument(merged, self.source, self.extends_chain))

    def __repr__(self) -> str:
        chain = f" extends {' -> '.join(self.extends_chain)}" if self.extends_chain else ""
        return f"<Policy {self.name!r}{chain}>"


def load_policy(source: Policy | DocumentSource = None) -> Policy:
    """A profile name, a file (YAML or JSON), inline JSON, a dict, a Policy, or None (the default).

    Raises PolicyError (field paths, never values) or FileNotFoundError.
    """
    if isinstance(source, Policy):
        return source
    return Policy(load_document(source))
