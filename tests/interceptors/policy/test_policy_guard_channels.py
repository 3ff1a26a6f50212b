"""Issue 30, the client-to-server guard under `standard`: a secret is judged wherever a URI carries it (each segment
alone, after any delimiter, in the userinfo), whatever encoding it is sent in, and the argument rules' labels and
values are read as code writes them (camelCase names, base64 that starts with `/`, string escapes, a `$` that is a
character). Each rule has its negatives: ids, paths, templates and prose still pass."""

from __future__ import annotations

import base64
import gzip
import hashlib
import random
import string
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from interceptors import Phase
from interceptors.registry import Invocation
from interceptors.transforms.argvalues import KNOWN_PREFIXES, bare_secret, credential_like, labelled_secret
from interceptors.transforms.entities import looks_random
from interceptors.transforms.guard import SecretGuard
from interceptors.transforms.mutators import TransformStages, _views
from interceptors.transforms.profiles import STANDARD_TRANSFORMS

GUARD = SecretGuard({})
_BASE62 = string.ascii_letters + string.digits


def _token(seed: int, size: int, alphabet: str = _BASE62) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(size))


def _password(seed: int, size: int = 12) -> str:
    """Lower case, upper case, digits and a symbol, shuffled (`iPp9@GRq`-like)."""
    rng = random.Random(seed)
    body = [rng.choice(string.ascii_lowercase), rng.choice(string.ascii_uppercase), rng.choice(string.digits)]
    body += [rng.choice(_BASE62) for _ in range(size - 4)] + [rng.choice("@#!%")]
    rng.shuffle(body)
    return "".join(body)


ENCODE = {
    "plain": lambda s: s,
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "hex": lambda s: s.encode().hex(),
    "percent": lambda s: "".join(f"%{b:02X}" for b in s.encode()),
    "gzip_base64": lambda s: base64.b64encode(gzip.compress(s.encode(), mtime=0)).decode(),
}


def _stages() -> TransformStages:
    return TransformStages(STANDARD_TRANSFORMS)


def _read_refusal(uri: str) -> str | None:
    """The standard stages' refusal of `resources/read` of `uri` (None: allowed)."""
    payload = {"method": "resources/read", "params": {"uri": uri}}
    verdict = _stages().request(Invocation("transforms/request", "resources/read", Phase.REQUEST, payload))
    return None if verdict.valid else "; ".join(message.message for message in verdict.messages or ())


def _roots_refusal(uri: str) -> str | None:
    """The standard stages' refusal of the client's `roots/list` answer naming `uri` (None: allowed)."""
    payload: dict[str, Any] = {"roots": [{"uri": uri, "name": "project"}]}
    verdict = _stages().answer(Invocation("transforms/answers", "roots/list", Phase.RESPONSE, payload))
    return None if verdict.valid else "; ".join(message.message for message in verdict.messages or ())


POSITIONS = {
    "first segment": "notes://n/{}",
    "deep segment": "notes://n/a/b/c/d/e/f/g/h/i/j/{}",
    "segment then more": "notes://n/{}/view/latest",
    "bare query": "notes://n/x?{}",
    "query member after another": "notes://n/x?page=2&{}",
    "fragment": "notes://n/x#{}",
    "path parameter": "notes://n/x;{}",
    "userinfo password": "notes://reader:{}@n/x",
    "file path": "file:///home/u/project/{}",
}


