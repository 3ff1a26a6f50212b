"""The vault's interceptors: tokens reversed on the way in, echoes re-pseudonymised on the way out (unit,
properties, through LocalChain, through a real MCP server), and the audited reveal."""

from __future__ import annotations

import json
import logging
import string
import zlib
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from integrations import InterceptorMiddleware
from interceptors import Invocation, InvocationContext, Phase, Principal
from interceptors.vault import (
    Depseudonymizer,
    Repseudonymizer,
    RevealError,
    RevealRecord,
    RevealTool,
    TokenVault,
    VaultStages,
    reveal_token,
    vault_registry,
)
from interceptors_server import LocalChain

FEW = settings(max_examples=max(10, settings.default.max_examples // 3))  # type: ignore[union-attr]
KEY = "stages-key-0123456789"
ARN = "arn:aws:rds:us-east-1:123456789012:db:payments-primary"


def vault(**kwargs: Any) -> TokenVault:
    """Every target may receive real values here (`restore_to` is empty by default: nothing is restored)."""
    return TokenVault(KEY, key_env=None, **{"restore_to": ["*"], **kwargs})


def context(principal: str | None = "alice", trace: str | None = "trace-1", session: str | None = None) -> Any:
    who = Principal("user", principal) if principal else None
    return InvocationContext(principal=who, trace_id=trace, session_id=session)


def invocation(event: str, phase: str, payload: Any, ctx: Any) -> Invocation:
    return Invocation("vault", event, Phase(phase), payload, None, ctx)


# --- the input side ---------------------------------------------------------------------------------------------


def test_depseudonymizer_walks_nested_arguments_and_records_pairs() -> None:
    v = vault()
    arn = v.tokenize(ARN, "aws_arn")
    ip = v.tokenize("10.1.2.3", "ip_address")
    host = v.tokenize("web-1", "resource_name")
    pairs: list[tuple[str, str]] = []
    restorer = Depseudonymizer(v)
    args = {"target": arn, "hosts": [ip, {"name": host}], "note": f"restart {host} behind {ip}", "n": 3}
    out = restorer.value(args, "global", pairs)
    assert out == {
        "target": ARN,
        "hosts": ["10.1.2.3", {"name": "web-1"}],
        "note": "restart web-1 behind 10.1.2.3",
        "n": 3,
    }
    assert (ARN, arn) in pairs and ("web-1", host) in pairs and ("10.1.2.3", ip) in pairs
    assert args["target"] == arn  # the input is not mutated
    assert restorer.value(out, "global", []) == out  # real values stay real
    keyed = Depseudonymizer(v, keys=True).value({host: 1}, "global", [])
    assert keyed == {"web-1": 1} and restorer.value({host: 1}, "global", []) == {host: 1}


def test_aliases_are_reversed_before_embedded_tokens() -> None:
    v = vault()
    account = v.tokenize("123456789012", "aws_account_id")
    instance = v.tokenize("i-0abc1234def567890", "resource_name")
    restorer = Depseudonymizer(v, {"prod-payments": "payments-prod-7f3a"})
    pairs: list[tuple[str, str]] = []
    text = f"arn:aws:ec2:us-east-1:{account}:prod-payments:instance/{instance}"
    assert restorer.text(text, "global", pairs) == (
        "arn:aws:ec2:us-east-1:123456789012:payments-prod-7f3a:instance/i-0abc1234def567890"
    )
    assert ("payments-prod-7f3a", "prod-payments") in pairs
    assert restorer.text("prod-payments", "global", []) == "payments-prod-7f3a"
    assert restorer.text("prod-payments-2", "global", []) == "prod-payments-2"  # not a whole alias


REAL = st.text(alphabet=string.ascii_letters + string.digits + "-_.:/@ ", min_size=1, max_size=30)


@FEW
@given(st.lists(REAL, min_size=1, max_size=5), st.lists(REAL, max_size=5))
def test_depseudonymize_is_idempotent_on_real_values(issued: list[str], others: list[str]) -> None:
    v = vault()
    tokens = [v.tokenize(value, "resource_name") for value in issued]
    restorer = Depseudonymizer(v)
    for text in [*issued, *others, " ".join(tokens + others)]:
        once = restorer.text(text, "global", [])
        assert restorer.text(once, "global", []) == once or any(once == t for t in tokens)
    for text in others:  # text holding no token comes back as it was
        if not any(t in text for t in tokens):
            assert restorer.text(text, "global", []) == text


def test_request_mutator_covers_tools_resources_prompts_and_completions() -> None:
    v = vault()
    stages = VaultStages(v)
    host = v.tokenize("web-1", "resource_name")
    ctx = context()
    cases = {
        "tools/call": ({"name": "t", "arguments": {"h": host}}, {"name": "t", "arguments": {"h": "web-1"}}),
        "resources/read": ({"uri": f"inventory://hosts/{host}"}, {"uri": "inventory://hosts/web-1"}),
        "prompts/get": ({"name": "p", "arguments": {"h": host}}, {"name": "p", "arguments": {"h": "web-1"}}),
        "completion/complete": (
            {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "h", "value": host},
             "context": {"arguments": {"other": host}}},
            {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "h", "value": "web-1"},
             "context": {"arguments": {"other": "web-1"}}},
        ),
    }  # fmt: skip
    for event, (params, expected) in cases.items():
        payload = {"method": event, "params": params}
        result = stages.request(invocation(event, "request", payload, ctx))
        assert result.payload == {"method": event, "params": expected}, event
    untouched = stages.request(invocation("tools/call", "request", {"method": "tools/call", "params": {}}, ctx))
    assert untouched.modified is False


