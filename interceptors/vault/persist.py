"""Vault files: AES-256-GCM under the vault's file sub-key, written atomically and privately.

An encrypted file is JSON: `{"format", "encrypted": true, "key_id", "nonce", "data"}`, where `data` is the
export (with real values) sealed by AES-GCM with a fresh 96-bit nonce; the format and key id are bound as
associated data, so editing any byte of the file makes it fail to open. A file written with `encrypt: false`
is the plain export (`{"format", "encrypted": false, "key_id", "entries"}`).

Writes go to a temporary file in the same directory (created 0600), are flushed and fsynced, then renamed
over the target, and the directory is fsynced: a crash leaves the old file or the new one, never half of
one. Missing parent directories are created 0700.
"""

from __future__ import annotations

import base64
import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import InterceptorsError
from .keys import VaultKeys

FILE_FORMAT = "mcp-interceptors-vault/1"
MAX_FILE_BYTES = 1 << 30


class VaultFileError(InterceptorsError, ValueError):
    """A vault file that cannot be used (wrong key, tampered, malformed). Nothing was loaded."""


def _aad(key_id: str) -> bytes:
    return f"{FILE_FORMAT}\x00{key_id}".encode()


def seal_document(payload: dict[str, Any], keys: VaultKeys | None) -> bytes:
    plain = orjson.dumps(payload)
    if keys is None:
        return orjson.dumps({**payload, "encrypted": False})
    nonce = os.urandom(12)
    sealed = AESGCM(keys.subkey("file-encryption")).encrypt(nonce, plain, _aad(keys.key_id))
    document = {
        "format": FILE_FORMAT,
        "encrypted": True,
        "key_id": keys.key_id,
        "nonce": base64.b64encode(nonce).decode(),
        "data": base64.b64encode(sealed).decode(),
    }
    return orjson.dumps(document)


def open_document(raw: bytes, keys: VaultKeys, *, require_encrypted: bool = False) -> dict[str, Any]:
    """The export inside a vault file (decrypted and authenticated when it is encrypted).

    `require_encrypted` (a vault with `encrypt: true`): a plain file is refused. Anyone who can write the file
    could otherwise swap the sealed file for a plain one and choose the real values the upstream receives."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise VaultFileError("not a vault file (not JSON)") from None
    if not isinstance(document, dict) or document.get("format") != FILE_FORMAT:
        raise VaultFileError(f"not a vault file (expected format {FILE_FORMAT!r})")
    if document.get("encrypted") is not True:
        if require_encrypted:
            raise VaultFileError("the vault file is not encrypted, and this vault has encrypt: true (refused)")
        if not isinstance(document.get("entries"), list):
            raise VaultFileError("a plain vault file needs an entries list")
        return {"format": FILE_FORMAT, "key_id": document.get("key_id"), "entries": document["entries"]}
    file_key = document.get("key_id")
    if not isinstance(file_key, str) or file_key != keys.key_id:
        shown = file_key if isinstance(file_key, str) and len(file_key) <= 16 and file_key.isalnum() else "?"
        raise VaultFileError(
            f"vault file authentication failed (wrong key or tampered file): it names key {shown}, "
            f"the key in use is {keys.key_id}"
        )
    try:
        nonce = base64.b64decode(document["nonce"], validate=True)
        sealed = base64.b64decode(document["data"], validate=True)
    except (KeyError, TypeError, ValueError):
        raise VaultFileError("vault file authentication failed (wrong key or tampered file)") from None
    if len(nonce) != 12:
        raise VaultFileError("vault file authentication failed (wrong key or tampered file)")
    try:
        plain = AESGCM(keys.subkey("file-encryption")).decrypt(nonce, sealed, _aad(keys.key_id))
    except InvalidTag:
        raise VaultFileError("vault file authentication failed (wrong key or tampered file)") from None
    try:
        inner = orjson.loads(plain)
    except orjson.JSONDecodeError:
        raise VaultFileError("vault file holds no entries list") from None
    if not isinstance(inner, dict) or not isinstance(inner.get("entries"), list):
        raise VaultFileError("vault file holds no entries list")
    return {"format": FILE_FORMAT, "key_id": keys.key_id, "entries": inner["entries"]}


def make_private_dirs(directory: Path) -> None:
    """Create missing directories 0700 (whatever the umask); existing ones are left as they are."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        os.chmod(path, 0o700)


def atomic_write(path: Path, data: bytes) -> None:
    """Temp file (0600) in the same directory → write → fsync → rename → fsync the directory."""
    directory = path.parent if str(path.parent) else Path(".")
    make_private_dirs(directory)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_vault_file(path: Path, payload: dict[str, Any], keys: VaultKeys | None) -> None:
    atomic_write(path, seal_document(payload, keys))


def check_private(path: Path, mode: int) -> None:
    """A vault file holds real values: readable or writable by group or others, it is refused (fix: chmod 600)."""
    if mode & 0o077:
        raise VaultFileError(
            f"vault file {path}: mode {stat.S_IMODE(mode):04o} lets group or others read or write it (refused; "
            f"chmod 600 it after checking that nobody changed it)"
        )


def read_vault_file(path: Path, keys: VaultKeys, *, require_encrypted: bool = False) -> dict[str, Any]:
    """The export in a vault file. Every problem is a one-line `VaultFileError` naming the file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise VaultFileError(f"vault file {path}: cannot read it ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        check_private(path, info.st_mode)
        if info.st_size > MAX_FILE_BYTES:
            raise VaultFileError(f"vault file {path}: too large")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read()
    except OSError as exc:
        raise VaultFileError(f"vault file {path}: cannot read it ({exc.strerror})") from None
    finally:
        os.close(fd)
    try:
        return open_document(raw, keys, require_encrypted=require_encrypted)
    except VaultFileError as exc:
        raise VaultFileError(f"vault file {path}: {exc}") from None
