"""Key rules: a dict key says what its value is (`password`, `account_id`, `hostname`, …).

Rules match the normalised key (`SecretAccessKey` → `secret_access_key`). The first rule whose pattern
matches and whose sibling condition holds decides the entry's treatment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .entities import CATEGORIES

_GUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_GCP_PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")


def account_entity(value: str) -> str:
    """What an account-like value is, by its shape."""
    if value.isdigit():
        return "aws_account_id" if len(value) == 12 else "gcp_project_number"
    if _GUID.fullmatch(value):
        return "azure_subscription_id"
    if _GCP_PROJECT.fullmatch(value) and "-" in value:
        return "gcp_project_id"
    return "cloud_account"


def ref_entity(value: str) -> str:
    """What a reference-like value is, by its shape (GUIDs are plain UUIDs, so `uuid: keep` keeps them)."""
    if value.isdigit() and len(value) == 12:
        return "aws_account_id"
    if _GUID.fullmatch(value):
        return "uuid"
    if value.startswith("ou-"):
        return "aws_ou_id"
    if value.startswith("o-"):
        return "aws_org_id"
    if value.startswith("r-") and len(value) <= 34:
        return "aws_root_id"
    return "resource_name"


SHAPES: dict[str, tuple[Callable[[str], str], tuple[str, ...]]] = {
    "account": (
        account_entity,
        ("aws_account_id", "gcp_project_number", "azure_subscription_id", "gcp_project_id", "cloud_account"),
    ),
    "ref": (ref_entity, ("aws_account_id", "uuid", "aws_ou_id", "aws_org_id", "aws_root_id", "resource_name")),
}


@dataclass(frozen=True, slots=True)
class KeyRule:
    name: str
    entity: str
    category: str
    pattern: re.Pattern[str]
    """Searched in the normalised key (anchor it as needed)."""
    exclude: re.Pattern[str] | None = None
    requires_sibling: frozenset[str] = frozenset()
    """At least one of these normalised keys must sit in the same mapping."""
    subtree: bool = False
    """Every leaf below the key is treated (numbers too), and drop removes the whole subtree."""
    scalars: bool = False
    """Numbers are treated too (as their text)."""
    map_keys: bool = False
    """The rule acts on the keys of the mapping under the key, not on its values."""
    defer: bool = False
    """A value matched whole by one active detector gets that detector's treatment instead."""
    shape: str | None = None
    split_arrow: bool = False
    parser: str | None = None
    confidence: float = 0.9
    weak: Callable[[str], bool] | None = None
    """Keys this rule matches only by a word that often names no secret (`auth`, `signature`, `cookies`): their
    values are replaced only when they look like one (see `looks_like_secret_value`)."""

    def matches(self, key: str, siblings: frozenset[str] | set[str]) -> bool:
        if not self.pattern.search(key):
            return False
        if self.exclude is not None and self.exclude.search(key):
            return False
        return not self.requires_sibling or not self.requires_sibling.isdisjoint(siblings)

    def entity_for(self, value: str) -> str:
        if self.shape is None:
            return self.entity
        return SHAPES[self.shape][0](value)

    @property
    def possible_entities(self) -> tuple[str, ...]:
        shaped = SHAPES[self.shape][1] if self.shape else ()
        return (*shaped, self.entity)


def _any(*names: str) -> re.Pattern[str]:
    return re.compile(r"^(?:" + "|".join(names) + r")$")


_SENSITIVE_WORDS = (
    "password|passwd|pwd|passphrase|secrets?|client_secret|api_key|apikey|access_key|secret_key|private_key|"
    "tokens?|access_token|refresh_token|id_token|session_token|auth_token|bearer|credentials?|authorization|auth|"
    "cookies?|set_cookie|connection_string|conn_str|sas|sas_token|signature|user_data|userdata|primary_key|"
    "secondary_key|account_key|shared_key|master_key|admin_password|kubeconfig|pem|private_key_id"
)
_SENSITIVE = re.compile(r"(?:^|_)(?:" + _SENSITIVE_WORDS + r")(?:_|$)")
_WEAK_WORDS = "auth|cookies?|set_cookie|signature|user_data|userdata|sas|pem"
_STRONG = re.compile(
    r"(?:^|_)(?:" + "|".join(w for w in _SENSITIVE_WORDS.split("|") if w not in _WEAK_WORDS.split("|")) + r")(?:_|$)"
)


def weak_key(key: str) -> bool:
    """A (normalised) key named only by weak words: no strong one such as password, token or secret in it."""
    return _STRONG.search(key) is None


def looks_like_secret_value(text: str) -> bool:
    """A value under a weak key that could be a credential: 8+ characters without blanks, not a placeholder,
    not a plain word, a URL or a path, and with a digit, a symbol or mixed case."""
    from .entities import is_placeholder

    value = text.strip()
    if len(value) < 8 or any(c.isspace() for c in value) or is_placeholder(value):
        return False
    if value.startswith(("http://", "https://", "/", "./")):
        return False
    core = value.replace("_", "").replace("-", "").replace(":", "").replace(".", "")
    if core.isalpha() and (core.islower() or core.isupper() or core.istitle()):
        return False
    return any(c.isdigit() for c in value) or not value.isalnum() or not (value.islower() or value.isupper())


