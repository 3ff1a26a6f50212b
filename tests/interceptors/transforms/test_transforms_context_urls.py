"""Context signals from issue 29's held-out tool outputs and gitleaks' literal false positives: a URL's host and
fixed path segments (the entropy fallback's run used to start in the host: `…stripe.` + `me/regulatory-receipt/…`),
public document ids in URLs, signatures after their label, vendor prefixes in the other case, Go test names,
messages after a credential's name, destructuring targets, quoted snake_case names under a key's label, and
client idempotency tokens. Each benign shape passes unchanged through the standard pipeline, and the secret next
to it, or in its place, is still caught. The values are made here for the tests (random runs from seeded draws)."""

from __future__ import annotations

import json
import random
import string

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from interceptors.transforms.entities import looks_random
from tests.interceptors.transforms.test_transforms_context_public import _run, _text_out

_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "_-"


def _token(seed: int, size: int = 32, alphabet: str = _ALNUM) -> str:
    """A run with the statistics of random text (drawn until the entropy fallback would call it random)."""
    rng = random.Random(seed)
    while True:
        token = "".join(rng.choice(alphabet) for _ in range(size))
        if looks_random(token):
            return token


_LABEL = st.from_regex(r"[a-z][a-z0-9]{1,10}(?:-{1,2}[a-z0-9]{1,8}){0,2}", fullmatch=True)
_HOST = st.builds(lambda labels, tld: ".".join([*labels, tld]), st.lists(_LABEL, min_size=1, max_size=4),
                  st.sampled_from(["com", "me", "io", "net", "dev"]))  # fmt: skip
_FIXED = st.from_regex(r"[a-z]{1,12}(?:-[a-z]{1,12}){0,2}|v[0-9]", fullmatch=True)
_OPAQUE = st.text(alphabet=_URLSAFE, min_size=40, max_size=140)


# --- a URL's host and fixed path ------------------------------------------------------------------------------


def test_a_stripe_regulatory_receipt_url_in_an_api_object_is_left_alone() -> None:
    receipt = "CBQaFwoVYWNjdF8x" + _token(1, 120, _URLSAFE)  # base64url of a protobuf naming the account
    obj = {
        "amount": 1000,
        "financial_account": "fa_1Pgc7BB7WZ01zgkWxDkCj857",
        "hosted_regulatory_receipt_url": f"https://sangeekp-15t6ai--agrippa-mydev.dev.stripe.me/regulatory-receipt/{receipt}",
        "id": "credrev_1Pgc7BB7WZ01zgkWo52rTmNq",
        "object": "treasury.credit_reversal",
    }
    text = json.dumps(obj, indent=2)
    assert _text_out(text) == text
    structured, report = _run({"content": [], "structuredContent": obj})
    assert structured["structuredContent"] == obj
    assert report.get("spared", {}).get("public_document")


@settings(max_examples=60, deadline=None)
@given(_HOST, st.lists(_FIXED, min_size=0, max_size=2), st.sampled_from(
    ["receipts/payment", "regulatory-receipt", "receipts", "invoices", "document/d", "spreadsheets/d",
     "file/d", "forms/d/e", "drive/folders"]), _OPAQUE)  # fmt: skip
def test_an_opaque_segment_after_a_public_document_path_is_left_alone(
    host: str, fixed: list[str], document: str, opaque: str
) -> None:
    path = "/".join([*fixed, document, opaque])
    text = f'{{"url": "https://{host}/{path}", "ok": true}}'
    assert _text_out(text) == text


@settings(max_examples=60, deadline=None)
@given(_HOST, st.lists(st.from_regex(r"[a-z]{3,12}|v[0-9]", fullmatch=True), max_size=2), st.integers(0, 2**32))
def test_a_random_path_segment_is_redacted_from_the_segment_on(host: str, fixed: list[str], seed: int) -> None:
    token = _token(seed)
    # the fallback reads the run from the host's last label on: where that run reads as a path as a whole (mostly
    # words between separators, `com/hooks/catch/<token>`), it finds nothing, as before the run was cut at the host
    assume(looks_random("/".join([host.rsplit(".", 1)[1], *fixed, token])))
    prefix = "/".join([f"https://{host}", *fixed]) + "/"
    out = _text_out(f"webhook: {prefix}{token}\n")
    assert token not in out
    assert out.startswith(f"webhook: {prefix}")  # the host and the fixed segments stay byte for byte


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(16, 23))
def test_a_short_path_token_stays_redacted_as_it_was(seed: int, size: int) -> None:
    # letters only, 16 to 23 characters: the fallback reads it as random only with `com/v1/` glued on; the cut keeps
    # it redacted (without the host)
    rng = random.Random(seed)
    token = "".join(rng.choice(string.ascii_letters) for _ in range(size))
    assume(any(c.islower() for c in token) and any(c.isupper() for c in token))
    out = _text_out(f"GET https://api.example.com/v1/{token} now")
    assert out.startswith("GET https://api.example.com/v1/")
    if looks_random("com/v1/" + token):
        assert token not in out


@settings(max_examples=40, deadline=None)
@given(_HOST, st.integers(0, 2**32))
def test_a_token_as_a_urls_user_or_in_its_query_is_still_caught(host: str, seed: int) -> None:
    token = _token(seed)
    user = _text_out(f"git clone https://{token}@{host}/org/repo.git")
    assert token not in user and user.startswith("git clone https://")  # the `//` is kept
    assert token not in _text_out(f"GET https://{host}/download?key={token}")


def test_a_random_host_label_is_a_host_name() -> None:
    label = _token(7, 24, string.ascii_lowercase + string.ascii_uppercase + string.digits)
    text = f"tunnel ready at https://{label}.tunnel.example.com/\n"
    assert _text_out(text) == text


