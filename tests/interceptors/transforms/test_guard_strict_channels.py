"""Issue 30: the request guard judges vendor tokens strictly in every channel but tool arguments, reads a Jira or
Confluence personal access token by its decoded structure wherever it sits, reads escaped quotes layer by layer,
and judges a labelled hex value against a hex alphabet's entropy.

The output path spares a value in a vendor's format whose body reads like documentation's sample (runs, repeats,
few distinct characters), so a document that shows one reads unaltered; tool arguments may carry such a document,
and keep that sparing. A resource URI, a root, `_meta`, a completion's value, a prompt's arguments, an elicitation's
and a sampling answer are judged strictly (issue 30: no secret reaches the upstream through them): there a value a
vendor's prefix starts is refused, whatever its body, unless a marker word says it is a sample. Through the real
stages (and the real gateway, to a recording upstream, for the last test); tokens are built here, never copied.
"""

from __future__ import annotations

import base64
import json
import random
import string
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from bench.guard_channels import CHANNELS, ENCODINGS, Secret, run_cases, summary
from interceptors import Phase
from interceptors.registry import Invocation
from interceptors.transforms.argvalues import (
    VENDOR_RULES,
    credential_like,
    json_unescaped,
    labelled_secret,
    shaped_secret,
    vendor_rules,
    vendor_token,
)
from interceptors.transforms.docvalues import documentation_value
from interceptors.transforms.guard import SecretGuard
from interceptors.transforms.mutators import STRICT_ANSWERS, STRICT_CHANNELS, TransformStages
from interceptors.transforms.profiles import STANDARD_TRANSFORMS
from interceptors.transforms.tokenspec import parse_spec

_BASE62 = string.ascii_letters + string.digits
GUARD = SecretGuard({})
STAGES = TransformStages(STANDARD_TRANSFORMS)


def _token(seed: int, size: int, alphabet: str = _BASE62) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(size))


# Vendor tokens whose bodies read like documentation's samples: the output path spares each for its shape.
SAMPLES = {
    "a run of zeros (GitHub)": "ghp_" + "0" * 31 + _token(1, 5),
    "counting digits (Slack)": "xoxb-" + "12345678901" + "-" + "1234567890123" + "-" + _token(2, 24),
    "counting letters (Anthropic)": "sk-ant-api03-" + (string.ascii_lowercase * 4)[:91] + "AA" + "AA",
    "a format gone wrong, counting (SonarQube)": "squ_" + "12345678ABCDEFGH" * 2 + "87654321",
}


def _request(event: str, params: dict[str, Any]) -> str | None:
    """The standard stages' refusal of a client request (None: allowed)."""
    payload = {"method": event, "params": params}
    verdict = STAGES.request(Invocation("transforms/request", event, Phase.REQUEST, payload))
    return None if verdict.valid else "; ".join(message.message for message in verdict.messages or ())


def _answer(event: str, answer: dict[str, Any]) -> str | None:
    """The standard stages' refusal of the client's answer to a server's request (None: allowed)."""
    verdict = STAGES.answer(Invocation("transforms/answers", event, Phase.RESPONSE, answer))
    return None if verdict.valid else "; ".join(message.message for message in verdict.messages or ())


def _strict_refusals(token: str) -> dict[str, str | None]:
    """Every strict channel's refusal of `token` (None where it was allowed)."""
    prompt = {"type": "ref/prompt", "name": "p"}
    return {
        "/uri (read)": _request("resources/read", {"uri": "notes://n/" + quote(token, safe="")}),
        "/uri (subscribe)": _request("resources/subscribe", {"uri": "notes://n/" + token}),
        "/_meta/note": _request("tools/call", {"name": "t", "arguments": {}, "_meta": {"note": token}}),
        "/argument/value": _request("completion/complete", {"ref": prompt, "argument": {"name": "q", "value": token}}),
        "/context/arguments/q": _request(
            "completion/complete",
            {"ref": prompt, "argument": {"name": "n", "value": "a"}, "context": {"arguments": {"q": token}}},
        ),
        "/content/note": _answer("elicitation/create", {"action": "accept", "content": {"note": token}}),
        "/roots/0/uri": _answer("roots/list", {"roots": [{"uri": "file:///p/" + quote(token), "name": "p"}]}),
        "/roots/0/name": _answer("roots/list", {"roots": [{"uri": "file:///p", "name": token}]}),
        "/arguments/name": _request("prompts/get", {"name": "p", "arguments": {"name": token}}),
        "/content/text": _answer(
            "sampling/createMessage", {"role": "assistant", "content": {"type": "text", "text": token}, "model": "m"}
        ),
    }


