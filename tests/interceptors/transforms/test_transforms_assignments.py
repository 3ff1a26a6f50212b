"""Labelled credentials in prose, notes and code checks (`assignments.py`).

Each shape is checked through the standard pipeline: the password is gone, and the text differs from the
original only inside the redacted span (the label and the user name stay). Next to each, benign text of the
same shape (a path after an address, `pass: true`, a bind variable, a comparison with a word) comes out
unchanged, so recall is not bought with precision.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from interceptors.transforms import STANDARD_TRANSFORMS, TransformContext, assemble_output
from interceptors.transforms.assignments import ASSIGNMENT_DETECTORS, _strong_password
from interceptors.transforms.channels import transform_tool_result

PIPELINE = assemble_output(STANDARD_TRANSFORMS)
BY_NAME = {d.name: d for d in ASSIGNMENT_DETECTORS}
PASSWORD = "Tq7#vLw2Rz"
REDACTED = re.compile(r"\[REDACTED:[a-z_]+\]")


def _out_text(text: str) -> str:
    out, _ = transform_tool_result({"content": [{"type": "text", "text": text}]}, PIPELINE, TransformContext())
    return str(out["content"][0]["text"])


def _only_the_value_changed(text: str, value: str) -> None:
    """The output is the input with `value` (and nothing else) replaced by one redaction marker."""
    out = _out_text(text)
    at = text.index(value)
    marker = REDACTED.match(out, at)
    assert marker is not None, (text, out)
    assert out[:at] == text[:at]
    assert out[marker.end() :] == text[at + len(value) :]


# --- each shape: the password goes, the label and the user stay -------------------------------------------------

SHAPES: list[tuple[str, str]] = [
    ("prose_password", "pass:{v}"),
    ("prose_password", "(pass: {v})"),
    ("prose_password", "-User:deploy -pw:{v}"),
    ("prose_password", "password for deploy: {v}"),
    ("prose_password", "the password for deploy is {v}"),
    ("prose_password", "password -> {v}"),
    ("prose_password", "password \u2192 {v}"),
    ("prose_password", "password\uc740 {v}"),
    ("prose_password_cjk", "\ube44\ubc00\ubc88\ud638:{v}"),
    ("prose_password_cjk", "\uc544\uc774\ub514 deploy \ube44\ubc88 : {v}"),
    ("prose_password_cjk", "\uc554\ud638\ub294 {v}"),
    ("prose_password_cjk", "\u30d1\u30b9\u30ef\u30fc\u30c9\uff1a{v}"),
    ("prose_password_cjk", "\u5bc6\u7801: {v}"),
    ("id_password_pair", "ID/PW:deploy/{v}"),
    ("id_password_pair", "id(pw): deploy({v})"),
    ("id_password_pair", "ID/PW -> deploy/{v}"),
    ("id_password_pair", "ID/PW deploy({v})"),
    ("id_password_pair", "user/pw: deploy / {v}"),
    ("id_password_pair", "login/pass = deploy/{v}"),
    ("id_password_pair", "\uacc4\uc815/PW:deploy/{v}"),
    ("id_password_pair", "host 10.1.2.3 (ID/PW:{v})"),
    ("ip_user_password", "10.20.30.40 deploy/{v}"),
    ("ip_user_password", "10.20.30.40,deploy/{v}"),
    ("ip_user_password", "10.20.30.40 (deploy/{v})"),
    ("user_password_at_ip", "ssh deploy:{v}@10.20.30.40"),
    ("user_password_at_ip", "login with deploy:{v}@10.20.30.40."),
    ("ip_id_pw_triple", "IP ID PW 10.20.30.40 deploy {v}"),
    ("ip_id_pw_triple", "IP/ID/PW 10.20.30.40/deploy/{v}"),
    ("sql_password_bare", "CREATE USER app IDENTIFIED BY {v};"),
    ("sql_password_bare", "ALTER USER app IDENTIFIED BY {v}\n"),
    ("env_default_secret", 'token = os.environ.get("API_TOKEN") or "{v}"'),
    ("env_default_secret", "const key = env.get('SECRET_KEY') || '{v}'"),
    ("env_default_secret", 'create(getenv(\\"SECRET\\", \\"{v}\\"))'),
    ("env_default_secret", 'x = getenv(SECRET, "{v}")'),
    ("compared_secret", 'if password == "{v}":'),
    ("compared_secret", "if (apiToken !== '{v}') {{"),
    ("compared_secret", 'if (password != "{v}")'),
    ("compared_secret", 'return password.equals("{v}");'),
    ("sonar_login", "sonar.login={v}"),
    ("sonar_login", 'SONAR_LOGIN := "{v}"'),
    ("sonar_login", "SONAR.LOGIN :::= {v}"),
]


@pytest.mark.parametrize(("name", "shape"), SHAPES)
def test_the_shape_is_found_by_its_detector(name: str, shape: str) -> None:
    text = shape.format(v=PASSWORD)
    at = text.index(PASSWORD)
    found = [
        m
        for m in BY_NAME[name].pattern.finditer(text)
        if any(m.start(g) == at for g in range(1, 4) if g <= (m.re.groups))
    ]
    assert found, (name, text)


@pytest.mark.parametrize(("name", "shape"), SHAPES)
def test_only_the_password_is_redacted(name: str, shape: str) -> None:
    _only_the_value_changed(shape.format(v=PASSWORD), PASSWORD)


@pytest.mark.parametrize("password", ["ioww358mdsw", "QWER123ASDF", "Passw0rdXyz"])
def test_an_unquoted_sql_password_needs_letters_and_a_digit_not_three_kinds(password: str) -> None:
    """The detector's own spec draws `[A-Za-z]{4}[0-9]{3}[A-Za-z]{4}`: one case and digits is a password after
    `IDENTIFIED BY` (the kit's whole_values property found `ioww358mdsw` missed when three kinds were asked)."""
    _only_the_value_changed(f"CREATE USER app IDENTIFIED BY {password};", password)


# --- benign text of the same shapes -------------------------------------------------------------------------------

BENIGN = [
    "pass: true",
    "Pass :meth:`peek` a default value to return",
    "tests pass: 15/20",
    "The password is required. Password reset links expire after an hour.",
    "10.0.0.1 src/main.py",
    "10.0.0.1 master/node01",
    "10.245.1.3   kubernetes.io/hostname=10.245.1.3   Ready    <none>",  # a node's label (kubectl --show-labels)
    "git@github.com:org/repo.git",
    "deploy:x@10.0.0.1",
    "ALTER USER app IDENTIFIED BY VALUES;",
    "ALTER USER app IDENTIFIED BY :new_password;",
    "CREATE USER app IDENTIFIED EXTERNALLY;",
    'x = os.getenv("DB_PASSWORD", "")',
    'if token == "<eos>":',
    'if self.token_type == "Bearer":',
    'if password == "":',
    "if password != confirm_password:",
    "ID/PW 10.0.0.1:xxx deploy",
    "ID/PW: see the vault",
    "sonar.login=${SONAR_TOKEN}",
    "User/Password authentication is disabled.",
]


@pytest.mark.parametrize("text", BENIGN)
def test_benign_text_of_the_same_shapes_is_unchanged(text: str) -> None:
    assert _out_text(text) == text


# --- properties ---------------------------------------------------------------------------------------------------

_LOWER = "abcdefghjkmnpqrstuvwxyz"
_UPPER = "ABCDEFGHJKLMNPQRSTUVWXYZ"
_DIGITS = "23456789"
_SYMBOLS = "#%^*_+!@"
_users = st.text(_LOWER, min_size=3, max_size=12)


@st.composite
def _passwords(draw: st.DrawFn) -> str:
    """Passwords as people write them: the four kinds of character, shuffled, 8 to 20 long."""
    parts = [draw(st.sampled_from(kind)) for kind in (_LOWER, _UPPER, _DIGITS, _SYMBOLS)]
    parts += draw(st.lists(st.sampled_from(_LOWER + _UPPER + _DIGITS + _SYMBOLS), min_size=4, max_size=16))
    return "".join(draw(st.permutations(parts)))


@given(_users, _passwords(), st.sampled_from(["ID/PW:{u}/{p}", "ID/PW {u}({p})", "ID(PW): {u}({p})",
                                               "id/pw -> {u}/{p}", "user/pw: {u} / {p}"]))  # fmt: skip
def test_an_id_pw_pair_keeps_its_user_and_loses_its_password(user: str, password: str, shape: str) -> None:
    text = shape.format(u=user, p=password)
    _only_the_value_changed(text, password)


@example(octets=(1, 1, 1, 1), user="aaa", password="aA2@aaaa", shape="{u}:{p}@{ip}")  # an @ in the password
@given(st.tuples(*[st.integers(1, 254)] * 4), _users, _passwords(), st.sampled_from(["{ip} {u}/{p}", "{ip},{u}/{p}",
                                                                                      "{u}:{p}@{ip}"]))  # fmt: skip
def test_an_address_with_a_login_loses_only_the_password(
    octets: tuple[int, ...], user: str, password: str, shape: str
) -> None:
    text = shape.format(ip=".".join(map(str, octets)), u=user, p=password)
    _only_the_value_changed(text, password)


@given(st.one_of(st.text(_LOWER + _DIGITS, min_size=6, max_size=30), st.text(_LOWER + "._-/", min_size=6, max_size=30)))
def test_a_value_of_two_kinds_of_character_is_never_a_strong_password(value: str) -> None:
    """Paths and names (`src/main.py`, `node01`) have at most two kinds of character: the strict test used
    where no label says `password` never takes them."""
    assert _strong_password(value, "password") is None


@given(_passwords())
def test_a_mixed_password_passes_the_strict_test(password: str) -> None:
    assert _strong_password(password, "password") == "password"


def _spans(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for detector in ASSIGNMENT_DETECTORS:
        for match in detector.pattern.finditer(text):
            out.append(match.span())
    return out


@given(st.text(st.sampled_from("ID/PW: (pass)=->10.2.\uacc4\uc815\ube44\ubc88 aZ9#"), max_size=400))
def test_the_patterns_stay_fast_and_total_on_label_soup(text: str) -> None:
    """Bounded quantifiers: text made of the labels' own characters never makes a pattern fail or backtrack long."""
    spans: Any = _spans(text)
    assert all(0 <= a <= b <= len(text) for a, b in spans)
