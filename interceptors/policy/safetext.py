"""Client-chosen text made safe for logs and error paths: one line, no control or format characters."""

from __future__ import annotations

import unicodedata

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def log_safe(text: str, limit: int | None = None) -> str:
    """Escape every character that could end a log line or reorder it (CR, LF, U+2028, bidi controls, ...).

    Backslashes are escaped too, so an escaped newline and a literal backslash-n stay distinguishable.
    """
    if limit is not None and len(text) > limit:
        text = text[:limit]
    if text.isprintable() and "\\" not in text:
        return text
    out: list[str] = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == " " or (char.isprintable() and unicodedata.category(char) not in _UNSAFE_CATEGORIES):
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def path_key(key: object) -> str:
    """A mapping key as it appears in an error path: short and single-line. Values never appear in paths."""
    return log_safe(key, 64) if isinstance(key, str) else f"<{type(key).__name__} key>"