_SAFE_KEY = re.compile(
    r"_(?:id|ids|arn|name|names|type|types|state|status|enabled|last_used|expir\w*|rotation\w*|created\w*|date|"
    r"version|policy|url|uri|endpoint|fingerprint|hint|count|counts|length|size|limit|used|usage|total|budget)$"
    r"|^(?:has|is|num|requires?|allows?|enabled?|uses?|max|min|total|count)_"
    r"|(?:^|_)(?:input|output|prompt|completion|cached|reasoning)_tokens?(?:_|$)"
    r"|^private_key_id$|^key_id$"
    # references to a secret, not the secret (Kubernetes secretKeyRef, secretName, vault paths)
    r"|_(?:ref|refs|reference|path|arn|mount|samesite|secure|httponly|domain|max_age|mode|format|algorithm|alg|"
    r"scheme|method|provider|issuer|audience|scopes?|endpoint|rotation|store|manager|backend|kind)$"
    # what describes a credential without holding one: its header or parameter name, variable, lifetime, file
    r"|_(?:header|header_name|param|parameter|query_param|field|field_name|env|env_var|env_name|var|variable|prefix|"
    r"ttl|ttl_seconds|seconds|secs|ms|minutes|hours|days|timeout|lifetime|duration|lifespan|location|file|filename|"
    r"file_path|dir|regex|label|placeholder|supported|methods?|types_supported|values_supported|algs?|encoding|"
    r"min_length|max_length|strength|complexity|required|requirements?|hint|prompt|description|doc|docs|help)$"
    # pagination cursors: redacted only where a detector finds a credential inside them
    r"|(?:^|_)(?:page|next|prev|previous|continuation|sync|resume|pagination|cursor|start)_tokens?$"
    # idempotency tokens a client makes up so a retried request is not done twice (EC2 `ClientToken`, Secrets
    # Manager `ClientRequestToken`, Smithy `idempotencyToken`): they authorise nothing
    r"|^(?:client|client_request|idempotency)_token$"
)
_ASSET_SIBLINGS = frozenset({"asset_type", "arn", "provider", "resource_type", "account_id", "region"})
_ORG_SIBLINGS = frozenset(
    {"parent_id", "ou_path", "feature_set", "management_account_id", "ous", "joined_method", "master_account_id",
     "organization_id"}
)  # fmt: skip

BUILTIN_KEY_RULES: tuple[KeyRule, ...] = (
    KeyRule("sensitive_key", "sensitive_field", "secret", _SENSITIVE, exclude=_SAFE_KEY, subtree=True, scalars=True,
            confidence=0.95, weak=weak_key),
    KeyRule("jwk_private_key", "private_key", "secret", _any("d", "p", "q", "dp", "dq", "qi", "k"),
            requires_sibling=frozenset({"kty"}), confidence=0.95),
    KeyRule("account_id_key", "cloud_account", "identifier",
            re.compile(r"^(?:account|accounts|account_ids?|owner_id|owner_account_id|accounts_affected)$"
                       r"|_account_ids?$"),
            defer=True, shape="account", split_arrow=True, scalars=True),
    KeyRule("account_map_key", "cloud_account", "identifier",
            re.compile(r"^(?:by_account|services_by_account)|_by_account$|^account_pairs$"),
            map_keys=True, shape="account"),
    KeyRule("org_id_key", "resource_ref", "identifier",
            _any("organization_id", "org_id", "root_id", "ou_ids?", "parent_ou_id"), defer=True, shape="ref"),
    KeyRule("subscription_key", "azure_subscription_id", "identifier",
            _any("subscription", "subscription_id", "azure_subscription_id"), defer=True),
    KeyRule("tenant_key", "azure_tenant_id", "identifier", _any("tenant", "tenant_id", "azure_tenant_id"), defer=True),
    KeyRule("gcp_project_key", "gcp_project_id", "identifier", _any("project", "project_id", "gcp_project_id"),
            defer=True),
    KeyRule("gcp_project_number_key", "gcp_project_number", "identifier", _any("project_number"), defer=True,
            scalars=True),
    KeyRule("resource_name_key", "resource_name", "identifier",
            re.compile(r"^(?:resource_name|display_name|(?:bucket|function|instance|cluster|db|database|computer|vm|"
                       r"role|user|group|key|table|queue|topic|repository)_name|username|asset_name|source_name|"
                       r"target_name|account_name|ou_names?|ou_path|org_name|organization_name|subject|object)$"
                       r"|.+_names$"),
            defer=True),
    KeyRule("resource_ref_key", "resource_ref", "identifier",
            re.compile(r"^(?:refs?|asset_refs?|asset_ids?|resource_ids?|resource|asset|source|target|source_id|"
                       r"target_id|source_ref|target_ref|nodes?|node_id|from|to|start|end|via|members|neighbors|"
                       r"neighbours|path|parent|parent_ids?|child_ids?|children|dependency_ids?|dependent_ids?|"
                       r"subject_id|object_id|entry|entry_id|exit|candidates?)$"),
            defer=True, shape="ref"),
    KeyRule("dataset_key", "dataset_name", "identifier",
            _any("dataset", "dataset_name", "datasets", "active_dataset", "base", "base_dataset", "target_dataset"),
            defer=True),
    KeyRule("dataset_listing_name_key", "dataset_name", "identifier", _any("name"),
            requires_sibling=frozenset({"loaded_at", "compliance_results"})),
    KeyRule("asset_name_key", "resource_name", "identifier", _any("name"), requires_sibling=_ASSET_SIBLINGS),
    KeyRule("asset_id_key", "resource_ref", "identifier", _any("id"), requires_sibling=_ASSET_SIBLINGS | _ORG_SIBLINGS,
            shape="ref"),
    KeyRule("org_name_key", "resource_name", "identifier", _any("name"), requires_sibling=_ORG_SIBLINGS),
    KeyRule("rag_chunk_id_key", "rag_chunk_id", "identifier", _any("chunk_ids?")),
    KeyRule("rag_content_key", "rag_content", "free_text", _any("content"),
            requires_sibling=frozenset({"chunk_type", "chunk_id"}), parser="rag"),
    KeyRule("hostname_key", "hostname", "network",
            _any("hostname", "host_name", "dns_name", "fqdn", "private_dns_name", "public_dns_name", "domain_name",
                 "endpoint_address"),
            defer=True),
)  # fmt: skip

