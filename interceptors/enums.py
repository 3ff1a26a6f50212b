"""The closed vocabularies of SEP-2624: phases, modes, types, severities and directions."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """Which half of a context operation an interceptor sees."""

    REQUEST = "request"
    RESPONSE = "response"


PHASE_TEXT: dict[Phase, str] = {phase: phase.value for phase in Phase}
"""Each phase's wire text: `Phase.value` is an enum property (a Python call), and every result's wire form needs
it on every invoke."""


class Mode(StrEnum):
    """`active` interceptors can block or change traffic; `audit` ones only observe."""

    ACTIVE = "active"
    AUDIT = "audit"

    @classmethod
    def parse(cls, value: object) -> Mode:
        """Read a wire mode; the legacy `enforce` means `active`. Anything else is a ValueError."""
        if value == "enforce":
            return cls.ACTIVE
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
        raise ValueError(f"unknown mode {value!r}")


class InterceptorType(StrEnum):
    """Validators judge a payload; mutators rewrite it."""

    VALIDATION = "validation"
    MUTATION = "mutation"


class Severity(StrEnum):
    """Only `error` (or a missing or unknown severity on an invalid result) blocks."""

    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class Direction(StrEnum):
    """Which side of a trust boundary the invoker stands on.

    Sending: mutate, then validate what actually leaves. Receiving: validate what arrived, then mutate.
    Always taken from the interception point, never derived from the phase.
    """

    SENDING = "sending"
    RECEIVING = "receiving"
