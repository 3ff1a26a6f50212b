"""Argument rules with path semantics, on a real folder tree: examples/policies/filesystem-project.yaml keeps
every read route out of `.ssh`, `.env*` and everything outside the project, and the project still reads.

The tree: `home/.ssh/id_rsa` (the user's key), `proj/` (PROJECT_DIR) with `README.md`, `src/app.py`,
`.ssh/id_ed25519`, `.env`, `.env.local`, symlinks into `.ssh` and to a file outside, and `outside.txt`.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.policy import PolicyEngine, PolicyError
from interceptors.policy.paths import PathContext, PathGlobs, PathRefused, path_views
from tests.conftest import ROOT

POLICY = ROOT / "examples" / "policies" / "filesystem-project.yaml"
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
WRITES = {"readOnlyHint": False, "destructiveHint": True}
READ_TOOLS = (
    "read_file",
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
)
WRITE_TOOLS = ("write_file", "edit_file", "create_directory", "move_file")


def make_tree(base: Path) -> Path:
    """The folder tree of the issue; returns the project folder."""
    home, proj = base / "home", base / "proj"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("USER-PRIVATE-KEY\n")
    (proj / "src").mkdir(parents=True)
    (proj / ".ssh").mkdir()
    (proj / ".ssh" / "id_ed25519").write_text("PROJECT-DEPLOY-KEY\n")
    (proj / ".env").write_text("API_KEY=env-secret\n")
    (proj / ".env.local").write_text("API_KEY=local-secret\n")
    (proj / "README.md").write_text("# the project\n")
    (proj / "src" / "app.py").write_text("print('hello')\n")
    (base / "outside.txt").write_text("OUTSIDE-SECRET\n")
    (proj / "sshlink").symlink_to(home / ".ssh")
    (proj / "keylink").symlink_to(proj / ".ssh" / "id_ed25519")
    (proj / "envlink").symlink_to(proj / ".env")
    (proj / "outlink").symlink_to(base / "outside.txt")
    return proj


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    proj = make_tree(tmp_path)
    monkeypatch.setenv("PROJECT_DIR", str(proj))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return proj


def filesystem_engine() -> PolicyEngine:
    """The example policy, taught the filesystem server's tool list (names and annotations as it sends them)."""
    engine = PolicyEngine(str(POLICY))
    tools = [{"name": n, "inputSchema": {"type": "object"}, "annotations": READ_ONLY} for n in READ_TOOLS]
    tools += [{"name": n, "inputSchema": {"type": "object"}, "annotations": WRITES} for n in WRITE_TOOLS]
    engine.learn("tools/list", {"tools": tools})
    return engine


def call(engine: PolicyEngine, tool: str, arguments: dict[str, Any]) -> Any:
    return engine.check_call(None, "tools/call", {"name": tool, "arguments": arguments})


def refused_routes(proj: Path) -> list[tuple[str, dict[str, Any]]]:
    """23 calls that must be refused (with the 3 listings of `listed_routes`, the issue's 26 read routes)."""
    p = str(proj)
    return [
        ("read_text_file", {"path": f"{p}/.env"}),
        ("read_text_file", {"path": f"{p}/.env.local"}),
        ("read_text_file", {"path": f"{p}/.ssh/id_ed25519"}),
        ("read_file", {"path": f"{p}/.env"}),
        ("read_text_file", {"path": f"{p}/.env", "head": 1}),
        ("read_text_file", {"path": f"{p}/.env.local", "tail": 1}),
        ("read_media_file", {"path": f"{p}/.ssh/id_ed25519"}),
        ("read_multiple_files", {"paths": [f"{p}/README.md", f"{p}/.env"]}),
        ("read_multiple_files", {"paths": [f"{p}/.ssh/id_ed25519"]}),
        ("get_file_info", {"path": f"{p}/.env"}),
        ("list_directory", {"path": f"{p}/.ssh"}),
        ("list_directory_with_sizes", {"path": f"{p}/.ssh"}),
        ("directory_tree", {"path": f"{p}/.ssh"}),
        ("search_files", {"path": f"{p}/.ssh", "pattern": "*"}),
        ("read_text_file", {"path": f"{p}/src/../.env"}),  # `..`
        ("read_text_file", {"path": f"{p}/../outside.txt"}),  # `..` out of the project
        ("read_text_file", {"path": "~/.ssh/id_rsa"}),  # `~`
        ("read_text_file", {"path": f"{p}//.ssh//id_ed25519"}),  # `//`
        ("read_text_file", {"path": f"{p}/./.env"}),
        ("read_text_file", {"path": f"{p}/sshlink/id_rsa"}),  # a symlink to the user's .ssh
        ("read_text_file", {"path": f"{p}/keylink"}),  # a symlink to a key
        ("read_text_file", {"path": f"{p}/outlink"}),  # a symlink to a file outside
        ("read_text_file", {"path": ".env.local"}),  # relative: to the project
    ]


