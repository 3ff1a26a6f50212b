"""Embedding contexts: the syntaxes a secret turns up in (JSON, YAML, .env, source code, logs, …).

Each context renders one to three tokens (a `Secret` or `Decoy`'s `text`) the way a real document would
carry them, keeping every token verbatim (quoting is chosen so nothing is escaped, except by JSON, which
the redactor reads as data). Encoded contexts (`ENCODED_CONTEXTS`: base64 blobs marked as such, data URLs,
URL-encoding, hex, Kubernetes secrets) change the token's spelling where the payload says so: `redact`
decodes them (its `decode` option), and the standard properties use those a policy's redactor decodes.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from hypothesis import strategies as st

from .formats import Decoy, Sample, Secret
from .regexgen import uniform

Render = Callable[[list[str], random.Random], Any]

FILLER_WORDS = (
    "deploy", "finished", "queue", "worker", "build", "checked", "cache", "warm", "request", "ok", "retry", "après",
    "naïve", "数据", "服务", "✓", "latency", "batch", "items", "processed", "step", "phase", "stable", "rollout",
    "größe", "résumé", "done", "pending", "value", "note", "ready", "Überblick", "🚀",
)  # fmt: skip
NEUTRAL_KEYS = ("note", "message", "detail", "info", "text", "remark", "comment", "memo", "field", "output")
"""Keys no built-in key rule covers: what is found under them is found by content."""


def _words(rng: random.Random, low: int = 1, high: int = 4) -> str:
    return " ".join(rng.choice(FILLER_WORDS) for _ in range(rng.randint(low, high)))


def _key(rng: random.Random, index: int) -> str:
    key = rng.choice(NEUTRAL_KEYS)
    return key if index == 0 else f"{key}_{index + 1}"


@dataclass(frozen=True, slots=True)
class Context:
    """One syntax. `forbids`: characters a token must not contain to stay verbatim here."""

    name: str
    render: Render
    forbids: str = ""
    multiline: bool = True
    encoded: bool = False
    description: str = ""
    encoding: str = ""
    """For an encoded context: the name `redact`'s `decode` option gives the encoding."""

    def accepts(self, token: str) -> bool:
        if not self.multiline and ("\n" in token or "\r" in token):
            return False
        return not any(char in token for char in self.forbids)


# --- renderers -------------------------------------------------------------------------------------------


def _plain(tokens: list[str], rng: random.Random) -> str:
    # A sentence may end right after a token (`… password: none. Then …`).
    return " ".join(f"{_words(rng)} {token}{rng.choice(['.', ''])} {_words(rng, 1, 3)}." for token in tokens)


def _json_text(tokens: list[str], rng: random.Random) -> str:
    body: dict[str, Any] = {_key(rng, i): token for i, token in enumerate(tokens)}
    body["status"] = rng.choice(["ok", "done", "pending"])
    body["count"] = rng.randint(0, 99)
    return json.dumps(body, ensure_ascii=rng.random() < 0.5, indent=2 if rng.random() < 0.3 else None)


def _json_escaped(tokens: list[str], rng: random.Random) -> str:
    message = " ".join(f'{_words(rng)} "{token}"' for token in tokens) + f"\n\t{_words(rng)}"
    return json.dumps({"message": message, "level": "info"})


def _json_in_string(tokens: list[str], rng: random.Random) -> str:
    inner = json.dumps({_key(rng, i): token for i, token in enumerate(tokens)})
    return json.dumps({"payload": inner, "kind": "event"})


def _structured(tokens: list[str], rng: random.Random) -> dict[str, Any]:
    items = [{_key(rng, 0): token, "position": index} for index, token in enumerate(tokens)]
    return {"items": items, "status": rng.choice(["ok", "done"]), "total": len(items)}


def _structured_key(tokens: list[str], rng: random.Random) -> dict[str, Any]:
    return {"lookup": {token: rng.randint(1, 9) for token in tokens}, "status": "ok"}


