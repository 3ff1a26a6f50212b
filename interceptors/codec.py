"""JSON on the hot path (orjson) and RFC 8785 canonical JSON for comparisons and hashing."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * 19  # orjson reads integers beyond 64 bits as floats
"""A run of 19+ digits: found by a translation and a substring search, at memory speed (a regex scan of a
32 MB message took over a second)."""
_STRIDE = 9
"""Any 19 consecutive bytes hold two positions that are consecutive multiples of 9 (2 * 9 < 19): a run of 19
digits puts two adjacent digits into the sample of every 9th byte, and a sample without any rules the run out
at a ninth of the scan's cost (the common message has no digit run at all)."""
_SAMPLED_RUN = b"00"

_GROWTH = 5
"""How much longer orjson may write a value than the text it was read from: only a number can grow, as a float
(`1e15` is written `1000000000000000.0`, 4.5 times; no float is written in more than 24 bytes, and no float
text is shorter than 3); strings are written with the escapes JSON requires (which their text had too, or
longer ones), whitespace and repeated keys are dropped."""
_WRITE_MAX_DEPTH = 254
"""orjson refuses to write containers nested deeper than this (it reads up to 1024)."""


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


dumps: Callable[[Any], bytes] = orjson.dumps
"""Compact JSON bytes; non-string keys and non-JSON values are a TypeError. orjson's own function, not a wrapper:
every in-process invoke calls it and `loads` several times."""


def dumps_str(value: Any) -> str:
    return orjson.dumps(value).decode()


loads: Callable[[bytes | str], Any] = orjson.loads
"""JSON text to Python values (orjson's own function, as `dumps`)."""


def may_round_numbers(data: bytes) -> bool:
    """Whether orjson could read `data` inexactly: it holds a run of 19+ digits (maybe an integer beyond 64 bits).

    Every 9th byte is looked at first (`_STRIDE`): the whole text is scanned only when two of those in a row are
    digits."""
    if data[::_STRIDE].translate(_DIGITS_AS_ZERO).find(_SAMPLED_RUN) < 0:
        return False
    return data.translate(_DIGITS_AS_ZERO).find(_LONG_RUN) >= 0


def loads_exact(data: bytes) -> Any:
    """Like `loads`, but integers of any size stay exact (the stdlib reads the rare text orjson would round)."""
    if (  # `may_round_numbers`, inline: it runs on every message
        data[::_STRIDE].translate(_DIGITS_AS_ZERO).find(_SAMPLED_RUN) < 0
        or data.translate(_DIGITS_AS_ZERO).find(_LONG_RUN) < 0
    ):
        return orjson.loads(data)
    return json.loads(data, parse_constant=_no_constant)


def written_size_bound(data: bytes) -> int | None:
    """At most how long `dumps` writes any value inside `loads(data)` (`data`: text orjson read), or None when
    `dumps` might refuse one (nested deeper than orjson writes).

    Why: a value just read from a short line need not be written again to learn that it is small (the
    interceptor server's stdio lane checks an invoke's payload size with this, not with a second encoding)."""
    if len(data) > 2 * _WRITE_MAX_DEPTH and data.count(b"[") + data.count(b"{") > _WRITE_MAX_DEPTH:
        return None  # (a shorter text cannot nest that deep: every opening bracket has its closing one)
    return _GROWTH * len(data)


def dumps_exact(value: Any) -> bytes:
    """Like `dumps`, but integers beyond 64 bits are written exactly (by the stdlib) instead of refused."""
    try:
        return orjson.dumps(value)
    except TypeError as exc:
        if "64-bit" not in str(exc):
            raise
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _canonical_string(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _canonical_number(value: int | float) -> str:
    """ECMAScript Number-to-String: shortest round-trip digits, exponent outside [1e-6, 1e21)."""
    if isinstance(value, int):
        if abs(value) < 10**21:
            return str(value)
        value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError("NaN and Infinity have no JSON form")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int)
    k = len(digits)
    n = k + exponent  # position of the decimal point relative to the digit string
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"


def canonical(value: Any) -> str:
    """RFC 8785 (JCS): sorted keys by UTF-16 code units, no whitespace, ECMAScript numbers."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _canonical_string(value)
    if isinstance(value, int | float):
        return _canonical_number(value)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(_canonical_string(k) + ":" + canonical(value[k]) for k in keys) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    raise TypeError(f"{type(value).__name__} has no JSON form")
