"""Context that says "not a secret", JSON texts rewritten in place, and the seam between text blocks.

The benign corpus (`interceptors.testing.realistic`) is output a model reads every day that a shape-only
scanner takes for secrets; every item must come out of the standard pipeline unchanged. Next to each signal, a
real secret in the same surroundings must still be caught, so precision is not bought with recall.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.testing.benign import altered
from interceptors.testing.realistic import CATEGORIES, realistic_corpus
from interceptors.transforms import STANDARD_TRANSFORMS, Redactor, TransformContext, assemble_output
from interceptors.transforms.channels import transform_tool_result
from interceptors.transforms.context import SIGNALS_BY_NAME, Context, decoded_binary, describes
from interceptors.transforms.jsonspans import rewrite

PIPELINE = assemble_output(STANDARD_TRANSFORMS)
GHP = "gh" + "p_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"
RANDOM = "Zq8vK2mX9pL4rT7wB3nF6hJ1cD5sG0aY"  # 32 random-looking characters (the entropy fallback's prey)


def _standard(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ctx = TransformContext()
    out, _ = transform_tool_result(result, PIPELINE, ctx)
    return out, ctx.report


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _out_text(text: str) -> str:
    out, _ = _standard(_text(text))
    return str(out["content"][0]["text"])


CORPUS = realistic_corpus(3)


@pytest.mark.parametrize("category", CATEGORIES)
def test_realistic_benign_outputs_pass_unchanged(category: str) -> None:
    items = [item for name, item in CORPUS if name == category]
    assert items
    changed = [item for item in items if altered(item, _standard(item)[0])]
    assert not changed, f"{len(changed)} of {len(items)} {category} item(s) altered: {json.dumps(changed[0])[:400]}"


# --- each signal spares the benign case and still catches the secret next to it ------------------------------


@pytest.mark.parametrize(
    ("benign", "reason"),
    [
        ("github.com/x/y v1.2.3 h1:" + "qJR7PLgE5ItYOVNqHrO2ZPR/N6EVDXgdQxJHQ28cqs4=", "digest"),
        ("pkg/a.py,sha256=" + "qJR7PLgE5ItYOVNqHrO2ZPR_N6EVDXgdQxJHQ28cqs4,120", "digest"),
        ("<HostId>" + "ecOTwuxNZrHtwOYp5MTHc362A9u+dTrN8VSJv8FENf2yHcMFjTLs+7UvBZSOyXCXELP6cy6it94=</HostId>",
         "request_id"),
        ("x-amz-id-2: wDp88oD2aYdn/zBgVTk82dwvJ+AyrK3axASf+IieEfvcfLMxQl2U56YArCXhaBIoR6yH8wQHDPU=", "request_id"),
        ("charge ch_" + "ZztE3kdFGkZHZsZePAnyBCFf" + " settled", "public_id"),
        ("job 01BQZ4M8ZNKV18C7XY6N68DSBZ queued", "ulid"),
        ("secret = secret.secret_value", "code_identifier"),
        ("    password = saslprep(password)", "code_identifier"),
        ("API_KEY=your-api-key-here", "placeholder"),
        ("STRIPE_SECRET_KEY=sk_test_...", "placeholder"),
    ],
)  # fmt: skip
def test_signal_spares_and_reports_its_reason(benign: str, reason: str) -> None:
    ctx = TransformContext()
    out, _ = transform_tool_result(_text(benign), PIPELINE, ctx)
    assert out["content"][0]["text"] == benign
    assert ctx.report.get("spared", {}).get(reason, 0) >= 1, ctx.report


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('password = "secret.secret_value"', "secret.secret_value"),  # quoted: a string literal, not code
        ("password = Xk9#mQ2$vB7w", "Xk9#mQ2$vB7w"),
        ("API_KEY=" + RANDOM, RANDOM),
        ("token: " + GHP + " # h1:", GHP),  # a vendor format is never spared by a digest label
        ("client_secret=pi_" + "mPprP0uMwPnK7TCUGtWzCafo" + "_secret_" + "Wx2Yz0Uv1St9Qr8", "_secret_"),
        ("DATABASE_URL=postgres://app:" + "Tr0ub4dor-3x@db.internal:5432/app", "Tr0ub4dor-3x"),
    ],
)
def test_secrets_next_to_the_signals_are_still_caught(text: str, secret: str) -> None:
    assert secret not in _out_text(text)


def test_public_blocks_are_spared_but_a_private_key_beside_them_is_not() -> None:
    body = "\n".join("MIIDdzCCAl+gAwIBAgIUe" + "Zq8vK2mX9pL4rT7wB3nF6hJ1cD5sG0aYQk8vK2mX9pL" for _ in range(4))
    cert = f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----"
    key = "-----BEGIN " + "PRIVATE KEY-----\n" + body + "\n-----END PRIVATE KEY-----"
    out, report = _standard(_text(cert + "\n" + key))
    text = out["content"][0]["text"] if out["content"] else ""
    assert "Zq8vK2mX9pL4rT7w" not in text.split("-----END CERTIFICATE-----")[-1]
    assert out["content"] == [] or text.startswith(cert) or report.get("dropped")


def test_context_is_tunable_per_profile() -> None:
    benign = "request_id=NOWp753q5r9dRVWg6WoslNG61i2 status=200 HostId: " + RANDOM
    policy = json.loads(json.dumps(STANDARD_TRANSFORMS))
    policy["transforms"][1]["context"] = False
    ctx = TransformContext()
    off, _ = transform_tool_result(_text(benign), assemble_output(policy), ctx)
    assert off["content"][0]["text"] != benign
    policy["transforms"][1]["context"] = {"request_id": False}
    assert transform_tool_result(_text(benign), assemble_output(policy), TransformContext())[0] != _text(benign)
    assert _out_text(benign) == benign
    with pytest.raises(ValueError, match="unknown signal"):
        Redactor({"context": {"nope": True}})
    assert Context.from_option({name: False for name in SIGNALS_BY_NAME}, "x") is None


def test_schemas_and_security_schemes_describe_and_do_not_hold() -> None:
    assert describes({"type": "http", "scheme": "bearer"}) == "security_scheme"
    assert describes({"type": "string", "minLength": 12, "format": "password"}) == "schema"
    assert describes({"kty": "RSA", "n": RANDOM, "e": "AQAB"}) == "public_jwk"
    assert describes({"kty": "RSA", "n": RANDOM, "e": "AQAB", "d": RANDOM}) is None
    assert describes({"type": "string", "value": "hunter2"}) is None
    spec = {"securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}}
    out, _report = _standard({"content": [], "structuredContent": spec})
    assert out["structuredContent"] == spec
    held = {"bearerAuth": {"token": RANDOM, "note": "x"}}
    out, _ = _standard({"content": [], "structuredContent": held})
    assert RANDOM not in json.dumps(out)


def test_binary_payloads_are_kept_and_text_payloads_still_read() -> None:
    import base64
    import random

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + random.Random(7).randbytes(240)).decode()
    # content blocks' binary data never reaches the redactor (channels.py); an image inside structured data does
    block = {"content": [], "structuredContent": {"thumb": {"type": "image", "data": png, "mimeType": "image/png"}}}
    out, report = _standard(block)
    assert out["structuredContent"] == block["structuredContent"]
    assert report["spared"]["binary_payload"] == 1
    policy = json.loads(json.dumps(STANDARD_TRANSFORMS))
    policy["transforms"][1]["context"] = False
    assert transform_tool_result(block, assemble_output(policy), TransformContext())[0] != block  # what it was
    text = base64.b64encode(f"token: {GHP}\n".encode()).decode()
    assert decoded_binary(png) and not decoded_binary(text)
    out, report = _standard({"content": [], "structuredContent": {"blob": text, "uri": "file:///a.env"}})
    assert "binary_payload" not in report.get("spared", {})
    assert GHP not in json.dumps(out)


# --- a JSON text changes only inside the redacted spans -------------------------------------------------------

_KEYS = st.sampled_from(["name", "password", "api_key", "note", "items", "Token", "x", "db_pass", "id", "secret"])
_PLAIN = st.text(alphabet="abcdefghij klmno-_.", max_size=12)
_SECRETS = st.sampled_from([GHP, "Xk9#mQ2$vB7w-Lp4", "AK" + "IAZ3QK7T2LMN4PXR6W", "hunter2-Secret9"])
_LEAVES = st.one_of(_PLAIN, _SECRETS, st.integers(-5, 5000), st.booleans(), st.none())
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=12,
)
_SKELETON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _skeleton(text: str) -> str:
    """The text with every string literal emptied: its layout, punctuation, numbers and literals."""
    return _SKELETON_STRING.sub('""', text)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=5),
    st.sampled_from([None, 2, 4, "\t"]),
    st.sampled_from([(", ", ": "), (",", ":"), (",", ": ")]),
)
@example({"db": {"password": "hunter2-Secret9", "port": 5432}, "x": [GHP, "ok"]}, 4, (",", ": "))
def test_a_redacted_json_text_changes_only_inside_redacted_strings(
    doc: dict[str, Any], indent: Any, separators: tuple[str, str]
) -> None:
    text = json.dumps(doc, indent=indent, separators=separators, ensure_ascii=False)
    out = _out_text(text)
    if out == text:
        return
    parsed = json.loads(out)
    before, after = _skeleton(text), _skeleton(out)
    # Numbers, booleans and nulls under a sensitive key become redaction markers: the only non-string changes.
    after_normalised = re.sub(r'""', "\x00", after)
    assert before.count("\n") == after.count("\n"), (text, out)
    for literal in ('""',):
        assert after.count(literal) >= before.count(literal)
    assert isinstance(parsed, dict)
    if before.replace('""', "\x00") != after_normalised:
        # only scalars under sensitive keys were turned into strings: strip them and compare again
        scalars = re.compile(r"-?\d+|true|false|null")
        assert scalars.sub("", before).replace('""', "") == scalars.sub("", after).replace('""', ""), (text, out)


def test_rewrite_keeps_layout_and_cuts_dropped_members_with_their_comma() -> None:
    text = '{\n    "a": 1,\n    "b": "x",\n    "c": [1, 2]\n}'
    assert rewrite(text, json.loads(text), {"a": 1, "b": "[R]", "c": [1, 2]}) == text.replace('"x"', '"[R]"')
    assert rewrite(text, json.loads(text), {"a": 1, "c": [1, 2]}) == '{\n    "a": 1,\n    "c": [1, 2]\n}'
    assert rewrite(text, json.loads(text), {"a": 1, "b": "x"}) == '{\n    "a": 1,\n    "b": "x"\n}'
    assert rewrite(text, json.loads(text), {}) == "{\n    \n}"
    dup = '{"a": "x", "a": "y"}'
    assert json.loads(rewrite(dup, json.loads(dup), {"a": "z"})) == {"a": "z"}


# --- the seam between text blocks ------------------------------------------------------------------------------

_PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGExkmSpHy1BMXCLKb3MivaDgRnjuIwIRIrLNhhg4esS1QyVgYR45V5gW6c\n"
    "O0T0ni6wh9xcNp9nvmZq8goemYzS7kZW5nYdqDFAt1kyPEsfDdNg2eS2P4Nd2k\n=Ab12\n-----END PGP PRIVATE KEY BLOCK-----"
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["password ", "password: ", "pw: ", "password=", "set password "]),
    st.text(alphabet="abcdefXYZ0123456789", min_size=6, max_size=14),
    st.sampled_from([_PGP, "bFFHR1BHUFJJVkFURUtFWUJMT0NLLS0tLS0K" * 3, "plain words follow here", GHP + " tail"]),
)
@example("password ", "s3cretVal9", _PGP)
@example("password: ", "s3cretVal9", "LS0tLS1CRUdJTiBQR1AgUFJJVkFURSBLRVkgQkxPQ0stLS0tLQoK")
def test_a_finding_never_runs_from_one_text_block_into_the_next(label: str, value: str, second: str) -> None:
    """Regression (found by the suite's random draws): a block ending in `password VALUE` followed by a block
    holding a base64 PGP private key lost characters from both: the value was read on into the next block."""
    first = "config follows " + label + value
    out, _ = _standard({"content": [{"type": "text", "text": first}, {"type": "text", "text": second}]})
    first_alone, _ = _standard({"content": [{"type": "text", "text": first}]})
    second_alone, _ = _standard({"content": [{"type": "text", "text": second}]})
    # Each block comes out as it does on its own (redacted for its own findings, a base64 private key header
    # included), never with characters taken by a value read on from its neighbour.
    assert out["content"] == first_alone["content"] + second_alone["content"]
    assert out["content"][0]["text"].startswith("config follows " + label.rstrip())


def test_a_secret_split_across_two_blocks_is_still_caught() -> None:
    out, _ = _standard(
        {"content": [{"type": "text", "text": "token " + GHP[:18]}, {"type": "text", "text": GHP[18:] + " rest"}]}
    )
    assert [b["text"] for b in out["content"]] == ["token [REDACTED:api_token]", " rest"]
    out, _ = _standard(
        {"content": [{"type": "text", "text": "password:"}, {"type": "text", "text": "Zx9-kQ2-vB7w ok"}]}
    )
    assert "Zx9-kQ2-vB7w" not in json.dumps(out)


# --- labelled credentials in every common shape ----------------------------------------------------------------

SECRET = "Kq7vR2xW9mTz4LpB"
SHAPES = [
    'System.setProperty("db.password", "{v}");', 'System.setProperty("API_TOKEN","{v}")', "DB_PASSWORD ::= {v}",
    "DB_PASSWORD ?= {v}", "API_KEY := {v}", '$password .= "{v}";', '$config["db_password"] = "{v}";',
    'var dbPassword string = "{v}"', 'const apiToken string = "{v}"', 'dbPassword := "{v}"',
    "<password>\n    {v}\n</password>", "<Password>{v}</Password>", '<add key="ApiKey" value="{v}" />',
    '<entry key="password">{v}</entry>', "pw:{v}", "PW:{v} ID:admin", 'SET PASSWORD FOR root = "{v}"',
    "ALTER USER app WITH PASSWORD '{v}';", "CREATE USER bob IDENTIFIED BY '{v}';", 'SET password "{v}"',
    "curl -su deploy:{v} https://ci.example.com", 'curl -u "deploy:{v}" https://ci.example.com', '"smtp_pass": "{v}"',
    "smtp_pass = {v}", "mysql -uroot -p{v} app", "mysql -u root --password={v}",
    'psql "postgresql://app:{v}@db:5432/app"', "PGPASSWORD={v} psql -h db", "export AWS_SESSION_TOKEN={v}",
    'password: "{v}"', "[db]\npassword = {v}", "db.password={v}", "spring.datasource.password={v}", "X-Api-Key: {v}",
    "Authorization: token {v}", "Authorization: Bearer {v}", "https://api.example.com/v1?api_key={v}&x=1",
    "redis://:{v}@cache:6379/0", "--token {v}", "token={v}", "ConvertTo-SecureString '{v}' -AsPlainText -Force",
    '$env:API_KEY = "{v}"', "set API_KEY={v}", "docker login -u bob -p {v}", "client_secret: {v}",
    "'password' => '{v}',", ':password => "{v}"', "password: !!str {v}", '"passwd":"{v}"', "user=admin password={v}",
    "Password {v}", 'passphrase "{v}"', "sshpass -p {v} ssh host", "echo {v} | docker login --password-stdin",
    "ldap_bind_pw = {v}", "secret_key_base: {v}", 'key = "{v}"', "DJANGO_SECRET_KEY={v}", "private_token: {v}",
]  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_a_labelled_secret_is_caught_in_every_shape(shape: str) -> None:
    assert SECRET not in _out_text(shape.replace("{v}", SECRET))


@pytest.mark.parametrize(
    "code",
    [
        'System.setProperty("db.password", System.getenv("DB_PASSWORD"));',
        "DB_PASSWORD ?= $(shell cat /run/secrets/db)",
        'var dbPassword string = os.Getenv("DB_PASSWORD")',
        "<password>${DB_PASSWORD}</password>",
        "<passwordPolicy>strict</passwordPolicy>",
        "The password is required. Password reset links expire after an hour.",
        "pw: ****",
        "--token-file /run/secrets/token --api-key-env API_KEY",
        "Authorization: token <your token>",
        "docker login -u bob --password-stdin < token.txt",
        "SET PASSWORD = PASSWORD(@new);",
    ],
)
def test_the_new_shapes_leave_code_and_prose_alone(code: str) -> None:
    assert _out_text(code) == code


def test_a_private_jwk_in_json_text_is_refused_by_the_input_guard() -> None:
    """Regression (surfaced by the kit's `refuses_secret_arguments` draws): the guard reads values only, and a JSON
    text parsed into a mapping hid `"d": "…"` from the `jwk_private_key` pattern."""
    from interceptors.transforms.guard import SecretGuard

    jwk = '{"kty": "EC", "crv": "P-256", "d": "1Fh_zm9tbRkRMgSnMJq8Mt3oa94hHBLzA-qfpIYceS5", "x": "abc"}'
    _, found = SecretGuard({"action": "reject"}).findings({"query": json.dumps({"comment": jwk})})
    assert found
