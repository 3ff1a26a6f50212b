"""The package as users get it: what each package exports, what importing the core pulls in, and a pytest
plugin that stays harmless when the `testing` extra is not installed."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

PACKAGES = [
    "interceptors",
    "interceptors.policy",
    "interceptors.security",
    "interceptors.testing",
    "interceptors.transforms",
    "interceptors.vault",
    "interceptors_chain",
    "interceptors_server",
    "integrations",
]
UPPER_LAYERS = ("mcp", "integrations", "interceptors_server", "interceptors_chain", "fastmcp", "starlette", "pytest")


@pytest.mark.parametrize("name", PACKAGES)
def test_each_package_exports_exactly_its_all(name: str) -> None:
    """Every name in `__all__` exists, none twice, and every public attribute is in `__all__` (modules aside):
    nothing is public by accident, nothing promised is missing."""
    package = importlib.import_module(name)
    exported = list(package.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ names something twice"
    missing = [n for n in exported if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ names what the package does not have: {missing}"
    public = {
        n
        for n in dir(package)
        if not n.startswith("_") and n != "annotations" and not isinstance(getattr(package, n), ModuleType)
    }
    unlisted = sorted(public - set(exported))
    assert not unlisted, f"{name} has public names outside __all__: {unlisted}"


def run_python(code: str, *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd, env=env, check=False
    )


CORE = ["interceptors", "interceptors.testing", "interceptors.policy", "interceptors.transforms", "interceptors.vault"]


@pytest.mark.parametrize("module", [*CORE, "interceptors.security"])
def test_the_core_imports_nothing_above_it(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {UPPER_LAYERS!r})\n"
        "assert not bad, bad\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr


# Hypothesis made unimportable, as in an environment installed without the `testing` extra (its own pytest
# plugin goes with it).
WITHOUT_HYPOTHESIS = textwrap.dedent(
    """
    import sys

    class NoHypothesis:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "hypothesis" or name.startswith("hypothesis."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoHypothesis)
    """
)


def test_the_kit_without_hypothesis_names_the_extra() -> None:
    code = WITHOUT_HYPOTHESIS + textwrap.dedent(
        """
        try:
            import interceptors.testing
        except ImportError as error:
            print("ImportError:", error)
        else:
            raise SystemExit("imported")
        """
    )
    done = run_python(code)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'pip install "mcp-interceptors[testing]"' in done.stdout


def test_pytest_in_another_project_runs_without_the_testing_extra(tmp_path: Path) -> None:
    """The `pytest11` entry point loads (it is installed with the package) and defines nothing."""
    (tmp_path / "test_unrelated.py").write_text(
        "import sys\n\n\ndef test_one():\n"
        "    assert 'integrations.pytest_plugin' in sys.modules  # our entry point did load\n"
        "    assert 'mcp' not in sys.modules and 'interceptors.testing' not in sys.modules\n"
    )
    code = WITHOUT_HYPOTHESIS + (
        "import pytest\n"
        "sys.exit(pytest.main(['-q', '-p', 'no:hypothesispytest', '-p', 'no:cacheprovider', '-p', 'no:anyio', '.']))\n"
    )
    done = run_python(code, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