# --- the output side ---------------------------------------------------------------------------------------------


def test_repseudonymizer_rewrites_what_a_model_reads_and_leaves_structure() -> None:
    rep = Repseudonymizer([("web-1", "res-aaaa"), ("10.1.2.3", "10.9.9.9"), ("ab", "res-short"), ("x y", "tok")])
    result = {
        "content": [
            {"type": "text", "text": "Unknown host 'web-1' (WEB-1) at 10.1.2.3, web-10, x y"},
            {"type": "resource_link", "uri": "inv://web-1", "name": "web-1", "mimeType": "web-1"},
            {"type": "resource", "resource": {"uri": "inv://web-1", "text": "web-1", "mimeType": "text/plain"}},
            {"type": "image", "data": "d2ViLTE=web-1", "mimeType": "image/png"},
        ],
        "structuredContent": {"web-1": ["web-1", {"host": "web-1"}], "n": 1},
        "_meta": {"io.mcp-interceptors/channel": "log", "echo": "web-1", "io.mcp-interceptors/transforms": {}},
        "isError": True,
    }
    out = rep.result(result)
    text = json.dumps(out)
    assert out["content"][0]["text"] == "Unknown host 'res-aaaa' (res-aaaa) at 10.9.9.9, res-aaaa0, tok"
    assert out["content"][1] == {
        "type": "resource_link",
        "uri": "inv://res-aaaa",
        "name": "res-aaaa",
        "mimeType": "web-1",
    }
    assert out["content"][2]["resource"] == {"uri": "inv://res-aaaa", "text": "res-aaaa", "mimeType": "text/plain"}
    assert out["content"][3]["data"] == "d2ViLTE=web-1"  # binary data is never rewritten
    assert out["structuredContent"] == {"res-aaaa": ["res-aaaa", {"host": "res-aaaa"}], "n": 1}
    assert out["_meta"]["echo"] == "res-aaaa" and out["_meta"]["io.mcp-interceptors/channel"] == "log"
    assert "ab" not in rep.table  # too short to look for
    assert text.count("web-1") == 2  # the mime type and the image data, both structural
    assert rep.result({"content": []}) == {"content": []}


