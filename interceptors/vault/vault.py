"""`TokenVault`: keyed, deterministic, format-preserving and reversible pseudonyms.

A token is a function of (key, namespace, entity, value): the same value gets the same token in every
call, process and restart that uses the same key, and a different one under another key or namespace.
The vault also remembers each token (in its `VaultStore`) so it can be reversed, but only in the
namespace that issued it.

It implements the transforms' `Pseudonymizer` protocol (`reversible`, `namespace_for`, `tokenize`, `digest`,
`detokenize`), so the redactor's `pseudonymize` strategy issues vault tokens when given a vault.
"""

from __future__ import annotations

import atexit
import fnmatch
import hashlib
import hmac
import logging
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import InterceptorsError
from . import formats, persist, scan
from .formats import FormatRequest, KeyStream
from .keys import DEFAULT_KEY_ENV, KeySource, VaultKeyError, VaultKeys, fields_message
from .netclass import IP_ENTITIES, IPNetwork, ip_entity
from .store import Entry, MemoryStore, Pair, StoreKeys, VaultStore, rows_to_entries

logger = logging.getLogger("interceptors.vault")

Scope = Literal["global", "principal"]
RestoredResults = Literal["check", "withhold"]
RESTORED_RESULTS = ("check", "withhold")
GLOBAL = "global"
ANONYMOUS = "anonymous"
MAX_ATTEMPTS = 64
GENERIC_FROM = 48
"""From this attempt on a collision falls back to the generic `<prefix>-<hex>` format."""
MIN_EMBEDDED = 6
"""Tokens shorter than this are reversed only when they are a whole string, never inside text."""
EXPORT_FORMAT = persist.FILE_FORMAT


class VaultError(InterceptorsError, RuntimeError):
    """A vault operation that cannot be done. Messages name key ids and entities, never values or keys."""


@dataclass(frozen=True, slots=True)
class VaultConfig:
    """The policy's `vault` section (all optional)."""

    key: str | None = None
    key_env: str | None = None
    """Named by the policy: then it must be set (see `TokenVault(require_key=...)`). None: the default variable,
    if set, else a random key for this process."""
    scope: Scope = "global"
    ttl_seconds: float | None = None
    path: str | None = None
    autosave: bool = False
    encrypt: bool = True
    restore_to: tuple[str, ...] = ()
    """Globs over tool and prompt names, resource URIs and completion references that may receive real
    values; empty (the default): none, every target gets the tokens as the model wrote them; `["*"]`: all."""
    restored_results: RestoredResults = "check"
    """What happens to the result of a call that received real values: `check` swaps the values back in every
    spelling the vault knows (doc/VAULT.md); `withhold` replaces the whole result."""

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any] | None) -> VaultConfig:
        data = dict(section or {})
        fields = {
            "key",
            "key_env",
            "scope",
            "ttl_seconds",
            "path",
            "autosave",
            "encrypt",
            "restore_to",
            "restored_results",
        }
        unknown = sorted(set(data) - fields, key=str)
        if unknown:
            names = ", ".join(repr(k) if isinstance(k, str) and k.isidentifier() else "<unprintable>" for k in unknown)
            raise ValueError(f"vault: unknown field(s) {names}")
        key = data.get("key")
        if key is not None and not isinstance(key, str):
            raise ValueError("vault.key: must be a string")
        key_env = data.get("key_env")
        if key_env is not None and (not isinstance(key_env, str) or not key_env):
            raise ValueError("vault.key_env: must be a non-empty string")
        scope = data.get("scope", "global")
        if scope not in ("global", "principal"):
            raise ValueError("vault.scope: must be 'global' or 'principal'")
        ttl = data.get("ttl_seconds")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0):
            raise ValueError("vault.ttl_seconds: must be a positive number or null")
        path = data.get("path")
        if path is not None and not isinstance(path, str):
            raise ValueError("vault.path: must be a string")
        flags = {}
        for name, default in (("autosave", False), ("encrypt", True)):
            value = data.get(name, default)
            if not isinstance(value, bool):
                raise ValueError(f"vault.{name}: must be true or false")
            flags[name] = value
        restore_to = data.get("restore_to") or ()
        if not isinstance(restore_to, list | tuple) or not all(isinstance(g, str) and g for g in restore_to):
            raise ValueError('vault.restore_to: must be a list of globs (empty: no target; ["*"]: every target)')
        restored_results = data.get("restored_results", "check")
        if restored_results not in RESTORED_RESULTS:
            raise ValueError("vault.restored_results: must be 'check' or 'withhold'")
        return cls(
            key,
            key_env,
            scope,
            None if ttl is None else float(ttl),
            path,
            flags["autosave"],
            flags["encrypt"],
            tuple(restore_to),
            restored_results,
        )

    def __repr__(self) -> str:
        key = "<hidden>" if self.key else None
        return (
            f"VaultConfig(key={key}, key_env={self.key_env!r}, scope={self.scope!r}, ttl_seconds={self.ttl_seconds},"
            f" path={self.path!r}, autosave={self.autosave}, encrypt={self.encrypt}, restore_to={self.restore_to!r},"
            f" restored_results={self.restored_results!r})"
        )


