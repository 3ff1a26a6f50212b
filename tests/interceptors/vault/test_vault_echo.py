"""Issue 30, the vault: a client never gets a restored value back, whatever a tool does to its argument.

Tools that echo their argument transformed (the 18 ways of the report and a few more) run in process behind
LocalChain with the vault's stages. With the default `restore_to` (empty) the tools never see a real value;
with a tool named in `restore_to`, its result is swapped back or withheld, and the client, decoding it the
way the tool encoded it, finds only the token.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import html
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.registry import Invocation
from interceptors.vault import TokenVault, VaultStages, vault_registry
from interceptors.vault.stages import WHY_FOUND, WHY_POLICY, WITHHELD
from interceptors.vault.taint import Taint
from interceptors.wire import InvocationContext, Phase, Principal
from interceptors_server import LocalChain

KEY = "echo-test-key-0123456789"
EMAIL = "ada.lovelace@analytical-example.org"

Echo = Callable[[str], Any]
"""What a tool returns for its argument: a text, or a (text, structuredContent) pair."""


def _chunks(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)]


ECHOES: dict[str, Echo] = {
    "plain": lambda v: v,
    "upper": str.upper,
    "base64": lambda v: base64.b64encode(v.encode()).decode(),
    "base64url": lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="),
    "hex": lambda v: v.encode().hex(),
    "percent": lambda v: "".join(f"%{b:02X}" for b in v.encode()),
    "json": lambda v: "".join(f"\\u{ord(c):04x}" for c in v),
    "html": lambda v: "".join(f"&#{ord(c)};" for c in v),
    "reversed": lambda v: v[::-1],
    "spaced": lambda v: " ".join(v),
    # The eleven that got through before:
    "base32": lambda v: base64.b32encode(v.encode()).decode(),
    "base85": lambda v: base64.b85encode(v.encode()).decode(),
    "gzip+base64": lambda v: base64.b64encode(gzip.compress(v.encode(), mtime=0)).decode(),
    "hex with :": lambda v: ":".join(f"{b:02x}" for b in v.encode()),
    "utf-16 hex": lambda v: v.encode("utf-16-be").hex(),
    "character codes": lambda v: ", ".join(str(ord(c)) for c in v),
    "2-character chunks": lambda v: " ".join(_chunks(v, 2)),
    "even + odd": lambda v: f"even: {v[::2]}\nodd: {v[1::2]}",
    "slices": lambda v: "\n".join(f"[{i}:{i + 8}] {v[i : i + 8]}" for i in range(0, len(v), 8)),
    "characters in structuredContent": lambda v: ("see structured content", {"chars": list(v)}),
    "md5 oracle": lambda v: hashlib.md5(v.encode()).hexdigest(),
    # A few more of the same families:
    "ascii85": lambda v: base64.a85encode(v.encode(), adobe=True).decode(),
    "utf-16-le hex": lambda v: v.encode("utf-16-le").hex(" "),
    "\\x bytes": lambda v: "".join(f"\\x{b:02x}" for b in v.encode()),
    "codes in structuredContent": lambda v: ("codes", {"codes": [ord(c) for c in v]}),
    "3-character chunks as JSON": lambda v: json.dumps(_chunks(v, 3)),
    "sha256": lambda v: hashlib.sha256(v.encode()).hexdigest(),
}


def _even_odd(text: str) -> str:
    lines = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    even, odd = lines.get("even", ""), lines.get("odd", "")
    return "".join(a + b for a, b in zip(even, odd + " ", strict=False)).rstrip()


DECODERS: dict[str, Callable[[str, Any], list[str]]] = {
    "base64": lambda t, s: [base64.b64decode(t + "==").decode(errors="ignore")],
    "base64url": lambda t, s: [base64.urlsafe_b64decode(t + "==").decode(errors="ignore")],
    "hex": lambda t, s: [bytes.fromhex(t).decode(errors="ignore")],
    "json": lambda t, s: [json.loads(f'"{t}"')],
    "html": lambda t, s: [html.unescape(t)],
    "reversed": lambda t, s: [t[::-1]],
    "spaced": lambda t, s: [t.replace(" ", "")],
    "base32": lambda t, s: [base64.b32decode(t).decode(errors="ignore")],
    "base85": lambda t, s: [base64.b85decode(t).decode(errors="ignore")],
    "gzip+base64": lambda t, s: [gzip.decompress(base64.b64decode(t)).decode(errors="ignore")],
    "hex with :": lambda t, s: [bytes.fromhex(t.replace(":", "")).decode(errors="ignore")],
    "utf-16 hex": lambda t, s: [bytes.fromhex(t).decode("utf-16-be", errors="ignore")],
    "character codes": lambda t, s: ["".join(chr(int(c)) for c in t.split(", "))],
    "2-character chunks": lambda t, s: [t.replace(" ", "")],
    "even + odd": lambda t, s: [_even_odd(t)],
    "slices": lambda t, s: ["".join(line.split(" ", 1)[1] for line in t.splitlines() if " " in line)],
    "characters in structuredContent": lambda t, s: ["".join(s["chars"])],
    "ascii85": lambda t, s: [base64.a85decode(t, adobe=True).decode(errors="ignore")],
    "utf-16-le hex": lambda t, s: [bytes.fromhex(t).decode("utf-16-le", errors="ignore")],
    "\\x bytes": lambda t, s: [bytes.fromhex(t.replace("\\x", "")).decode(errors="ignore")],
    "codes in structuredContent": lambda t, s: ["".join(chr(c) for c in s["codes"])],
    "3-character chunks as JSON": lambda t, s: ["".join(json.loads(t))],
}
"""How the client reads each echo back (what an attacker does with it)."""


FIXED_MESSAGES = frozenset(WITHHELD.format(why=why) for why in (WHY_FOUND, WHY_POLICY))
"""The vault's own texts for a withheld result: the same whatever the value, so they tell nothing of it (a value
drawn as `PSEUDONY` is in the word "pseudonyms" of the message without having come out)."""


def recovered(how: str, text: str, structured: Any) -> list[str]:
    """Everything the client can read out of the echo: the text itself and its decoding, when it decodes."""
    views = ["" if text in FIXED_MESSAGES else text, json.dumps(structured)]
    decoder = DECODERS.get(how)
    if decoder is not None and not text.startswith(WITHHELD[:20]):
        with contextlib.suppress(ValueError, KeyError, TypeError, OSError, EOFError):
            views.extend(decoder(text, structured))  # the token's spelling need not decode as the value's did
    return views


def leaked(how: str, value: str, text: str, structured: Any) -> bool:
    if how in ("md5 oracle", "sha256"):
        digests = {hashlib.md5(value.encode()).hexdigest(), hashlib.sha256(value.encode()).hexdigest()}
        return any(d in text.casefold() for d in digests)
    return any(value.casefold() in view.casefold() for view in recovered(how, text, structured))


def context(principal: str, trace: str) -> InvocationContext:
    return InvocationContext(principal=Principal("user", principal), trace_id=trace)


async def call(chain: LocalChain, tool: str, how: str, token: str, trace: str) -> tuple[Any, str, Any]:
    """One tools/call through the chain: what the tool received, the text and structured content returned."""
    request = {"method": "tools/call", "params": {"name": tool, "arguments": {"value": token}}}
    ctx = context("alice", trace)
    sent = await chain.execute("tools/call", "request", request, direction="receiving", context=ctx)
    received = (sent.final_payload or request)["params"]["arguments"]["value"]
    echoed = ECHOES[how](received)
    text, structured = echoed if isinstance(echoed, tuple) else (echoed, None)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        result["structuredContent"] = structured
    answer = await chain.execute("tools/call", "response", result, direction="sending", context=ctx)
    final = answer.final_payload or result
    return received, final["content"][0]["text"], final.get("structuredContent")


def vault(**kwargs: Any) -> TokenVault:
    return TokenVault(KEY, key_env=None, scope="principal", **kwargs)


@pytest.mark.anyio
@pytest.mark.parametrize("how", list(ECHOES))
async def test_default_restore_to_gives_no_tool_a_real_value(how: str) -> None:
    v = vault()
    assert v.restore_to == () and TokenVault.from_config({"key": KEY}).restore_to == ()
    token = v.tokenize(EMAIL, "email", v.namespace_for("alice"))
    async with LocalChain(vault_registry(v)) as chain:
        received, text, structured = await call(chain, "encode", how, token, f"default-{how}")
    assert received == token  # the tool got the pseudonym as the model wrote it
    assert not leaked(how, EMAIL, text, structured)


@pytest.mark.anyio
@pytest.mark.parametrize("how", list(ECHOES))
async def test_a_tool_in_restore_to_never_echoes_the_real_value_back(how: str) -> None:
    v = vault(restore_to=["encode"])
    token = v.tokenize(EMAIL, "email", v.namespace_for("alice"))
    async with LocalChain(vault_registry(v)) as chain:
        received, text, structured = await call(chain, "encode", how, token, f"restored-{how}")
    assert received == EMAIL  # the named tool got the real value ...
    assert not leaked(how, EMAIL, text, structured), (how, text)  # ... and the client never gets it back
    # Either swapped for the token in place, or the whole result withheld.
    assert text.startswith("result withheld by the vault") or not Taint([(EMAIL, token)]).found(text)


@pytest.mark.anyio
async def test_simple_echoes_are_swapped_in_place_not_withheld() -> None:
    v = vault(restore_to=["encode"])
    token = v.tokenize(EMAIL, "email", v.namespace_for("alice"))
    async with LocalChain(vault_registry(v)) as chain:
        for how in ("plain", "upper", "base64", "hex", "reversed"):
            _, text, _ = await call(chain, "encode", how, token, f"swap-{how}")
            assert ECHOES[how](token).casefold() == text.casefold(), how
        _, text, _ = await call(chain, "encode", "md5 oracle", token, "swap-md5")
        assert text == hashlib.md5(token.encode()).hexdigest()  # the token's digest: an oracle over tokens only


@pytest.mark.anyio
async def test_restored_results_withhold_replaces_every_restored_result() -> None:
    v = TokenVault.from_config({"key": KEY, "restore_to": ["encode"], "restored_results": "withhold"})
    token = v.tokenize(EMAIL, "email")
    async with LocalChain(vault_registry(v)) as chain:
        received, text, structured = await call(chain, "encode", "plain", token, "withhold")
        assert received == EMAIL and text.startswith("result withheld by the vault") and structured is None
        _, text, _ = await call(chain, "other", "plain", token, "withhold-other")
        assert text == token  # not in restore_to: nothing restored, the result passes


def test_restore_to_and_restored_results_are_validated() -> None:
    for bad in ({"restore_to": "encode"}, {"restore_to": [""]}, {"restored_results": "maybe"}):
        with pytest.raises(ValueError):
            TokenVault.from_config({"key": KEY, **bad})
    assert TokenVault.from_config({"key": KEY, "restore_to": None}).restores("anything") is False
    assert TokenVault.from_config({"key": KEY, "restore_to": ["*"]}).restores("anything")


# --- the rule in general -----------------------------------------------------------------------------------------

VALUES = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=8, max_size=40).filter(
    lambda v: sum(c.isalnum() for c in v) >= max(8, 0.8 * len(v))
)
"""Identifier-like values (what the vault tokenises): mostly letters and digits. A value of punctuation with a
few letters can be handed out a letter or two per piece, below any fragment size (doc/VAULT.md)."""


@settings(max_examples=60, deadline=None)
@given(value=VALUES, how=st.sampled_from(sorted(ECHOES)), prefix=st.sampled_from(["", "id=", "the value: "]))
@example(value="jane.doe@corp-example.com", how="base85", prefix="x")
@example(value="ACCT-0042-7781-99", how="character codes", prefix="")
@example(value="00000000", how="ascii85", prefix="id=")  # one whole Ascii85 group of the value: 5 characters
def test_taint_finds_every_known_echo_of_any_value(value: str, how: str, prefix: str) -> None:
    """Whatever the value, each echo way (with text around it) is found by the backstop."""
    if how in ("md5 oracle", "sha256", "slices"):
        # A digest is of the value alone: of anything longer it is another number. Slices after a prefix can
        # cut a short value into pieces below the fragment size ("id=00000", "00000:::", "00"): a documented
        # limit (doc/VAULT.md, threat model), not a promise.
        prefix = ""
    echoed = ECHOES[how](prefix + value)
    text = json.dumps(echoed) if isinstance(echoed, tuple) else echoed
    assert Taint([(value, "tok-0000000000")]).found(text), (how, text)


@settings(max_examples=60, deadline=None)
@given(value=VALUES)
@example(value="00000000z00L00T00000")  # every third character once made 3-grams: noise matched them
@example(value="grace.hopper@navy-example.org")  # another token's `.example` once read as a piece of it
def test_taint_never_counts_the_token_as_the_value(value: str) -> None:
    v = vault()
    token = v.tokenize(value, "resource_name")
    taint = Taint([(value, token)])
    other = v.tokenize("someone@corp.org", "email")  # another token, as the strict redactor may issue
    for how in ("plain", "base64", "hex", "reversed", "upper"):
        assert not taint.found(ECHOES[how](token)) or token == value, how
        assert not taint.found(f"{ECHOES[how](token)} {other}") or token == value or other == value, how


@settings(max_examples=80, deadline=None)
@given(value=VALUES, how=st.sampled_from(sorted(ECHOES)), trace=st.uuids())
@example(value="ada.lovelace@analytical-example.org", how="slices", trace=uuid.UUID(int=1))
@example(value="00011:::000", how="slices", trace=uuid.UUID(int=2))  # 5 of 8 digits in one slice: now found
@example(value="00001012", how="even + odd", trace=uuid.UUID(int=3))  # halves of a short value: 4-grams
@example(value="PSEUDONY", how="2-character chunks", trace=uuid.UUID(int=4))  # a word of the withheld message
def test_the_response_stage_never_lets_a_restored_value_out(value: str, how: str, trace: uuid.UUID) -> None:
    """The rule in general: for any value a tool in `restore_to` received, whichever way it echoes it, the
    client cannot read the value back out of what the response stage lets through."""
    v = vault(restore_to=["*"])
    token = v.tokenize(value, "resource_name", v.namespace_for("alice"))
    stages = VaultStages(v)
    ctx = context("alice", trace.hex)
    request = {"method": "tools/call", "params": {"name": "encode", "arguments": {"value": token}}}
    sent = stages.request(Invocation("vault", "tools/call", Phase.REQUEST, request, None, ctx))
    received = sent.payload["params"]["arguments"]["value"] if sent.modified else token
    assert received == value or token == value
    echoed = ECHOES[how](received)
    text, structured = echoed if isinstance(echoed, tuple) else (echoed, None)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        result["structuredContent"] = structured
    answer = stages.response(Invocation("vault", "tools/call", Phase.RESPONSE, result, None, ctx))
    final = answer.payload if answer.modified else result
    if token != value:
        assert not leaked(how, value, final["content"][0]["text"], final.get("structuredContent")), how


def test_a_withheld_result_keeps_its_methods_shape_and_nothing_else() -> None:
    v = vault(restore_to=["*"], restored_results="withhold")
    token = v.tokenize(EMAIL, "email", v.namespace_for("alice"))
    stages = VaultStages(v)
    channel = {"io.mcp-interceptors/channel": "error"}
    cases: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
        ("resources/read", {"uri": f"mail://{token}"}, {"contents": [{"uri": "mail://x", "text": EMAIL}]},
         {"contents": []}),
        ("prompts/get", {"name": "p", "arguments": {"to": token}},
         {"messages": [{"role": "user", "content": {"type": "text", "text": EMAIL}}]}, {"messages": []}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": token}},
         {"completion": {"values": [EMAIL]}}, {"completion": {"values": [], "hasMore": False}}),
        ("tools/call", {"name": "t", "arguments": {"v": token}},
         {"content": [{"type": "text", "text": "ok"}], "_meta": {**channel, "note": EMAIL}},
         {"isError": True, "_meta": channel}),
    ]  # fmt: skip
    for index, (event, params, result, expected) in enumerate(cases):
        ctx = context("alice", f"shape-{index}")
        sent = stages.request(Invocation("vault", event, Phase.REQUEST, {"method": event, "params": params}, None, ctx))
        assert sent.modified and EMAIL in json.dumps(sent.payload), event
        answer = stages.response(Invocation("vault", event, Phase.RESPONSE, result, None, ctx))
        assert answer.modified and EMAIL not in json.dumps(answer.payload), event
        assert {k: answer.payload[k] for k in expected} == expected, event


def test_a_reload_applies_the_new_documents_restore_to(tmp_path: Path) -> None:
    """The gateway keeps its vault across a reload (tokens keep reversing), but not the old restore rules."""
    from integrations.gateway.stages import build_stages

    opened = tmp_path / "opened.yaml"
    opened.write_text("extends: strict\nname: opened\nvault: {key: k-0123456789abcdef, restore_to: ['*']}\n")
    closed = tmp_path / "closed.yaml"
    closed.write_text("extends: strict\nname: closed\nvault: {key: k-0123456789abcdef}\n")
    first = build_stages(str(opened), None)
    try:
        assert first.vault is not None and first.vault.restores("anything")
        second = build_stages(str(closed), None, previous=first)
        assert second.vault is first.vault and second.vault.restore_to == () and not second.vault.restores("x")
    finally:
        first.close()
