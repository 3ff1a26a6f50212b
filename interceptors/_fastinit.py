"""A faster `__init__` for frozen, slotted dataclasses built on every message (results, actions, contexts).

A frozen dataclass's generated `__init__` writes each field through `object.__setattr__`, looked up anew per
field: about twice what writing the slot through its own descriptor costs. The gateway builds some thirty such
objects per tool call, so `fast_init` replaces the generated `__init__` with one that writes each slot through
its descriptor, with the same parameters, defaults, default factories and `__post_init__`: the same object, the
instance still frozen afterwards.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

_FACTORY = object()
"""The default of a parameter whose field has a default factory (as in the dataclass's own `__init__`)."""


def fast_init(cls: type[T]) -> type[T]:
    """Give `cls` (a `@dataclass(frozen=True, slots=True)`) the descriptor-writing `__init__`; returns `cls`.

    Apply it above the `@dataclass` decorator. Keyword-only fields and `InitVar`s are refused (TypeError):
    nothing here needs them, and their rules would have to be copied."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"fast_init needs a frozen, slotted dataclass, not {cls.__qualname__}")
    # An InitVar is a declared field that `fields()` leaves out and `__post_init__` takes as an argument. Read
    # through getattr: should the stdlib rename its private marker, this refuses nothing rather than failing to import
    # (and `tests/interceptors/test_fastinit.py` then fails loudly).
    initvar = getattr(dataclasses, "_FIELD_INITVAR", None)
    declared = cls.__dataclass_fields__  # type: ignore[attr-defined]
    if initvar is not None and any(getattr(field, "_field_type", None) is initvar for field in declared.values()):
        raise TypeError(f"fast_init does not handle InitVar fields ({cls.__qualname__})")
    env: dict[str, Any] = {"__fi_factory": _FACTORY}
    arguments: list[str] = []
    body: list[str] = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.kw_only:
            raise TypeError(f"fast_init does not handle keyword-only fields ({cls.__qualname__}.{field.name})")
        name = field.name
        env[f"__fi_set_{name}"] = getattr(cls, name).__set__
        has_default = field.default is not dataclasses.MISSING
        has_factory = field.default_factory is not dataclasses.MISSING
        if has_default:
            env[f"__fi_default_{name}"] = field.default
        if has_factory:
            env[f"__fi_make_{name}"] = field.default_factory
        if field.init:
            if has_default:
                arguments.append(f"{name}=__fi_default_{name}")
            elif has_factory:
                arguments.append(f"{name}=__fi_factory")
                body.append(f"    if {name} is __fi_factory: {name} = __fi_make_{name}()")
            else:
                arguments.append(name)
            value = name
        elif has_default:
            value = f"__fi_default_{name}"
        elif has_factory:
            value = f"__fi_make_{name}()"
        else:
            continue  # no init and no default: the dataclass leaves it unset too
        body.append(f"    __fi_set_{name}(__fi_self, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    __fi_self.__post_init__()")
    source = f"def __init__(__fi_self, {', '.join(arguments)}) -> None:\n" + ("\n".join(body) or "    pass") + "\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<fast_init {cls.__qualname__}>", "exec"), env, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    type.__setattr__(cls, "__init__", init)
    return cls
