"""The request guard's own rules for argument values (`interceptors/transforms/argvalues.py`): a whole value that is
one random token, random tokens in a short line, a labelled value in a line; each also read decoded; refusals name
the member, never the value."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from interceptors.transforms.argvalues import (
    KNOWN_PREFIXES,
    bare_secret,
    credential_like,
    holds_secret,
    labelled_secret,
    opaque_key,
    paired_secret,
    prefixed_secret,
)
from interceptors.transforms.base import TransformContext
from interceptors.transforms.context import public_object_id
from interceptors.transforms.entities import looks_random
from interceptors.transforms.guard import SecretGuard, SecretsRefused

GUARD = SecretGuard({})
NEUTRAL_KEYS = ("query", "text", "q", "input", "note", "value", "name", "content")
_BASE62 = string.ascii_letters + string.digits


def _token(seed: int, size: int = 40, alphabet: str = _BASE62) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(size))


def _encodings(text: str) -> list[str]:
    return [
        text,
        base64.b64encode(text.encode()).decode(),
        text.encode().hex(),
        "".join(f"%{b:02X}" for b in text.encode()),
        json.dumps({"note": text}),
        json.dumps(json.dumps({"note": text})),
    ]


@given(st.integers(0, 2**32), st.sampled_from(NEUTRAL_KEYS), st.sampled_from(range(6)), st.integers(24, 64))
def test_a_random_token_as_a_whole_value_is_refused_in_any_encoding(
    seed: int, key: str, encoding: int, size: int
) -> None:
    """Whatever the engine's randomness rule calls random (and no opaque shape) is a secret as an argument's value,
    spelled as it is or encoded."""
    token = _token(seed, size)
    assume(looks_random(token))
    payload = _encodings(token)[encoding]
    assert GUARD.findings({key: payload})[1]


@given(st.integers(0, 2**32), st.sampled_from(NEUTRAL_KEYS))
def test_opaque_non_secrets_pass_under_any_name(seed: int, key: str) -> None:
    """GUIDs, digests, URLs, paths, e-mail addresses, host names and numbers are ids, not secrets."""
    rng = random.Random(seed)
    raw = rng.randbytes(32)
    for value in (
        str(uuid.UUID(bytes=raw[:16])),
        str(uuid.UUID(bytes=raw[:16])).upper(),
        hashlib.sha1(raw).hexdigest(),
        hashlib.sha256(raw).hexdigest(),
        f"https://example.com/items/{raw.hex()[:12]}?page=2",
        f"/home/user/projects/{raw.hex()[:8]}/main.py",
        f"user.{raw.hex()[:6]}@example.com",
        f"build-{raw.hex()[:6]}.internal.example.com",
        str(rng.randrange(10**20)),
    ):
        assert not holds_secret({key: value}), value
        assert not GUARD.findings({key: value})[1], value


OPAQUE_KEYS = ("file_id", "fileId", "cursor", "nextPageToken_cursor", "sha256", "etag")


@given(st.integers(0, 2**32), st.sampled_from(OPAQUE_KEYS))
def test_a_name_that_says_id_or_digest_keeps_a_bare_token(seed: int, key: str) -> None:
    assert opaque_key(key)
    assert not holds_secret({key: _token(seed)})


@pytest.mark.parametrize(
    "line",
    [
        "pass:IhqSb1Gg",
        "-pw:dipPr144Gg!",
        "PSSWORD:=FlUgeGeHeImEn08",
        "password for master:IhqSb1Gg",
        'gi_reo_gi_credential = "K2u6mFw8wJOsAf"',
        "ALTER USER username IDENTIFIED BY SqLpa5sW0rD;",
        "nonce = 'bsfcvir57nt40rydvtbhs8lzbgljmet5'",
        "--super-secret_token 1ace4d19-fa7e-b4e2-c3f0-9129474bcd81",  # a GUID, but the label says secret
        "GET https://example.com/api/v2/token/OTI2NjA3NjU1NTI2Oh2DOnASdOHoIhEGyqIuYrdkYaQZ",  # a `/token/` segment
    ],
)
def test_a_labelled_value_in_a_line_is_refused(line: str) -> None:
    assert labelled_secret(line)
    refused = GUARD.findings({"query": f"run this: {line}"})[1]
    assert refused


@pytest.mark.parametrize(
    "line",
    [
        "password = get_password()",
        "token = self.token",
        "key: ${API_KEY}",
        "password: <your password>",
        "secret = settings.SECRET_KEY",
        'public_key = "9Cnzj4p4WGeKLs1Pt8QuKUpRKfFLfRYC9AIKjbJTWit"',
        "key_file=/etc/ssl/private/server.key",
        "password: changeme",
        "the token expires in 3600 seconds",
        "api_key=example-key-for-docs",
        "minisat-master-keying:x64-uwp=fail",  # `keying`: the label word goes on as another word
        "fn::secret: ops_eyJzaWduSW5B..[Redacted]",  # an elided excerpt
        "id/pw/port:master/IhqSb1Gg/xxxx",  # a user and a password written as a pair (documentation)
        "key AKIAZ7QW3RT5YU8OP2LM",  # an AWS access key id names a key: the guard passes it by design
    ],
)
def test_code_templates_and_prose_after_a_label_pass(line: str) -> None:
    assert not labelled_secret(line)
    assert not holds_secret({"query": line})


def test_short_lines_and_documents() -> None:
    token = _token(7)
    assert looks_random(token)
    assert holds_secret({"query": f"deploy with {token} please"})  # a short line: read token by token
    assert not holds_secret({"query": f"notes\n{'word ' * 60}\n{token}"})  # a document: the detectors' call
    assert not holds_secret({"query": f"csrf-token={token}"})  # a per-request token by its label
    assert not holds_secret({"query": f'"credentialId": "{token}"'})  # an id by its label
    assert not bare_secret(f"...{token}...")  # an elided excerpt


def test_base32_seeds_and_vendor_prefixes() -> None:
    assert bare_secret("JERZOR2XLQYTUQG7YBZYHLK3KSLRYTWB")  # an OTP seed
    assert not bare_secret("AKIAQWADE5R42RDZ4JEM")  # an AWS key's id half names a key
    assert not bare_secret("AKIAZ7QW3RT5YU8OP2LM")
    assert not bare_secret("ABCDEFGHIJKLMNOPQRSTUVWX")  # no digits: a run of letters
    assert bare_secret("glpat-8d5ri2n9g85LAnC9YW85.01.cgpAsnEmP")  # a prefix set apart, mixed case: no host name
    assert not bare_secret("build-7f3a9.ci.internal.example.com")
    assert not labelled_secret("see https://example.com/docs/token/overview")  # a word after `/token/`


def test_base64_of_an_image_is_not_a_secret() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(60)).decode()
    assert not bare_secret(png)


def test_a_refusal_names_the_member_never_the_value() -> None:
    token = _token(11)
    assert looks_random(token)
    arguments: dict[str, Any] = {"options": {"mode": "fast", "extra": [1, {"blob": quote(token)}]}, "q": "hi"}
    _, found = GUARD.findings(arguments)
    assert found == {"secret_value": 1}
    pointer = GUARD.locate(arguments, "/arguments")
    assert pointer == "/arguments/options/extra/1/blob"
    message = str(SecretsRefused(found, pointer))
    assert token not in message and quote(token) not in message


def test_a_completion_value_is_judged_under_its_argument_name() -> None:
    token = _token(13)
    assert GUARD.findings(token, None, "name")[1]
    assert not GUARD.findings(token)[1]  # a bare string with no name: a URI's view, an id by nature
    assert not GUARD.findings(token, None, "file_id")[1]


def test_redact_replaces_only_the_member() -> None:
    token = _token(17)
    guard = SecretGuard({"action": "redact"})
    new, found = guard.findings({"q": "hello", "key_material": token})
    assert found and new == {"q": "hello", "key_material": "[REDACTED:secret_value]"}


def test_the_rules_can_be_turned_off_and_decode_false_reads_as_spelled() -> None:
    token = _token(19)
    assert not SecretGuard({"argument_values": False}).findings({"q": token})[1]
    line = base64.b64encode(b"pass:IhqSb1Gg").decode()
    assert GUARD.findings({"q": line})[1]
    assert not SecretGuard({"decode": False}).findings({"q": line})[1]


@given(st.text(max_size=80), st.sampled_from(NEUTRAL_KEYS))
def test_any_text_is_judged_without_error(text: str, key: str) -> None:
    holds_secret({key: text})
    credential_like(text)
    labelled_secret(text)


@given(
    st.sampled_from(['CURLOPT_PASSWORD, "{}"', 'SET password "{}"', 'ConvertTo-SecureString "{}"']),
    st.integers(0, 2**32),
    st.sampled_from(["base64", "hex", "gzip", "percent"]),
)
def test_json_inside_an_encoding_is_judged_as_the_structure_it_spells(template: str, seed: int, how: str) -> None:
    """Base64 (hex, gzip, `%XX`) of a JSON object is read as that object: as text its strings' escaped quotes
    (`\\"`) would hide the value from the patterns that need the quotes."""
    import gzip

    secret = _token(seed, 14)
    assume(any(c.isdigit() for c in secret) and any(c.islower() for c in secret) and any(c.isupper() for c in secret))
    text = json.dumps({"note": "x = " + template.format(secret)}).encode()
    payload = {
        "base64": base64.b64encode(text).decode(),
        "hex": text.hex(),
        "gzip": base64.b64encode(gzip.compress(text, mtime=0)).decode(),
        "percent": "".join(f"%{b:02X}" for b in text),
    }[how]
    assert GUARD.findings({"query": json.dumps({"note": "x = " + template.format(secret)})})[1]
    assert GUARD.findings({"query": payload})[1]
    with pytest.raises(SecretsRefused) as refused:
        GUARD.apply({"query": payload}, TransformContext(direction="input"))
    assert secret not in str(refused.value)


def _mixed(seed: int, size: int) -> str:
    rng = random.Random(seed)
    body = [rng.choice(string.ascii_lowercase), rng.choice(string.ascii_uppercase), rng.choice(string.digits)]
    body += [rng.choice(_BASE62) for _ in range(size - 3)]
    rng.shuffle(body)
    return "".join(body)


@given(st.integers(0, 2**32), st.sampled_from(range(6)))
def test_shaped_secrets_are_refused_in_any_encoding(seed: int, encoding: int) -> None:
    """Secrets known by their shape, not their randomness: each refused as spelled and encoded, and the refusal names
    the member, never the value."""
    rng = random.Random(seed)
    password = _mixed(seed, rng.randint(8, 20))
    key_bytes = ", ".join(f"0x{rng.randrange(256):02x}" for _ in range(rng.randint(8, 32)))
    lines = [
        f'const {rng.choice(["HEROKU", "SNYK", "ACME"])}_KEY = "{uuid.UUID(int=rng.getrandbits(128))}"',
        f"#define AESKEY {{{key_bytes}}}",
        f"secret: []byte{{{key_bytes}}},",
        f"curl -H 'Authorization: Basic {base64.b64encode(f'user:{password}'.encode()).decode()}' https://x.test",
        f'curl -X PUT -u "admin:{password}" https://127.0.0.1',
        f'PASSWORD = os.environ.get("PASSWORD") or "{password}"',
    ]
    line = rng.choice(lines)
    payload = _encodings(line)[encoding]
    assert GUARD.findings({"query": payload})[1], line
    arguments = {"mode": "fast", "args": {"query": payload}}
    found = GUARD.findings(arguments)[1]
    pointer = GUARD.locate(arguments, "/arguments")
    assert pointer == "/arguments/args/query"
    message = str(SecretsRefused(found, pointer))
    assert password not in message and payload not in message


@pytest.mark.parametrize(
    "line",
    [
        'CACHE_KEY = "0b7c1f32-9a2e-4c55-8f0e-2d4a9c6b1e77"',  # an id under a key's name
        "request_id: 0b7c1f32-9a2e-4c55-8f0e-2d4a9c6b1e77",
        "key_sizes = [128, 192, 256, 128, 192, 256, 128, 192]",  # not bytes: a size list
        "key = [1, 1, 1, 1, 1, 1, 1, 1, 1]",  # one repeated byte
        "Authorization: Bearer <YOUR_TOKEN_HERE>",
        "Authorization: Basic ${BASIC_AUTH}",
        "docker run -u 1000:1000 image",
        'git push -u origin main && echo "password"',
        'password = getpass("Enter your password: ")',
        "SET PASSWORD FOR 'u'@'localhost' = PASSWORD('s3cRetPa55w0rd');"[:0] + "x = PASSWORD('SqLpa5sW0rD')",
        "Activation key : ZAQWS-XCDER-VBGTR-FRTGU-KLMNO",  # a run of the alphabet: a sample
    ],
)
def test_shapes_that_are_not_secrets_pass(line: str) -> None:
    assert not GUARD.findings({"query": line})[1], line


@given(st.integers(0, 2**32), st.integers(0, 3))
def test_base64_in_a_short_line_is_judged_by_what_it_says(seed: int, cut: int) -> None:
    """A base64 token inside a short line (even cut short) that spells a random token or a labelled value is a
    secret; one that spells prose is not."""
    secret = _mixed(seed, 28)
    assume(looks_random(secret))
    said = base64.b64encode(f"-----BEGIN PRIVATE KEY {secret}".encode()).decode().rstrip("=")
    said = said[: len(said) - cut]
    assert GUARD.findings({"query": f'pkey = ("{said}")'})[1]
    prose = base64.b64encode(b"the quick brown fox jumps over the lazy dog again").decode()
    assert not GUARD.findings({"query": f'text = ("{prose}")'})[1]


def _read_refusal(uri: str) -> str | None:
    """The standard stages' refusal of `resources/read` of `uri` (None: allowed)."""
    from interceptors import Phase
    from interceptors.registry import Invocation
    from interceptors.transforms.mutators import TransformStages
    from interceptors.transforms.profiles import STANDARD_TRANSFORMS

    stages = TransformStages(STANDARD_TRANSFORMS)
    payload = {"method": "resources/read", "params": {"uri": uri}}
    verdict = stages.request(Invocation("transforms/request", "resources/read", Phase.REQUEST, payload))
    return None if verdict.valid else "; ".join(message.message for message in verdict.messages or ())


