"""Showing a secret in a failure message without printing it: a short prefix, a short suffix, the length."""

from __future__ import annotations


def mask(value: str) -> str:
    """`'ghp_…Yz' (40 chars)`: at most a quarter of the value is shown, nothing of values under 8 characters."""
    size = len(value)
    if size >= 16:
        shown = f"{value[:4]}…{value[-2:]}"
    elif size >= 8:
        shown = f"{value[:2]}…{value[-1:]}"
    else:
        shown = "…"
    return f"{shown!r} ({size} chars)"


def masked_window(text: str, start: int, end: int, needles: tuple[str, ...], width: int = 24) -> str:
    """The text around `text[start:end]`, with that span and every needle in the window masked."""
    left = text[max(0, start - width) : start]
    right = text[end : end + width]
    for needle in needles:
        if needle:
            left = left.replace(needle, "«…»")
            right = right.replace(needle, "«…»")
    # A needle cut by the window's outer edge can still show a fragment: trim it.
    left = _drop_cut(left, needles, at_start=True)
    right = _drop_cut(right, needles, at_start=False)
    prefix = "…" if start - width > 0 else ""
    suffix = "…" if end + width < len(text) else ""
    return f"{prefix}{left}«{mask_short(text[start:end])}»{right}{suffix}".replace("\n", "\\n")


def mask_short(value: str) -> str:
    size = len(value)
    if size >= 16:
        return f"{value[:4]}…{value[-2:]}"
    if size >= 8:
        return f"{value[:2]}…{value[-1:]}"
    return "…"


def _drop_cut(part: str, needles: tuple[str, ...], *, at_start: bool) -> str:
    """Remove a partial needle (4+ characters) at the outer edge of a window part."""
    for needle in needles:
        for size in range(min(len(needle) - 1, len(part)), 3, -1):
            if at_start and needle.endswith(part[:size]):
                return "…" + part[size:]
            if not at_start and needle.startswith(part[-size:]):
                return part[:-size] + "…"
    return part
