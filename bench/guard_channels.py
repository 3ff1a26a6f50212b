"""Client-to-server channels under a policy's request guard: how many secrets, plain and encoded, reach the upstream.

Every case goes through the real gateway — the router, chain adapter and stages `mcp-interceptors proxy --policy
P` builds, in this process — to a real upstream process (`bench.recording_upstream`) that writes down every
message it receives; an SDK client (`mcp.Client`, handshake era, with sampling, elicitation and roots callbacks)
sends each payload in one channel:

- `tool_args`: `tools/call` `echo` with `{"query": payload}`; `meta`: `tools/call` `echo` with `_meta.note`;
- `prompt_args`: `prompts/get` `p` with `{"name": payload}`;
- `completion_value`: `completion/complete` on prompt `p`, the argument's value; `completion_context`: a
  context argument's value;
- `resource_uri`: `resources/read` of `notes://n/<payload, percent-encoded>` (the upstream's template);
  `subscribe_uri`: the same URI in `resources/subscribe`;
- `sampling_answer`, `elicitation_answer`, `roots_uri`, `roots_name`: the client's answer to the upstream's
  `sampling/createMessage` (the text), `elicitation/create` (a content field) and `roots/list` (a root's URI
  or name), asked through the upstream's `ask` tool.

A case **reached** the upstream when a message the upstream logged during the case holds the sent text (the
URI, for the URI channels). A refusal is checked too: its message must name a path and never hold the secret
or the payload. Each channel also sends one benign control, which must reach the upstream (else the channel is
broken and its counts mean nothing).

Payloads: each secret spelled as its format's sample (`plain`) and encoded (`ENCODINGS`: base64, base64 twice,
hex, `%XX`, gzip then base64, JSON inside a string, JSON twice, JSON then base64), plus JSON Web Keys (EC, RSA)
as JSON text. Secrets come from the built-in families' format specs (`--source generated`, reproducible) or from
the public corpora of `bench.public_corpus` (`--source public`: gitleaks' true positives and CredSweeper's
positives, read at run time from `$MCPI_CORPORA` or /work/corpora, never stored here).

Public items whose value is not a secret the guard refuses by design (ids: GUIDs, app and client ids, domains,
buckets, AWS key ids; lines that say they are test data) are counted apart (`SET_ASIDE`) and reported on their
own line. `--split` keeps one split of the corpora (`tune` to tune, `heldout` to report). `--benign` sends the
benign corpora instead (gitleaks' and CredSweeper's false positives, real files), each item whole as one tool
argument, and counts refusals: the guard's false refusals.

python -m bench.guard_channels [--policy standard] [--source generated|public] [--split tune|heldout] [--limit N]
    [--channels a,b] [--encodings a,b] [--benign] [--json]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM_MODULE = "bench.recording_upstream"
CONTROL = "hello from the control case"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


ENCODINGS: dict[str, Callable[[str], str]] = {
    "plain": lambda s: s,
    "base64": _b64,
    "base64_twice": lambda s: _b64(_b64(s)),
    "hex": lambda s: s.encode().hex(),
    "percent": lambda s: "".join(f"%{b:02X}" for b in s.encode()),
    "gzip_base64": lambda s: base64.b64encode(gzip.compress(s.encode(), mtime=0)).decode(),
    "json": lambda s: json.dumps({"note": s}),
    "json_twice": lambda s: json.dumps(json.dumps({"note": s})),
    "json_base64": lambda s: _b64(json.dumps({"note": s})),
}
"""How a secret's spelled sample is sent. `plain` is counted apart from the others (the encoded ones)."""

CHANNELS = (
    "tool_args",
    "meta",
    "prompt_args",
    "completion_value",
    "completion_context",
    "resource_uri",
    "subscribe_uri",
    "sampling_answer",
    "elicitation_answer",
    "roots_uri",
    "roots_name",
)


@dataclass(frozen=True, slots=True)
class Secret:
    family: str
    spelled: str
    """The text sent (the secret in the context its format needs: `AWS_SECRET_ACCESS_KEY=…`)."""
    value: str
    """The secret itself: never allowed in a refusal's message."""
    split: str = ""
    """The corpus split (`tune`, `heldout`) of a public item; empty for generated ones."""
    aside: str = ""
    """Why the item is counted apart (`SET_ASIDE`): not a secret the guard refuses by design. Empty: counted."""


