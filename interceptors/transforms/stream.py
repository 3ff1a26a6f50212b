"""Hold-back for streaming channels: a secret split across two progress or log messages of one request.

Each message of a stream is redacted on its own by the channel's pipeline, so `token ghp_ab` followed by
`cd…` would go out as two harmless-looking halves. Text never moves between messages: each message keeps its
own text, and the pipeline redacts its spans in place, reading its neighbours as context. A `StreamHoldBack`
sits in front of the pipeline, one per request and channel, and decides only *when* a message goes on and
*which context* it is read with:

- a message whose trailing run of token characters could start a secret (it contains or begins a token
  prefix, or is 8 characters or more that read as random; or it ends in a secret label and its separator)
  is held, whole, until the next message of the channel (or the request's end): it then goes on with the
  head of that next message as its *after* context, so the pipeline sees the secret whole and replaces the
  part in this message;
- every message goes on with a bounded *tail* of the messages before it (their original text, `tail`
  characters) as its *before* context, so the rest of a secret begun (or labelled) earlier is cut from it;
- `flush()` hands back the held message when the request ends (the gateway sends it before the final
  result). The delay is bounded: nothing is held past the next message of its channel or the final result,
  and a run longer than `max_hold` characters is no prefix any more (its message is not held).

The context rides the chain in the payload's `_meta` (`STREAM_META_KEY`, see `channels`); a pipeline with
nothing to do leaves the message exactly as it was sent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

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
STREAM_META_KEY = "io.mcp-interceptors/stream"
"""`_meta` key of a streamed message's payload: `{"before": str, "after": str}`, its neighbours' text."""
M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class Release(Generic[M]):
    """A message to send now, with the text around it (read as context, never sent with it)."""

    message: M
    before: str
    after: str

    def context(self) -> dict[str, str] | None:
        """The `_meta[STREAM_META_KEY]` value, or None when there is no context."""
        if not self.before and not self.after:
            return None
        return {"before": self.before, "after": self.after}


class StreamHoldBack(Generic[M]):
    """The per-request state of one streaming channel (see the module docstring)."""

    __slots__ = ("_held", "_hints", "_scanner", "_tail", "context_size", "max_hold", "tail_size")

    def __init__(
        self, detectors: Sequence[Detector] | None = None, *, tail: int = 256, max_hold: int = 256, context: int = 256
    ) -> None:
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
        self._held: tuple[M, str, str] | None = None
        self._tail = ""
        self.tail_size = tail
        self.max_hold = max_hold
        self.context_size = context

    @property
    def holding(self) -> bool:
        return self._held is not None

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

    def should_hold(self, text: str) -> bool:
        """Whether the end of `text` could be the start of a secret that goes on in the next message."""
        run = _TRAILING_RUN.search(text)
        start = run.start() if run is not None else len(text)
        label = _TRAILING_LABEL.search(text, max(0, start - 64), start)
        if label is not None and label.end() == start:
            start = label.start()
        elif not self._could_start_secret(text[start:]):
            return False
        if len(text) - start > self.max_hold:
            return False
        return not (start < len(text) and self._complete_at_end(text, start))

    def _complete_at_end(self, text: str, start: int) -> bool:
        """Whether a secret detector matches up to the very end of `text`, from within the held run: then it
        is whole here (should it go on in the next message, that one's before context finds the rest)."""
        window = max(0, start - 64)
        end = len(text) - window
        return any(finding.end == end for finding in self._scanner.scan(text[window:]))

    def push(self, message: M, text: str) -> list[Release[M]]:
        """A new message of the stream (`text`: what it carries, "" for none): the messages to send now, in
        order, each with its context. A message with no text is never held (and releases a held one)."""
        out: list[Release[M]] = []
        if self._held is not None:
            held, held_text, before = self._held
            self._held = None
            out.append(Release(held, before, text[: self.context_size]))
            self._remember(held_text)
        before = self._tail
        if text and self.should_hold(text):
            self._held = (message, text, before)
        else:
            out.append(Release(message, before, ""))
            self._remember(text)
        return out

    def _remember(self, text: str) -> None:
        if self.tail_size and text:
            self._tail = (self._tail + text)[-self.tail_size :]

    def flush(self) -> list[Release[M]]:
        """The held message, if any (the request is over): it goes on now, with no after context."""
        if self._held is None:
            return []
        held, held_text, before = self._held
        self._held = None
        self._remember(held_text)
        return [Release(held, before, "")]


__all__ = ["STREAM_META_KEY", "Release", "StreamHoldBack"]
