"""`annotate`: tells the model what was done to the result and how to treat it (placed last).

Annotations go to the report; with `inline` they are also merged into dict results. Content hints
(audience, priority) are computed for the report only, never written onto MCP content items.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from .base import Options, Transform, TransformContext

_SEVERITIES = ("critical", "high", "medium", "low", "info", "informational")
_LEVELS = {"public": 0, "internal": 1, "confidential": 2, "restricted": 3}
_WITHHELD = ("redacted", "masked", "hashed", "dropped")
_PRIORITIES = {level: round(0.3 + 0.15 * level, 2) for level in _LEVELS.values()}
"""A content priority per sensitivity level (computed once, as `round(0.3 + 0.15 * level, 2)`)."""
_TOTALS = ("redacted", "masked", "hashed", "pseudonymized", "generalized", "dropped", "aliased")
PSEUDONYM_NOTE = "Pseudonymised values are stable references: pass them back unchanged to refer to the same thing."


class Annotator(Transform):
    type = "annotate"
    OPTIONS = (
        "inline", "key", "classification", "provenance", "summary", "label_findings", "content_annotations", "profile",
        "notice",
    )  # fmt: skip

    def __init__(self, options: Mapping[str, Any], path: str = "annotate", transform_id: str | None = None) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        self.inline = opts.flag("inline", False)
        self.key = opts.text("key", "_annotations") or "_annotations"
        self.classification = opts.flag("classification", True)
        self.provenance = opts.flag("provenance", True)
        self.summary = opts.flag("summary", True)
        self.label_findings = opts.flag("label_findings", False)
        self.content_annotations = opts.flag("content_annotations", True)
        self.profile = opts.text("profile", None)
        self.notice = opts.text("notice", None)

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        return self.apply_all([value], ctx, [label])[0]

    def apply_all(self, values: Sequence[Any], ctx: TransformContext, labels: Sequence[str]) -> list[Any]:
        """One set of annotations per result, computed over all of its parts."""
        severities: dict[str, int] = {}
        out = [self._findings(value, severities) for value in values]
        annotations = self._annotations(ctx, values, severities)
        ctx.report["annotations"] = annotations
        if self.content_annotations:
            level = _LEVELS.get(ctx.sensitivity or "confidential", 2)
            priority = _PRIORITIES[level]
            if severities and (severities.get("critical") or severities.get("high")):
                priority = 0.9
            ctx.report["content_annotations"] = {
                "audience": ["user"] if level >= 3 else ["user", "assistant"],
                "priority": priority,
            }
        if self.inline:
            out = [{**value, self.key: annotations} if isinstance(value, dict) else value for value in out]
        return out

    def _annotations(self, ctx: TransformContext, values: Sequence[Any], severities: dict[str, int]) -> dict[str, Any]:
        report = ctx.report
        annotations: dict[str, Any] = {}
        if self.classification:
            # Only the sections the report has (usually none): one membership test each, no empty dict made.
            withheld = sorted({e for s in _WITHHELD if s in report for e in report[s]})
            pseudonymized = sorted(report["pseudonymized"]) if "pseudonymized" in report else []
            classification: dict[str, Any] = {
                "sensitivity": ctx.sensitivity or "confidential",
                "withheld_entities": withheld,
                "pseudonymized_entities": pseudonymized,
            }
            if pseudonymized:
                classification["note"] = PSEUDONYM_NOTE
            annotations["classification"] = classification
        if self.provenance:
            provenance: dict[str, Any] = {
                "kind": ctx.kind,
                "name": ctx.name,
                "generated_at": _utc_now(),
            }
            if self.profile is not None:
                provenance["policy"] = self.profile
            if ctx.category is not None:
                provenance["category"] = ctx.category
            for value in values:
                if value.__class__ is dict or isinstance(value, dict):
                    dataset = next((value[k] for k in ("dataset", "dataset_id", "source") if k in value), None)
                    if isinstance(dataset, str | int):
                        provenance["dataset"] = dataset
                        break
            if ctx.roles:
                provenance["principal_roles"] = sorted(ctx.roles)
            annotations["provenance"] = provenance
        if self.summary:
            totals = {s: _total(report[s]) for s in _TOTALS if s in report}
            annotations["transformed"] = {k: v for k, v in totals.items() if v}
        untrusted = report.get("untrusted")
        if isinstance(untrusted, Mapping) and untrusted.get("notice"):
            annotations["untrusted_content"] = untrusted["notice"]
        if self.notice:
            annotations["notice"] = self.notice
        annotations["findings_by_severity"] = dict(sorted(severities.items())) if severities else {}
        return annotations

    def _findings(self, value: Any, severities: dict[str, int]) -> Any:
        """Counts finding-like dicts (and, with label_findings, labels a copy of each)."""
        if not self.label_findings:
            _count_findings(value, severities)
            return value
        if isinstance(value, dict):
            out = {k: self._findings(v, severities) for k, v in value.items()}
            severity = _counted_severity(value, severities)
            if severity is not None:
                score = value.get("risk_score")
                out["_risk"] = f"{severity.upper()} risk" + (f" ({score})" if score is not None else "")
            return out
        if isinstance(value, list | tuple):
            return [self._findings(v, severities) for v in value]
        return value


def _counted_severity(value: dict[str, Any], severities: dict[str, int]) -> str | None:
    """A finding-like dict's severity (as written), counted; None for any other dict."""
    severity = value.get("severity")
    if isinstance(severity, str) and severity.lower() in _SEVERITIES and ("title" in value or "resource_id" in value):
        level = severity.lower()
        severities[level] = severities.get(level, 0) + 1
        return severity
    return None


def _count_findings(value: Any, severities: dict[str, int]) -> None:
    """`_findings` without labels: the same counts, nothing copied."""
    if value.__class__ is str:  # the commonest part (a text block): nothing to count, no ABC check
        return
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, dict | list | tuple):
                _count_findings(item, severities)
        _counted_severity(value, severities)
    elif isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, dict | list | tuple):
                _count_findings(item, severities)


def _utc_now() -> str:
    """The provenance timestamp (second precision), formatted once per second."""
    global _clock
    now = int(time.time())
    second, text = _clock  # one tuple: a thread never reads one second's number with another's text
    if second != now:
        text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        _clock = (now, text)
    return text


_clock: tuple[int, str] = (-1, "")


def _total(section: Any) -> int:
    if section is None:
        return 0
    if isinstance(section, Mapping):
        return sum(v for v in section.values() if isinstance(v, int))
    if isinstance(section, int) and not isinstance(section, bool):
        return section
    return 0
