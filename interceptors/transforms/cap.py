"""The output cap: the text a model reads is cut at `max_output_chars`; structured content is not.

It runs after the pipeline, on the text blocks of a result, and reports `truncated_chars`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_MAX_OUTPUT_CHARS = 200_000
MARKER = "\n... [truncated by mcp-interceptors]"


def cap_text_blocks(result: Mapping[str, Any], max_chars: int | None) -> tuple[dict[str, Any], int]:
    """A copy of a result whose text blocks hold at most `max_chars` characters in all, and how many went."""
    out = dict(result)
    content = result.get("content")
    if max_chars is None or not isinstance(content, list):
        return out, 0
    room = max_chars
    removed = 0
    blocks: list[Any] = []
    for block in content:
        is_mapping = block.__class__ is dict or isinstance(block, Mapping)
        text = block.get("text") if is_mapping and block.get("type") == "text" else None
        if not isinstance(text, str):
            blocks.append(block)
            continue
        if len(text) <= room:
            room -= len(text)
            blocks.append(block)
            continue
        removed += len(text) - room
        if room > 0:
            blocks.append({**block, "text": text[:room] + MARKER})
        room = 0
    if removed:
        out["content"] = blocks
    return out, removed
