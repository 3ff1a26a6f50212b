"""Pipeline assembly on plain dicts: modes, option merging, alias ordering, hints, input side, validation."""

from __future__ import annotations

from typing import Any

import pytest

from interceptors.transforms import (
    IDENTITY,
    OPEN_TRANSFORMS,
    STANDARD_TRANSFORMS,
    STRICT_TRANSFORMS,
    Redactor,
    TransformContext,
    assemble_input,
    assemble_output,
    check_transform_sections,
    normalize_spec,
    register_transform,
)
from interceptors.transforms.base import Transform
from interceptors.transforms.project import Projection
from interceptors.transforms.specs import FACTORIES

POLICY: dict[str, Any] = {
    "name": "p",
    "transforms": ["sanitize", {"type": "redact", "strategies": {"secret": "redact"}}, "annotate"],
    "input_transforms": [{"type": "guard_secrets"}],
}


def test_standard_shape_and_input_pipeline() -> None:
    assert assemble_output(STANDARD_TRANSFORMS).types == ("sanitize", "redact", "project", "annotate")
    assert assemble_input(STANDARD_TRANSFORMS).types == ("guard_secrets", "depseudonymize")
    assert assemble_output(OPEN_TRANSFORMS) is IDENTITY and assemble_input(OPEN_TRANSFORMS) is IDENTITY
    assert assemble_output(STRICT_TRANSFORMS).reversible


def test_pipelines_are_cached_and_instances_shared() -> None:
    first = assemble_output(STANDARD_TRANSFORMS)
    assert assemble_output(dict(STANDARD_TRANSFORMS)) is first
    other = assemble_output({**STANDARD_TRANSFORMS, "transforms": STANDARD_TRANSFORMS["transforms"][1:2]})
    assert other.transforms[0] is first.transforms[1]


def test_spec_normalisation() -> None:
    spec = normalize_spec({"transform": "Redaction", "id": "r1", "options": {"default": "redact"}}, "t")
    assert (spec.type, spec.id, dict(spec.options)) == ("redact", "r1", {"default": "redact"})
    assert normalize_spec("untrusted-text", "t").type == "sanitize"
    assert normalize_spec({"name": "reject_secrets", "action": "redact"}, "t").options == {"action": "redact"}
    with pytest.raises(ValueError, match="unknown transform type"):
        normalize_spec("teleport", "t")
    with pytest.raises(ValueError, match="either under 'options' or inline"):
        normalize_spec({"type": "redact", "options": {"a": 1}, "b": 2}, "t")


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("append", ("sanitize", "redact", "annotate", "project")),
        ("prepend", ("project", "sanitize", "redact", "annotate")),
        ("replace", ("project",)),
    ],
)
def test_transforms_mode(mode: str, expected: tuple[str, ...]) -> None:
    rule = {"transforms": [{"type": "project", "max_string": 10}], "transforms_mode": mode}
    assert assemble_output(POLICY, [rule]).types == expected


def test_alias_and_substitute_move_after_the_last_redact() -> None:
    policy = {
        "transforms": [
            {"type": "alias", "aliases": {"a": "b"}},
            "sanitize",
            {"type": "substitute", "aliases": {"c": "d"}},
            {"type": "redact", "id": "r1"},
            {"type": "redact", "id": "r2", "default": "keep"},
            "annotate",
        ]
    }
    assert assemble_output(policy).ids == ("sanitize", "r1", "r2", "alias", "substitute", "annotate")
    rule = {"transforms": [{"type": "alias", "aliases": {"x": "y"}}], "transforms_mode": "prepend"}
    assert assemble_output(POLICY, [rule]).types == ("sanitize", "redact", "alias", "annotate")


def test_transform_options_merge_policy_then_rules_by_type_alias_and_id() -> None:
    policy = {
        "transforms": [{"type": "redact", "id": "main", "strategies": {"secret": "redact"}}],
        "transform_options": {"redaction": {"strategies": {"email": "hash"}}},
    }
    rule_a = {"transform_options": {"main": {"strategies": {"email": "redact"}, "min_confidence": 0.5}}}
    rule_b = {"transform_options": {"redact": {"strategies": {"pii": "keep"}}}}
    pipeline = assemble_output(policy, [rule_a, rule_b])
    redactor = pipeline.transforms[0]
    assert isinstance(redactor, Redactor)
    strategies = {k: v.kind for k, v in redactor.table.strategies.items()}
    # type options first, then the id's: the id wins on email.
    assert strategies == {"secret": "redact", "email": "redact", "pii": "keep"}
    assert redactor.min_confidence == 0.5
    lists = {
        "transforms": [{"type": "project", "exclude": ["a", "b"]}],
        "transform_options": {"project": {"exclude": ["c"]}},
    }
    projection = assemble_output(lists).transforms[0]
    assert isinstance(projection, Projection) and projection.exclude is not None
    assert len(projection.exclude.patterns) == 1  # lists are replaced, not merged


