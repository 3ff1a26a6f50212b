"""The conformance suite's secretless redactor as a configuration of our redactor.

Only the seven verbatim secret formats of `interceptors.security.secrets` are looked for; each is replaced
by an opaque handle `<mcp:secret-ref:<format>:<fnv1a>>`; keys, structure and everything else stay.
"""

from __future__ import annotations

from typing import Any

from ..codec import dumps_str
from ..outcomes import Mutation
from ..registry import Invocation
from .base import TransformContext
from .detectors import Detector, Scanner
from .redactor import Redactor
from .strategies import Strategy


def fnv1a32(text: str) -> str:
    """FNV-1a over UTF-16 code units, as 8 lowercase hex digits (the same in every language)."""
    value = 0x811C9DC5
    data = text.encode("utf-16-le", "surrogatepass")
    for index in range(0, len(data), 2):
        value = ((value ^ (data[index] | data[index + 1] << 8)) * 0x01000193) & 0xFFFFFFFF
    return f"{value:08x}"


def secret_handle(format_id: str, secret: str) -> str:
    """A handle that no secret format matches, so a guard downstream sees no secret."""
    return f"<mcp:secret-ref:{format_id}:{fnv1a32(secret)}>"


def _format_detectors() -> tuple[Detector, ...]:
    from ..security.secrets import SECRET_FORMATS  # imported late: security/ may import this module

    return tuple(
        Detector(
            name=fmt.id,
            entity=fmt.id,
            category="secret",
            pattern=fmt.pattern,
            confidence=1.0,
            hints=(fmt.prefix.lower(),),
            min_length=len(fmt.prefix) + 1,
            description=fmt.label,
        )
        for fmt in SECRET_FORMATS
    )


class SecretlessHandler:
    """A stateless mutator handler: string values lose their secrets to handles; keys stay as they are."""

    def __init__(self) -> None:
        self.detectors = _format_detectors()
        self.scanner = Scanner(self.detectors)
        handle = Strategy("redact", custom=lambda value, entity, source: secret_handle(source, value))
        self.redactor = Redactor(
            {"key_rules": False, "scan_keys": False, "tags": False, "name_mentions": False, "structured_text": False},
            "secretless",
            catalog=self.detectors,
            code_strategies={d.name: handle for d in self.detectors},
        )

    def hits(self, payload: Any) -> list[tuple[str, str]]:
        """Every `(format, secret)` in the payload's JSON text (keys included), in text order."""
        if payload is None:
            return []
        return [(f.detector.name, f.value) for f in self.scanner.scan(dumps_str(payload))]

    def __call__(self, invocation: Invocation) -> Mutation:
        payload = invocation.payload
        hits = self.hits(payload)
        if not hits:
            return Mutation.unchanged()
        formats = list(dict.fromkeys(format_id for format_id, _ in hits))
        return Mutation(self.redact(payload), True, {"redacted": len(hits), "formats": formats})

    def redact(self, value: Any) -> Any:
        return self.redactor.apply(value, TransformContext())


def secretless_handler() -> SecretlessHandler:
    """A fresh handler equivalent to `interceptors.security.SecretlessRedactor`."""
    return SecretlessHandler()