def test_escaped_and_encoded_echoes_are_caught() -> None:
    rep = Repseudonymizer([('say "hi"/ok', "res-1111111111")])
    assert rep.text(json.dumps({"q": 'say "hi"/ok'})) == json.dumps({"q": "res-1111111111"})
    assert rep.text("https://x.example/?q=" + quote('say "hi"/ok', safe="")) == "https://x.example/?q=res-1111111111"


IDENT = st.text(alphabet=string.ascii_letters + string.digits + "-_.:@", min_size=3, max_size=16)
FILLER = st.text(alphabet=string.ascii_letters + " ,;()'\"", max_size=8)


@FEW
@given(st.lists(IDENT, min_size=1, max_size=4, unique=True), st.lists(st.tuples(FILLER, FILLER), max_size=6), st.data())
def test_no_restored_value_survives_repseudonymisation(reals: list[str], fillers: Any, data: st.DataObject) -> None:
    v = vault()
    tokens = [v.tokenize(real, "resource_name") for real in reals]
    pairs = list(zip(reals, tokens, strict=True))

    def echo() -> str:
        real = data.draw(st.sampled_from(reals))
        shape = data.draw(st.sampled_from([str, str.upper, str.lower, lambda s: json.dumps(s)[1:-1]]))
        return shape(real)

    texts = [f"{a}{echo()}{b}" for a, b in fillers] or [echo()]
    result = {
        "content": [{"type": "text", "text": t} for t in texts],
        "structuredContent": {echo(): [echo(), {"k": echo()}]},
        "_meta": {"note": echo()},
    }
    out = Repseudonymizer(pairs).result(result)
    # Every string that carried an echo, by its place (the result's own field names, such as `structuredContent`,
    # are not echoes: `TRU` sits in that one by chance).
    ((key, (first, inner)),) = out["structuredContent"].items()
    echoed = [block["text"] for block in out["content"]] + [key, first, inner["k"], out["_meta"]["note"]]
    for emitted in echoed:
        cleaned = emitted
        for token in sorted(tokens, key=len, reverse=True):
            cleaned = cleaned.replace(token, "\x00")
        for real in reals:
            assert real.lower() not in cleaned.lower(), (real, emitted)


def _spell(text: str, how: str) -> str:
    """`text` as a tool could hand it back: each of these is a spelling the leak checks decode."""
    import base64
    import html

    if how == "base64":
        return base64.b64encode(text.encode()).decode()
    if how == "base64url":
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    if how == "hex":
        return text.encode().hex()
    if how == "HEX":
        return text.encode().hex().upper()
    if how == "percent":
        return "".join(f"%{byte:02X}" for byte in text.encode())
    if how == "quote":
        return quote(text, safe="")
    if how == "json":
        return "".join(f"\\u{ord(c):04x}" for c in text)
    if how == "json-dumps":
        return json.dumps(text)
    if how == "html":
        return "".join(f"&#{ord(c)};" if i % 2 else f"&#x{ord(c):x};" for i, c in enumerate(text))
    if how == "html-named":
        return html.escape(text).replace("@", "&commat;").replace(".", "&period;")
    return text


def _token_for(real: str) -> str:
    """An e-mail-shaped pseudonym for `real`, the same in every run, that does not contain `real` (a short value
    such as `1@d` could otherwise sit across the token's `@` by chance, and any output would then "leak" it). `real`
    holds one `@` with at most 12 characters on each side, so this check covers the text around the token too."""
    number = zlib.crc32(real.encode())
    while True:
        token = f"user-{number % 16**8:08x}@d-0a1b2c3d.example"
        if real not in token:
            return token
        number += 1