ID_FAMILY = re.compile(r"(?i)\buuid\b|\bclient id\b|\bapp id\b|\bdomain\b|\bs3 bucket\b|access-id|client-id")
"""Public families whose value names a thing (a GUID, an app or client id, a host, a bucket, a key's id half)."""
KEY_ID = re.compile(r"(?:AKIA|ASIA|A3T)[A-Z0-9]{16}|(?:AC|SK)[0-9a-fA-F]{32}|00D[A-Za-z0-9]{12}(?:[A-Za-z0-9]{3})?")
"""Values that name a key or an account: AWS access key ids, Twilio account and API key SIDs (`AC…`, `SK…`: the
key's secret is another value), Salesforce org ids (`00D…`)."""
OAUTH_CLIENT_ID = re.compile(r"\d{6,16}-[0-9a-z]{32}\.apps\.googleusercontent\.com")
"""A Google OAuth client id, an id when it is the whole line (a line that also holds the client's secret counts)."""
CLIENT_ID_LABEL = re.compile(r"(?i)client[_-]?id[\"']?\s*[:=]")
"""A line that labels its value a client id (`t_client_id: 3MVG…`, a Salesforce consumer key: OAuth's public half)."""
MARKED = re.compile(r"NEGATIVE|EXAMPLE|(?i:example)$")
TYPE_TAG = re.compile(r"\s*\"(?:kty|type)\"\s*:\s*\"[^\"]*\"\s*,?\s*")
"""A line that is one JSON member naming a credential's type (`"kty": "RSA",`, `"type": "service_account"`): the
scanners report it for the object it starts, whose secret members are on other lines."""
START_TAG = re.compile(r"\s*<[A-Za-z][\w:.-]*(?:\s+[\w:.-]+=\"[^\"]*\")*\s*>\s*")
"""A line that is one XML start tag with attributes only (`<token name="token" comment="…">`): the element's value
is on the lines after it."""
NEGATIVE_DOC_SAMPLE = re.compile(r"cs:doc_[A-Za-z0-9_]+_n:\d+$")
"""A line of a CredSweeper documentation sample named as the negative half of a pair (`doc_credentials_n` beside
`doc_credentials_p`)."""
SET_ASIDE = {
    "id": "names a key or an object, not a secret (GUIDs, app and client ids, domains, buckets, AWS key ids, Google"
    " OAuth client ids): the guard passes ids by design",
    "marked": "says it is test data (`NEGATIVE:`, `EXAMPLE`)",
    "elsewhere": "holds no secret: the line the scanner reports starts a multi-line credential whose secret is on"
    " other lines (a JSON member naming the credential's type, an XML start tag with no value in it)",
    "false": "its sample's authors mark it as no credential: under a `FALSE` header of a documentation sample, or in"
    " the negative half of a documentation sample pair (`doc_get_n` beside `doc_get_p`); lines the documentation mode"
    " still reports. The header needs the CredSweeper checkout the corpora were built from (`SOURCES.json`)",
}
"""Public items counted apart, and why: the corpora label every line their scanners report, ids included."""


def set_aside(family: str, text: str, value: str, reported: str | None = None) -> str:
    """The `SET_ASIDE` reason for a public item, or empty (counted). `reported`: the corpus's own value for the item
    (empty or None when the scanner gave none)."""
    if ID_FAMILY.search(family) or KEY_ID.fullmatch(value.strip().strip("\"', ")) or CLIENT_ID_LABEL.search(text):
        return "id"
    if OAUTH_CLIENT_ID.fullmatch(text.strip().strip("\"', ")):
        return "id"
    if TYPE_TAG.fullmatch(text) or (not reported and START_TAG.fullmatch(text)):
        return "elsewhere"
    return "marked" if MARKED.search(text) else ""


@dataclass(slots=True)
class Tally:
    sent: int = 0
    reached: int = 0
    refused_named: int = 0
    """Refusals whose message names a path (`at '/…'`)."""
    leaky_refusals: int = 0
    """Refusals whose message holds the secret or the payload (must stay 0)."""
    examples: list[str] = field(default_factory=list)
    """A few `family/encoding` that reached the upstream."""


# --- secrets ---------------------------------------------------------------------------------------------------