@given(
    st.integers(0, 2**32),
    st.sampled_from(["var g = '{}'", 'mailchimp = "{}"', '"k": "{}"', "facebook 1308742762612587|{}"]),
    st.sampled_from(range(4)),
)
def test_a_line_holding_a_random_token_in_a_uri_is_refused(seed: int, line: str, encoding: int) -> None:
    """A URI has no member name for the bare rule, but a path segment that reads as a line of text (blanks, quotes)
    holding a random token is a secret pasted into the URI, not an id: refused, the refusal naming `/uri`."""
    token = _token(seed, 32)
    assume(looks_random(token))
    payload = _encodings(line.format(token))[encoding]
    message = _read_refusal("notes://n/" + quote(payload, safe=""))
    assert message is not None and "at '/uri'" in message
    assert token not in message and payload not in message


@pytest.mark.parametrize(
    "uri",
    [
        "file:///home/me/My%20Documents/report%202024%20final.pdf",
        "notes://n/meeting%20notes%20for%20Q3%20planning",
        "repo://octo/hello/blob/9fceb02d0ae598e95dc970b74767f19372d61af8/README.md",
    ],
)
def test_uris_of_ids_and_named_files_pass(uri: str) -> None:
    assert _read_refusal(uri) is None


@given(st.integers(0, 2**32), st.sampled_from(["q", "input", "value", "data"]))
def test_a_uri_query_member_is_judged_under_its_name(seed: int, name: str) -> None:
    """A query member's value is judged as an argument of that name would be: a random token under a neutral name
    is refused (naming `/uri`), under an id's or a cursor's name it passes."""
    token = _token(seed, 32)
    assume(looks_random(token))
    message = _read_refusal(f"notes://n/x?a=1&{name}={quote(token)}")
    assert message is not None and "at '/uri'" in message and token not in message
    assert _read_refusal(f"notes://n/x?cursor={token}&file_id={token}") is None
    assert _read_refusal(f"notes://n/x?csrf-token={token}") is None