def listed_routes(proj: Path) -> list[tuple[str, dict[str, Any]]]:
    """3 listings of the project itself: allowed, with every protected entry withheld from the result."""
    return [
        ("list_directory", {"path": str(proj)}),
        ("directory_tree", {"path": str(proj)}),
        ("search_files", {"path": str(proj), "pattern": "**/*"}),
    ]


def listing(proj: Path, tool: str) -> dict[str, Any]:
    """What the filesystem server answers for the project folder (its formats, its structuredContent)."""
    names = sorted(os.listdir(proj))
    if tool == "list_directory":
        text = "\n".join(f"{'[DIR]' if (proj / n).is_dir() else '[FILE]'} {n}" for n in names)
    elif tool == "directory_tree":

        def node(path: Path) -> dict[str, Any]:
            if path.is_dir() and not path.is_symlink():
                return {"name": path.name, "type": "directory", "children": [node(c) for c in sorted(path.iterdir())]}
            return {"name": path.name, "type": "file"}

        text = json.dumps([node(proj / n) for n in names], indent=2)
    else:
        text = "\n".join(str(path) for path in sorted(proj.rglob("*")))
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"content": text}}


PROTECTED = ("USER-PRIVATE-KEY", "PROJECT-DEPLOY-KEY", "env-secret", "local-secret", "OUTSIDE-SECRET")


@pytest.mark.parametrize("index", range(23))
def test_every_read_route_to_a_protected_file_is_refused_with_its_reason(tree: Path, index: int) -> None:
    engine = filesystem_engine()
    tool, arguments = refused_routes(tree)[index]
    decision = call(engine, tool, arguments)
    assert decision.outcome == "denied", (tool, arguments)
    assert decision.code == -31001
    assert decision.message.startswith("Access denied: argument '/path")
    assert decision.data is not None and decision.data["argument"].startswith("/path")
    assert "refused: " in decision.data["reason"] and "rule 'project-paths'" in decision.data["reason"]
    assert str(tree) not in decision.message  # the rule, never the path
    entry = engine.audit.entries()[-1]
    assert (entry["decision"], entry["name"], entry["reason"]) == ("denied", tool, decision.reason)
    assert str(tree) not in json.dumps(entry)


@pytest.mark.parametrize("index", range(3))
def test_listings_of_the_project_withhold_every_protected_entry(tree: Path, index: int) -> None:
    engine = filesystem_engine()
    tool, arguments = listed_routes(tree)[index]
    assert call(engine, tool, arguments).allowed
    rules = engine.policy.arguments
    result, withheld, mode = rules.filter_result(tool, rules.bases(tool, arguments), listing(tree, tool))
    assert mode == "filter" and withheld > 0
    text = result["content"][0]["text"]
    assert result["structuredContent"]["content"] == text
    for hidden in (".ssh", ".env", "sshlink", "keylink", "envlink", "outlink", "id_"):
        assert hidden not in text, (tool, hidden)
    assert "README.md" in text and "src" in text


