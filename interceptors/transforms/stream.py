"""Hold-back for streaming channels: a secret split across two progress or log messages of one request.

Each message of a stream is redacted on its own by the channel's pipeline, so `token ghp_ab` followed by
`cd…` would go out as two harmless-looking halves. A `StreamHoldBack` sits in front of the pipeline, one per
request and channel:

- the *trailing prefix that could start a secret* (the last run of token characters when it could begin one:
  it contains or begins a token prefix, or is 8 characters or more that read as random; with a secret label
  and its separator before it, from the label) is held back and put in front of the next message, so the pipeline
  sees the secret whole;
- a bounded *tail* of what already went out (`tail` characters) is read in front of each message, so a value
  whose label went out in the previous message (`db_pass:` then `hunter2…`) is still found; the part of such
  a finding in the new message is replaced before the message goes on;
- `flush()` hands back what is held when the request ends (the gateway sends it, through the same pipeline,
  before the final result). The delay is bounded: nothing is held past the next message or the final result,
  and never more than `max_hold` characters (a longer run is no prefix any more: it is let through whole).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .detectors import Detector, Scanner
from .entities import RandomnessRule, looks_random

_TRAILING_RUN = re.compile(r"[^\s\"'<>()\[\]{},;|`]*\Z")
_TRAILING_LABEL = re.compile(
    r"(?i)(?<![a-z0-9])(?:[a-z0-9]{1,16}[_.-])?(?:password|passwd|pwd|pass|secret|token|api[_-]?key|key|auth|bearer|basic|credential)s?"
    r"[\"'\\]{0,3}[ \t]*(?:[:=]|=>|:=)?[ \t\"']*\Z"
)
_SECRET_CATEGORIES = frozenset({"secret", "credential"})
MIN_RANDOM_PREFIX = 8
# Detectors whose hints are ordinary words (labels, commands, short fragments): a word like `passed`, `monkey` or
# `tokens` at the end of a message is not the start of a secret. Labels are held by `_TRAILING_LABEL` instead.
_WORD_HINTED = frozenset(
    {"secret_assignment", "labelled_key", "connection_string_secret", "aws_secret_access_key", "authorization_header",
     "curl_user_credentials", "mysql_password_flag", "cli_password_flag", "netrc_password", "azure_sas_signature",
     "jwk_private_key", "twilio_api_key", "mailchimp_api_key", "telegram_bot_token", "crates_io_token",
     "private_key", "putty_private_key", "azure_storage_key"}
)  # fmt: skip
_PREFIX_RULE = RandomnessRule(min_length=MIN_RANDOM_PREFIX, slack=0.8, max_wordy=0.4)


def _scanner_and_hints(detectors: Sequence[Detector]) -> tuple[Scanner, tuple[str, ...]]:
    chosen = tuple(d for d in detectors if d.category in _SECRET_CATEGORIES)
    hints = tuple(sorted({h for d in chosen if d.name not in _WORD_HINTED for h in d.hints if len(h) >= 3}))
    return Scanner(chosen), hints


_BUILTIN: tuple[Scanner, tuple[str, ...]] | None = None


class StreamHoldBack:
    """The per-request state of one streaming channel (see the module docstring)."""

    __slots__ = ("_held", "_hints", "_scanner", "_tail", "max_hold", "tail_size")

    def __init__(self, detectors: Sequence[Detector] | None = None, *, tail: int = 256, max_hold: int = 256) -> None:
        """One per request and channel: the built-in detectors' scanner is built once and shared (it keeps no
        state), so a new hold-back costs next to nothing."""
        if detectors is None:
            global _BUILTIN
            if _BUILTIN is None:
                from .catalog import BUILTIN_DETECTORS

                _BUILTIN = _scanner_and_hints(BUILTIN_DETECTORS)
            self._scanner, self._hints = _BUILTIN
        else:
            self._scanner, self._hints = _scanner_and_hints(detectors)
        self._held = ""
        self._tail = ""
        self.tail_size = tail
        self.max_hold = max_hold

    @property
    def held(self) -> str:
        return self._held

    def _could_start_secret(self, run: str) -> bool:
        """A run that begins (or holds, or ends in three characters or more of) a token prefix (a secret
        detector's hint), or one of 8 characters or more that reads as random (the start of a random token)."""
        if not run:
            return False
        folded = run.lower()
        for hint in self._hints:
            if hint.startswith(folded) or hint in folded:
                return True
            if any(folded.endswith(hint[:k]) for k in range(3, min(len(hint), len(folded)) + 1)):
                return True
        return looks_random(run, _PREFIX_RULE)

    def _hold_from(self, text: str) -> int:
        """Where the held-back suffix of `text` starts (`len(text)`: nothing is held)."""
        run = _TRAILING_RUN.search(text)
        start = run.start() if run is not None else len(text)
        label = _TRAILING_LABEL.search(text, max(0, start - 64), start) if start >= 0 else None
        if label is not None and label.end() == start:
            start = label.start()
        elif not self._could_start_secret(text[start:]):
            return len(text)
        if len(text) - start > self.max_hold:
            return len(text)
        if start < len(text) and self._complete_at_end(text, start):
            return len(text)  # a whole secret ends the message: the pipeline sees it whole already
        return start

    def _complete_at_end(self, text: str, start: int) -> bool:
        """Whether a secret detector matches up to the very end of `text`, from within the held run: then it
        is whole here (should it go on in the next message, the tail read in front of that one finds the rest)."""
        window = max(0, start - 64)
        end = len(text) - window
        return any(finding.end == end for finding in self._scanner.scan(text[window:]))

    def feed(self, text: str) -> str:
        """The part of this message (with what was held before it) to send on now; the rest is held."""
        buffer = self._held + text
        cut = self._hold_from(buffer)
        emit, self._held = buffer[:cut], buffer[cut:]
        emit = self._across_tail(emit)
        return emit

    def _across_tail(self, emit: str) -> str:
        """Replace the part of `emit` that finishes a secret begun in (or labelled by) the tail that went out."""
        context = self._tail
        if context and emit:
            cut = len(context)
            own = {(f.start + cut, f.end + cut) for f in self._scanner.scan(emit)}
            for finding in self._scanner.scan(context + emit):
                if finding.end > cut and (finding.start, finding.end) not in own:
                    start = max(finding.start, cut) - cut
                    emit = emit[:start] + f"[REDACTED:{finding.entity}]" + emit[finding.end - cut :]
                    break
        self._tail = (self._tail + emit)[-self.tail_size :] if self.tail_size else ""
        return emit

    def flush(self) -> str:
        """What is still held (the request is over): it goes out now, through the same pipeline."""
        held, self._held = self._held, ""
        return self._across_tail(held) if held else ""


__all__ = ["StreamHoldBack"]
