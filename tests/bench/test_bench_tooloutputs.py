"""The `tool_outputs` corpus builder (bench.public_tooloutputs) on a small git snapshot written here: items in
the shape a tool returns, credential-shaped ones left out and counted, the report's `altered` row."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.corpus_upstream import result_of
from bench.public_corpus import build, load
from bench.public_quality import public_report
from bench.public_tooloutputs import Sources, tool_output_items

FIXTURES = {
    "resources": {
        "charge": {"id": "ch_1AbCdEfGhIjKlMnOpQrStUvW", "object": "charge", "amount": 100, "currency": "usd"},
        "payment_intent": {"id": "pi_1AbCdEfGhIjKlMnOpQrStUvW", "object": "payment_intent",
                           "client_secret": "pi_1AbCdEfGhIjKlMnOpQrStUvW" + "_secret_" + "AbCdEfGhIjKlMnOp"},
        "event": {"id": "evt_1AbCdEfGhIjKlMnOpQrStUvW", "object": "event", "type": "charge.succeeded"},
    }
}  # fmt: skip


def _snapshot(root: Path) -> Path:
    """A bare git repository named like a fetched snapshot (`owner+name/repo`) holding Stripe-style fixtures."""
    work = root / "work"
    (work / "openapi").mkdir(parents=True)
    (work / "openapi" / "fixtures3.json").write_text(json.dumps(FIXTURES))
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "fixtures"], check=True)
    folder = root / "snapshots"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(folder / "stripe+openapi" / "repo")], check=True)
    return folder


def test_items_are_tool_results_and_credential_shaped_ones_are_left_out(tmp_path: Path) -> None:
    folder = _snapshot(tmp_path)
    assert set(Sources(folder).repos) == {"stripe/openapi"}
    items, summary = tool_output_items(folder)
    stripe = [i for i in items if i["family"] == "stripe_object"]
    assert stripe and all("_secret_" not in i["text"] for i in items)
    assert summary["left_out_as_credential_shaped"]["stripe_object"] == 1
    assert summary["repositories"] == {"stripe/openapi": str(folder / "stripe+openapi" / "repo")}
    structured = [i for i in stripe if "structured" in i]
    for item in structured:
        result = result_of(item)
        assert result["structuredContent"] == json.loads(result["content"][0]["text"])


def test_the_corpus_is_built_recorded_and_reported(tmp_path: Path) -> None:
    folder = _snapshot(tmp_path)
    out = tmp_path / "corpora"
    counts = build(out, None, None, None, [], tool_sources=folder)
    items = load("tool_outputs", out)
    assert items and counts["tool_outputs"] == len(items)
    assert {i["label"] for i in items} == {"benign"} and {i["split"] for i in items} <= {"tune", "heldout"}
    sources = json.loads((out / "SOURCES.json").read_text())
    assert sources["tool_outputs"]["folder"] == str(folder)
    build(out, None, None, None, [], tool_sources=None)  # a later partial build keeps the record
    assert "tool_outputs" in json.loads((out / "SOURCES.json").read_text())
    report = public_report(folder=out, gateway=0, peers=False)
    row = report["corpora"]["tool_outputs"]
    assert row["metric"] == "altered" and row["all"]["items"] == len(items)