def _b64url(rng: random.Random, length: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return "".join(rng.choice(alphabet) for _ in range(length))


def jwk_secrets(rng: random.Random) -> list[Secret]:
    """Private JSON Web Keys (EC and RSA, random members) as JSON text: the value is their `d`."""
    ec_d = _b64url(rng, 43)
    ec = {"kty": "EC", "crv": "P-256", "x": _b64url(rng, 43), "y": _b64url(rng, 43), "d": ec_d}
    rsa_d = _b64url(rng, 342)
    rsa = {"kty": "RSA", "n": _b64url(rng, 342), "e": "AQAB", "d": rsa_d}
    rsa.update({member: _b64url(rng, 171) for member in ("p", "q", "dp", "dq", "qi")})
    return [Secret("jwk_ec", json.dumps(ec), ec_d), Secret("jwk_rsa", json.dumps(rsa), rsa_d)]


def generated_secrets(seed: int = 30, families: Iterable[str] | None = None) -> list[Secret]:
    """One sample of every built-in `secret` family's format spec (single-line), and the JWKs."""
    from interceptors.transforms.catalog import BUILTIN_DETECTORS
    from interceptors.transforms.tokenspec import parse_spec

    rng = random.Random(seed)
    wanted = set(families) if families is not None else None
    out: list[Secret] = []
    for detector in BUILTIN_DETECTORS:
        if detector.category != "secret" or not detector.spec or (wanted is not None and detector.name not in wanted):
            continue
        spelled, value = parse_spec(detector.spec).generate(rng)
        if "\n" in spelled or len(value) < 8:
            continue
        out.append(Secret(detector.name, spelled, value))
    if wanted is None or "jwk" in wanted:
        out.extend(jwk_secrets(rng))
    return out


def _false_lines() -> set[str]:
    """Item ids (`cs:<sample>:<line>`) of the CredSweeper lines under a `FALSE` header, read from the checkout the
    corpora's `SOURCES.json` names (empty when it is not there)."""
    from bench.public_corpus import corpora_dir, credsweeper_false_lines

    try:
        root = json.loads((corpora_dir() / "SOURCES.json").read_text(encoding="utf-8")).get("credsweeper")
    except (OSError, ValueError):
        return set()
    if not isinstance(root, str) or not Path(root).is_dir():
        return set()
    return {f"cs:{name}:{number}" for name, number in credsweeper_false_lines(Path(root))}


def public_secrets(limit: int | None = None, split: str | None = None) -> list[Secret]:
    """gitleaks' true positives and CredSweeper's positives (single-line, with a known value), read now; `split`:
    only the items of that split (`tune`, `heldout`)."""
    from bench.public_corpus import corpora_dir

    false_lines = _false_lines()
    out: list[Secret] = []
    for name in ("gitleaks_tps", "credsweeper_pos"):
        path = corpora_dir() / f"{name}.jsonl"
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            text, value = item.get("text"), item.get("secret") or item.get("text")
            if item.get("label") != "secret" or not isinstance(text, str) or not isinstance(value, str):
                continue
            if "\n" in text.strip() or len(value) < 8 or len(text) > 2000:
                continue
            if split is not None and item.get("split") != split:
                continue
            family = str(item.get("family"))
            reported = item.get("secret") if isinstance(item.get("secret"), str) else None
            negative = NEGATIVE_DOC_SAMPLE.match(str(item.get("id")))
            false = item.get("id") in false_lines or negative is not None
            aside = "false" if false else set_aside(family, text.strip(), value, reported)
            out.append(Secret(f"{name}:{family}", text.strip(), value, str(item.get("split") or ""), aside))
    rng = random.Random(30)
    rng.shuffle(out)
    return out[:limit] if limit is not None else out


# --- the gateway and the client ---------------------------------------------------------------------------------


class Answers:
    """What the client answers the upstream's requests with, set before each case."""

    def __init__(self) -> None:
        self.sampling = CONTROL
        self.elicitation = CONTROL
        self.root_uri = "file:///notes"
        self.root_name = "notes"


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


class Log:
    """The upstream's log of received messages, read from where the last case stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new(self) -> list[Any]:
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


async def _send(client: Any, answers: Answers, channel: str, payload: str) -> tuple[str, str | None]:
    """Send `payload` in `channel`; `(marker, refusal message or None)`: the marker is what the upstream gets."""
    from mcp import types
    from mcp.shared.exceptions import MCPError

    session = client.session
    uri = "notes://n/" + quote(payload, safe="")
    marker = payload
    try:
        if channel == "tool_args":
            await session.call_tool("echo", {"query": payload})
        elif channel == "meta":
            await session.call_tool("echo", {}, meta={"note": payload})
        elif channel == "prompt_args":
            await session.get_prompt("p", {"name": payload})
        elif channel == "completion_value":
            await session.complete(
                types.PromptReference(type="ref/prompt", name="p"), {"name": "name", "value": payload}
            )
        elif channel == "completion_context":
            await session.complete(
                types.PromptReference(type="ref/prompt", name="p"), {"name": "name", "value": "a"}, {"name": payload}
            )
        elif channel in ("resource_uri", "subscribe_uri"):
            marker = uri
            if channel == "resource_uri":
                await session.read_resource(uri)
            else:
                await session.subscribe_resource(uri)
        else:
            method = {"sampling_answer": "sampling/createMessage", "elicitation_answer": "elicitation/create"}.get(
                channel, "roots/list"
            )
            answers.sampling = answers.elicitation = CONTROL
            answers.root_uri, answers.root_name = "file:///notes", "notes"
            if channel == "sampling_answer":
                answers.sampling = payload
            elif channel == "elicitation_answer":
                answers.elicitation = payload
            elif channel == "roots_uri":
                answers.root_uri = marker = "file:///notes/" + quote(payload, safe="")
            else:
                answers.root_name = payload
            result = await session.call_tool("ask", {"method": method})
            block = result.content[0] if result.content else None
            said = block.text if isinstance(block, types.TextContent) else ""
            if said.startswith("refused: "):
                return marker, said[len("refused: ") :]
    except MCPError as exc:
        return marker, exc.error.message
    return marker, None


@dataclass(slots=True)
class Run:
    channels: dict[str, dict[str, Tally]]
    controls: dict[str, bool]
    seconds: float
    audited: dict[str, int] = field(default_factory=dict)
    """`denied` decisions the audit counted while each channel's cases ran (the control included)."""
    aside: dict[str, dict[str, Tally]] = field(default_factory=dict)
    """Per channel, `plain` and `encoded` tallies of the items set aside (`Secret.aside`), not in `channels`."""
    held: dict[str, Counter[str]] = field(default_factory=dict)
    """Per channel, how many cases of each family did not reach the upstream (refused, or lost)."""
    leaks: dict[str, list[tuple[Secret, str]]] = field(default_factory=dict)
    """Per channel, every counted `(secret, encoding)` that reached the upstream (`--leaks` prints them)."""


async def run_cases(
    secrets: Sequence[Secret],
    *,
    policy: str = "standard",
    channels: Sequence[str] = CHANNELS,
    encodings: Sequence[str] = tuple(ENCODINGS),
) -> Run:
    """Every secret in every encoding through every channel of one gateway; the tallies per channel and encoding."""
    from mcp import Client, types

    from integrations.gateway.inprocess import InProcessGateway
    from integrations.gateway.stages import build_stages
    from interceptors_server import LocalChain

    answers = Answers()

    async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
        content = types.TextContent(type="text", text=answers.sampling)
        return types.CreateMessageResult(role="assistant", content=content, model="m")

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"note": answers.elicitation})

    async def roots(context: Any) -> types.ListRootsResult:
        root = types.Root.model_validate({"uri": answers.root_uri, "name": answers.root_name})
        return types.ListRootsResult(roots=[root])

    started = time.process_time()
    tallies = {c: {e: Tally() for e in encodings} for c in channels}
    aside = {c: {"plain": Tally(), "encoded": Tally()} for c in channels}
    held: dict[str, Counter[str]] = {c: Counter() for c in channels}
    leaks: dict[str, list[tuple[Secret, str]]] = {c: [] for c in channels}
    audited: dict[str, int] = {}
    controls: dict[str, bool] = {}
    with tempfile.TemporaryDirectory() as folder:
        log_path = Path(folder) / "upstream.jsonl"
        log_path.touch()
        command = [sys.executable, "-m", UPSTREAM_MODULE, str(log_path)]
        stages = build_stages(policy, None)
        try:
            async with (
                LocalChain(*stages.registries) as chain,
                InProcessGateway(command, chain, stages=stages, cwd=str(ROOT)) as gateway,
                Client(
                    gateway.server,
                    mode="legacy",
                    sampling_callback=sampling,
                    elicitation_callback=elicitation,
                    list_roots_callback=roots,
                ) as client,
            ):
                log = Log(log_path)
                await client.session.list_tools()  # the policy learns the catalog
                await client.session.list_prompts()
                await client.session.list_resource_templates()
                log.new()
                counters = stages.engine.audit.counters if stages.engine is not None else {}
                for channel in channels:
                    denied_before = counters.get("denied", 0)
                    marker, _ = await _send(client, answers, channel, CONTROL)
                    controls[channel] = any(marker in s for m in log.new() for s in _strings(m))
                    for secret in secrets:
                        for encoding in encodings:
                            payload = ENCODINGS[encoding](secret.spelled)
                            marker, refusal = await _send(client, answers, channel, payload)
                            if secret.aside:
                                tally = aside[channel]["plain" if encoding == "plain" else "encoded"]
                            else:
                                tally = tallies[channel][encoding]
                            tally.sent += 1
                            if any(marker in s for m in log.new() for s in _strings(m)):
                                tally.reached += 1
                                if not secret.aside:
                                    leaks[channel].append((secret, encoding))
                                if len(tally.examples) < 5:
                                    tally.examples.append(secret.family)
                                continue
                            held[channel][secret.family] += 1
                            if refusal is not None:
                                if " at '/" in refusal or "at the top level" in refusal:
                                    tally.refused_named += 1
                                if secret.value in refusal or payload in refusal:
                                    tally.leaky_refusals += 1
                    audited[channel] = counters.get("denied", 0) - denied_before
        finally:
            stages.close()
    return Run(tallies, controls, time.process_time() - started, audited, aside, held, leaks)