@given(
    st.integers(0, 2**32),
    st.sampled_from(["\x1b[32m{}\x1b[0m", "\\x1b[1;31m{}\\033[0m", "\\u001b[33m{}\\u001b[0m", "[0m{}[0m"]),
)
def test_a_value_glued_to_terminal_codes_is_judged_without_them(seed: int, wrap: str) -> None:
    token = _token(seed, 32)
    assume(looks_random(token))
    assert GUARD.findings({"query": wrap.format(token)})[1]
    assert not GUARD.findings({"query": wrap.format("build finished in 12 seconds")})[1]


@given(st.integers(0, 2**32), st.sampled_from(["\\x{:02x}", "\\u{:04x}"]))
def test_an_escaped_labelled_value_is_judged_as_the_characters_it_spells(seed: int, escape: str) -> None:
    secret = _mixed(seed, 14)
    spelled = "".join(escape.format(ord(c)) for c in secret)
    assert GUARD.findings({"query": f'password = "{spelled}"'})[1]
    assert not GUARD.findings({"query": 'sep = "\\x00\\x1f"'})[1]


@pytest.mark.parametrize(
    "label",
    ["비밀번호:", "비번:", "암호:", "パスワード:", "密码=", "пароль:", "Passwort:", "contraseña =", "password설정은"],
)
@given(seed=st.integers(0, 2**32))
def test_a_password_label_in_another_language_is_a_label(label: str, seed: int) -> None:
    """`password` in Korean, Japanese, Chinese, Russian, German, Spanish (or followed by Korean words) labels a
    value as the English word does; a word after it is still a word."""
    secret = _mixed(seed, 12)
    assume(credential_like(secret))  # not a word-like run (`Apa4Foodifog`)
    assert labelled_secret(f"{label}{secret}")
    assert GUARD.findings({"query": f"계정:master {label}{secret}"})[1]
    assert not labelled_secret(f"{label}incorrect")