def _yaml(tokens: list[str], rng: random.Random) -> str:
    lines = ["config:", f"  retries: {rng.randint(1, 5)}"]
    lines += [f"  {_key(rng, i)}: '{token}'" for i, token in enumerate(tokens)]
    return "\n".join(lines) + "\n"


def _ini(tokens: list[str], rng: random.Random) -> str:
    lines = [f"[{rng.choice(['service', 'worker', 'main'])}]", "enabled = true"]
    lines += [f"{_key(rng, i)} = {token}" for i, token in enumerate(tokens)]
    return "\n".join(lines) + "\n"


def _dotenv(tokens: list[str], rng: random.Random) -> str:
    quote_char = rng.choice(["", '"'])
    lines = [f"{_key(rng, i).upper()}={quote_char}{token}{quote_char}" for i, token in enumerate(tokens)]
    return "\n".join(["LOG_LEVEL=info", *lines]) + "\n"


def _toml(tokens: list[str], rng: random.Random) -> str:
    lines = ["[server]", f"port = {rng.randint(1024, 9999)}"]
    lines += [f'{_key(rng, i)} = """{token}"""' if "\n" in token else f'{_key(rng, i)} = "{token}"' for i, token in
              enumerate(tokens)]  # fmt: skip
    return "\n".join(lines) + "\n"


def _shell(tokens: list[str], rng: random.Random) -> str:
    lines = ["#!/bin/sh", "set -eu"] + [f"export {_key(rng, i).upper()}='{token}'" for i, token in enumerate(tokens)]
    return "\n".join(lines) + "\n"


def _url_query(tokens: list[str], rng: random.Random) -> str:
    query = "&".join(f"{_key(rng, i)}={token}" for i, token in enumerate(tokens))
    return f"https://api.example.com/v1/items?{query}&page={rng.randint(1, 9)}"


def _http_headers(tokens: list[str], rng: random.Random) -> str:
    lines = ["GET /v1/items HTTP/1.1", "Host: api.internal"]
    lines += [f"X-{_key(rng, i).capitalize()}: {token}" for i, token in enumerate(tokens)]
    return "\r\n".join([*lines, "Accept: */*", "", ""])


def _csv(tokens: list[str], rng: random.Random) -> str:
    rows = ["id,note,status"]
    for index, token in enumerate(tokens):
        cell = f'"{token}"' if any(c in token for c in ",\n") else token
        rows.append(f"{index + 1},{cell},{rng.choice(['ok', 'failed'])}")
    return "\n".join(rows) + "\n"


def _log(tokens: list[str], rng: random.Random) -> str:
    lines = []
    for index, token in enumerate(tokens):
        level = rng.choice(["INFO", "WARN", "DEBUG"])
        lines.append(f"2024-05-0{index + 1}T13:45:0{index}Z {level} [worker-{rng.randint(1, 9)}] {_key(rng, 0)}={token}"
                     f" elapsed={rng.randint(1, 900)}ms")  # fmt: skip
    return "\n".join(lines)


def _xml(tokens: list[str], rng: random.Random) -> str:
    inner = "".join(f"<{_key(rng, i)}><![CDATA[{token}]]></{_key(rng, i)}>" for i, token in enumerate(tokens))
    return f'<?xml version="1.0"?><config version="{rng.randint(1, 3)}">{inner}</config>'


def _html(tokens: list[str], rng: random.Random) -> str:
    cells = "".join(f"<tr><td>{_words(rng, 1, 2)}</td><td>{token}</td></tr>" for token in tokens)
    return f'<table class="results">{cells}</table>'


def _markdown(tokens: list[str], rng: random.Random) -> str:
    body = "\n".join(tokens)
    return f"## {_words(rng, 1, 2)}\n\nThe output was:\n\n```text\n{body}\n```\n"