_OPEN_VAULTS: weakref.WeakSet[TokenVault] = weakref.WeakSet()


def _save_open_vaults() -> None:
    """At interpreter exit: save every vault that has a file and unsaved changes. Never raises."""
    for vault in list(_OPEN_VAULTS):
        try:
            if vault.dirty and vault.path is not None:
                vault.save()
        except Exception as exc:  # exit must go on
            logger.warning("vault %s not saved at exit: %s", vault.key_id, type(exc).__name__)


atexit.register(_save_open_vaults)


class TokenVault:
    """Issues and reverses pseudonyms. Thread-safe; share one per process (or one store across processes)."""

    reversible = True

    def __init__(
        self,
        key: bytes | str | None = None,
        *,
        key_env: str | None = DEFAULT_KEY_ENV,
        scope: Scope = "global",
        ttl_seconds: float | None = None,
        path: str | Path | None = None,
        autosave: bool = False,
        encrypt: bool = True,
        store: VaultStore | None = None,
        clock: Callable[[], float] = time.time,
        operation_ttl: float = 3600.0,
        require_key: bool = False,
        restore_to: Iterable[str] = (),
        restored_results: RestoredResults = "check",
    ) -> None:
        """`require_key`: `key_env` must be set (no random fallback). A vault with a `path` always needs a stable
        key: a random one would make its own file unreadable at the next start."""
        if scope not in ("global", "principal"):
            raise ValueError("scope must be 'global' or 'principal'")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self._keys = VaultKeys.derive(key, key_env, required=require_key)
        if path is not None and self._keys.source == "random":
            raise VaultKeyError(
                f"vault file {path} needs a stable key: set vault.key, vault.key_env or ${key_env or DEFAULT_KEY_ENV}"
            )
        if self._keys.source == "random":
            logger.info("vault %s: random key for this process (tokens change at restart)", self._keys.key_id)
        self._token_key = self._keys.subkey("tokenize")
        self._prefix_key = self._keys.subkey("prefix-preserving")
        self._hash_key = self._keys.subkey("hash")
        self._prefix_bases: dict[tuple[str, str], Any] = {}
        self.scope: Scope = scope
        self.ttl: float | None = ttl_seconds
        self.path: Path | None = Path(path) if path is not None else None
        self.autosave = autosave
        self.encrypt = encrypt
        if isinstance(restore_to, str) or restore_to is None:
            raise ValueError('restore_to must be a list of globs (empty: no target; ["*"]: every target)')
        if restored_results not in RESTORED_RESULTS:
            raise ValueError("restored_results must be 'check' or 'withhold'")
        self.restore_to: tuple[str, ...] = tuple(restore_to)
        """Which tools, prompts, resources and completions may receive real values (globs; empty: none)."""
        self.restored_results: RestoredResults = restored_results
        """`check` or `withhold`: what the response stage does with the result of a call that got real values."""
        self.clock = clock
        self.operation_ttl = operation_ttl
        self.store: VaultStore = store if store is not None else MemoryStore()
        self.store.bind(StoreKeys(self._keys))
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._dirty = False
        self.collisions = 0
        self.issued = 0
        self.reversed = 0
        if self.path is not None and self.path.exists():
            self.load(self.path, overwrite=False)  # a shared store may already hold newer entries
            self._dirty = False
        if self.path is not None:
            _OPEN_VAULTS.add(self)

    @property
    def performs_io(self) -> bool:
        """Whether issuing or reversing a token may wait on I/O (a shared store, a file saved on every change):
        then its stages run in worker threads, never on the event loop."""
        return self.autosave or not isinstance(self.store, MemoryStore)

    @classmethod
    def from_config(
        cls, section: Mapping[str, Any] | VaultConfig | None, *, store: VaultStore | None = None, **kwargs: Any
    ) -> TokenVault:
        """A vault from the policy's `vault` section (`key`, `key_env`, `scope`, `ttl_seconds`, `path`, …)."""
        config = section if isinstance(section, VaultConfig) else VaultConfig.from_mapping(section)
        return cls(
            config.key,
            key_env=config.key_env or DEFAULT_KEY_ENV,
            require_key=config.key is None and config.key_env is not None,
            scope=config.scope,
            ttl_seconds=config.ttl_seconds,
            path=config.path,
            autosave=config.autosave,
            encrypt=config.encrypt,
            restore_to=config.restore_to,
            restored_results=config.restored_results,
            store=store,
            **kwargs,
        )

    # --- identity ------------------------------------------------------------------------------------

    @property
    def key_id(self) -> str:
        return self._keys.key_id

    @property
    def key_source(self) -> KeySource:
        return self._keys.source

    @property
    def dirty(self) -> bool:
        return self._dirty

    def __repr__(self) -> str:
        return f"TokenVault(key_id={self.key_id!r}, scope={self.scope!r}, store={self.store.name!r})"

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a TokenVault cannot be pickled")

    def stats(self) -> dict[str, Any]:
        """Counters and settings; never the key and never a value."""
        return {
            "key_id": self.key_id,
            "key_source": self.key_source,
            "scope": self.scope,
            "ttl_seconds": self.ttl,
            "store": self.store.name,
            "entries": self.store.count(),
            "issued": self.issued,
            "reversed": self.reversed,
            "collisions": self.collisions,
            "persistent": self.path is not None,
            "dirty": self._dirty,
        }

    def reconfigure(self, section: Mapping[str, Any] | VaultConfig | None) -> None:
        """Take a new policy's `restore_to` and `restored_results` (a reload keeps the vault, its key and its
        tokens, but the rules on where real values go must follow the document in force)."""
        config = section if isinstance(section, VaultConfig) else VaultConfig.from_mapping(section)
        self.restore_to = config.restore_to
        self.restored_results = config.restored_results

    def restores(self, target: str | None) -> bool:
        """Whether a tool or prompt (by name), a resource (by URI) or a completion reference may receive real
        values (`restore_to`; empty, the default: none). The others get the tokens as the model wrote them. Globs
        are shell-style and case-sensitive, as the policy's: a positive pattern matches and no `!` one does."""
        globs = self.restore_to
        if not globs:
            return False
        name = target or ""
        positive = [g for g in globs if not g.startswith("!")]
        negative = [g[1:] for g in globs if g.startswith("!")]
        return any(fnmatch.fnmatchcase(name, g) for g in positive) and not any(
            fnmatch.fnmatchcase(name, g) for g in negative
        )

    # --- the Pseudonymizer protocol ------------------------------------------------------------------------

    def namespace_for(self, principal: str | None) -> str:
        """`global`, or `p:<principal id>` with per-principal scope (`anonymous` without a principal)."""
        if self.scope == "global":
            return GLOBAL
        return f"p:{principal}" if principal else ANONYMOUS

    def digest(self, value: str, entity: str) -> str:
        """Hex HMAC-SHA256 of `entity \\x1f value` under the hash sub-key (same as the transforms' KeyedHasher)."""
        message = f"{entity}\x1f{value}".encode("utf-8", "surrogatepass")
        return hmac.new(self._hash_key, message, hashlib.sha256).hexdigest()

    def hash_value(self, value: str, entity: str = "", length: int = 16) -> str:
        """A short keyed fingerprint (for audit lines): at least 4 hex characters."""
        return self.digest(value, entity)[: max(4, length)]

    def tokenize(self, value: str, entity: str, namespace: str = GLOBAL) -> str:
        """The token of `value` as `entity` in `namespace`, issued now if needed. Values that name nothing
        (special addresses, `*`, `$VAR`, service endpoints, empty text) come back unchanged, unregistered."""
        if not isinstance(value, str):
            raise TypeError("only text can be tokenised")
        if not value:
            return value
        canonical = canonical_entity(entity, value)
        if canonical is None:
            return value
        entity = canonical
        now = self.clock()
        existing = self.store.find(namespace, entity, value, now, self.ttl)
        if existing is not None:
            return existing
        formatter = formats.formatter_for(entity)
        for attempt in range(MAX_ATTEMPTS):
            stream = KeyStream(self._token_key, fields_message(namespace, entity, str(attempt), value))
            request = FormatRequest(
                namespace, entity, attempt, stream, self._sub(namespace), self._prefix_base(namespace)
            )
            token = formatter(value, request) if attempt < GENERIC_FROM else formats.generic(value, request)
            if token is None:
                return value
            status, got = self.store.claim(Entry(namespace, entity, value, token, now, now), self.ttl)
            if status == "ok":
                with self._lock:
                    self.issued += 1
                    self._dirty = True
                return got
            if status == "have":
                return got
            with self._lock:
                self.collisions += 1
        raise VaultError(f"no free token for a {entity} after {MAX_ATTEMPTS} attempts")

    def _prefix_base(self, namespace: str) -> Callable[[IPNetwork], Any]:
        def base(block: IPNetwork) -> Any:
            key = (namespace, str(block))
            found = self._prefix_bases.get(key)
            if found is None:
                if len(self._prefix_bases) >= 1024:
                    self._prefix_bases.clear()
                found = self._prefix_bases[key] = formats.prefix_hasher(self._prefix_key, namespace, block)
            return found

        return base

    def _sub(self, namespace: str) -> Callable[[str, str], str]:
        def sub(value: str, entity: str) -> str:
            return self.tokenize(value, entity, namespace)

        return sub

    def detokenize(self, text: str, namespace: str = GLOBAL) -> tuple[str, list[Pair]]:
        """`text` with every token of `namespace` in it reversed (the whole text, or whole words inside it),
        and the `(real, token)` pairs."""
        return self.detokenize_text(text, namespace)

    # --- reversal ------------------------------------------------------------------------------------

    def _reverse(self, namespace: str, tokens: Collection[str]) -> dict[str, Entry]:
        found = self.store.reverse(namespace, list(tokens), self.clock(), self.ttl)
        return found

    def entry(self, token: str, namespace: str = GLOBAL) -> Entry | None:
        """The entry of an exact token (renewing it), or None."""
        return self._reverse(namespace, [token]).get(token)

    def reverse(self, token: str, namespace: str = GLOBAL) -> str | None:
        """The real value of an exact token, or None."""
        entry = self.entry(token, namespace)
        if entry is not None:
            with self._lock:
                self.reversed += 1
        return None if entry is None else entry.value

    def is_token(self, text: str, namespace: str = GLOBAL) -> bool:
        return self.entry(text, namespace) is not None

    def lookup(self, value: str, entity: str, namespace: str = GLOBAL) -> str | None:
        """The token already issued for `value` as `entity`, without issuing one."""
        canonical = canonical_entity(entity, value)
        if canonical is None:
            return None
        return self.store.find(namespace, canonical, value, self.clock(), self.ttl)

    def tokens_for(self, value: str, namespace: str | None = None) -> list[str]:
        """Every token issued for `value` (any entity), in one namespace or all. A full scan of the store."""
        return sorted({e.token for e in self.store.entries(namespace) if e.value == value})

    def detokenize_text(self, text: str, namespace: str = GLOBAL) -> tuple[str, list[Pair]]:
        """Reverse `text` if it is a token, else every token found in it as a whole word (one store lookup)."""
        if not text:
            return text, []
        limit = self.store.max_token_length()
        parts = scan.runs(text, MIN_EMBEDDED) if limit >= MIN_EMBEDDED else []
        spans = scan.candidates(text, min_length=MIN_EMBEDDED, max_length=limit, parts=parts)
        if len(text) <= limit:  # no token is longer than that: a longer text is never one whole
            spans.add(text)
        if not spans:
            return text, []
        known = self._reverse(namespace, spans)
        if not known:
            return text, []
        exact = known.get(text)
        if exact is not None:
            with self._lock:
                self.reversed += 1
            return exact.value, [(exact.value, text)]
        new, hits = scan.replace(
            text, known, lambda span, entry: entry.value, min_length=MIN_EMBEDDED, max_length=limit, parts=parts
        )
        if hits:
            with self._lock:
                self.reversed += len(hits)
        return new, [(entry.value, span) for span, entry in hits]

    def detokenize_text_count(self, text: str, namespace: str = GLOBAL) -> tuple[str, int]:
        new, pairs = self.detokenize_text(text, namespace)
        return new, len(pairs)

    # --- lifetime --------------------------------------------------------------------------------------

    def purge_expired(self) -> int:
        """Drop every entry unused for `ttl_seconds`; how many went."""
        removed = self.store.purge(self.clock(), self.ttl)
        if removed:
            self._dirty = True
        return removed

    # --- per-operation pairs -------------------------------------------------------------------------

    def remember(self, operation: str, pairs: Iterable[Pair]) -> None:
        """Keep what one operation's request restored, for its response phase (see `interceptors`)."""
        items = [(str(real), str(token)) for real, token in pairs]
        if items:
            self.store.remember(operation, items, self.operation_ttl)

    def recall(self, operation: str) -> list[Pair]:
        return self.store.recall(operation, self.operation_ttl)

    def operation_done(self, operation: str, grace: float = 30.0) -> None:
        """The operation answered: keep its pairs only a little longer (late log lines, retries)."""
        pairs = self.store.recall(operation, min(grace, self.operation_ttl))
        del pairs

    # --- import, export, files -------------------------------------------------------------------------

    def export(self, namespace: str | None = None) -> dict[str, Any]:
        """Every live mapping as plain data (it holds real values: protect it)."""
        now = self.clock()
        rows = [
            e.as_row()
            for e in sorted(self.store.entries(namespace), key=lambda e: (e.namespace, e.created, e.token))
            if self.ttl is None or now - e.last_used < self.ttl
        ]
        return {"format": EXPORT_FORMAT, "key_id": self.key_id, "entries": rows}

    def import_mappings(self, data: Mapping[str, Any], *, overwrite: bool = False) -> int:
        """Add the mappings of an export (possibly made under another key); how many were added.

        Imported tokens keep their text, so tokens already handed out keep reversing, and the same values
        keep getting them. Everything is checked before anything is added."""
        if not isinstance(data, Mapping) or data.get("format") != EXPORT_FORMAT:
            raise VaultError(f"not a vault export (expected format {EXPORT_FORMAT!r})")
        rows = data.get("entries")
        if not isinstance(rows, list):
            raise VaultError("a vault export needs an entries list")
        try:
            entries = rows_to_entries(rows)
        except ValueError as exc:
            raise VaultError(f"bad vault export: {exc}") from None
        added = self.store.put(entries, overwrite)
        if added:
            self._dirty = True
        return added

    def save(self, path: str | Path | None = None) -> Path | None:
        """Write every mapping to `path` (or the configured one) atomically, encrypted unless `encrypt` is
        off. Returns the path, or None when there is none."""
        target = Path(path) if path is not None else self.path
        if target is None:
            return None
        with self._save_lock:
            was_dirty = self._dirty
            self._dirty = False
            try:
                payload = self.export()
                persist.write_vault_file(target, payload, self._keys if self.encrypt else None)
            except BaseException:
                self._dirty = self._dirty or was_dirty
                raise
        return target

    def load(self, path: str | Path | None = None, *, overwrite: bool = True) -> int:
        """Read a file written by `save` under this key. A wrong key, a tampered or a malformed file raises
        `VaultFileError` and loads nothing."""
        source = Path(path) if path is not None else self.path
        if source is None:
            raise VaultError("no vault path configured")
        data = persist.read_vault_file(source, self._keys, require_encrypted=self.encrypt)
        return self._import_file_data(source, data, overwrite)

    def _import_file_data(self, source: Path, data: Mapping[str, Any], overwrite: bool) -> int:
        """A file's rows, all or nothing; a bad row is a one-line `VaultFileError` naming the file and the row."""
        try:
            return self.import_mappings(data, overwrite=overwrite)
        except VaultError as exc:
            problem = str(exc).removeprefix("bad vault export: ")
            raise persist.VaultFileError(f"vault file {source}: {problem}") from None

    def import_file(self, path: str | Path, key: bytes | str, *, overwrite: bool = False) -> int:
        """Import the mappings of a file written under another key (given here, used once, not kept)."""
        other = VaultKeys.derive(key, None)
        data = persist.read_vault_file(Path(path), other, require_encrypted=self.encrypt)
        return self._import_file_data(Path(path), data, overwrite)

    def maybe_autosave(self) -> Path | None:
        """Save now if `autosave` is on and something changed (called after each response pass)."""
        if self.autosave and self._dirty and self.path is not None:
            return self.save()
        return None

    def close(self) -> None:
        """Save unsaved changes (when there is a file) and release the store."""
        try:
            if self._dirty and self.path is not None:
                self.save()
        finally:
            _OPEN_VAULTS.discard(self)
            self.store.close()

    def __enter__(self) -> TokenVault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def canonical_entity(entity: str, value: str) -> str | None:
    """The entity a value is issued under. Addresses are classified by value (so `ip_address` and `private_ip`
    give one token), special ones give None (never tokenised); a numeric or GUID `cloud_account` is
    formatted as what it is."""
    if entity in IP_ENTITIES:
        kind = ip_entity(value)
        if kind is None:
            return entity
        return None if kind.startswith("special") else kind
    if entity == "cloud_account":
        return formats.cloud_account_like(value) or entity
    return entity