# --- the report ----------------------------------------------------------------------------------------------


def summary(run: Run) -> dict[str, Any]:
    """Per channel: plain and encoded `reached/sent`, named and leaky refusals, the control, examples."""
    out: dict[str, Any] = {}
    for channel, by_encoding in run.channels.items():
        plain = by_encoding.get("plain", Tally())
        encoded = [t for e, t in by_encoding.items() if e != "plain"]
        out[channel] = {
            "control_reached": run.controls.get(channel, False),
            "plain": [plain.reached, plain.sent],
            "encoded": [sum(t.reached for t in encoded), sum(t.sent for t in encoded)],
            "by_encoding": {e: [t.reached, t.sent] for e, t in by_encoding.items()},
            "refusals_naming_a_path": sum(t.refused_named for t in by_encoding.values()),
            "refusals_holding_the_secret": sum(t.leaky_refusals for t in by_encoding.values()),
            "audited_denials": run.audited.get(channel, 0),
            "reached_examples": sorted({f"{x}/{e}" for e, t in by_encoding.items() for x in t.examples})[:8],
        }
        apart = run.aside.get(channel)
        if apart is not None and (apart["plain"].sent or apart["encoded"].sent):
            out[channel]["set_aside"] = {k: [t.reached, t.sent] for k, t in apart.items()}
    return out


