"""How bench.guard_channels builds its public positives: which items it sets apart and why (`SET_ASIDE`), on lines
written here; and the CredSweeper documentation samples' `FALSE` sections (`public_corpus.credsweeper_false_lines`)
on a small tree imitating its layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.guard_channels import SET_ASIDE, public_secrets, set_aside
from bench.public_corpus import credsweeper_false_lines


@pytest.mark.parametrize(
    ("family", "text", "reported", "reason"),
    [
        ("JWK", '"kty": "RSA",', '"kty": "RSA"', "elsewhere"),  # the key's `d` is on another line
        ("gcp-service-account", '"type": "service_account"', "", "elsewhere"),
        ("Token", '<token name="token" comment="the value is on the next line">', "", "elsewhere"),
        ("Google Multi", "123456789012-0123456789abcdefghijklmnopqrstuv.apps.googleusercontent.com", "", "id"),
        ("Salesforce Credentials", "t_client_id: 3MVGb3j9DpwrLFc90tWIy.nh7B89Yzeymd", "", "id"),
        ("Twilio Credentials", "AC4d2f64e2a108cd72f648b1984c3b5a13", "AC4d2f64e2a108cd72f648b1984c3b5a13", "id"),
        ("generic-api-key", 'aws_key_id = "AKIAQWERTYUIOPASDFGH"', "", ""),  # the id is the value, not the line
        ("Token", '<token name="token">kV46hPnEYhCWFnB85r5NrprAxggzgb6G</token>', "", ""),  # the value is here
        ("Token", '<token name="token" comment="x">', "kV46hPnEYhCWFnB85r5N", ""),  # the scanner gave a value
        ("JWK", '"kty": "RSA", "d": "kV46hPnEYhCWFnB85r5NrprAxggzgb6G"', "", ""),  # more than the type
        ("Google Multi", '"id":"1-abc.apps.googleusercontent.com","secret":"GOCSPX-kV46hPnEYhCWFnB85r5N"', "", ""),
    ],
)
def test_set_aside_only_lines_without_a_secret_and_ids(family: str, text: str, reported: str, reason: str) -> None:
    value = reported or text
    assert set_aside(family, text, value, reported) == reason
    assert reason == "" or reason in SET_ASIDE


def _sample_tree(root: Path) -> None:
    samples = root / "tests" / "samples"
    samples.mkdir(parents=True)
    (samples / "doc_pairs").write_text('token:Ab3dEf6hIj9\n\nFALSE:\n"key":"some_file_0"\n\nsecret = x\n')
    (samples / "doc_hash_false").write_text("pw:Ab3dEf6hIj9\n# FALSE\nid:a@b.c,pw:NOTHING1!\n")
    (samples / "other").write_text("FALSE:\npassword = Ab3dEf6hIj9\n")  # not a documentation sample


def test_credsweeper_false_sections_are_read_from_the_samples(tmp_path: Path) -> None:
    _sample_tree(tmp_path)
    assert credsweeper_false_lines(tmp_path) == {("doc_pairs", 4), ("doc_pairs", 6), ("doc_hash_false", 3)}
    assert credsweeper_false_lines(tmp_path / "missing") == set()


def test_public_secrets_set_false_lines_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An item under a sample's `FALSE` header is counted apart when the checkout `SOURCES.json` names is there."""
    checkout = tmp_path / "CredSweeper"
    _sample_tree(checkout)
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    items = [
        {"id": "cs:doc_pairs:1", "family": "Token", "label": "secret", "text": "token:Ab3dEf6hIj9",
         "secret": "Ab3dEf6hIj9", "split": "heldout"},
        {"id": "cs:doc_pairs:4", "family": "DOC_CREDENTIALS", "label": "secret", "text": '"key":"some_file_0"',
         "secret": "some_file_0", "split": "heldout"},
    ]  # fmt: skip
    (corpora / "credsweeper_pos.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))
    (corpora / "SOURCES.json").write_text(json.dumps({"credsweeper": str(checkout)}))
    monkeypatch.setenv("MCPI_CORPORA", str(corpora))
    asides = {secret.spelled: secret.aside for secret in public_secrets(split="heldout")}
    assert asides == {"token:Ab3dEf6hIj9": "", '"key":"some_file_0"': "false"}
    (corpora / "SOURCES.json").write_text(json.dumps({"credsweeper": str(tmp_path / "gone")}))
    assert {secret.aside for secret in public_secrets(split="heldout")} == {""}