@given(seed=st.integers(0, 2**32), label=st.sampled_from(["paasword", "passworsd", "pasword", "passwd", "paswrd"]))
def test_a_misspelt_password_label_is_a_label(seed: int, label: str) -> None:
    secret = _mixed(seed, 10)
    assume(credential_like(secret))
    assert labelled_secret(f"{label}: {secret}")
    assert labelled_secret(f'if {label} != "{secret}":')


@given(
    seed=st.integers(0, 2**32),
    line=st.sampled_from(
        [
            "ID/PW {user}({pw})",
            "ANYID(PW):{user}({pw})",
            "ID/PW->{user}/{pw}",
            "ID/Pass:xxxx:{user}/{pw}",
            "아이디/PW:{user}/{pw}",
            "192.168.0.1,{user}/{pw}",
            "98.76.54.32 ({user}/{pw})",
            "IP ID PW 10.0.0.7 {user} {pw}",
        ]
    ),
    user=st.sampled_from(["master", "admin", "deploy", "j.smith"]),
    encoding=st.sampled_from(range(6)),
)
def test_an_account_written_with_its_password_is_refused(seed: int, line: str, user: str, encoding: int) -> None:
    """`user/password`, `user(password)` or `user password` right after a label naming both (`ID/PW`) or after a
    host's address: the password is a credential, in any encoding."""
    password = _mixed(seed, 10)
    assume(credential_like(password))
    text = line.format(user=user, pw=password)
    assert paired_secret(text)
    assert GUARD.findings({"query": _encodings(text)[encoding]})[1]