def _document_refusals(token: str) -> dict[str, str | None]:
    """The document channel's refusal of `token` (a tool's arguments)."""
    return {"tool": _request("tools/call", {"name": "t", "arguments": {"query": token}})}


@pytest.mark.parametrize("token", list(SAMPLES.values()), ids=list(SAMPLES))
def test_a_vendor_sample_is_refused_in_every_channel_without_documents_naming_where(token: str) -> None:
    assert vendor_token(token)
    for where, message in _strict_refusals(token).items():
        assert message is not None, where
        assert f"at '{where.split(' ')[0]}'" in message, (where, message)
        assert token not in message and token[4:] not in message


@pytest.mark.parametrize("token", list(SAMPLES.values()), ids=list(SAMPLES))
def test_a_vendor_sample_keeps_the_output_paths_sparing_in_channels_that_carry_documents(token: str) -> None:
    # a model may pass a document that shows a sample (a README, a test file): judged as the output path judges it
    assert _document_refusals(token) == {"tool": None}


@pytest.mark.parametrize(
    "value",
    [
        "ghp_" + "x" * 36,  # a marker: `x` runs
        "ghp_EXAMPLE" + _token(3, 25),
        "sk-ant-api03-your_api_key_here" + "a" * 70,
        "npm_config_cache_directory_name",  # words after a vendor's prefix: a name, not a token
        "sk-learn-classifier-model-final",
        "notes/2024-06-01/meeting",
    ],
)
def test_marked_samples_names_and_ids_pass_the_strict_channels(value: str) -> None:
    assert not vendor_token(value)
    assert all(message is None for message in _strict_refusals(value).values()), value


_SPEC_DETECTORS = [d for d in VENDOR_RULES.scanner.detectors if d.spec]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_SPEC_DETECTORS), st.integers(0, 2**32), st.integers(0, 10_000), st.sampled_from([1, 2, 3]))
def test_a_vendor_token_the_output_path_spares_by_its_shape_is_refused_where_no_document_is(
    detector: Any, seed: int, where: int, period: int
) -> None:
    spelled, value = parse_spec(detector.spec).generate(random.Random(seed))
    assume("\n" not in spelled)
    # the body made sample-like: a window of 10 alphanumerics repeats its first `period` characters (`0000…`, `ababab…`)
    spans = [i for i in range(6, len(value) - 16) if value[i : i + 10].isalnum()]
    assume(spans)
    start = spans[where % len(spans)]
    cycle = value[start : start + period]
    sample = value[:start] + (cycle * 10)[:10] + value[start + 10 :]
    found = [f for f in VENDOR_RULES.scanner.scan(sample) if f.detector is detector and f.value == sample]
    assume(found and documentation_value(sample, ""))  # the output path would spare it
    assume(not documentation_value(sample, "", shape=False))  # by its shape, no marker
    assert vendor_token(sample)
    assert GUARD.findings(sample, strict=True)[1]
    assert _request("resources/read", {"uri": "notes://n/" + quote(sample, safe="")}) is not None


def test_a_guard_that_leaves_a_detector_alone_leaves_its_samples_alone_too() -> None:
    token = SAMPLES["counting digits (Slack)"]
    assert SecretGuard({}).findings(token, strict=True)[1]
    lenient = SecretGuard({"disabled_detectors": ["slack_token", "aws_access_key_id"]})
    assert not vendor_token(token, vendor_rules(frozenset({"slack_token"})))
    assert not lenient.findings({"q": token}, strict=True)[1]
    assert not SecretGuard({"categories": ["credential"]}).findings({"q": token}, strict=True)[1]


def test_with_argument_values_off_no_channel_is_strict() -> None:
    token = SAMPLES["a run of zeros (GitHub)"]
    assert not SecretGuard({"argument_values": False}).findings({"q": token}, strict=True)[1]


def test_strict_channels_are_those_without_documents() -> None:
    # tool arguments are judged apart (the refusing guards), with the output path's sparing of samples
    assert {("uri",), ("_meta",), ("arguments",), ("argument", "value"), ("context", "arguments")} == STRICT_CHANNELS
    assert {"elicitation/create", "roots/list", "sampling/createMessage"} == STRICT_ANSWERS


# --- a Jira or Confluence Data Center personal access token, by its decoded structure -------------------------------


def _pat(digits: str, tail: bytes) -> str:
    return base64.b64encode(digits.encode() + b":" + tail).decode()


_TAILS = st.binary(min_size=20, max_size=20).filter(lambda b: sum(not 32 <= c < 127 for c in b) >= 6)