SPELLINGS = ["base64", "base64url", "hex", "HEX", "percent", "quote", "json", "json-dumps", "html", "html-named"]
LOCAL = st.text(alphabet=string.ascii_letters + string.digits + "._+-", min_size=1, max_size=12)
EMAILISH = st.builds(lambda a, b: f"{a}@{b}", LOCAL, LOCAL)
AROUND = st.sampled_from(["", "got ", "value: ", "[", "x"])


@settings(max_examples=400, deadline=None)
@given(EMAILISH, st.lists(st.sampled_from(SPELLINGS), min_size=1, max_size=3), AROUND, AROUND, st.data())
def test_no_restored_value_leaves_in_any_spelling_the_redactor_can_decode(
    real: str, layers: list[str], before: str, after: str, data: st.DataObject
) -> None:
    """The vault's property: a restored value of 3+ characters, echoed inside any nesting of up to three encodings
    that the redactor and the leak checks decode (base64 either alphabet, hex either case, percent, JSON escapes,
    HTML references), is never emitted; `find_leaks` of interceptors.testing is the judge."""
    from interceptors.testing.assertions import find_leaks

    token = _token_for(real)
    text = f"{before}{real}{after}"
    for how in layers:
        text = f"{data.draw(AROUND)}{_spell(text, how)}{data.draw(AROUND)}"
    out = Repseudonymizer([(real, token)]).text(text)
    assert not find_leaks(out, [real]), (real, layers, text, out)


@settings(max_examples=200, deadline=None)
@given(EMAILISH, st.sampled_from(["reversed", "spaced", "dashed", "upper", "spaced-reversed"]), AROUND)
def test_reversed_and_spelled_out_echoes_are_caught(real: str, how: str, around: str) -> None:
    token = "user-0a1b2c3d@d-0a1b2c3d.example"
    spelled = {
        "reversed": real[::-1],
        "spaced": " ".join(real),
        "dashed": "-".join(real.upper()),
        "upper": real.upper(),
        "spaced-reversed": " ".join(real[::-1]),
    }[how]
    out = Repseudonymizer([(real, token)]).text(f"{around}{spelled}{around}")
    folded = out.casefold().replace(token.casefold(), "\x00").replace(token[::-1].casefold(), "\x00")
    assert real.casefold() not in folded and real[::-1].casefold() not in folded
    squeezed = "".join(c for c in folded if c not in " -")
    assert "".join(c for c in real if c not in " -").casefold() not in squeezed


def test_response_mutator_uses_the_pairs_of_its_own_operation() -> None:
    v = vault(scope="principal")
    stages = VaultStages(v)
    alice = v.namespace_for("alice")
    token = v.tokenize("web-1", "resource_name", alice)
    request = {"method": "tools/call", "params": {"name": "t", "arguments": {"h": token}}}
    stages.request(invocation("tools/call", "request", request, context(trace="op-1")))
    echo = {"content": [{"type": "text", "text": "no such host web-1"}]}
    other = stages.response(invocation("tools/call", "response", echo, context(trace="op-2")))
    assert other.modified is False  # another operation restored nothing
    progress = {
        "content": [{"type": "text", "text": "scanning web-1"}],
        "_meta": {"io.mcp-interceptors/channel": "progress"},
    }
    mine = stages.response(invocation("tools/call", "response", progress, context(trace="op-1")))
    assert mine.payload["content"][0]["text"] == f"scanning {token}"
    final = stages.response(invocation("tools/call", "response", echo, context(trace="op-1")))
    assert final.payload["content"][0]["text"] == f"no such host {token}"
    bob = stages.response(invocation("tools/call", "response", echo, context(principal="bob", trace="op-1")))
    assert bob.modified is False  # same trace id, another principal: another operation