def test_the_project_still_reads_and_writes_stay_hidden(tree: Path) -> None:
    engine = filesystem_engine()
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_text_file", {"path": str(tree / "README.md")}),
        ("read_text_file", {"path": "src/app.py", "head": 1}),
        ("read_multiple_files", {"paths": [str(tree / "README.md"), str(tree / "src" / "app.py")]}),
        ("list_directory", {"path": str(tree / "src")}),
        ("get_file_info", {"path": str(tree)}),
        ("list_allowed_directories", {}),
        ("read_text_file", {"path": str(tree / "src" / ".environment.md")}),  # not `.env` nor `.env.*`
    ]
    for tool, arguments in calls:
        assert call(engine, tool, arguments).allowed, (tool, arguments)
    for tool in WRITE_TOOLS:
        assert call(engine, tool, {"path": str(tree / "new.txt")}).outcome == "not_found"
    names = {
        tool["name"]
        for tool in engine.filter_list(None, "tools/list", {"tools": [{"name": n} for n in WRITE_TOOLS]})[0]["tools"]
    }
    assert names == set()
    assert engine.policy.rate_limits and engine.policy.audit


def test_a_listing_of_an_unchanged_result_stays_byte_for_byte(tree: Path) -> None:
    engine = filesystem_engine()
    rules = engine.policy.arguments
    result = listing(tree / "src", "list_directory")
    assert rules.filter_result("list_directory", (str(tree / "src"),), result) == (result, 0, "filter")


def test_an_unset_project_dir_fails_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROJECT_DIR", raising=False)
    with pytest.raises(PolicyError, match="PROJECT_DIR is not set"):
        PolicyEngine(str(POLICY))


def test_arguments_that_cannot_be_judged_are_refused(tree: Path) -> None:
    engine = filesystem_engine()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"path": 7}, "a path that is not a string"),
        ({"path": f"{tree}/README.md\x00.png"}, "control character"),
        ({"path": "~root/.ssh/id_rsa"}, "~user"),
        ({"path": f"{tree}/%252Eenv"}, "double percent-encoding"),
        ({"path": f"{tree}/%ff"}, "not UTF-8"),
        ({"path": "/proc/self/cwd/.env"}, "/proc"),
        ({"path": f"{tree}\\.env"}, "backslash"),
        ({"path": ""}, "empty"),
    ]
    for arguments, why in cases:
        decision = call(engine, "read_text_file", arguments)
        assert decision.outcome == "denied" and why in decision.message, (arguments, decision.message)


def test_text_rules_and_required_arguments() -> None:
    engine = PolicyEngine(
        {
            "name": "t",
            "arguments": [
                {"tools": ["run_*"], "arguments": ["/command"], "deny": ["*rm -rf*", "*curl*"], "required": True},
                {"tools": ["fetch"], "arguments": ["/urls/*"], "allow": ["https://docs.example/*"]},
            ],
        }
    )
    assert call(engine, "run_shell", {"command": "ls -la"}).allowed
    assert not call(engine, "run_shell", {"command": "echo; RM -RF /"}).allowed  # case folded
    assert not call(engine, "run_shell", {"command": "\uff43\uff55\uff52\uff4c evil"}).allowed  # fullwidth folded
    assert "required" in call(engine, "run_shell", {}).message
    assert call(engine, "fetch", {"urls": ["https://docs.example/a"]}).allowed
    assert not call(engine, "fetch", {"urls": ["https://docs.example/a", "https://evil.example/"]}).allowed


def test_the_document_is_checked_by_field_path() -> None:
    bad = {"arguments": [{"tools": [], "arguments": ["path"], "type": "text", "results": "filter", "bogus": 1}]}
    with pytest.raises(PolicyError) as caught:
        PolicyEngine(bad)
    text = str(caught.value)
    for problem in ("arguments[0].bogus: unknown key", "arguments[0].arguments[0]: must be a JSON pointer",
                    "arguments[0].tools: is required", "arguments[0].results: only for type: path"):  # fmt: skip
        assert problem in text
    with pytest.raises(PolicyError, match="must be an absolute directory"):
        PolicyEngine({"paths": {"roots": ["relative/dir"]}})


