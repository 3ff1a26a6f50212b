"""The public-corpus builder and report (bench.public_corpus, bench.public_quality) on small trees written here.

The trees imitate the layout of the public checkouts the builder reads (rule sources with `tps`/`fps` lists, a
samples map, labelled sample lines); their content is written for these tests.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from bench.public_corpus import build, credsweeper_items, generate, gitleaks_items, go_string, load, split_of
from bench.public_corpus import main as corpus_main
from bench.public_quality import CORPORA, format_public_report, public_report

GENERATE_GO = """package utils

func GenerateSampleSecret(identifier string, secret string) string {
	return fmt.Sprintf("%s_key = \\"%s\\"", identifier, secret)
}

func GenerateSampleSecrets(identifier string, secret string) []string {
	samples := map[string]string{
		// a comment
		"env":  "{I}_TOKEN={s}",
		"yaml": "{i}_token: '{s}'",
	}
	return nil
}
"""

RULE_GO = """package rules

func Widget() *config.Rule {
	r := config.Rule{
		RuleID: "widget-token",
		Regex:  regexp.MustCompile(`wdg_[a-f0-9]{32}`),
	}
	tps := utils.GenerateSampleSecrets("widget", "wdg_"+secrets.NewSecret(utils.Hex("32")))
	tps = append(tps,
		"token: wdg_0123456789abcdef0123456789abcdef", // literal
		`raw wdg_fedcba9876543210fedcba9876543210`,
	)
	fps := []string{
		"wdg_" + "xxxxxxxx",
		"see https://example.com/wdg_docs",
	}
	return utils.Validate(r, tps, fps)
}
"""


def _gitleaks_tree(root: Path) -> Path:
    (root / "cmd/generate/config/utils").mkdir(parents=True)
    (root / "cmd/generate/config/rules").mkdir(parents=True)
    (root / "cmd/generate/config/utils/generate.go").write_text(GENERATE_GO)
    (root / "cmd/generate/config/rules/widget.go").write_text(RULE_GO)
    return root


def test_go_literals_and_regex_samples() -> None:
    assert go_string('"a\\tb\\"c\\\\d\\x41\\u00e9"') == 'a\tb"c\\dAé'
    assert go_string("`raw\\n`") == "raw\\n"
    rng = random.Random(1)
    for pattern in (r"ghp_[0-9a-zA-Z]{36}", r"(?:ABIA|ACCA)[A-Z2-7]{16}", r"[[:alnum:]]{8}\.x", r"a(?i)b[^c]{2,3}"):
        value = generate(pattern, rng)
        assert re.fullmatch(pattern.replace("[[:alnum:]]", "[a-zA-Z0-9]").replace("(?i)", ""), value, re.I), pattern


def test_gitleaks_rules_give_literal_tps_fps_and_samples_in_the_shapes(tmp_path: Path) -> None:
    items = list(gitleaks_items(_gitleaks_tree(tmp_path)))
    by = {
        name: [i for i in items if i["corpus"] == name]
        for name in ("gitleaks_tps", "gitleaks_fps", "gitleaks_generated")
    }
    assert [i["text"] for i in by["gitleaks_tps"]] == [
        "token: wdg_0123456789abcdef0123456789abcdef", "raw wdg_fedcba9876543210fedcba9876543210"]  # fmt: skip
    assert [i["text"] for i in by["gitleaks_fps"]] == ["wdg_xxxxxxxx", "see https://example.com/wdg_docs"]
    generated = by["gitleaks_generated"]
    assert {i["family"] for i in generated} == {"widget-token"} and len(generated) == 2  # two shapes
    for item in generated:
        assert re.fullmatch(r"wdg_[a-f0-9]{32}", item["secret"]) and item["secret"] in item["text"]
        assert item["text"].startswith(("WIDGET_TOKEN=", "widget_token: '"))
    assert items == list(gitleaks_items(tmp_path)), "the same tree builds the same corpus"


def test_credsweeper_labels_positives_rejected_candidates_and_marked_lines(tmp_path: Path) -> None:
    (tmp_path / "tests/samples").mkdir(parents=True)
    (tmp_path / "tests/data").mkdir(parents=True)
    (tmp_path / "tests/samples/conf").write_text("password = 'Qw7!zRt9pLm'\npassword = 'dummy'\nkey: abc # FP\n")
    finding = {"rule": "Password", "line_data_list": [{"path": "./tests/samples/conf", "line_num": 1,
                                                       "value": "Qw7!zRt9pLm"}]}  # fmt: skip
    candidate = {"rule": "Password", "line_data_list": [{"path": "./tests/samples/conf", "line_num": 2, "value": "x"}]}
    (tmp_path / "tests/data/output.json").write_text(json.dumps([finding]))
    (tmp_path / "tests/data/no_filters_no_ml.json").write_text(json.dumps([finding, candidate]))
    items = list(credsweeper_items(tmp_path))
    positives = [i for i in items if i["label"] == "secret"]
    negatives = [i for i in items if i["label"] == "benign"]
    assert [(i["text"], i["secret"]) for i in positives] == [("password = 'Qw7!zRt9pLm'", "Qw7!zRt9pLm")]
    assert sorted(i["text"] for i in negatives) == ["key: abc # FP", "password = 'dummy'"]


def test_the_split_is_a_stable_half() -> None:
    ids = [f"item-{n}" for n in range(400)]
    splits = [split_of(i) for i in ids]
    assert splits == [split_of(i) for i in ids]
    assert 150 < splits.count("heldout") < 250


def test_a_missing_corpus_is_reported_as_not_built(tmp_path: Path) -> None:
    report = public_report(folder=tmp_path, gateway=0)
    assert report["not_built"] == [name for name, _, _ in CORPORA]
    assert "not built" in format_public_report(report)
    assert load("gitleaks_tps", tmp_path) is None


def test_the_builder_refuses_to_write_into_the_repository() -> None:
    repo = Path(__file__).resolve().parents[2]
    with pytest.raises(SystemExit):
        corpus_main(["build", "--no-packages", "--out", str(repo / "corpora")])


@pytest.mark.slow
def test_report_in_process_and_through_the_gateway_on_a_tiny_corpus(tmp_path: Path) -> None:
    """Ours flags the planted keys and leaves the benign lines; the gateway sample agrees with in-process."""
    build(tmp_path, _gitleaks_tree(tmp_path / "gl"), None, None, [])
    report = public_report(folder=tmp_path, gateway=4, peers=False)
    rows = report["corpora"]
    assert rows["gitleaks_tps"]["heldout"]["items"] + rows["gitleaks_tps"]["tune"]["items"] == 2
    generated = rows["gitleaks_generated"]
    assert generated["all"]["ours"] == 1.0 and generated["all"]["ours_value_recall"] == 1.0
    assert rows["gitleaks_fps"]["all"]["ours"] == 0.0
    for name in ("gitleaks_generated", "gitleaks_fps"):
        gateway = rows[name]["gateway"]
        if gateway:
            assert gateway["same_as_in_process"] == 1.0
    assert report["peers_skipped"] and "detect-secrets" in report["peers_skipped"][0]