def test_hints_skip_pseudonymize_projection_extra_and_honor_hints() -> None:
    assert assemble_output(STANDARD_TRANSFORMS, (), {"skip": ["*"]}) is IDENTITY
    assert assemble_output(STANDARD_TRANSFORMS, (), {"skip": ["projection"]}).types == (
        "sanitize",
        "redact",
        "annotate",
    )
    strict = assemble_output(STRICT_TRANSFORMS, (), {"pseudonymize": False})
    assert not strict.transforms[1].reversible and assemble_output(STRICT_TRANSFORMS).transforms[1].reversible
    hinted = assemble_output(STANDARD_TRANSFORMS, (), {"project": {"max_string": 7}})
    projection = hinted.transforms[2]
    assert isinstance(projection, Projection) and projection.caps.max_string == 7
    extra = assemble_output(POLICY, (), {"skip": ["all"], "transforms": [{"type": "regex_replace"}]})
    assert extra.types == ("regex_replace",)
    ignoring = {**POLICY, "honor_hints": False}
    assert assemble_output(ignoring, (), {"skip": ["*"], "extra": ["project"]}).types == (
        "sanitize", "redact", "annotate", "project")  # fmt: skip
    assert assemble_output(ignoring, [{"honor_hints": True}], {"skip": ["*"]}) is IDENTITY


def test_input_side_rules_hints_and_reversibility() -> None:
    rule = {"input_transforms": [{"type": "guard_secrets", "action": "redact", "id": "soft"}]}
    assert assemble_input(POLICY, [rule]).ids == ("guard_secrets", "soft", "depseudonymize")
    assert assemble_input(POLICY, (), {"input_guard": False}).types == ("depseudonymize",)
    assert assemble_input(POLICY, (), {"depseudonymize": False, "skip_input": ["guard_secrets"]}) is IDENTITY
    plain = {"transforms": [{"type": "redact", "default": "redact"}], "input_transforms": []}
    assert assemble_input(plain) is IDENTITY  # nothing reversible, nothing to reverse
    aliased = {"transforms": [{"type": "substitute", "aliases": {"111111111111": "prod"}}]}
    reverse = assemble_input(aliased)
    assert reverse.types == ("depseudonymize",)
    assert reverse.apply({"account": "prod"}, TransformContext()) == {"account": "111111111111"}


def test_custom_and_disabled_detectors_reach_every_redactor() -> None:
    policy = {
        "transforms": [{"type": "redact", "strategies": {"ticket": "redact", "email": "redact"}}],
        "input_transforms": [{"type": "guard_secrets"}],
        "detectors": [{"name": "ticket", "pattern": r"TKT-\d{6}", "hints": ["tkt-"], "category": "secret"}],
        "disabled_detectors": ["email"],
    }
    pipeline = assemble_output(policy)
    out = pipeline.apply({"t": "TKT-123456 bob@example.com"}, TransformContext())
    assert out == {"t": "[REDACTED:ticket] bob@example.com"}
    guard = assemble_input(policy).transforms[0]
    assert "ticket" in [d.name for d in guard._redactor.detectors]  # type: ignore[attr-defined]


def test_register_transform() -> None:
    class Upper(Transform):
        type = "upper"

        def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
            return value.upper() if isinstance(value, str) else value

    register_transform("upper", lambda options, path, tid: Upper(tid))
    try:
        assert assemble_output({"transforms": ["upper"]}).apply("abc", TransformContext()) == "ABC"
    finally:
        FACTORIES.pop("upper")


# --- validation -----------------------------------------------------------------------------------------------

SECRET = "sup3r-s3cret-value"


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ({"transforms": "redact"}, "policy.transforms"),
        ({"transforms": ["teleport"]}, "policy.transforms[0]"),
        ({"transforms": [{"type": "redact", "colour": SECRET}]}, "policy.transforms[0]"),
        ({"transforms": [{"type": "redact", "strategies": {"secret": SECRET}}]},
         "policy.transforms[0].strategies.secret"),
        ({"transforms": [{"type": "project", "max_chars": SECRET}]}, "policy.transforms[0].max_chars"),
        ({"input_transforms": [{"type": "guard_secrets", "action": SECRET}]}, "policy.input_transforms[0].action"),
        ({"transform_options": {"redact": {"key_rules": SECRET}}}, "policy.transform_options.redact.key_rules"),
        ({"transform_options": {"redact": SECRET}}, "policy.transform_options.redact"),
        ({"detectors": [{"name": "d", "pattern": "(" + SECRET}]}, "policy.detectors[0].pattern"),
        ({"detectors": [{"name": "d", "pattern": "a"}, {"name": "d", "pattern": "b"}]}, "policy.detectors"),
        ({"disabled_detectors": SECRET}, "policy.disabled_detectors"),
        ({"honor_hints": SECRET}, "policy.honor_hints"),
        ({"transforms_mode": SECRET}, "policy.transforms_mode"),
        ({"transforms": [{"type": "sanitize", "extra_patterns": ["(" + SECRET]}]},
         "policy.transforms[0].extra_patterns[0]"),
    ],
)  # fmt: skip
def test_check_transform_sections_names_fields_never_values(doc: dict[str, Any], where: str) -> None:
    with pytest.raises(ValueError) as info:
        check_transform_sections(doc, "policy")
    message = str(info.value)
    assert message.startswith(where), message
    assert SECRET not in message


def test_valid_sections_pass() -> None:
    check_transform_sections(STANDARD_TRANSFORMS, "policy")
    check_transform_sections(STRICT_TRANSFORMS, "policy")
    check_transform_sections(
        {"transforms_mode": "replace", "transforms": ["annotate"], "honor_hints": None}, "rules[0]"
    )
    check_transform_sections({"transform_options": {"my-id": {"anything": 1}}}, "policy")