def test_path_globs() -> None:
    globs = PathGlobs(["**/.ssh/**", "**/.env", "**/.env.*", "**/id_*"])
    for denied in ("/p/.ssh", "/p/.ssh/x/y", "/p/.env", "/p/.env.local", "/p/a/id_rsa.pub", "/P/.SSH/CONFIG"):
        assert globs.match(denied) is not None, denied
    for allowed in ("/p/.environment", "/p/src/env", "/p/ssh/x", "/p/my_id"):
        assert globs.match(allowed) is None, allowed


# --- the property: any mangled spelling of a denied path is denied --------------------------------------------

_BASE = Path(tempfile.mkdtemp(prefix="policy-paths-"))
atexit.register(shutil.rmtree, _BASE, True)
_PROJ = make_tree(_BASE)
_CONTEXT = PathContext(str(_BASE / "home"), str(_PROJ), True, False)
DENIED_TARGETS = [".env", ".env.local", ".ssh/id_ed25519", ".ssh"]
ZERO_WIDTH = ["\u200b", "\u00ad", "\u200c", "\u200d", "\u2060", "\ufeff"]
FULLWIDTH = {c: chr(ord(c) + 0xFEE0) for c in "abcdefghijklmnopqrstuvwxyz"}


def _mangle_segment(segment: str, how: str, draw: st.DrawFn) -> str:
    if not segment:
        return segment
    at = draw(st.integers(0, len(segment)))
    if how == "zero-width":
        return segment[:at] + draw(st.sampled_from(ZERO_WIDTH)) + segment[at:]
    if how == "fullwidth":
        return "".join(FULLWIDTH.get(c, c) if draw(st.booleans()) else c for c in segment)
    if how == "long-s":
        return segment.replace("s", "\u017f")
    if how == "percent":
        return "".join(f"%{ord(c):02X}" if c.isascii() and draw(st.booleans()) else c for c in segment)
    if how == "case":
        return "".join(c.upper() if draw(st.booleans()) else c for c in segment)
    if how == "trailing":
        return segment + draw(st.sampled_from([".", " ", "..", ". "]))
    if how == "stream":
        return segment + draw(st.sampled_from(["::$DATA", ":$DATA", ":hidden"]))
    if how == "param":
        return segment + ";x=1"
    return segment


@st.composite
def spellings(draw: st.DrawFn, target: str) -> str:
    """A spelling of `<proj>/<target>` made by path-mangling operations a server may undo."""
    parts = target.split("/")
    spelled: list[str] = []
    for part in parts:
        for _ in range(draw(st.integers(0, 2))):
            spelled.append(draw(st.sampled_from([".", "", "src/..", "sshlink/..", "x/.."])))
        how = draw(st.sampled_from(["plain", "zero-width", "fullwidth", "long-s", "percent", "case", "trailing",
                                    "stream", "param"]))  # fmt: skip
        spelled.append(_mangle_segment(part, how, draw))
    tail = "/".join(spelled)
    prefix = draw(st.sampled_from(["abs", "double", "proc", "relative", "home", "quoted", "src-up", "via-link"]))
    proj = str(_PROJ)
    if prefix == "double":
        return f"/{proj}//{tail}"
    if prefix == "proc":
        return f"/proc/self/root{proj}/{tail}"
    if prefix == "relative":
        return tail
    if prefix == "home":
        return f"~/../proj/{tail}"
    if prefix == "quoted":
        return f' "{proj}/{tail}" '
    if prefix == "src-up":
        return f"{proj}/src/../{tail}"
    if prefix == "via-link":  # through the symlink to the project's own key
        return f"{proj}/keylink" if target.startswith(".ssh/") else f"{proj}/envlink"
    return f"{proj}/{tail}"