# --- end to end through LocalChain ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_model_sees_tokens_tool_sees_real_values_echo_is_repseudonymised() -> None:
    v = vault(scope="principal")
    alice = v.namespace_for("alice")
    # What the output side (the redactor) showed alice: tokens only.
    token_arn = v.tokenize(ARN, "aws_arn", alice)
    token_host = v.tokenize("web-1", "resource_name", alice)
    async with LocalChain(vault_registry(v)) as chain:
        ctx = context("alice", "call-1")
        request = {
            "method": "tools/call",
            "params": {"name": "restart", "arguments": {"db": token_arn, "note": f"then {token_host}"}},
        }
        outcome = await chain.execute("tools/call", "request", request, direction="receiving", context=ctx)
        assert outcome.final_payload["params"]["arguments"] == {"db": ARN, "note": "then web-1"}
        # The tool echoes what it received, in text, structured content and _meta.
        echo = {
            "content": [{"type": "text", "text": f"Unknown severity for {ARN} on 'web-1'"}],
            "structuredContent": {"db": ARN, "host": "web-1"},
            "_meta": {"trace": "web-1"},
        }
        answer = await chain.execute("tools/call", "response", echo, direction="sending", context=ctx)
        emitted = json.dumps(answer.final_payload)
        assert ARN not in emitted and "web-1" not in emitted and "123456789012" not in emitted
        assert answer.final_payload["structuredContent"] == {"db": token_arn, "host": token_host}
        # The gateway's error channel for the same call is covered too.
        error = {
            "content": [{"type": "text", "text": "db web-1 is down"}],
            "isError": True,
            "_meta": {"io.mcp-interceptors/channel": "error"},
        }
        failed = await chain.execute("tools/call", "response", error, direction="sending", context=ctx)
        assert failed.final_payload["content"][0]["text"] == f"db {token_host} is down"


@pytest.mark.anyio
async def test_two_principals_cannot_reverse_each_others_tokens() -> None:
    v = vault(scope="principal")
    alice_token = v.tokenize("web-1", "resource_name", v.namespace_for("alice"))
    bob_token = v.tokenize("web-1", "resource_name", v.namespace_for("bob"))
    assert alice_token != bob_token
    async with LocalChain(vault_registry(v)) as chain:
        for who, token, expected in (
            ("bob", alice_token, alice_token),
            ("alice", bob_token, bob_token),
            ("alice", alice_token, "web-1"),
            ("bob", bob_token, "web-1"),
        ):
            payload = {"method": "tools/call", "params": {"name": "t", "arguments": {"h": token}}}
            outcome = await chain.execute(
                "tools/call", "request", payload, direction="receiving", context=context(who, f"{who}-{token}")
            )
            arguments = (outcome.final_payload or payload)["params"]["arguments"]
            assert arguments == {"h": expected}, who