@pytest.mark.parametrize(
    "line",
    [
        "Default ID/PW are wpasp/wpasp.",  # the same word twice: a sample account
        "ID/PW master/password",  # a word
        "ANYID PW master iPp12@GRq",  # no separator the label's pair uses
        "계정/Password-xxxx:master/IhqSb1Gg",  # another field after the label
        "id/pw/port:master/IhqSb1Gg/xxxx",  # a path, not a pair
        "192.168.0.1 src/main.py",
        "10.0.0.1 GET /index.html 200",
        "ID/PW: see the vault entry ops/db",
    ],
)
def test_pairs_that_are_not_accounts_pass(line: str) -> None:
    assert not paired_secret(line)


def _prefixed(seed: int, prefix: str, size: int) -> str:
    return prefix + _token(seed, size, _BASE62 + "_-")


@given(
    seed=st.integers(0, 2**32),
    prefix=st.sampled_from(sorted(KNOWN_PREFIXES)),
    size=st.integers(16, 60),
    encoding=st.sampled_from(range(4)),
)
def test_a_known_vendor_prefix_alone_in_a_uri_is_refused(seed: int, prefix: str, size: int, encoding: int) -> None:
    """A URI's lone token is an id, unless it starts with a prefix a secret detector knows and the rest is random:
    then it is that vendor's credential (its format off: cut short, a character outside its alphabet)."""
    token = _prefixed(seed, prefix.upper() if seed % 2 else prefix, size)
    assume(looks_random(token[len(prefix) :]) or bare_secret(token[len(prefix) :]))
    assert prefixed_secret(token)
    payload = _encodings(token)[encoding]
    message = _read_refusal("notes://n/" + quote(payload, safe=""))
    assert message is not None and "at '/uri'" in message and token not in message


@given(seed=st.integers(0, 2**32), prefix=st.sampled_from(["figd_", "cfk_", "acme_"]))
def test_an_unknown_vendor_prefix_needs_a_long_random_run(seed: int, prefix: str) -> None:
    long, short = _prefixed(seed, prefix, 44), _prefixed(seed, prefix, 24)
    assume(looks_random(long[len(prefix) :]))
    assert prefixed_secret(long)
    assert not prefixed_secret(short)  # `pi_…`, `cus_…`, `price_…`: ids behind a prefix are shorter


@pytest.mark.parametrize(
    "uri",
    [
        "stripe://payment_intents/pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "stripe://prices/price_1MoBy5LkdIwHu7ixZhnattbh",
        "notes://n/ghp_wordsandmorewordsandletters",  # a known prefix, but words, not random
        "notes://n/ntn_12345678901234567890",  # digits only
    ],
)
def test_prefixed_ids_in_uris_pass(uri: str) -> None:
    assert _read_refusal(uri) is None


# --- issue 30, held-out leaks: pairs, labels, shapes and lone tokens in URIs ---------------------------------------


def _three_classes(seed: int, size: int = 10) -> str:
    """A password with lower case, upper case, digits and a symbol (`iPp9@GRq`-like)."""
    rng = random.Random(seed)
    body = [*_mixed(seed, size - 1), rng.choice("@#!%")]
    rng.shuffle(body)
    return "".join(body)