def _engine_for_property() -> PolicyEngine:
    """The example policy with the property's project as its root (no environment variable is changed)."""
    import yaml

    document: dict[str, Any] = yaml.safe_load(POLICY.read_text())
    document["paths"]["roots"] = [str(_PROJ)]
    document["paths"]["home"] = str(_BASE / "home")
    engine = PolicyEngine(document)
    engine.learn("tools/list", {"tools": [{"name": "read_text_file", "annotations": READ_ONLY}]})
    return engine


_PROPERTY_ENGINE = _engine_for_property()


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(DENIED_TARGETS).flatmap(spellings))
@example(f"{_PROJ}/.e\u200bnv")
@example(f"{_PROJ}/.\u017f\u017fh/id_ed25519")
@example(f"/proc/self/root{_PROJ}/.env.local::$DATA")
@example(f"{_PROJ}/.ss%68/id_ed25519")
def test_any_mangled_spelling_of_a_denied_path_is_denied(spelled: str) -> None:
    decision = call(_PROPERTY_ENGINE, "read_text_file", {"path": spelled})
    assert not decision.allowed, repr(spelled)


def test_views_of_a_path() -> None:
    proj = str(_PROJ)
    assert path_views(f"{proj}/src/../README.md", _CONTEXT) == (f"{proj}/README.md",)
    assert f"{proj}/.env" in path_views(f"{proj}/.e\u00adnv", _CONTEXT)
    assert f"{proj}/.env" in path_views(f"{proj}/.\uff45\uff4e\uff56", _CONTEXT)
    assert f"{proj}/.ssh/id_ed25519" in path_views(f"{proj}/keylink", _CONTEXT)
    assert f"{proj}/.env" in path_views(f"/proc/1/root{proj}/.env", _CONTEXT)
    with pytest.raises(PathRefused, match="relative path with no base"):
        path_views("x", PathContext("/home/u", None))


NAMES = [".env", ".env.local", ".ssh", "id_rsa.pub", "sshlink", "keylink", "envlink", "outlink", "README.md",
         "src", "notes 2 KB.txt", "a  b", ".environment"]  # fmt: skip
PROTECTED_NAMES = {".env", ".env.local", ".ssh", "id_rsa.pub", "sshlink", "keylink", "envlink", "outlink"}


def _sized(name: str, size: int, is_dir: bool) -> str:
    """A `list_directory_with_sizes` line, padded as the filesystem server pads it."""
    return f"{'[DIR]' if is_dir else '[FILE]'} {name.ljust(30)} {'' if is_dir else f'{size} B'.rjust(10)}"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 10**6), st.booleans()), min_size=1, max_size=12))
@example([(".env", 10, False), ("README.md", 5, False)])
def test_every_listing_format_loses_exactly_its_protected_entries(entries: list[tuple[str, int, bool]]) -> None:
    """`[FILE] name`, padded sizes and absolute paths: protected entries withheld, every other entry kept as is."""
    rules = _PROPERTY_ENGINE.policy.arguments
    proj = str(_PROJ)
    formats = {
        "list_directory": [f"{'[DIR]' if d else '[FILE]'} {n}" for n, _, d in entries],
        "list_directory_with_sizes": [_sized(n, s, d) for n, s, d in entries],
        "search_files": [f"{proj}/{n}" for n, _, _ in entries],
    }
    for tool, lines in formats.items():
        result = {"content": [{"type": "text", "text": "\n".join(lines)}]}
        filtered, _, _ = rules.filter_result(tool, (proj,), result)
        kept = filtered["content"][0]["text"].split("\n") if filtered["content"][0]["text"] else []
        expected = [line for line, (name, _, _) in zip(lines, entries, strict=True) if name not in PROTECTED_NAMES]
        assert kept == expected, (tool, lines)
