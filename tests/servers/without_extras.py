"""`python -m tests.servers.without_extras MODULE[,MODULE] -- CLI ARGS` (or `-- -c CODE`): the command line as a
plain install runs it, where the named top-level modules (an extra's packages: prometheus_client, hypothesis,
...) are missing."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from typing import Any


class _Missing(importlib.abc.MetaPathFinder):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> None:
        if fullname.split(".", 1)[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


if __name__ == "__main__":
    blocked, _, *argv = sys.argv[1:]
    sys.meta_path.insert(0, _Missing({name for name in blocked.split(",") if name}))
    if argv[:1] == ["-c"]:  # `-- -c CODE`: Python code instead of the command line
        exec(compile(argv[1], "<without_extras>", "exec"), {"__name__": "__main__"})
        sys.exit(0)
    from integrations.cli import main

    sys.exit(main(argv))