def format_summary(data: dict[str, Any]) -> str:
    lines = [
        f"{'channel':<20} {'control':>7} {'plain reached':>14} {'encoded reached':>16} {'named':>6} {'leaky':>6}"
        f" {'audited':>7}"
    ]
    for channel, row in data.items():
        plain, encoded = row["plain"], row["encoded"]
        lines.append(
            f"{channel:<20} {'ok' if row['control_reached'] else 'BROKEN':>7} {plain[0]:>6}/{plain[1]:<7} "
            f"{encoded[0]:>7}/{encoded[1]:<8} {row['refusals_naming_a_path']:>6} "
            f"{row['refusals_holding_the_secret']:>6} {row['audited_denials']:>7}"
        )
    for channel, row in data.items():
        apart = row.get("set_aside")
        if apart:
            lines.append(
                f"  {channel}: set aside (not counted above): plain {apart['plain'][0]}/{apart['plain'][1]}, "
                f"encoded {apart['encoded'][0]}/{apart['encoded'][1]} reached"
            )
    for channel, row in data.items():
        missed = {e: v for e, v in row["by_encoding"].items() if v[0]}
        if missed:
            lines.append(f"  {channel}: reached by encoding {missed}; e.g. {', '.join(row['reached_examples'])}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import anyio

    parser = argparse.ArgumentParser(prog="python -m bench.guard_channels", description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="standard")
    parser.add_argument("--source", choices=("generated", "public"), default="generated")
    parser.add_argument("--limit", type=int, default=None, help="at most this many secrets")
    parser.add_argument("--channels", default=",".join(CHANNELS))
    parser.add_argument("--encodings", default=",".join(ENCODINGS))
    parser.add_argument("--split", choices=("tune", "heldout"), default=None, help="public items of one split only")
    parser.add_argument(
        "--benign", action="store_true", help="send the benign corpora instead (tool_args, plain) and count refusals"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--leaks", action="store_true", help="also print every counted item that reached the upstream (text cut)"
    )
    args = parser.parse_args(argv)
    if args.benign:
        return _benign_main(args)
    secrets = generated_secrets() if args.source == "generated" else public_secrets(split=args.split)
    secrets = secrets[: args.limit] if args.limit is not None else secrets
    channels = [c for c in args.channels.split(",") if c]
    encodings = [e for e in args.encodings.split(",") if e]
    unknown = [c for c in channels if c not in CHANNELS] + [e for e in encodings if e not in ENCODINGS]
    if unknown or not secrets:
        parser.error(f"unknown channel or encoding: {', '.join(unknown)}" if unknown else "no secrets to send")
    run = anyio.run(lambda: run_cases(secrets, policy=args.policy, channels=channels, encodings=encodings))
    data = summary(run)
    if args.json:
        print(json.dumps({"policy": args.policy, "source": args.source, "secrets": len(secrets), "channels": data}))
    else:
        split = f", split {args.split}" if args.split else ""
        print(f"policy {args.policy}, {len(secrets)} secrets ({args.source}{split}), {run.seconds:.1f} s CPU")
        print(format_summary(data))
    if args.leaks:
        print(format_leaks(run))
    return 0


def format_leaks(run: Run, width: int = 160) -> str:
    """Every counted item that reached the upstream, per channel: `encoding family | the text sent (cut)`."""
    lines: list[str] = []
    for channel, leaked in run.leaks.items():
        for secret, encoding in leaked:
            text = secret.spelled if len(secret.spelled) <= width else secret.spelled[: width - 1] + "…"
            lines.append(f"leak {channel} {encoding} {secret.family} | {text!r}")
    return "\n".join(lines)


BENIGN_CORPORA = ("gitleaks_fps", "credsweeper_neg", "realworld_benign", "tool_outputs")
"""Items nobody should be refused for: gitleaks' and CredSweeper's own false positives, and real files."""


def benign_items(split: str | None = None, limit: int | None = None) -> list[Secret]:
    """The benign corpora's text items as `Secret`s (family: the corpus), each sent whole as one argument."""
    from bench.public_corpus import corpora_dir

    out: list[Secret] = []
    for name in BENIGN_CORPORA:
        path = corpora_dir() / f"{name}.jsonl"
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            text = item.get("text")
            if item.get("kind", "text") != "text" or not isinstance(text, str) or not text:
                continue
            if split is not None and item.get("split") != split:
                continue
            out.append(Secret(name, text, "\x00never\x00", str(item.get("split") or "")))
    return out[:limit] if limit is not None else out


def _benign_main(args: argparse.Namespace) -> int:
    """Each benign item as `{"query": text}` in a tools/call: how many the guard refuses, per corpus."""
    import anyio

    items = benign_items(args.split, args.limit)
    run = anyio.run(lambda: run_cases(items, policy=args.policy, channels=("tool_args",), encodings=("plain",)))
    sent = Counter(item.family for item in items)
    refused = run.held.get("tool_args", Counter())
    rows = {name: [refused.get(name, 0), sent[name]] for name in BENIGN_CORPORA if sent[name]}
    if args.json:
        print(json.dumps({"policy": args.policy, "split": args.split, "refused": rows}))
    else:
        split = f", split {args.split}" if args.split else ""
        print(f"policy {args.policy}, benign items each sent as one argument{split}, {run.seconds:.1f} s CPU")
        for name, (count, total) in rows.items():
            print(f"{name:<20} refused {count:>5}/{total:<6} ({100 * count / total:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
