"""Secrets cut across streamed messages (issue 29): through the router with the real transform stage, each
progress or log message keeps its own text (byte for byte under an open policy; under `standard` with the
secret's spans redacted in place), and a secret split across two of them never comes out in any part."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.testing.formats import BUILTIN_FORMATS
from tests.stream_helpers import GHP, OPEN, STANDARD, _stream, _texts

ISSUE = ["connecting to db; retry=3", "step 17: GET /v1/items ok"]


def test_open_policy_every_message_arrives_exactly_as_sent() -> None:
    messages = [*ISSUE, f"token {GHP[:10]}", f"{GHP[10:]} done", "last ghp_Zz9"]
    raw = _stream(OPEN, "notifications/progress", messages)
    assert _texts(raw) == messages  # boundaries kept: no "…retry=3step 17: GET …"
    plain = _stream(OPEN, "notifications/progress", messages, hold=False)
    assert raw == plain  # byte for byte what the gateway sends without any hold-back


def test_standard_keeps_boundaries_and_redacts_a_split_token_in_place() -> None:
    messages = ["connecting; retry=3", f"token {GHP[:10]}", f"{GHP[10:]} done", "step 17: GET /v1/items ok"]
    texts = _texts(_stream(STANDARD, "notifications/progress", messages))
    assert len(texts) == 4
    assert texts[0] == messages[0] and texts[3] == messages[3]
    assert texts[1].startswith("token ") and "[REDACTED" in texts[1]
    assert texts[2].endswith(" done")
    assert all(GHP[:8] not in t and GHP[12:] not in t for t in texts)


def test_standard_log_messages_keep_boundaries() -> None:
    messages = ["db_password:", " hunter2-Xk9-pQ7-zR4 loaded", "ready"]
    texts = _texts(_stream(STANDARD, "notifications/message", messages), "data")
    assert len(texts) == 3 and texts[2] == "ready" and texts[0] == "db_password:"
    assert "hunter2-Xk9-pQ7-zR4" not in texts[1] and texts[1].endswith(" loaded")


def test_a_message_ending_in_a_prefix_is_flushed_before_the_reply() -> None:
    texts = _texts(_stream(STANDARD, "notifications/progress", ["next ghp_"]))
    assert texts == ["next ghp_"]


SPLIT_FAMILIES = ["github_token", "anthropic_api_key", "slack_token", "stripe_key", "gitlab_token", "openai_api_key"]


@settings(max_examples=60, deadline=None)
@given(
    family=st.sampled_from(SPLIT_FAMILIES),
    data=st.data(),
    cut=st.floats(0.05, 0.95),
    before=st.sampled_from(["", "step 1: ", "reading the key "]),
    after=st.sampled_from(["", " done", " and more"]),
)
@example(family="github_token", data=None, cut=0.5, before="", after="")
def test_a_token_split_across_two_messages_never_comes_out(
    family: str, data: Any, cut: float, before: str, after: str
) -> None:
    fmt = BUILTIN_FORMATS[family]
    value = data.draw(fmt.samples).value if data is not None else GHP
    at = max(1, min(len(value) - 1, int(cut * len(value))))
    messages = [before + value[:at], value[at:] + after]
    texts = _texts(_stream(STANDARD, "notifications/progress", messages))
    assert len(texts) == 2
    assert value not in "".join(texts)
    # neither half survives where it is long enough to identify the token
    for half in (value[:at], value[at:]):
        if len(half) >= 16:
            assert all(half not in t for t in texts)