def inventory_server(seen: list[dict[str, Any]]) -> Server[Any]:
    """`describe` returns real identifiers; `check` echoes its argument back in every place it can."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        schema = {"type": "object"}
        return types.ListToolsResult(
            tools=[types.Tool(name="describe", input_schema=schema), types.Tool(name="check", input_schema=schema)]
        )

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        seen.append(arguments)
        if params.name == "describe":
            data = {"instance_arn": ARN, "private_ip": "10.1.2.3", "db_name": "prod-payments"}
            return types.CallToolResult(content=[types.TextContent(type="text", text="ok")], structured_content=data)
        target = str(arguments.get("target"))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"Unknown severity for '{target}'")],
            structured_content={"asked": target},
            is_error=True,
        )

    return Server("inventory", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.anyio
async def test_full_loop_through_a_server_with_the_strict_redactor() -> None:
    from interceptors.transforms import STRICT_TRANSFORMS, transforms_registry

    v = vault(scope="principal")
    seen: list[dict[str, Any]] = []
    server = inventory_server(seen)
    registries = (transforms_registry(STRICT_TRANSFORMS, pseudonymizer=v), vault_registry(v))

    def who(ctx: ServerRequestContext[Any, Any]) -> InvocationContext:
        import uuid

        return InvocationContext(principal=Principal("user", "alice"), trace_id=uuid.uuid4().hex)

    async with LocalChain(*registries) as chain:
        server.middleware.append(InterceptorMiddleware(chain, context_provider=who))
        async with Client(server) as client:
            described = await client.call_tool("describe", {})
            shown = described.structured_content or {}
            for real in (ARN, "10.1.2.3", "prod-payments", "123456789012"):
                assert real not in json.dumps(shown)
            token = shown["db_name"]
            checked = await client.call_tool("check", {"target": token})
    assert seen[-1] == {"target": "prod-payments"}  # the tool got the real value
    text = checked.content[0]
    assert isinstance(text, types.TextContent)  # free text the redactor does not recognise: the vault's echo guard
    assert "prod-payments" not in text.text and token in text.text
    assert checked.structured_content == {"asked": token}


# --- reveal -------------------------------------------------------------------------------------------------------


def test_reveal_is_audited_and_never_logs_the_value(caplog: pytest.LogCaptureFixture) -> None:
    v = vault(scope="principal")
    alice = v.namespace_for("alice")
    token = v.tokenize("payments-primary-db", "resource_name", alice)
    records: list[RevealRecord] = []
    with caplog.at_level(logging.WARNING, logger="interceptors.vault.reveal"):
        exact = reveal_token(v, token, principal="alice", audit=records.append)
        embedded = reveal_token(v, f"is {token} up?", principal="alice", audit=records.append)
        missing = reveal_token(v, "res-0000000000", principal="alice", audit=records.append)
        other = reveal_token(v, token, principal="mallory", audit=records.append)
    assert exact == {"pseudonym": token, "found": True, "value": "payments-primary-db", "entity_type": "resource_name"}
    assert embedded == {
        "pseudonym": f"is {token} up?",
        "found": True,
        "value": "is payments-primary-db up?",
        "replaced": 1,
    }
    assert missing["found"] is False and missing["value"] is None
    assert other["found"] is False  # another namespace
    assert [r.found for r in records] == [True, True, False, False]
    shown = caplog.text + repr(records)
    assert "payments-primary-db" not in shown and token not in shown
    assert "reveal_token principal='alice'" in caplog.text

    def failing(record: RevealRecord) -> None:
        raise RuntimeError("audit log unavailable")

    with pytest.raises(RuntimeError):
        reveal_token(v, token, principal="alice", audit=failing)  # no audit, no answer
    tool = RevealTool(v, records.append)
    assert tool({"token": token}, "alice")["value"] == "payments-primary-db"
    for bad in ({"token": ""}, {"token": "x" * 20_001}, {"token": 5}, {"token": token, "extra": 1}):
        with pytest.raises(RevealError):
            tool(bad, "alice")


def call(name: str, value: str) -> dict[str, Any]:
    return {"method": "tools/call", "params": {"name": name, "arguments": {"db": value}}}


def test_restore_to_names_the_targets_that_receive_real_values() -> None:
    v = TokenVault.from_config({"key": KEY, "restore_to": ["deploy_*", "!deploy_public", "cg://assets/*"]})
    assert v.restores("deploy_prod") and v.restores("cg://assets/db1")
    assert not v.restores("deploy_public") and not v.restores("echo") and not v.restores(None)
    assert not TokenVault(KEY, key_env=None).restores("anything")  # empty by default: no target
    token = v.tokenize("prod-payments-db", "resource_name")
    stages = VaultStages(v)
    restored = stages.request(invocation("tools/call", "request", call("deploy_prod", token), context()))
    assert restored.modified and restored.payload["params"]["arguments"] == {"db": "prod-payments-db"}
    kept = stages.request(invocation("tools/call", "request", call("echo", token), context()))
    assert kept.modified is False  # the token goes to `echo` as the model wrote it
    with pytest.raises(ValueError, match=r"vault\.restore_to"):
        TokenVault.from_config({"key": KEY, "restore_to": "deploy_*"})
