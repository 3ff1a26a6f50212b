"""Credential families from their vendors' formats, evasions, every field, the benign corpus, split secrets.

Samples come from each family's format spec (`Detector.spec`, written from the vendor's documentation apart
from the pattern), drawn from fixed seeds: every run checks the same values.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interceptors.testing import CONTEXTS, RedactionTarget, find_leaks
from interceptors.testing.benign import CATEGORIES, altered, benign_corpus
from interceptors.transforms import STANDARD_TRANSFORMS, TransformContext, assemble_output, transform_payload
from interceptors.transforms.catalog import BUILTIN_BY_NAME, BUILTIN_DETECTORS
from interceptors.transforms.detectors import Detector, Scanner
from interceptors.transforms.stream import StreamHoldBack
from interceptors.transforms.tokenspec import SpecError, TokenSpec, crc32_base62, crc32_token_valid, parse_spec

STANDARD = RedactionTarget.load(STANDARD_TRANSFORMS)
SCANNER = Scanner(tuple(d for d in BUILTIN_DETECTORS if d.name != "uuid"))
FAMILIES = [d for d in BUILTIN_DETECTORS if d.spec]
SECRET_FAMILIES = [d for d in BUILTIN_DETECTORS if d.category in ("secret", "credential") and not d.fallback]
# Families that name the same value another family reports first (a label, then a prefixed token).
SAME_VALUE = {"labelled_key": {"secret_assignment"}, "secret_assignment": {"connection_string_secret"}}
SYNTAXES = ("{t}", "see {t} here", '{{"value": "{t}"}}', "VALUE={t}\n", "note: '{t}'", "`{t}`.")
GHP = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"


def samples(detector: Detector, count: int, seed: int = 11) -> list[tuple[str, str]]:
    spec = parse_spec(detector.spec)
    rng = random.Random(f"{seed}:{detector.name}")
    return [spec.generate(rng) for _ in range(count)]


def texts(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def tool(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


# --- the catalog -----------------------------------------------------------------------------------------------


def test_every_secret_family_has_a_spec_and_a_documented_source() -> None:
    missing = [d.name for d in SECRET_FAMILIES if not d.spec or not d.source]
    assert missing == []
    assert len(FAMILIES) >= 70


@pytest.mark.parametrize("detector", FAMILIES, ids=lambda d: d.name)
def test_family_finds_its_vendor_format_whole_in_every_syntax(detector: Detector) -> None:
    """Positive: every spec sample, in six syntaxes, is covered entirely by a finding of its family."""
    for index, (text, value) in enumerate(samples(detector, 30)):
        if "\n" in text and index % len(SYNTAXES) in (2, 4):
            continue  # a multi-line key is not a JSON string or a quoted YAML scalar
        planted = SYNTAXES[index % len(SYNTAXES)].format(t=text)
        at = planted.find(value)
        covering = [f for f in SCANNER.scan(planted) if f.start <= at and f.end >= at + len(value)]
        assert covering, f"{detector.name}: sample {index} not covered"
        assert covering[0].detector.name in {detector.name, *SAME_VALUE.get(detector.name, ())}


PREFIXED = [d for d in FAMILIES if isinstance(parse_spec(d.spec).parts[0], type(parse_spec("'a'").parts[0]))]


@pytest.mark.parametrize("detector", PREFIXED, ids=lambda d: d.name)
def test_family_near_miss_a_broken_prefix_is_not_its_format(detector: Detector) -> None:
    """Near-miss: the vendor's literal prefix with its first character changed is not the family's format."""
    alone = Scanner((detector,))
    for text, _ in samples(detector, 20):
        broken = "\u00a7" + text[1:]
        assert not [f for f in alone.scan(broken) if f.start <= 1], detector.name


def test_checksummed_tokens_are_verified() -> None:
    payload = "zQWBuTSOoRi4A9spHcVY5ncnsDkxkJ"
    valid = payload + crc32_base62(payload)
    assert crc32_token_valid(valid) and not crc32_token_valid(payload + "000000")
    alone = Scanner((BUILTIN_BY_NAME["npm_token"],))
    assert alone.scan("npm_" + valid) and not alone.scan("npm_" + "abcdefghijklmnopqrstuvwxyzabcdefghij")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("db_pass: Tr0ub4dor&3xyz", "Tr0ub4dor&3xyz"),
        ("PGPASSWORD=s3cr3t-Pg-pass psql -h db", "s3cr3t-Pg-pass"),
        ("MYSQL_ROOT_PASSWORD=R00tPassw0rd!", "R00tPassw0rd!"),
        ("curl -u deploy:Hunter2Hunter2 https://api.example.com/", "Hunter2Hunter2"),
        ("curl --user 'ops:Xy9!kLm2pQ' https://x", "Xy9!kLm2pQ"),
        ("mysql -u root -pS3cretPass shop", "S3cretPass"),
        ("sshpass -p 'Zz9yY8xX7w' ssh host", "Zz9yY8xX7w"),
        ("redis-cli -h cache -a R3disPassw0rd ping", "R3disPassw0rd"),
        ("machine api.example.com login deploy password N3tRcPassw0rd", "N3tRcPassw0rd"),
        ("DD_API_KEY=0f8e7d6c5b4a39281706f5e4d3c2b1a0", "0f8e7d6c5b4a39281706f5e4d3c2b1a0"),
        ("license_key: 9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"),
    ],
)
def test_labelled_and_command_line_credentials(text: str, secret: str) -> None:
    out = STANDARD.transform("tools/call", tool(text))
    assert secret not in texts(out)


@pytest.mark.parametrize(
    "text",
    ["mkdir -p /srv/app && mysql --version", "docker run -p 8080:80 mysql", "cache_key: 9a8b7c6d5e4f3a2b1c0d9e8f7a",
     "public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
     "const apiKey = process.env.STRIPE_SECRET_KEY;", "token = get_token(scope)", "password = os.environ['DB']"],
)  # fmt: skip
def test_command_and_code_look_alikes_are_left_alone(text: str) -> None:
    out = STANDARD.transform("tools/call", tool(text))
    assert out["content"][0]["text"] == text


# --- evasions ------------------------------------------------------------------------------------------------------

EVASIONS = {
    "zero_width_space": lambda v: v[:6] + "\u200b" + v[6:],
    "zero_width_joiner": lambda v: v[:5] + "\u200d" + v[5:],
    "soft_hyphen": lambda v: v[:7] + "\u00ad" + v[7:],
    "word_joiner": lambda v: v[:4] + "\u2060" + v[4:],
    "bidi_mark": lambda v: v[:3] + "\u202e" + v[3:],
    "variation_selector": lambda v: v[:6] + "\ufe0f" + v[6:],
    "fullwidth": lambda v: "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in v),
    "unicode_escape": lambda v: "".join(f"\\u{ord(c):04x}" for c in v[:4]) + v[4:],
    "html_decimal": lambda v: f"&#{ord(v[0])};" + v[1:],
    "html_hex": lambda v: f"&#x{ord(v[1]):x};".join((v[:1], v[2:])),
    "html_named": lambda v: v.replace("_", "&lowbar;", 1),
}


@pytest.mark.parametrize("evasion", sorted(EVASIONS))
@pytest.mark.parametrize(
    "family", ["github_token", "anthropic_api_key", "aws_access_key_id", "slack_webhook", "npm_token"]
)
def test_evasions_are_normalised_and_the_whole_original_span_is_redacted(family: str, evasion: str) -> None:
    for _, value in samples(BUILTIN_BY_NAME[family], 5):
        evaded = EVASIONS[evasion](value)
        text = f"leaked {evaded} here"
        findings = SCANNER.scan(text)
        assert [(f.start, f.end) for f in findings] == [(7, 7 + len(evaded))], (family, evasion)
        out = STANDARD.transform("tools/call", tool(text))
        emitted = out["content"][0]["text"]
        # Secrets are redacted, credentials (the AWS key id) masked: either way neither spelling comes out.
        assert emitted.startswith("leaked ") and emitted.endswith(" here") and evaded not in emitted
        assert value not in emitted and ("*" * 8 in emitted or "[REDACTED" in emitted)


def test_nbsp_and_other_spaces_read_as_spaces() -> None:
    out = STANDARD.transform("tools/call", tool("password:\u00a0Hunter2Hunter2\u2003ok"))
    assert "Hunter2Hunter2" not in texts(out)


# --- every field --------------------------------------------------------------------------------------------------


def test_meta_at_every_level_is_scanned_but_our_own_keys_are_not() -> None:
    result = {
        "content": [{"type": "text", "text": "ok", "_meta": {"note": GHP}},
                    {"type": "resource_link", "uri": "file:///a", "name": "a", "_meta": {"t": GHP}},
                    {"type": "resource", "resource": {"uri": "file:///b", "text": "b", "_meta": {"t": GHP}}}],
        "structuredContent": {"_meta": {"t": GHP}, "items": [{"_meta": {"deep": GHP}}]},
        "_meta": {"debug": GHP, "progressToken": "keep-me"},
    }  # fmt: skip
    out = STANDARD.transform("tools/call", copy.deepcopy(result))
    assert not find_leaks(out, [GHP])
    assert out["_meta"]["progressToken"] == "keep-me"


def test_cursors_are_redacted_only_where_a_detector_finds_a_credential() -> None:
    opaque = base64.urlsafe_b64encode(bytes(range(40, 88))).decode().rstrip("=")
    result = {"content": [], "structuredContent": {"nextPageToken": opaque, "cursor": f"after {GHP}",
                                                   "page": {"next_cursor": opaque}}}  # fmt: skip
    out = STANDARD.transform("tools/call", result)
    assert out["structuredContent"]["nextPageToken"] == opaque
    assert out["structuredContent"]["page"]["next_cursor"] == opaque
    assert GHP not in texts(out)


def test_the_log_logger_name_is_scanned() -> None:
    payload = {"content": [{"type": "text", "text": "started"}], "_meta": {
        "io.mcp-interceptors/channel": "log", "logger": f"svc {GHP}"}}  # fmt: skip
    out, _ = transform_payload("tools/call", payload, assemble_output(STANDARD_TRANSFORMS), TransformContext())
    assert GHP not in texts(out) and out["_meta"]["io.mcp-interceptors/channel"] == "log"


def test_blobs_whose_bytes_are_text_are_scanned_and_binary_ones_pass() -> None:
    env = base64.b64encode(f"GITHUB={GHP}\n".encode()).decode()
    binary = base64.b64encode(bytes(range(256))).decode()
    result = {"content": [{"type": "image", "mimeType": "image/png", "data": env},
                          {"type": "audio", "mimeType": "audio/wav", "data": binary},
                          {"type": "resource", "resource": {"uri": "file:///x.env", "blob": env}}]}  # fmt: skip
    out = STANDARD.transform("tools/call", copy.deepcopy(result))
    for block in (out["content"][0]["data"], out["content"][2]["resource"]["blob"]):
        assert GHP not in base64.b64decode(block).decode()
    assert out["content"][1]["data"] == binary
    read = STANDARD.transform("resources/read", {"contents": [{"uri": "file:///x.env", "blob": env}]})
    assert GHP not in base64.b64decode(read["contents"][0]["blob"]).decode()


# --- precision on the benign corpus ---------------------------------------------------------------------------------


def test_the_benign_corpus_is_left_alone() -> None:
    """1,200 realistic benign results in 16 categories: at most 0.5% altered (measured: none)."""
    corpus = benign_corpus(1200)
    changed = [category for category, payload in corpus if altered(payload, STANDARD.transform("tools/call",
               copy.deepcopy(payload)))]  # fmt: skip
    assert len(corpus) >= 1000 and set(CATEGORIES) == {c for c, _ in corpus}
    assert len(changed) <= len(corpus) // 200, sorted(set(changed))


@pytest.mark.parametrize("category", sorted(CATEGORIES))
def test_each_benign_category_comes_out_unchanged(category: str) -> None:
    rng = random.Random(f"benign:{category}")
    for _ in range(25):
        payload = CATEGORIES[category](rng)
        assert not altered(payload, STANDARD.transform("tools/call", copy.deepcopy(payload))), category


# --- split secrets -


@pytest.mark.parametrize("cut", [1, 4, 9, 20, 39])
def test_a_token_split_across_adjacent_text_blocks_is_redacted_in_both(cut: int) -> None:
    result = {"content": [{"type": "text", "text": "token " + GHP[:cut]}, {"type": "text", "text": GHP[cut:] + " ok"}]}
    out = STANDARD.transform("tools/call", result)
    joined = "".join(block["text"] for block in out["content"])
    assert GHP not in joined and GHP[:cut] + GHP[cut:] not in joined.replace(" ", "")
    assert out["content"][1]["text"].endswith(" ok")


def test_a_label_and_its_value_in_adjacent_blocks() -> None:
    result = {"content": [{"type": "text", "text": "db_pass:"}, {"type": "text", "text": " Tr0ub4dor&3xyz, done"}]}
    out = STANDARD.transform("tools/call", result)
    assert "Tr0ub4dor&3xyz" not in texts(out)


STREAMED = ["github_token", "anthropic_api_key", "aws_access_key_id", "slack_token", "stripe_key", "npm_token",
            "gitlab_token", "openai_api_key", "sendgrid_api_key"]  # fmt: skip


@given(
    family=st.sampled_from(STREAMED),
    seed=st.integers(0, 10_000),
    cut=st.floats(0.0, 1.0),
    before=st.sampled_from(["", "step 1: ", "reading the key "]),
    after=st.sampled_from(["", " done", " and more"]),
)
def test_stream_hold_back_never_lets_a_split_token_out_whole_or_in_joining_halves(
    family: str, seed: int, cut: float, before: str, after: str
) -> None:
    """Two messages of one stream carry a token cut anywhere: what goes out (each message redacted with its
    neighbours' text as context, then the flush) never holds the token, alone or joined; no text moves."""
    from tests.stream_helpers import STANDARD, _stream, _texts

    ((_, value),) = samples(BUILTIN_BY_NAME[family], 1, seed)
    at = max(1, min(len(value) - 1, int(cut * len(value))))
    sent = _texts(_stream(STANDARD, "notifications/progress", [before + value[:at], value[at:] + after]))
    assert len(sent) == 2
    assert all(value not in part for part in sent)
    assert value not in "".join(sent)


def test_stream_hold_back_is_bounded_and_flushes() -> None:
    stream: StreamHoldBack[str] = StreamHoldBack(max_hold=16)
    quiet = "no secret here, just words"
    assert [r.message for r in stream.push("m1", quiet)] == ["m1"]
    long_run = "id " + "A1b2C3d4" * 4
    assert [r.message for r in stream.push("m2", long_run)] == ["m2"]  # longer than max_hold: not held
    assert stream.push("m3", "next ghp_ab") == [] and stream.holding
    (release,) = stream.flush()
    assert release.message == "m3" and release.after == "" and release.before.endswith("A1b2C3d4")
    assert not stream.holding and stream.flush() == []


# --- the spec language -----------------------------------------------------------------------------------------------


def test_spec_language_parts_and_errors() -> None:
    spec = TokenSpec.parse("'k-' ('a'|'b') [0-9]{3} <[x-z]{2,4}> @crc32b62")
    text, value = spec.generate(random.Random(1))
    assert text.startswith(("k-a", "k-b")) and set(value) <= set("xyz") and 2 <= len(value) <= 4
    for bad in ("", "[a-", "'open", "(a", "[z-a]", "[a]{x}", "!"):
        with pytest.raises(SpecError):
            TokenSpec.parse(bad)


@pytest.mark.parametrize("context", [c for c in CONTEXTS if c.name in ("plain", "json", "yaml", "dotenv", "log")],
                         ids=lambda c: c.name)  # fmt: skip
def test_families_embedded_in_the_kit_syntaxes_never_leak(context: Any) -> None:
    rng = random.Random(f"embed:{context.name}")
    for detector in FAMILIES:
        for text, value in samples(detector, 3):
            if not context.accepts(text):
                continue
            rendered = context.render([text], rng)
            payload = tool(rendered) if isinstance(rendered, str) else {"content": [], "structuredContent": rendered}
            out = STANDARD.transform("tools/call", payload)
            assert not find_leaks(out, [value]), (detector.name, context.name)


def test_every_format_code_point_inside_a_token_is_ignored() -> None:
    """All Unicode format (Cf) code points, not a sample: each inside a token leaves it found, whole."""
    import sys
    import unicodedata

    format_points = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(format_points) > 150
    for point in format_points:
        text = f"key {GHP[:7]}{point}{GHP[7:]} end"
        findings = SCANNER.scan(text)
        assert [(f.detector.name, f.start, f.end) for f in findings] == [("github_token", 4, 4 + len(GHP) + 1)], (
            f"U+{ord(point):04X}"
        )