@settings(max_examples=60, deadline=None)
@given(st.text("0123456789", min_size=12, max_size=12), _TAILS, st.binary(max_size=60), st.binary(max_size=60))
@example("123456789012", bytes(range(200, 220)), b"\x89PNG\r\n\x1a\n", b"IEND")
def test_a_data_center_pat_is_found_inside_a_data_value(digits: str, tail: bytes, before: bytes, after: bytes) -> None:
    token = _pat(digits, tail)
    blob = base64.b64encode(before).decode().rstrip("=") + "/" + token + "/" + base64.b64encode(after).decode()
    text = f'"image/png": "{blob}",'
    assert shaped_secret(text) and shaped_secret(token)
    message = _request("tools/call", {"name": "t", "arguments": {"icon": text}})
    assert message is not None and "at '/arguments/icon'" in message and token not in message


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(b"202406010930: backup finished, 3 files").decode(),  # a stamp then text: no random bytes
        _pat("12345678901", bytes(range(200, 221))),  # 11 digits
        base64.b64encode(b"123456789012;" + bytes(range(200, 220))).decode(),  # no `:`
        base64.b64encode(b"0001:" + bytes(range(200, 228))).decode(),
    ],
)
def test_base64_that_is_not_a_data_center_pat_is_not_one(text: str) -> None:
    assert not shaped_secret(text)


# --- escaped quotes, layer by layer ---------------------------------------------------------------------------------


def _escaped(text: str, layers: int) -> str:
    for _ in range(layers):
        text = json.dumps(text)[1:-1]
    return text


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 3), st.sampled_from(["salt", "api_key", "secret", "password"]))
def test_a_labelled_value_in_json_escaped_inside_strings_is_refused(seed: int, layers: int, label: str) -> None:
    value = _token(seed, 16, "0123456789abcdef") if label == "salt" else _token(seed, 14)
    assume(credential_like(value))
    line = 'cfg = "' + _escaped(json.dumps({label: value}), layers) + '"'
    assert json_unescaped(line) == 'cfg = "' + json.dumps({label: value}) + '"'
    message = _request("tools/call", {"name": "t", "arguments": {"query": line}})
    assert message is not None and "at '/arguments/query'" in message and value not in message


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_escaped_json_without_a_secret_passes(layers: int) -> None:
    line = 'cfg = "' + _escaped(json.dumps({"mode": "fast", "retries": 3, "label": "weekly report"}), layers) + '"'
    assert _request("tools/call", {"name": "t", "arguments": {"query": line}}) is None


def test_json_unescaped_leaves_text_without_escaped_quotes() -> None:
    assert json_unescaped("C:\\path\\to\\file") is None
    assert json_unescaped('say \\"hi\\"') == 'say "hi"'


# --- a labelled hex value: a hex alphabet's entropy ------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.text("0123456789abcdef", min_size=16, max_size=40))
def test_a_labelled_hex_value_is_judged_against_the_hex_alphabet(value: str) -> None:
    from interceptors.transforms.entities import shannon_entropy

    assume(any(c.isdigit() for c in value) and any(c.isalpha() for c in value))
    assume(not documentation_value(value) and not documentation_value(value, strict=False))  # (`0000001234…`)
    assert credential_like(value) == (shannon_entropy(value) >= 3.0)
    if credential_like(value):
        assert labelled_secret(f'salt = "{value}"')
        assert labelled_secret(f'salt = "{value.upper()}"')
        assert not labelled_secret(f'sha256 = "{value}"') and not labelled_secret(f'key_id = "{value}"')


def test_a_hex_literal_in_code_is_a_number() -> None:
    assert credential_like("4b9a6d8b638eb0c61f")
    assert not credential_like("0x81103c1452dd61cd")  # a mask: the hex floor is for hex digits alone


# --- through the gateway ----------------------------------------------------------------------------------------------

_DOCUMENT_CHANNELS = {"tool_args"}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # resources/subscribe is one of the channels
def test_through_the_gateway_a_vendor_sample_reaches_no_channel_without_documents() -> None:
    secrets = [Secret(f"sample:{name}", token, token) for name, token in SAMPLES.items()]
    encodings = ("plain", "base64", "percent", "json")
    data = summary(anyio.run(lambda: run_cases(secrets, encodings=encodings)))
    assert set(data) == set(CHANNELS)
    for channel, row in data.items():
        assert row["control_reached"], channel
        assert row["refusals_holding_the_secret"] == 0, channel
        plain, encoded = row["plain"], row["encoded"]
        if channel in _DOCUMENT_CHANNELS:
            assert plain == [len(secrets), len(secrets)], (channel, row)  # the output path's sparing, kept
        else:
            assert plain[0] == 0 and encoded[0] == 0, (channel, row)
            if channel != "resource_uri":  # (the policy refuses some URIs first, in its own words)
                assert row["refusals_naming_a_path"] == plain[1] + encoded[1], (channel, row)
    assert set(ENCODINGS) >= set(encodings)
