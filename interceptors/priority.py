"""Phase-aware priority hints: one integer when both phases agree, else `{request, response}`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .enums import Phase
from .errors import WireError, integral

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def _check_int32(value: object, path: str) -> int:
    number = integral(value)
    if number is None:
        raise WireError(path, "must be an integer")
    if not INT32_MIN <= number <= INT32_MAX:
        raise WireError(path, "must fit a signed 32-bit integer")
    return number


@dataclass(frozen=True, slots=True)
class Priority:
    """Ordering hint for mutators, resolved per phase; lower runs first. Ignored for validators."""

    request: int = 0
    response: int = 0

    def __post_init__(self) -> None:
        _check_int32(self.request, "priorityHint.request")
        _check_int32(self.response, "priorityHint.response")

    def resolve(self, phase: Phase | str) -> int:
        return self.response if phase == Phase.RESPONSE else self.request

    @property
    def is_default(self) -> bool:
        return self.request == 0 and self.response == 0

    def to_wire(self) -> int | dict[str, int]:
        if self.request == self.response:
            return self.request
        out: dict[str, int] = {}
        if self.request:
            out["request"] = self.request
        if self.response:
            out["response"] = self.response
        return out

    @classmethod
    def from_wire(cls, value: Any, path: str = "priorityHint") -> Priority:
        """Accept an int32 (an integral JSON number: 1.0 is 1) or an object with optional int32 `request`/`response`
        keys."""
        if isinstance(value, Mapping):
            extra = set(value) - {"request", "response"}
            if extra:
                raise WireError(path, f"unexpected key {sorted(extra)[0]!r}")
            return cls(
                _check_int32(value.get("request", 0), f"{path}.request"),
                _check_int32(value.get("response", 0), f"{path}.response"),
            )
        number = _check_int32(value, path)
        return cls(number, number)

    @classmethod
    def of(cls, value: int | Priority | Mapping[str, int] | None) -> Priority:
        """Coerce the forms the authoring API accepts."""
        if value is None:
            return cls()
        if isinstance(value, Priority):
            return value
        return cls.from_wire(value)
