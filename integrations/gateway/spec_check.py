"""The spec check of results the router gateway relays: the SDK's result model for the method, at a version.

The router stays free of pydantic: it calls `RouterConfig.check_result(method, result, version)` on each
upstream result (at the upstream's version) and on each result a response mutator changed (at the
client's), and answers -32603 when the check names a problem. Only the result model of the method is
validated, with one cached `TypeAdapter` per (method, version); methods the SDK has no result model for
(vendor methods, tasks) and task-augmented results pass unchecked. What is wrong is named by location and
error type only, never by value (the value may be a credential).

The commonest result, a `tools/call` result of text blocks only (`{"content": [{"type": "text", "text": ...}],
"isError": ..., "_meta": {...}}`, nothing else), is accepted without pydantic at the versions whose model
accepts that shape (found once per version by validating a sample): 0.5 µs instead of about 5. Anything else,
however close, goes to the model.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Final

from mcp_types.methods import SERVER_RESULTS
from pydantic import TypeAdapter, ValidationError

MAX_ERRORS: Final = 5


_MAPPED_FROM: Final = 64
_TYPE: Final = itemgetter("type")
_TEXT: Final = itemgetter("text")
_PLAIN_SAMPLE: Final = {"content": [{"type": "text", "text": ""}], "isError": False}


def plain_text_tool_result(result: dict[str, Any]) -> bool:
    """Only text blocks (each exactly `type` and a string `text`), an optional boolean `isError` and an optional
    `_meta` object with string keys (what the transforms' annotations add), nothing else."""
    content = result.get("content")
    if content.__class__ is not list:
        return False
    extra = len(result) - 1
    if extra:
        if "isError" in result:
            flag = result["isError"]
            if flag is not True and flag is not False:
                return False
            extra -= 1
        if "_meta" in result:
            meta = result["_meta"]
            if meta.__class__ is not dict or any(key.__class__ is not str for key in meta):
                return False
            extra -= 1
        if extra:
            return False
    if len(content) < _MAPPED_FROM:
        for block in content:
            if block.__class__ is not dict or len(block) != 2 or block.get("type") != "text":
                return False
            if block.get("text").__class__ is not str:
                return False
        return True
    # Many blocks: each test maps a C function over them (a million: 0.35 s, where this loop took 1.7 s).
    if set(map(type, content)) != {dict} or set(map(len, content)) != {2}:
        return False
    try:
        if set(map(_TYPE, content)) != {"text"}:
            return False
        return set(map(type, map(_TEXT, content))) == {str}
    except KeyError:
        return False


class SpecCheck:
    """`check(method, result, version)`: None when the result is valid (or unchecked), else `data` naming it."""

    def __init__(self) -> None:
        self._adapters: dict[tuple[str, str], TypeAdapter[Any] | None] = {}
        self._plain_text: dict[str, bool] = {}
        """Per version: whether its `tools/call` model accepts `plain_text_tool_result`s (the sample passes)."""

    def _accepts_plain_text(self, version: str) -> bool:
        known = self._plain_text.get(version)
        if known is None:
            adapter = self._adapter("tools/call", version)
            known = adapter is not None and _valid(adapter, _PLAIN_SAMPLE)
            if len(self._plain_text) < 64:  # versions come from peers: bounded
                self._plain_text[version] = known
        return known

    def _adapter(self, method: str, version: str) -> TypeAdapter[Any] | None:
        key = (method, version)
        try:
            return self._adapters[key]
        except KeyError:
            model: Any = SERVER_RESULTS.get(key)  # a model class or a union of them
            adapter = self._adapters[key] = TypeAdapter(model) if model is not None else None
            return adapter

    def __call__(self, method: str, result: dict[str, Any], version: str | None) -> dict[str, Any] | None:
        if version is None:
            return None
        if method == "tools/call" and plain_text_tool_result(result) and self._accepts_plain_text(version):
            return None
        adapter = self._adapter(method, version)
        if adapter is None or "task" in result:  # no model, or a task-augmented request's CreateTaskResult
            return None
        try:
            adapter.validate_python(result, by_alias=True, by_name=False)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False, include_input=False)
            return {
                "reason": f"the {method} result does not match the {version} schema",
                "errors": [{"path": _path(error["loc"]), "type": error["type"]} for error in errors[:MAX_ERRORS]],
            }
        return None


def _valid(adapter: TypeAdapter[Any], result: dict[str, Any]) -> bool:
    try:
        adapter.validate_python(result, by_alias=True, by_name=False)
    except ValidationError:
        return False
    return True


def _path(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location)