def _python(tokens: list[str], rng: random.Random) -> str:
    args = ", ".join(
        f'{_key(rng, i)}="""{t}"""' if "\n" in t else f'{_key(rng, i)}="{t}"' for i, t in enumerate(tokens)
    )
    return f"from service import Client\n\nclient = Client({args})\nclient.run(retries={rng.randint(1, 5)})\n"


def _go(tokens: list[str], rng: random.Random) -> str:
    fields = "\n".join(f"\t{_key(rng, i).capitalize()}: `{token}`," for i, token in enumerate(tokens))
    return f"package main\n\nvar cfg = Config{{\n{fields}\n\tRetries: {rng.randint(1, 5)},\n}}\n"


def _js(tokens: list[str], rng: random.Random) -> str:
    lines = [f"const {_key(rng, i)} = '{token}';" for i, token in enumerate(tokens)]
    return "\n".join([*lines, f"export default {{ retries: {rng.randint(1, 5)} }};"]) + "\n"


def _sql(tokens: list[str], rng: random.Random) -> str:
    rows = ", ".join(f"({index + 1}, '{token}')" for index, token in enumerate(tokens))
    return f"INSERT INTO notes (id, body) VALUES {rows};"


def _stack_trace(tokens: list[str], rng: random.Random) -> str:
    if rng.random() < 0.5:
        calls = "\n".join(
            f'  File "worker.py", line {rng.randint(10, 99)}, in run\n    handle({token})' for token in tokens
        )
        return f"Traceback (most recent call last):\n{calls}\nValueError: invalid input"
    causes = "\n".join(f"Caused by: java.lang.IllegalStateException: bad value {token}" for token in tokens)
    return f"java.lang.RuntimeException: failed\n\tat com.acme.Worker.run(Worker.java:{rng.randint(10, 99)})\n{causes}"


# --- encoded ---------------------------------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _base64_blob(tokens: list[str], rng: random.Random) -> dict[str, Any]:
    config = "\n".join(f"{_key(rng, i).upper()}={token}" for i, token in enumerate(tokens))
    return {"encoding": "base64", "config": _b64(config + "\n")}


def _data_url(tokens: list[str], rng: random.Random) -> str:
    return "data:text/plain;base64," + _b64("\n".join(tokens))


def _url_encoded(tokens: list[str], rng: random.Random) -> str:
    query = "&".join(f"{_key(rng, i)}={quote(token, safe='')}" for i, token in enumerate(tokens))
    return f"https://api.example.com/callback?{query}"


def _hex_blob(tokens: list[str], rng: random.Random) -> dict[str, Any]:
    return {"encoding": "hex", "data": "\n".join(tokens).encode().hex()}


def _k8s_secret(tokens: list[str], rng: random.Random) -> str:
    data = "\n".join(f"  {_key(rng, i)}: {_b64(token)}" for i, token in enumerate(tokens))
    return f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ntype: Opaque\ndata:\n{data}\n"


CONTEXTS: tuple[Context, ...] = (
    Context("plain", _plain, description="prose"),
    Context("json", _json_text, description="a JSON document as text"),
    Context("json_escaped", _json_escaped, description="quoted inside a JSON string, with escapes around it"),
    Context("json_in_string", _json_in_string, description="a JSON document inside a JSON string"),
    Context("structured", _structured, description="structured content (a JSON value, not text)"),
    Context("structured_key", _structured_key, description="used as a key of structured content"),
    Context("yaml", _yaml, forbids="'", multiline=False),
    Context("ini", _ini, multiline=False),
    Context("dotenv", _dotenv, forbids='"', multiline=False),
    Context("toml", _toml, forbids='"\\'),
    Context("shell_export", _shell, forbids="'"),
    Context("url_query", _url_query, forbids=" \t=&", multiline=False),
    Context("http_headers", _http_headers, multiline=False),
    Context("csv", _csv, forbids='"'),
    Context("log_line", _log, multiline=False),
    Context("xml", _xml, forbids="]"),
    Context("html", _html, forbids="<"),
    Context("markdown_code", _markdown, forbids="`"),
    Context("python_source", _python, forbids='"\\'),
    Context("go_source", _go, forbids="`"),
    Context("js_source", _js, forbids="'\\", multiline=False),
    Context("sql", _sql, forbids="'"),
    Context("stack_trace", _stack_trace),
)
"""The syntaxes the transforms are expected to handle: the token is verbatim or JSON-escaped."""

