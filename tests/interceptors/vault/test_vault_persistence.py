"""Vault files on real disks: round trips, wrong keys, tampering, permissions, atomic and crash-safe writes,
imports across keys, saving at shutdown."""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from interceptors.vault import TokenVault, VaultError, VaultFileError

KEY = "persistence-key-ABCDEF-0123"
OTHER = "another-key-ZYXWVU-9876"
VALUES = [
    ("123456789012", "aws_account_id"),
    ("arn:aws:iam::123456789012:role/deployer", "aws_arn"),
    ("10.20.30.40", "ip_address"),
    ("alice@corp.example.com", "email"),
    ("prod-payments-db", "resource_name"),
]


def fill(vault: TokenVault) -> dict[str, str]:
    return {value: vault.tokenize(value, entity) for value, entity in VALUES}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_round_trip_encrypted_private_and_auto_loaded(tmp_path: Path) -> None:
    target = tmp_path / "state" / "deep" / "vault.json"
    first = TokenVault(KEY, key_env=None, path=target)
    tokens = fill(first)
    assert first.dirty
    assert first.save() == target
    assert not first.dirty
    assert mode(target) == 0o600
    assert mode(target.parent) == 0o700 and mode(target.parent.parent) == 0o700
    raw = target.read_text()
    for value, _ in VALUES:
        assert value not in raw
    document = json.loads(raw)
    assert document["encrypted"] is True and document["key_id"] == first.key_id
    assert not [p for p in target.parent.iterdir() if p.name != "vault.json"]  # no temp files left

    second = TokenVault(KEY, key_env=None, path=target)  # loads at construction
    assert not second.dirty
    for value, token in tokens.items():
        assert second.reverse(token) == value
    assert second.stats()["entries"] == first.stats()["entries"]


def test_wrong_key_and_tampering_raise_and_load_nothing(tmp_path: Path) -> None:
    target = tmp_path / "vault.json"
    original = TokenVault(KEY, key_env=None, path=target)
    fill(original)
    original.save()

    with pytest.raises(VaultFileError, match="wrong key or tampered file") as excinfo:
        TokenVault(OTHER, key_env=None, path=target)
    assert OTHER not in str(excinfo.value) and KEY not in str(excinfo.value)

    bystander = TokenVault(OTHER, key_env=None)
    bystander.tokenize("keep-me", "resource_name")
    with pytest.raises(VaultFileError):
        bystander.load(target)
    assert bystander.stats()["entries"] == 1

    document = json.loads(target.read_text())
    sealed = bytearray(base64.b64decode(document["data"]))
    sealed[len(sealed) // 2] ^= 0x01
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps({**document, "data": base64.b64encode(bytes(sealed)).decode()}))
    tampered.chmod(0o600)
    victim = TokenVault(KEY, key_env=None)
    with pytest.raises(VaultFileError, match="wrong key or tampered file"):
        victim.load(tampered)
    relabelled = tmp_path / "relabelled.json"
    relabelled.write_text(json.dumps({**document, "key_id": "000000000000"}))
    relabelled.chmod(0o600)
    with pytest.raises(VaultFileError):
        victim.load(relabelled)
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(target.read_bytes()[:-10])
    truncated.chmod(0o600)
    with pytest.raises(VaultFileError):
        victim.load(truncated)
    assert victim.stats()["entries"] == 0


def test_plain_files_and_autosave(tmp_path: Path) -> None:
    target = tmp_path / "plain.json"
    vault = TokenVault(KEY, key_env=None, path=target, encrypt=False, autosave=True)
    token = vault.tokenize("prod-payments-db", "resource_name")
    assert vault.maybe_autosave() == target
    assert "prod-payments-db" in target.read_text() and mode(target) == 0o600
    assert vault.maybe_autosave() is None  # nothing new
    assert TokenVault(KEY, key_env=None, path=target, encrypt=False).reverse(token) == "prod-payments-db"
    assert TokenVault(KEY, key_env=None).save() is None  # no path, nothing to do


def test_encrypt_true_refuses_a_plain_file_the_attacker_wrote(tmp_path: Path) -> None:
    """A plain file in place of the sealed one would choose the real values the upstream receives."""
    target = tmp_path / "vault.json"
    sealed = TokenVault(KEY, key_env=None, path=target)
    token = sealed.tokenize("prod-payments-db", "resource_name")
    sealed.save()
    forged = {"format": "mcp-interceptors-vault/1", "encrypted": False, "key_id": sealed.key_id,
              "entries": [["global", "resource_name", "attacker-db", token, 1.0, 1.0]]}  # fmt: skip
    target.write_text(json.dumps(forged))
    target.chmod(0o600)
    with pytest.raises(VaultFileError) as refused:
        TokenVault(KEY, key_env=None, path=target)
    assert str(refused.value) == (
        f"vault file {target}: the vault file is not encrypted, and this vault has encrypt: true (refused)"
    )
    assert TokenVault(KEY, key_env=None, path=target, encrypt=False).reverse(token) == "attacker-db"  # chosen so