def _secret_token(seed: int, shape: str) -> str:
    """A lone token the guard refuses where a URI carries it alone: a known vendor prefix and a random run, an id
    joined to a secret by `|`, a base32 seed, base64 with `+`."""
    rng = random.Random(seed)
    if shape == "prefixed":
        return sorted(KNOWN_PREFIXES)[seed % len(KNOWN_PREFIXES)] + _token(seed, 36)
    if shape == "app":
        return f"{rng.randrange(10**15, 10**16)}|{_token(seed, 27, _BASE62 + '_-')}"
    if shape == "base32":
        return _token(seed, 32, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    return base64.b64encode(rng.randbytes(60)).decode()


@given(
    seed=st.integers(0, 2**32),
    shape=st.sampled_from(["prefixed", "app", "base32", "plus"]),
    position=st.sampled_from(sorted(POSITIONS)),
    encoding=st.sampled_from(["plain", "base64", "hex", "percent"]),
)
def test_a_lone_secret_is_refused_wherever_a_uri_carries_it(
    seed: int, shape: str, position: str, encoding: str
) -> None:
    """A URI's every segment, query part, fragment and userinfo part is judged alone, as the first path segment is:
    the view that joins them one per line is read line by line, and a view starts after every delimiter (base64
    holds `/`), not only after the first slashes. Refused as a resource URI and as a root's URI, naming `/uri` or
    `/roots/0/uri`, never holding the token."""
    token = _secret_token(seed, shape)
    assume(bare_secret(token) and (shape != "plus" or "+" in token))
    assume(_read_refusal("notes://n/" + quote(token, safe="")) is not None)  # the first segment's verdict
    uri = POSITIONS[position].format(quote(ENCODE[encoding](token), safe=""))
    message = _read_refusal(uri)
    assert message is not None and "at '/uri'" in message and token not in message
    answer = _roots_refusal(uri)
    assert answer is not None and "at '/roots/0/uri'" in answer and token not in answer


ID_POSITIONS = sorted(set(POSITIONS) - {"userinfo password"})
"""Where an id may stand (a userinfo's password is a password: the detectors refuse it whatever it looks like)."""


@given(seed=st.integers(0, 2**32), position=st.sampled_from(ID_POSITIONS), size=st.integers(24, 64))
def test_a_mixed_case_id_passes_wherever_a_uri_carries_it(seed: int, position: str, size: int) -> None:
    """Ids are mixed-case or lower-case runs of letters, digits, `_` and `-` (a Drive file id, a Figma key): judged
    alone in any segment, one that passes as the first segment passes wherever it stands, random or not."""
    token = _token(seed, size, _BASE62 + "_-")
    assume(any(c.islower() for c in token) and "+" not in token)
    assume(_read_refusal(f"notes://n/{token}") is None)  # (a lower-case prefix and 32+ random: a vendor's key)
    assert _read_refusal(POSITIONS[position].format(token)) is None


@pytest.mark.parametrize(
    "uri",
    [
        "https://example.com/a/b/c/d/e/f/g/h/i/j/k/l/m/readme.md?ref=main&tab=readme-ov-file#installation",
        "notes://n/2024/12/05/meeting-notes-with-the-platform-team?highlight=authentication",
        "file:///home/u/project/src/interceptors/transforms/argvalues.py",
        "https://img.shields.io/badge/python-3.12-blue.svg?logo=python&logoColor=white",
        "gdrive:///1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms/edit#gid=0",
        "notes://alice@n/inbox/f47ac10b-58cc-4372-a567-0e02b2c3d479",
        "s3://my-bucket/logs/2024/12/05/part-00000-7d3f9a2c.parquet;version=3",
    ],
)
def test_uris_of_ids_paths_and_words_pass(uri: str) -> None:
    assert _read_refusal(uri) is None
    assert _roots_refusal(uri) is None


def test_a_uri_is_judged_from_after_every_delimiter() -> None:
    """Base64 with `/` right after a `?`, a `#` or a `=`, or deeper than eight slashes, is whole in a view."""
    token = "ab/cd+ef"
    for uri in (f"notes://n/x?{token}", f"notes://n/x#{token}", f"notes://n/x?q={token}"):
        assert token in _views(uri)
    deep = "notes://n/" + "/".join("abcdefghijklmnop") + "/" + token
    assert token in _views(deep)
    assert "reader\nsecret-part" in "".join(v for v in _views("notes://reader:secret-part@n/x") if isinstance(v, str))


@given(
    seed=st.integers(0, 2**32),
    line=st.sampled_from(['"bot_token": "{}"', "var g = '{}'", "export SERVICE_KEY={}", "{} # the deploy key"]),
)
def test_base64_of_a_line_in_a_uri_is_judged_as_a_named_value(seed: int, line: str) -> None:
    """A lone base64 token that spells a line of text (blanks, quotes) is no id: where a tool argument's value would
    be refused for it, so is the URI that carries it."""
    token = _token(seed, 40)
    assume(looks_random(token))
    encoded = base64.b64encode(line.format(token).encode()).decode()
    assume(bool(GUARD.findings({"query": encoded})[1]))
    message = _read_refusal("notes://n/" + quote(encoded, safe=""))
    assert message is not None and "at '/uri'" in message and token not in message


@pytest.mark.parametrize(
    "text",
    ["Hello world, this is a note about the meeting", "SELECT name FROM users WHERE id = 42", "the quick brown fox"],
)
def test_base64_of_prose_in_a_uri_passes(text: str) -> None:
    assert _read_refusal("notes://n/" + base64.b64encode(text.encode()).decode()) is None


@given(
    seed=st.integers(0, 2**32),
    wrap=st.sampled_from([">>>\x1b[93m{}\x1b[0m<<<", 'Colored line: "\x1b[94m{}\x1b[0m";', "\x1b[1;31m{}\x1b[m"]),
    encoding=st.sampled_from(["base64", "hex", "percent", "gzip_base64"]),
)
def test_a_coloured_key_is_refused_in_every_encoding(seed: int, wrap: str, encoding: str) -> None:
    """A key glued to raw terminal codes is found as spelled (the codes stripped); encoded, the shared decoders
    refuse its control characters, so the guard decodes it itself: refused in every encoding, as an argument and
    as a URI."""
    key = "sk-" + hashlib.md5(random.Random(seed).randbytes(8)).hexdigest()
    line = wrap.format(key)
    assert GUARD.findings({"query": line})[1]
    payload = ENCODE[encoding](line)
    assert GUARD.findings({"query": payload})[1]
    message = _read_refusal("notes://n/" + quote(payload, safe=""))
    assert message is not None and key not in message


@given(seed=st.integers(0, 2**32), size=st.integers(24, 60), label=st.sampled_from(["secret", "api_key", "token"]))
def test_base64_that_starts_with_a_slash_is_no_path(seed: int, size: int, label: str) -> None:
    """A labelled value that is `/` then one random segment of base64's alphabet is base64 (it may start with `/`),
    not a path: refused."""
    body = _token(seed, size, _BASE62 + "+")
    assume(all((any(c.islower() for c in body), any(c.isupper() for c in body), any(c.isdigit() for c in body))))
    assume(bare_secret(body))
    assert labelled_secret(f'var {label}_1="/{body}"')
    assert GUARD.findings({"query": f'{label} = "/{body}"'})[1]


@pytest.mark.parametrize(
    "line",
    [
        'secret = "/run/secrets/db_password"',
        "token: /var/lib/app/token",
        'key = "/etc/ssl/private/server.key"',
        'secret: "/SecretsManagerAccess"',
        "auth = /login",
    ],
)
def test_paths_after_a_label_pass(line: str) -> None:
    assert not labelled_secret(line)


@given(
    seed=st.integers(0, 2**32),
    name=st.sampled_from(["adminPass", "dbPwd", "myPw", "ANYpw", "APIkey", "userPassword", "smtpSecret", "ghToken"]),
    sep=st.sampled_from([": ", "=", " = ", ":"]),
)
def test_a_label_that_ends_a_camel_case_name_is_a_label(seed: int, name: str, sep: str) -> None:
    """A label word that starts a camelCase part of a name (after a lower-case letter, or after two upper-case
    ones: `adminPass`, `ANYpw`, `APIkey`) labels the value after it, as it does after `_`."""
    password = _password(seed)
    assume(credential_like(password))
    assert labelled_secret(f"{name}{sep}{password}")
    assert GUARD.findings({"query": f"id:xxxx({name}{sep}{password})"})[1]


@pytest.mark.parametrize(
    "line",
    [
        "Okey: Xy7kQ9mZp2a",  # one capital: no camelCase part
        "publicKey: Xy7kQ9mZp2a",
        "bypass: Xy7kQ9mZp2a",  # no case change: a word
        "compassHeading = 270",
        "getToken(userId, scopes)",
        "primaryKey: user_id",
        "sessionTokenizer = Tokenizer()",
    ],
)
def test_camel_case_names_that_are_no_labels_pass(line: str) -> None:
    assert not labelled_secret(line)


@given(seed=st.integers(0, 2**32), escape=st.sampled_from(["\\0", "\\x04", "\\033", "\\u0007"]))
def test_string_escapes_and_a_dollar_are_a_passwords_characters(seed: int, escape: str) -> None:
    """A salt or password written as a string literal with escapes (`\\0`, `\\x04`, octal) and a `$` that starts
    no variable is judged as the characters it spells."""
    rng = random.Random(seed)
    core = "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(6))
    core = core[:2] + rng.choice(string.digits) + core[2:]
    value = f"{core}%#$@s{escape}clt{escape}"
    line = f'salt4 = {{"salt5": "{value}"}}'
    assert GUARD.findings({"query": line})[1]


@pytest.mark.parametrize(
    "line",
    [
        "password: $DB_PASSWORD",
        "password = ${DB_PASSWORD}",
        'password = "$(cat /run/secrets/db)"',
        "secret: $SECRET_FROM_VAULT_2024",
        'path = "C:\\\\0data\\\\files"',
    ],
)
def test_variables_and_templates_after_a_label_pass(line: str) -> None:
    assert not GUARD.findings({"query": line})[1]