ENCODED_CONTEXTS: tuple[Context, ...] = (
    Context("base64_blob", _base64_blob, encoded=True, description='{"encoding": "base64", "config": "..."}',
            encoding="base64"),
    Context("data_url", _data_url, encoded=True, description="data:text/plain;base64,...", encoding="data_url"),
    Context("url_encoded", _url_encoded, encoded=True, description="percent-encoded query values",
            encoding="url_query"),
    Context("hex_blob", _hex_blob, encoded=True, description='{"encoding": "hex", "data": "..."}', encoding="hex"),
    Context("k8s_secret", _k8s_secret, encoded=True, description="a Kubernetes Secret manifest (base64 data)",
            encoding="k8s_secret"),
)  # fmt: skip
"""Syntaxes that re-spell the token where the payload marks it; `redact` decodes each (`Context.encoding`)."""

CONTEXTS_BY_NAME: dict[str, Context] = {c.name: c for c in (*CONTEXTS, *ENCODED_CONTEXTS)}


class _HasSamples(Protocol):
    @property
    def samples(self) -> tuple[Sample, ...]: ...


class SampleViews:
    """`secrets` and `decoys` of anything with `samples`, and a short repr in IPython."""

    __slots__ = ()

    @property
    def secrets(self: _HasSamples) -> tuple[Secret, ...]:
        return tuple(s for s in self.samples if isinstance(s, Secret))

    @property
    def decoys(self: _HasSamples) -> tuple[Decoy, ...]:
        return tuple(s for s in self.samples if isinstance(s, Decoy))

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@dataclass(frozen=True, slots=True)
class Embedded(SampleViews):
    """Samples rendered into one context: `value` is a string or a JSON value."""

    context: str
    value: Any
    samples: tuple[Sample, ...]
    skeleton: Any
    """The same rendering with the tokens replaced by markers: what the context itself contributes."""
    encoded: bool = False

    def __repr__(self) -> str:
        return f"Embedded({self.context}, {list(self.samples)!r})"


def render(context: Context, samples: Sequence[Sample], seed: int) -> Embedded:
    """Render `samples` into `context` (deterministic for a seed)."""
    tokens = [s.text for s in samples]
    value = context.render(tokens, random.Random(seed))
    markers = [f"\u2063slot{index}\u2063" for index in range(len(tokens))]
    skeleton = context.render(markers, random.Random(seed))
    return Embedded(context.name, value, tuple(samples), skeleton, context.encoded)


def distinct_samples(samples: Sequence[Sample]) -> bool:
    """No sample's protected value may be spelled inside another sample's text."""
    for sample in samples:
        for other in samples:
            if other is not sample and sample.value in other.text:
                return False
    return True


def embedded(
    samples: st.SearchStrategy[Any],
    *,
    contexts: Sequence[Context] = CONTEXTS,
    max_samples: int = 3,
) -> st.SearchStrategy[Embedded]:
    """One to `max_samples` samples (Secrets or Decoys) rendered together into one of `contexts`."""
    if not contexts:
        raise ValueError("no contexts")

    @st.composite
    def build(draw: st.DrawFn) -> Embedded:
        drawn: list[Sample] = draw(st.lists(samples, min_size=1, max_size=max_samples).filter(distinct_samples))
        usable = [c for c in contexts if all(c.accepts(s.text) for s in drawn)]
        if not usable:
            drawn = drawn[:1]
            usable = [c for c in contexts if c.accepts(drawn[0].text)] or [CONTEXTS_BY_NAME["plain"]]
        context = draw(uniform(usable))
        return render(context, drawn, draw(st.integers(0, 2**32 - 1)))

    return build()
