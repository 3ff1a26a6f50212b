"""The spec check of results the router gateway relays: the SDK's result model for the method, at a version.

The router stays free of pydantic: it calls `RouterConfig.check_result(method, result, version)` on each
upstream result (at the upstream's version) and on each result a response mutator changed (at the
client's), and answers -32603 when the check names a problem. Only the result model of the method is
validated, with one cached `TypeAdapter` per (method, version); methods the SDK has no result model for
(vendor methods, tasks) and task-augmented results pass unchecked. What is wrong is named by location and
error type only, never by value (the value may be a credential).
"""

from __future__ import annotations

from typing import Any, Final

from mcp_types.methods import SERVER_RESULTS
from pydantic import TypeAdapter, ValidationError

MAX_ERRORS: Final = 5


class SpecCheck:
    """`check(method, result, version)`: None when the result is valid (or unchecked), else `data` naming it."""

    def __init__(self) -> None:
        self._adapters: dict[tuple[str, str], TypeAdapter[Any] | None] = {}

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


def _path(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location)
