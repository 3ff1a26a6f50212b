"""The wheel ships every package of the checkout but the benchmarks: `pip install .` (the README's first command)
lists its packages by name, so a new package directory missing from that list would install a gateway that fails
on import; `bench` stays in the checkout (`mcp-interceptors bench` runs from one)."""

from __future__ import annotations

import tomllib

from tests.conftest import ROOT

TOP = ("interceptors", "interceptors_chain", "interceptors_server", "integrations")


def test_every_package_directory_is_in_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in TOP
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == set(), "these listed packages no longer exist"
    assert not any(name.split(".")[0] == "bench" for name in listed)
