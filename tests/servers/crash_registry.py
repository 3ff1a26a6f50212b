"""A registry whose one validator crashes, quoting its payload in the exception (for the logging tests)."""

from __future__ import annotations

from interceptors import Invocation, Registry, Verdict

registry = Registry()


@registry.validator("crash/always", events="tools/call", phase="request")
def always(invocation: Invocation) -> Verdict:
    raise TypeError(f"cannot handle {invocation.payload!r}")