def test_group_or_world_readable_files_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "vault.json"
    TokenVault(KEY, key_env=None, path=target).save()
    for loose in (0o644, 0o640, 0o604, 0o660, 0o602):
        target.chmod(loose)
        with pytest.raises(VaultFileError) as refused:
            TokenVault(KEY, key_env=None, path=target)
        assert f"mode {loose:04o} lets group or others read or write it" in str(refused.value)
        assert str(target) in str(refused.value)
    target.chmod(0o600)
    TokenVault(KEY, key_env=None, path=target)
    target.chmod(0o400)
    TokenVault(KEY, key_env=None, path=target)


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ([["global", "resource_name", "a", "res-1", 1.0, 1.0], ["global", "x"]], "row 2 (entries[1]): must be"),
        ([["global", "resource_name", 5, "res-1", 1.0, 1.0]], "row 1 (entries[0]): namespace, entity, value"),
        ([["global", "e", "a", "res-1", 1.0, 1.0]] * 2 + [["global", "e", "a", "t", "x", 1]], "row 3 (entries[2])"),
        ([None], "row 1 (entries[0]): must be"),
        ("not a list", "a plain vault file needs an entries list"),
    ],
)
def test_a_malformed_file_is_one_line_naming_the_file_and_the_row(tmp_path: Path, rows: Any, problem: str) -> None:
    target = tmp_path / "vault.json"
    target.write_text(json.dumps({"format": "mcp-interceptors-vault/1", "encrypted": False, "entries": rows}))
    target.chmod(0o600)
    with pytest.raises(VaultFileError) as refused:
        TokenVault(KEY, key_env=None, path=target, encrypt=False)
    message = str(refused.value)
    assert message.startswith(f"vault file {target}: ") and problem in message and "\n" not in message
    for raw in (b"", b"{", b"[]", b'{"format": "mcp-interceptors-vault/1", "encrypted": true}'):
        target.write_bytes(raw)
        with pytest.raises(VaultFileError) as broken:
            TokenVault(KEY, key_env=None, path=target)
        assert str(broken.value).startswith(f"vault file {target}: ")


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "vault.json"
    vault = TokenVault(KEY, key_env=None, path=target)
    fill(vault)
    vault.save()
    before = target.read_bytes()
    vault.tokenize("a-new-name", "resource_name")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk went away")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk went away"):
        vault.save()
    monkeypatch.undo()
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vault.json"]
    assert vault.dirty  # still unsaved
    vault.save()
    assert TokenVault(KEY, key_env=None, path=target).lookup("a-new-name", "resource_name") is not None


CRASHER = textwrap.dedent(
    """
    import sys
    from interceptors.vault import TokenVault
    vault = TokenVault(sys.argv[2], key_env=None, path=sys.argv[1])
    n = 0
    print("ready", flush=True)
    while True:
        for _ in range(200):
            vault.tokenize(f"name-{n}", "resource_name")
            n += 1
        vault.save()
    """
)


def test_a_killed_writer_never_leaves_a_broken_file(tmp_path: Path) -> None:
    target = tmp_path / "vault.json"
    TokenVault(KEY, key_env=None, path=target).save()
    counts: list[int] = []
    for delay in (0.15, 0.3, 0.45):
        child = subprocess.Popen(
            [sys.executable, "-c", CRASHER, str(target), KEY],
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[3],
        )
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        reloaded = TokenVault(KEY, key_env=None, path=target)  # the old file or a newer one, never half of one
        count = reloaded.stats()["entries"]
        assert count % 200 == 0 and mode(target) == 0o600
        counts.append(count)
    assert counts[-1] > 0  # the writer did get files out before it was killed


def test_export_and_import_across_keys(tmp_path: Path) -> None:
    old = TokenVault(KEY, key_env=None, path=tmp_path / "old.json")
    tokens = fill(old)
    old.save()
    new = TokenVault(OTHER, key_env=None)
    assert new.import_mappings(old.export()) == len(old.export()["entries"])
    for value, token in tokens.items():
        assert new.reverse(token) == value
    # Values keep the tokens already handed out, even under the new key.
    assert new.tokenize("prod-payments-db", "resource_name") == tokens["prod-payments-db"]
    assert new.import_mappings(old.export()) == 0  # nothing new without overwrite

    third = TokenVault(OTHER, key_env=None)
    assert third.import_file(tmp_path / "old.json", KEY) > 0
    assert third.reverse(tokens["10.20.30.40"]) == "10.20.30.40"
    with pytest.raises(VaultFileError):
        TokenVault(OTHER, key_env=None).import_file(tmp_path / "old.json", "not-the-key")
    with pytest.raises(VaultError):
        new.import_mappings({"format": "something-else", "entries": []})
    with pytest.raises(VaultError):
        new.import_mappings({"format": "mcp-interceptors-vault/1", "entries": [["only", "three", "fields"]]})


SHUTDOWN = textwrap.dedent(
    """
    import sys
    from interceptors.vault import TokenVault
    vault = TokenVault(sys.argv[2], key_env=None, path=sys.argv[1])
    print(vault.tokenize("saved-at-exit", "resource_name"))
    """
)


def test_unsaved_changes_are_saved_at_close_and_at_exit(tmp_path: Path) -> None:
    closing = tmp_path / "close.json"
    with TokenVault(KEY, key_env=None, path=closing) as vault:
        token = vault.tokenize("saved-on-close", "resource_name")
    assert TokenVault(KEY, key_env=None, path=closing).reverse(token) == "saved-on-close"

    at_exit = tmp_path / "exit.json"
    out = subprocess.run(
        [sys.executable, "-c", SHUTDOWN, str(at_exit), KEY],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert TokenVault(KEY, key_env=None, path=at_exit).reverse(out.stdout.strip()) == "saved-at-exit"