def test_a_google_document_url_is_left_alone() -> None:
    text = "Spec: https://docs.google.com/document/d/1W7KCxOxP-1Fy5EyF2lbJGE2WuKmu5v0suYqoHas1jRM/edit"
    assert _text_out(text) == text


# --- signatures, case-changed prefixes, code names ------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet=_URLSAFE, min_size=16, max_size=120), min_size=1, max_size=5),
       st.sampled_from(["CloudFront-Signature: ", "X-Amz-Signature=", "signature: ", '"Signature": "']))  # fmt: skip
def test_a_value_after_a_signature_label_is_left_alone(parts: list[str], label: str) -> None:
    text = f"// {label}{'~'.join(parts)}\n"
    assert _text_out(text) == text


def test_a_key_beside_a_signature_is_still_caught() -> None:
    signature, key = _token(11, 96, _URLSAFE), _token(12)
    out = _text_out(f"CloudFront-Signature: {signature}\napi_key = {key}\n")
    assert signature in out and key not in out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32))
def test_an_upper_cased_copy_of_a_google_api_key_is_not_a_key(seed: int) -> None:
    key = "AIza" + _token(seed, 35, _URLSAFE)
    assume(any(c.isalpha() for c in key[4:]))
    copy = key.upper()
    assert _text_out(copy) == copy
    assert key not in _text_out(key)  # the key itself, as Google issues it


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["New", "With", "Entropy", "Parse", "Large", "Input", "Monotonic", "Reader",
                                 "String", "Encode", "Decode", "Random", "Bytes", "Compare", "Time"]),
                min_size=2, max_size=6),
       st.sampled_from(["Benchmark", "Test", "Fuzz", "Example"]), st.sampled_from(["1", "4", "8", "16"]))  # fmt: skip
def test_a_go_test_name_with_its_sub_test_is_a_name(words: list[str], kind: str, procs: str) -> None:
    cut = max(1, len(words) // 2)
    name = f"{kind}{''.join(words[:cut])}/{''.join(words[cut:]) or 'Case'}-{procs}"
    text = (
        "diff --git a/README.md b/README.md\n@@ -50,6 +50,8 @@\n"
        f"+{name}            20000000      65.8 ns/op     243.28 MB/s   16 B/op   1 allocs/op\n"
    )
    assert _text_out(text) == text


# --- labelled values that are messages, names or code -----------------------------------------------------------


def test_an_error_message_that_starts_with_a_credentials_name_is_left_alone() -> None:
    for code in (
        '            raise TypeError("pwd: expected bytes, got %s" % type(pwd).__name__)\n',
        'log.error("password: must be at least 12 characters")\n',
        "token: invalid or expired\n",
    ):
        assert _text_out(code) == code, code


def test_a_password_in_prose_is_still_caught() -> None:
    for line, secret in (("password: hunter2x for the server\n", "hunter2x"),
                         ("password: letmein for the server\n", "letmein")):  # fmt: skip
        assert secret not in _text_out(line), line


@settings(max_examples=40, deadline=None)
@given(st.from_regex(r"[a-z][a-z_]{1,12}", fullmatch=True), st.sampled_from(["token", "password", "secret", "key"]),
       st.from_regex(r"[a-z_][a-z_]{1,20}(?:\.[a-z_]{1,12}){0,2}", fullmatch=True),
       st.sampled_from([" = ", " := "]))  # fmt: skip
def test_a_name_unpacked_into_several_is_code(first: str, label: str, value: str, operator: str) -> None:
    assume(len(value) >= 8)
    text = f"        {first}, {label}{operator}{value}\n        use({label})\n"
    assert _text_out(text) == text


def test_a_quoted_secret_unpacked_into_several_is_still_caught() -> None:
    secret = _token(21)
    assert secret not in _text_out(f'user, token = "admin", "{secret}"\n')
    assert secret not in _text_out(f'a, token = "{secret}"\n')


@settings(max_examples=40, deadline=None)
@given(st.lists(st.from_regex(r"[a-z]{2,12}", fullmatch=True), min_size=2, max_size=4),
       st.sampled_from(["apiKey", "api_key", "token", "key", "secret"]))  # fmt: skip
def test_a_quoted_snake_case_name_under_a_key_label_is_a_name(words: list[str], label: str) -> None:
    # a JSON example inside an OpenAPI YAML document, as in the USPTO data set API's description (parsed JSON goes
    # by its keys' rules: every string under an `apiKey` key is replaced there)
    name = "_".join(words)
    example = json.dumps({"apis": [{label: name, "apiVersionNumber": "v1"}]}, indent=4)
    text = "      example:\n" + "\n".join("        " + line for line in example.splitlines()) + "\n"
    assert _text_out(text) == text


def test_a_quoted_snake_case_password_is_still_caught() -> None:
    assert "correct_horse_battery" not in _text_out('"password": "correct_horse_battery"')
    assert "correct_horse_battery" not in _text_out("db_passwd = 'correct_horse_battery'")


def test_an_ec2_client_token_is_an_idempotency_token() -> None:
    response = {
        "ReservedInstancesListings": [
            {"ClientToken": "myIdempToken1", "Status": "active", "CreateDate": "2012-07-17T17:11:09.449Z"}
        ],
        "ClientRequestToken": "EXAMPLE1-90ab-cdef-fedc-ba987EXAMPLE",
    }
    text = json.dumps(response, indent=2)
    assert _text_out(text) == text
    out, _ = _run({"content": [], "structuredContent": response})
    assert out["structuredContent"] == response


def test_a_secret_under_a_client_token_key_is_still_caught() -> None:
    secret = "sk_live_" + _token(31, 24)
    out, _ = _run({"content": [], "structuredContent": {"ClientToken": secret}})
    assert secret not in json.dumps(out)