BUILTIN_KEY_RULES_BY_NAME: dict[str, KeyRule] = {rule.name: rule for rule in BUILTIN_KEY_RULES}

_RULE_FIELDS = frozenset(
    {"name", "entity", "pattern", "category", "exclude", "requires_sibling", "subtree", "scalars", "map_keys",
     "confidence", "defer"}
)  # fmt: skip
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")


def key_rule_from_config(config: Any, path: str) -> KeyRule:
    """A custom key rule (`extra_key_rules` item); patterns are searched in the normalised key."""
    from .detectors import compile_pattern

    if not isinstance(config, Mapping):
        raise ValueError(f"{path}: must be a mapping")
    unknown = [k for k in config if k not in _RULE_FIELDS]
    if unknown:
        raise ValueError(f"{path}: unknown field(s) in a key rule")
    name = config.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{path}.name: required, letters, digits and _.:- (at most 64)")
    entity = config.get("entity", name)
    if not isinstance(entity, str) or not _NAME.fullmatch(entity):
        raise ValueError(f"{path}.entity: must be a name")
    category = config.get("category", "secret")
    if category not in CATEGORIES:
        raise ValueError(f"{path}.category: must be one of {', '.join(CATEGORIES)}")
    pattern = compile_pattern(config.get("pattern"), re.IGNORECASE, f"{path}.pattern")
    exclude = None
    if config.get("exclude") is not None:
        exclude = compile_pattern(config["exclude"], re.IGNORECASE, f"{path}.exclude")
    siblings = config.get("requires_sibling", [])
    if isinstance(siblings, str):
        siblings = [siblings]
    if not isinstance(siblings, list) or not all(isinstance(s, str) for s in siblings):
        raise ValueError(f"{path}.requires_sibling: must be a list of key names")
    flags: dict[str, bool] = {}
    for flag in ("subtree", "scalars", "map_keys", "defer"):
        value = config.get(flag, False)
        if not isinstance(value, bool):
            raise ValueError(f"{path}.{flag}: must be true or false")
        flags[flag] = value
    confidence = config.get("confidence", 0.9)
    if not isinstance(confidence, int | float) or isinstance(confidence, bool) or not 0 <= confidence <= 1:
        raise ValueError(f"{path}.confidence: must be a number between 0 and 1")
    from .entities import normalize_key

    return KeyRule(
        name=name,
        entity=entity,
        category=category,
        pattern=pattern,
        exclude=exclude,
        requires_sibling=frozenset(normalize_key(s) for s in siblings),
        confidence=float(confidence),
        subtree=flags["subtree"],
        scalars=flags["scalars"],
        map_keys=flags["map_keys"],
        defer=flags["defer"],
    )


# --- tag containers ----------------------------------------------------------------------------------------

TAG_CONTAINERS = frozenset({"tags", "labels", "tag", "resource_tags", "user_labels", "tag_set", "tag_list"})
TAG_KEY_ALLOWLIST = (
    "env", "environment", "stage", "tier", "managed_by", "terraform", "cost_center", "project_type",
    "application_tier", "criticality", "data_classification", "compliance", "backup", "patch_group",
)  # fmt: skip
PERSON_TAG_KEYS = frozenset(
    {"owner", "owners", "created_by", "creator", "contact", "email", "maintainer", "author", "requester",
     "requested_by", "user", "team_lead", "manager"}
)  # fmt: skip
ENUM_KEYS = frozenset(
    {"type", "status", "severity", "provider", "region", "kind", "strategy", "entity", "decision", "state",
     "category", "level", "role", "method", "action", "mode", "format", "protocol", "scheme", "asset_type",
     "resource_type", "edge_type", "relation", "priority", "phase", "direction"}
)  # fmt: skip
