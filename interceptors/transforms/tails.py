"""The rest of a secret that a terminal, a log or a tool wrapped onto the following lines.

A detector matches one line: `token = "v1.0-aaa…` ends where the line ends, and the key's other half sits on
the next lines, where no detector sees it (nothing labels it, and a piece of a token has no format). A finding
of a secret that ends at a line end is extended over the lines that continue it:

- a full continuation line is exactly as wide as the first line, as the finding's part of it, or as the
  part after a separator (a label's `=`, a quote: the value wrapped on its own), and holds only characters
  of the finding's alphabet (letters, digits, `-_.=+/` and the punctuation the finding itself uses);
- a line that starts as a setting of its own (`NAME=`, `name:`) ends the run, taken or not;
- the run ends at the first shorter line, which is taken when it closes a quote the finding's line opened,
  or when it looks random (two of lower case, upper case and digits: `of8wygs7g`, `KxzLbtKM`; not a word
  like `debug` or `Done`) and holds nothing but the alphabet.

Only secrets are extended (an e-mail address at a line end has no tail); the characters between the pieces
(the line breaks) are inside the span, so the redaction covers every piece and changes nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .detectors import Finding

__all__ = ["with_wrapped_tails"]

_MIN_WIDTH = 24
"""Narrower "wrapping" is a short value at a line end, not a wrapped one."""
_MAX_LINES = 64
_QUOTES = "\"'`"
_SEPARATORS = frozenset(" \t=:,;(|>" + _QUOTES)
"""Where a wrapped value may begin on its line (after a label, an operator, a quote)."""
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_SETTING = re.compile(
    r"(?:[A-Z][A-Z0-9]*_[A-Z0-9_]*|[a-z]+(?:[._][a-z0-9]+)*|[a-z]+(?:[A-Z][a-z0-9]+)+)\s*[=:](?=[^=])"
)
"""A line that starts as a setting of its own (`BACKUP_ENABLED=true`, `debug=1`, `logLevel: info`): the value
before it ended at its line end, whatever the line's width and alphabet."""


def _looks_random(piece: str) -> bool:
    """Two of lower case, upper case and digits, and not a word or a number (`debug`, `DONE`, `Done`, `2024`)."""
    kinds = any(c.islower() for c in piece) + any(c.isupper() for c in piece) + any(c.isdigit() for c in piece)
    return len(piece) >= 2 and kinds >= 2 and not _WORD.fullmatch(piece)


_TOKEN_PUNCTUATION = frozenset("-_.=+/")
"""What base64, base64url and vendor tokens use besides letters and digits."""


def _alphabet(value: str) -> frozenset[str]:
    return _TOKEN_PUNCTUATION | frozenset(c for c in value if not c.isalnum() and not c.isspace())


def _of_alphabet(line: str, punctuation: frozenset[str]) -> bool:
    return bool(line) and all(c.isascii() and (c.isalnum() or c in punctuation) for c in line)


def _tail_end(text: str, finding: Finding) -> int:
    """Where the wrapped rest of `finding` ends (its own end when nothing continues it)."""
    end = finding.end
    if end >= len(text) or text[end] not in "\r\n":
        return end
    line_start = text.rfind("\n", 0, end) + 1
    first = text[line_start:end]
    own = text[max(finding.start, line_start) : end]  # the finding's part of its last line
    punctuation = _alphabet(own)
    after_separators = (len(first) - at - 1 for at, c in enumerate(first) if c in _SEPARATORS)
    widths = {w for w in (len(first), len(own), *after_separators) if w >= _MIN_WIDTH}
    if not widths:
        return end
    opener = text[finding.start - 1 : finding.start + 1] if finding.start else finding.value[:1]
    opened = next((c for c in opener if c in _QUOTES), "")
    at = end
    taken = end
    for _ in range(_MAX_LINES):
        brk = 2 if text.startswith("\r\n", at) else 1 if text.startswith("\n", at) else 0
        if not brk:
            break
        start = at + brk
        stop = text.find("\n", start)
        stop = len(text) if stop < 0 else stop
        line = text[start:stop].rstrip("\r")
        if _SETTING.match(line):
            break
        if len(line) in widths and _of_alphabet(line, punctuation):
            widths = {len(line)}
            at = taken = start + len(line)
            continue
        body = line
        closes = False
        if opened and (cut := line.find(opened)) > 0:
            body, closes = line[:cut], True
        fits = bool(body) and _of_alphabet(body, punctuation) and len(body) < max(widths)
        if fits and (closes or (body == line and _looks_random(body))):
            taken = start + len(body)
        break
    return taken


def with_wrapped_tails(text: str, findings: Sequence[Finding]) -> Sequence[Finding]:
    """`findings` with each secret's wrapped rest inside its span; a finding inside that rest (a detector that
    read one of the pieces on its own) is merged into it, so each wrapped secret is one span."""
    if "\n" not in text:
        return findings
    out: list[Finding] = []
    changed = False
    index = 0
    while index < len(findings):
        finding = findings[index]
        index += 1
        if finding.detector.category != "secret" or finding.end >= len(text) or text[finding.end] not in "\r\n":
            out.append(finding)
            continue
        end = _tail_end(text, finding)
        while index < len(findings) and findings[index].start < end:
            end = max(end, findings[index].end)
            index += 1
        if end > finding.end:
            changed = True
            finding = Finding(finding.start, end, text[finding.start : end], finding.entity, finding.detector)
        out.append(finding)
    return out if changed else findings