@given(
    seed=st.integers(0, 2**32),
    line=st.sampled_from(
        [
            "id pw {user} // {pw}",
            "ID / PW : {user} / {pw}",
            "id/pass:{user},{pw}",
            "ID PW {user} {pw}",
            "ID:{user}/PASS:{pw}",
            "P/W:{pw}",
            "Key(ANYSecret):{pw}",
            'salt1 = b"{pw}"',
        ]
    ),
    user=st.sampled_from(["master", "db", "deploy"]),
    encoding=st.sampled_from(range(6)),
)
def test_pairs_and_labels_written_other_ways_are_refused(seed: int, line: str, user: str, encoding: int) -> None:
    """An account and its password split by ` / `, `//`, `,` or a blank after a label naming both, a password field
    after the account's (`ID:master/PASS:…`), `P/W:`, a label with a parenthesised qualifier, a bytes literal: each
    refused as spelled and encoded, the refusal naming the member and never the password."""
    password = _three_classes(seed)
    assume(credential_like(password))
    text = line.format(user=user, pw=password)
    payload = _encodings(text)[encoding]
    arguments = {"mode": "fast", "args": {"query": payload}}
    found = GUARD.findings(arguments)[1]
    assert found, text
    pointer = GUARD.locate(arguments, "/arguments")
    assert pointer == "/arguments/args/query"
    message = str(SecretsRefused(found, pointer))
    assert password not in message and payload not in message


@pytest.mark.parametrize(
    "line",
    [
        "ANYID PW master iPp12@GRq",  # a label glued to a word, then a blank: CredSweeper's own negative
        "ID PW master password1",  # a blank between them and no upper case: words
        "id pw reset // see the wiki",
        "P/W: see the vault",
    ],
)
def test_pairs_and_labels_that_are_not_credentials_pass(line: str) -> None:
    assert not GUARD.findings({"query": line})[1], line


@given(seed=st.integers(0, 2**32), encoding=st.sampled_from(range(6)))
def test_shapes_of_issue_30_are_refused_in_any_encoding(seed: int, encoding: int) -> None:
    """An NTLM AUTHENTICATE message, a MySQL password hash, an environment lookup's literal default on a line naming
    a secret, a camelCase service key holding a GUID."""
    rng = random.Random(seed)
    ntlm = "TlRMTVNTUAADAAAAGAAYA" + base64.b64encode(rng.randbytes(90)).decode().rstrip("=")
    sha = hashlib.sha1(rng.randbytes(16)).hexdigest().upper()
    password = _mixed(seed, 9)
    lines = [
        f"Authorization header: {ntlm}",
        f"ALTER USER 'app'@'%' IDENTIFIED WITH 'mysql_native_password' AS '*{sha}' REQUIRE NONE",
        f'if SECRET := getenv("APP_SECRET", "{password}"):',
        f'DB_PASSWORD = os.environ.get("DB_PASSWORD", b"{password}")',
        f'const acmeKey = "{uuid.UUID(int=rng.getrandbits(128))}"',
    ]
    line = rng.choice(lines)
    assert GUARD.findings({"query": _encodings(line)[encoding]})[1], line


@pytest.mark.parametrize(
    "line",
    [
        'const cacheKey = "0b7c1f32-9a2e-4c55-8f0e-2d4a9c6b1e77"',  # an id under a key's name
        'idempotencyKey: "0b7c1f32-9a2e-4c55-8f0e-2d4a9c6b1e77"',
        'PASSWORD = os.getenv("PASSWORD", "changeme")',  # a placeholder default
        'SECRET_FILE = os.getenv("SECRET_FILE", "/run/secrets/app")',  # a path
        'PASSWORD = os.getenv("PASSWORD", "")',
        "Negative: TlRMTVNTUAADAAAAGAAYAFYAAAAYABgAbgAAAAAAThisIsAnExampleAAAAAAAAABIAAAADgAOAEgAAAAAAAAAVgAAAA",
        "CREATE USER 'app'@'%' IDENTIFIED BY PASSWORD",
    ],
)
def test_shapes_of_issue_30_that_are_not_secrets_pass(line: str) -> None:
    assert not GUARD.findings({"query": line})[1], line


def _upper_run(seed: int, size: int) -> str:
    return _token(seed, size, string.ascii_uppercase + string.digits)


