"""Issue 30: the request guard on every client-to-server channel, with the transforms' detection.

Through the real gateway (in process, the stages `proxy --policy standard` builds) to a real upstream process that
writes down what it receives (`bench.recording_upstream`), an SDK client sends generated secrets of the built-in
vendor formats, plain and encoded (base64, twice, hex, `%XX`, gzip then base64, JSON inside a string, JSON twice,
JSON then base64) and JSON Web Keys, in each channel: tool, prompt and completion arguments, resource URIs,
`_meta`, and its answers to the upstream's sampling, elicitation and roots requests (`bench.guard_channels`).
Secrets are generated from the format specs at run time (never stored).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.guard_channels import CHANNELS, ENCODINGS, generated_secrets, jwk_secrets, run_cases, summary
from interceptors.transforms import SecretGuard, SecretsRefused, TransformContext
from interceptors.transforms.guard import pointer_segment

GITHUB = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
JWK_D = "CQn8hcxp6MOe1IKF_Xc1dFBkBjk4l9GZ9BphZtGoLRY"
JWK = json.dumps({"kty": "EC", "crv": "P-256", "x": "abc", "d": JWK_D})
GUARD = SecretGuard({})


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # resources/subscribe is one of the channels
def test_through_the_gateway_no_channel_but_tool_arguments_lets_a_secret_through() -> None:
    # every fourth family (a spread of vendors, labels, connection strings, keys) and the JWKs, in every encoding
    secrets = generated_secrets()
    chosen = secrets[::4] + [s for s in secrets if s.family.startswith("jwk")]
    data = summary(anyio.run(lambda: run_cases(chosen)))
    assert set(data) == set(CHANNELS)
    for channel, row in data.items():
        assert row["control_reached"], f"{channel}: the benign control never reached the upstream"
        assert row["refusals_holding_the_secret"] == 0, channel
        plain, encoded = row["plain"], row["encoded"]
        assert plain[1] == len(chosen) and encoded[1] == len(chosen) * (len(ENCODINGS) - 1)
        if channel == "tool_args":  # the acceptance: at most 2% plain and 5% encoded
            assert plain[0] <= 0.02 * plain[1] and encoded[0] <= 0.05 * encoded[1], row
        else:
            assert plain[0] == 0 and encoded[0] <= 0.05 * encoded[1], (channel, row)
        refused = plain[1] - plain[0] + encoded[1] - encoded[0]
        if channel != "resource_uri":
            assert row["audited_denials"] == refused, (channel, row)  # every refusal, an answer's too, is audited
            assert row["refusals_naming_a_path"] == refused, (channel, row)
        else:  # the policy refuses some URIs first, in its own words (no template matches: audited `not_found`)
            assert 0 < row["audited_denials"] <= refused and 0 < row["refusals_naming_a_path"] <= refused, row


# --- the guard's own answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "pointer"),
    [
        ({"config": {"token": GITHUB}}, "/arguments/config/token"),
        ({"query": "ok", "list": ["a", {"deep": [1, f"use {GITHUB}"]}]}, "/arguments/list/1/deep/1"),
        ({"config": json.dumps({"auth": {"key": GITHUB}})}, "/arguments/config"),
        ({"config": json.dumps(json.dumps({"note": JWK}))}, "/arguments/config"),
        # `d` is random: a secret on its own (the guard's bare-value rule), so its own member is named
        ({"jwk": {"kty": "EC", "crv": "P-256", "x": "abc", "d": JWK_D}}, "/arguments/jwk/d"),
        ({"a/b~c": GITHUB}, "/arguments/a~1b~0c"),
        ({GITHUB: 1}, "/arguments"),  # a member whose name is the secret is never named
        ({"x" * 100: GITHUB}, "/arguments/" + "x" * 63 + "…"),
    ],
)
def test_a_refusal_names_the_pointer_of_the_secret_never_the_secret(arguments: dict[str, Any], pointer: str) -> None:
    guard = SecretGuard({})
    _, found = guard.findings(arguments)
    assert found
    located = guard.locate(arguments, "/arguments")
    assert located == pointer
    refused = SecretsRefused(found, located)
    assert f"at '{pointer}'" in str(refused) and refused.data["path"] == pointer
    assert GITHUB not in str(refused) and JWK_D not in str(refused)


def test_pointer_segments_are_escaped_and_printable() -> None:
    assert pointer_segment("a/b~c") == "a~1b~0c"
    assert pointer_segment("a\u200bb") == "<unprintable>"
    assert pointer_segment("line\nbreak") == "<unprintable>"
    assert pointer_segment(3) == "3"


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_the_guard_reads_every_encoding_of_a_jwk(encoding: str) -> None:
    for secret in jwk_secrets(__import__("random").Random(1)):
        payload = ENCODINGS[encoding](secret.spelled)
        assert SecretGuard({}).findings({"query": payload})[1], (secret.family, encoding)


def test_decode_false_judges_arguments_as_spelled() -> None:
    encoded = ENCODINGS["base64"](f"token {GITHUB}")
    assert SecretGuard({}).findings({"q": encoded})[1]
    assert not SecretGuard({"decode": False}).findings({"q": encoded})[1]


_KEYS = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)


@st.composite
def planted(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """Arguments with one secret at a random depth (mappings of neutral names and lists) and the path to it."""
    path: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            path.append(draw(_KEYS.filter(lambda k: k != "other" and not GUARD.findings({k: "x"})[1])))
        else:
            path.append(draw(st.integers(0, 2)))
    value: Any = draw(st.sampled_from([GITHUB, f"the token is {GITHUB}", ENCODINGS["base64"](GITHUB)]))
    for step in reversed(path):
        value = [*(["benign"] * step), value] if isinstance(step, int) else {step: value, "other": "benign"}
    return {"root": value}, ["root", *path]


@settings(max_examples=60, deadline=None)
@given(planted())
@example(({"root": {"~/": GITHUB, "other": "benign"}}, ["root", "~/"]))
def test_the_pointer_leads_to_the_secret_or_to_a_container_of_it(case: tuple[Any, list[Any]]) -> None:
    arguments, path = case
    assert GUARD.findings(arguments)[1]
    located = GUARD.locate(arguments, "/arguments")
    full = "/arguments" + "".join(f"/{pointer_segment(step)}" for step in path)
    assert located == full or full.startswith(located + "/")
    assert GITHUB not in located
    with pytest.raises(SecretsRefused) as info:
        GUARD.apply(arguments, TransformContext())
    assert GITHUB not in str(info.value)


# --- the stages' handlers, without a chain -----------------------------------------------------------------------


def _refusal_message(verdict: Any) -> str | None:
    """The message a blocking verdict gives the requester, or None when it allows."""
    if verdict.valid:
        return None
    return "; ".join(message.message for message in verdict.messages)


@pytest.mark.parametrize(
    ("event", "answer", "pointer"),
    [
        ("roots/list", {"roots": [{"uri": "file:///ok", "name": "ok"}, {"uri": "file:///x/" + "%67hp_" + GITHUB[4:]}]},
         "/roots/1/uri"),
        ("elicitation/create", {"action": "accept", "content": {"note": ENCODINGS["hex"](GITHUB)}}, "/content/note"),
        ("sampling/createMessage", {"role": "assistant", "content": {"type": "text", "text": JWK}, "model": "m"},
         "/content/text"),
        # a client's error answer, as the gateway presents it (result-shaped)
        ("sampling/createMessage", {"content": [{"type": "text", "text": f"cannot: {GITHUB}"}], "isError": True},
         "/content/0/text"),
    ],
)  # fmt: skip
def test_a_client_answer_carrying_a_secret_is_refused_naming_where(event: str, answer: Any, pointer: str) -> None:
    from interceptors import Phase
    from interceptors.registry import Invocation
    from interceptors.transforms.mutators import TransformStages
    from interceptors.transforms.profiles import STANDARD_TRANSFORMS

    stages = TransformStages(STANDARD_TRANSFORMS)
    message = _refusal_message(stages.answer(Invocation("transforms/answers", event, Phase.RESPONSE, answer)))
    assert message is not None and f"at '{pointer}'" in message and event in message
    assert GITHUB not in message and GITHUB[4:] not in message and JWK_D not in message
    clean = {"roots": [{"uri": "file:///home/me/project", "name": "project"}]}
    assert (
        _refusal_message(stages.answer(Invocation("transforms/answers", "roots/list", Phase.RESPONSE, clean))) is None
    )


def test_protocol_meta_members_are_judged_by_value_only() -> None:
    from interceptors import Phase
    from interceptors.registry import Invocation
    from interceptors.transforms.mutators import TransformStages
    from interceptors.transforms.profiles import STANDARD_TRANSFORMS

    stages = TransformStages(STANDARD_TRANSFORMS)

    def judged(meta: dict[str, Any]) -> str | None:
        payload = {"method": "tools/call", "params": {"name": "t", "arguments": {}, "_meta": meta}}
        return _refusal_message(stages.request(Invocation("transforms/request", "tools/call", Phase.REQUEST, payload)))

    assert judged({"progressToken": "abc-123", "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}) is None
    assert "at '/_meta/progressToken'" in (judged({"progressToken": GITHUB}) or "")
    assert "at '/_meta/session_token'" in (judged({"progressToken": 1, "session_token": "abc"}) or "")
