"""A secret wrapped onto the following lines (issue 29: "40-column wrapping leaves half of a key"): every piece
is redacted, and the lines that do not continue it stay byte for byte."""

from __future__ import annotations

import random
import string

from hypothesis import given
from hypothesis import strategies as st

from interceptors.testing.properties import RedactionTarget

STANDARD = RedactionTarget.load("standard")
TOKEN = string.ascii_letters + string.digits


def _out(text: str) -> str:
    result = STANDARD.transform("tools/call", {"content": [{"type": "text", "text": text}]})
    return str(result["content"][0]["text"])


def _token(seed: int, size: int) -> str:
    """A random token (from a seed, so that shrinking keeps it random: a run of zeros is no secret)."""
    rng = random.Random(seed)
    return "".join(rng.choice(TOKEN) for _ in range(size))


SEEDS = st.integers(0, 2**32)


def _wrap(value: str, width: int) -> list[str]:
    return [value[i : i + width] for i in range(0, len(value), width)]


@given(
    seed=SEEDS,
    size=st.integers(41, 200),
    width=st.sampled_from([32, 40, 64, 76]),
    label=st.sampled_from(["api_token", "vault_token", "SECRET_KEY", "client_secret"]),
    quote=st.sampled_from(['"', "'", "`"]),
)
def test_a_quoted_value_wrapped_on_its_own_loses_every_piece(
    seed: int, size: int, width: int, label: str, quote: str
) -> None:
    body = _token(seed, size)
    assert body not in _out(f"{label} = {quote}{body}{quote}")  # caught on one line: the property is the wrapping
    pieces = _wrap(body, width)
    text = f"before\n{label} = {quote}" + "\n".join(pieces) + f"{quote}\nafter the value"
    out = _out(text)
    assert not any(piece in out for piece in pieces if len(piece) >= 8), out
    assert out.startswith(f"before\n{label} = ") and out.endswith("\nafter the value"), out


@given(seed=SEEDS, size=st.integers(40, 160))
def test_a_whole_line_wrapped_at_the_terminals_width_loses_every_piece(seed: int, size: int) -> None:
    line = f"export GITHUB_TOKEN=ghp_{_token(seed, size)}"
    pieces = _wrap(line, 40)
    out = _out("$ env\n" + "\n".join(pieces) + "\n$ exit\n")
    secret_pieces = [pieces[0][len("export GITHUB_TOKEN=") :], *pieces[1:]]
    assert not any(p in out for p in secret_pieces if len(p) >= 8), out
    assert out.endswith("\n$ exit\n")


@given(word=st.sampled_from(["debug", "DONE", "ok", "release notes", "see the docs", "exit 0", "}"]))
def test_a_line_after_a_secret_that_does_not_continue_it_stays(word: str) -> None:
    text = f'api_key = "sk_live_{"a1B2c3D4e5F6g7H8i9J0kLmN"}"\n{word}\nnext line'
    out = _out(text)
    assert out != text
    assert out.endswith(f"\n{word}\nnext line")


def test_a_short_line_after_an_unquoted_secret_needs_letters_and_digits() -> None:
    token = "dp.pt.tr7pk1eqvh7uvsnafs5ip721pw2w9iqfo9"
    assert "of8wygs7g" not in _out(f"doppler_token: {token}\nof8wygs7g\nend")
    assert _out(f"doppler_token: {token}\nrestarting\nend").endswith("\nrestarting\nend")


def test_an_identifier_at_a_line_end_has_no_tail() -> None:
    text = "contact: someone@example.com\nabcdefgh12345678\n"
    assert _out(text).endswith("\nabcdefgh12345678\n")


@given(
    seed=SEEDS,
    setting=st.sampled_from(["BACKUP_ENABLED=true", "debug=1", "logLevel: info", "db.pool.size=10", "X_RETRY=3"]),
)
def test_a_setting_on_the_next_line_is_no_tail(seed: int, setting: str) -> None:
    """A value filling its line, then a setting of its own (mixed case and `=`, so it would pass as random)."""
    token = _token(seed, 60)
    out = _out(f"API_TOKEN={token}\n{setting}")
    assert token not in out and out.endswith(f"\n{setting}"), out