@given(
    seed=st.integers(0, 2**32),
    shape=st.sampled_from(["app", "base32", "upper", "dotted", "plus", "graph"]),
    encoding=st.sampled_from(range(4)),
)
def test_a_lone_token_with_a_secrets_alphabet_in_a_uri_is_refused(seed: int, shape: str, encoding: int) -> None:
    """A URI's lone token is an id by nature, unless it has what ids lack: an id joined to a secret by `|`, base64's
    `+`, upper-case letters and digits only (an OTP seed, `dt0c01.…`), a Graph API prefix with no separator. Refused
    as spelled and encoded, the refusal naming `/uri` and never the token; so is it as an argument."""
    rng = random.Random(seed)
    token = {
        "app": f"{rng.randrange(10**15, 10**16)}|{_token(seed, 27, _BASE62 + '_-')}",
        "base32": _token(seed, 32, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
        "upper": _upper_run(seed, 40),
        "dotted": f"dt0c01.{_upper_run(seed, 24)}.{_upper_run(seed + 1, 64)}",
        "plus": base64.b64encode(rng.randbytes(60)).decode(),
        "graph": "EAAM" + _token(seed, 150),
    }[shape]
    assume(bare_secret(token) and (shape != "plus" or "+" in token))
    assert GUARD.findings({"query": token})[1]
    payload = _encodings(token)[encoding]
    message = _read_refusal("notes://n/" + quote(payload, safe=""))
    assert message is not None and "at '/uri'" in message and token not in message


@given(seed=st.integers(0, 2**32), size=st.integers(24, 64))
def test_a_lone_mixed_case_id_in_a_uri_passes(seed: int, size: int) -> None:
    """Ids in a URI's path are mixed-case or lower-case runs of letters, digits, `_` and `-` (a Drive file id, a
    Figma key, a Telegram file id): a lone one passes, random or not."""
    token = _token(seed, size, _BASE62 + "_-")
    assume(any(c.islower() for c in token))
    assert _read_refusal(f"gdrive:///{token}") is None
    assert _read_refusal(f"notes://n/files/{token}/view") is None


@given(st.integers(0, 2**32))
def test_a_key_glued_to_terminal_codes_is_found_by_the_detectors(seed: int) -> None:
    """Terminal colour codes glued to a vendor's key (`ESC[93msk-…`) hide its start from the detectors' boundaries:
    the guard also reads the text without them."""
    key = "sk-" + hashlib.md5(random.Random(seed).randbytes(8)).hexdigest()
    found = GUARD.findings({"query": f">>>\x1b[93m{key}\x1b[0m<<<"})[1]
    assert found and "secret_value" not in found  # a detector's entity, not the argument rules' fallback


@pytest.mark.parametrize(
    "uri",
    [
        "https://admin:{pw}@db.example.com/x",  # userinfo
        "postgres://app:{pw}@10.0.0.5:5432/db",
        "notes://n/x;password={pw}",  # a path parameter
        "notes://n/x#token={pw}",  # a fragment
        "notes://n/a?api_key={pw}",  # a query member
        "notes://n/<ID / PW : db / {pw}>",  # a pair pasted into a segment (percent-encoded whole)
    ],
)
@given(seed=st.integers(0, 2**32))
def test_a_uri_holds_a_secret_wherever_an_argument_would(uri: str, seed: int) -> None:
    """Userinfo, path parameters, fragments, query members and pasted lines are judged as arguments are: refused,
    naming `/uri`, never holding the password."""
    password = _three_classes(seed, 14)
    assume(credential_like(password))
    if "<" in uri:
        head, line = uri.split("<")
        spelled = head + quote(line.rstrip(">").format(pw=password), safe="")
    else:
        spelled = uri.format(pw=quote(password, safe=""))
    message = _read_refusal(spelled)
    assert message is not None and "at '/uri'" in message and password not in message


_STRIPE_PREFIXES = ("cus", "price", "prod", "sub", "ch", "pi", "pm", "evt", "txn", "il", "si", "mtr_test", "fa", "trxn")


def _stripe_id(seed: int, prefix: str) -> str:
    body = _token(seed, 24)
    return f"{prefix}_{random.Random(seed).choice(string.digits)}{body}"


@given(st.integers(0, 2**32), st.sampled_from(_STRIPE_PREFIXES), st.sampled_from(("customer", "price", "source", "q")))
def test_an_object_id_with_a_public_prefix_passes_under_any_name(seed: int, prefix: str, key: str) -> None:
    """A tool that manages a Stripe account takes its objects' ids (`cus_…`, `price_…`) as arguments: an id the
    API hands out is no key, though its body is random. A client secret (`…_secret_…`) is not spared as an id."""
    object_id = _stripe_id(seed, prefix)
    assert not GUARD.findings({key: object_id})[1], object_id
    assert not GUARD.findings({"query": json.dumps({"data": [{key: object_id}]}, indent=4)})[1], object_id
    intent = _stripe_id(seed, "pi" if seed % 2 else "seti")  # what has a client secret: Payment and SetupIntents
    assert not public_object_id(f"{intent}_secret_{_token(seed + 1, 24)}")  # judged as any other value


def _b64url(seed: int, size: int) -> str:
    return _token(seed, size, _BASE62 + "-_")


@given(st.integers(0, 2**32), st.sampled_from(("RSA", "EC")), st.booleans())
def test_a_public_json_web_key_passes_and_a_private_one_does_not(seed: int, kty: str, as_text: bool) -> None:
    """A JWKS publishes public keys (`n`, `e`, `x`, `y`, `kid`, `x5t`): none of its members is a secret, however
    random. The same key with its private exponent `d` is refused."""
    if kty == "RSA":
        key: dict[str, Any] = {"kty": kty, "kid": _b64url(seed, 27), "n": _b64url(seed + 1, 342), "e": "AQAB"}
    else:
        key = {"kty": kty, "crv": "P-384", "x": _b64url(seed + 1, 64), "y": _b64url(seed + 2, 64)}
    key["x5t"] = _b64url(seed + 3, 27)

    def spelled(jwk: dict[str, Any]) -> Any:
        return {"jwks": json.dumps({"keys": [jwk]}, indent=2)} if as_text else {"keys": [jwk]}

    assert not GUARD.findings(spelled(key))[1], key
    assert GUARD.findings(spelled({**key, "d": _b64url(seed + 4, 64)}))[1]


def test_only_a_registered_key_type_makes_a_json_web_key() -> None:
    """A made-up `kty` buys no sparing: a random token under `n` is judged as under any other name."""
    token = _b64url(7, 48)
    assert not GUARD.findings({"kty": "RSA", "n": token, "e": "AQAB"})[1]
    assert GUARD.findings({"kty": "anything", "n": token})[1]
    assert GUARD.findings({"kty": "RSA", "n": token, "note": token})[1]


@pytest.mark.parametrize(
    "text",
    [
        "content-security-policy: default-src 'self'; script-src 'self' 'nonce-7it+MWPD34c7Sh4RalVq2Q==' "
        "'strict-dynamic'; object-src 'none'",
        '<!doctype html><html><head><script nonce="7it+MWPD34c7Sh4RalVq2Q==">window.__page = 0;</script>'
        '<style nonce="7it+MWPD34c7Sh4RalVq2Q==">body{margin:0}</style>',
        '<link rel="stylesheet" href="/a.css" nonce="PjQqWvvQ503Ob41EfkZQCA==">',
        "sha384-VWtYFJOPUZYrGQ5m32nprpzAvmfeDpmkQ6kKEAPoVs8g9ViNSh5BxyzAbCdEfGh",
        '<script src="https://cdn.jsdelivr.net/npm/jose@6/dist/key/generate_secret.js" '
        'integrity="sha384-VWtYFJOPUZYrGQ5m32nprpzAvmfeDpmkQ6kKEAPoVs8g9ViNSh5BlHhKmUhKBgt0"></script>',
    ],
)
def test_csp_nonces_and_integrity_digests_pass(text: str) -> None:
    """A page's CSP nonce goes to every reader of the page, and an SRI digest is a hash: neither is a secret."""
    assert not GUARD.findings({"query": text})[1], text


@pytest.mark.parametrize(
    "text",
    [
        "NAME         STATUS   AGE   LABELS\n10.245.1.3   Ready    17m   kubernetes.io/hostname=10.245.1.3",
        "10.245.1.3   kubernetes.io/hostname=10.245.1.3   Ready     17m",
        '{\n  "id": "vr_1Pgc76B7WZ01zgkWq9Rp33Dj",\n  "verification_session": "vs_1Pgc76B7WZ01zgkW1uXbT3Y9"\n}',
    ],
)
def test_node_labels_and_ids_under_a_credential_word_pass(text: str) -> None:
    """A node's `name=value` label where `host user/password` would stand, and an object id under a name that
    holds `session`, are what a tool returned, not a login or a key."""
    assert not GUARD.findings({"query": text})[1], text


def test_a_fingerprint_is_a_digest() -> None:
    assert not GUARD.findings({"card": {"fingerprint": "AuoSJ18zsVWV9SPc", "last4": "4242"}})[1]


def test_a_nonce_outside_an_html_tag_is_still_a_label() -> None:
    assert GUARD.findings({"query": 'oauth nonce="7it+MWPD34c7Sh4RalVq2Q==" here'})[1]
    assert GUARD.findings({"query": '<div data-x="1"> nonce="7it+MWPD34c7Sh4RalVq2Q=="'})[1]
