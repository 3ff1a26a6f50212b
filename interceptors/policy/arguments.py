"""Argument rules: what a tool may be asked to do, judged on its arguments (and the paths its results list).

A rule names tools (globs) and arguments (JSON pointers, `*` for every item of an array or member of an
object) and holds allow and deny patterns. `type: path` gives the arguments path semantics (`paths.py`): every
view of the path must lie under an allowed root and match no deny glob; `results: filter` (or `refuse`) also
judges every path a listing or search returns. `type: text` matches plain globs on the value as sent and on its
folded form. A value that cannot be judged (not a string, not normalisable) is refused: fail closed.
"""

from __future__ import annotations

import os
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import PolicyError
from .globs import Globs
from .paths import (
    INVISIBLE,
    PathContext,
    PathGlobs,
    PathRefused,
    default_fold_case,
    judge_views,
    lexical_views,
    path_views,
    root_forms,
)

RESULT_MODES = ("none", "filter", "refuse")
MAX_VALUES = 1024
"""At most this many values are judged per rule and call; a call with more is refused."""
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TAGGED = re.compile(r"^\[(?:FILE|DIR|LINK|SYMLINK|F|D)\]\s+(.*)$")
_SIZE = re.compile(r"\s+\d+(?:\.\d+)?\s*(?:B|KB|MB|GB|TB|bytes)\s*$", re.IGNORECASE)
_CACHE = 4096


def expand_env(value: str, where: str, problems: list[str]) -> str:
    """`${NAME}` replaced by the environment variable; an unset or empty one is a load error (fail closed)."""

    def one(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if not found:
            problems.append(f"{where}: the environment variable {match.group(1)} is not set")
            return ""
        return found

    return _ENV.sub(one, value)


def parse_pointer(pointer: str) -> tuple[str, ...]:
    """RFC 6901 (`~1` is `/`, `~0` is `~`); a `*` segment stands for every item or member."""
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise ValueError("a JSON pointer starts with '/'")
    return tuple(part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/"))


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def resolve_pointer(value: Any, parts: Sequence[str], at: str = "") -> Iterator[tuple[str, Any]]:
    """Every (concrete pointer, value) the pointer reaches; nothing when a step is absent."""
    if not parts:
        yield at, value
        return
    head, rest = parts[0], parts[1:]
    if isinstance(value, Mapping):
        if head == "*":
            for key, item in value.items():
                yield from resolve_pointer(item, rest, f"{at}/{_escape(str(key))}")
        elif head in value:
            yield from resolve_pointer(value[head], rest, f"{at}/{_escape(head)}")
    elif isinstance(value, list):
        if head == "*":
            for index, item in enumerate(value):
                yield from resolve_pointer(item, rest, f"{at}/{index}")
        elif head.isdigit() and int(head) < len(value):
            yield from resolve_pointer(value[int(head)], rest, f"{at}/{head}")


def _fold_text(text: str) -> str:
    return unicodedata.normalize("NFKC", "".join(c for c in text if c not in INVISIBLE))


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an argument (or a result) was refused: the argument's pointer and the rule, never the value."""

    pointer: str
    reason: str

    def text(self) -> str:
        return f"argument '{self.pointer}' refused: {self.reason}" if self.pointer else self.reason


@dataclass(frozen=True, slots=True)
class ArgumentRule:
    name: str
    tools: Globs
    pointers: tuple[tuple[str, tuple[str, ...]], ...]
    kind: str
    allow_text: Globs | None
    deny_text: Globs
    allow_paths: PathGlobs | None
    deny_paths: PathGlobs
    roots: tuple[str, ...] | None
    results: str
    required: bool

    def values(self, arguments: Any) -> Iterator[tuple[str, Any]]:
        for text, parts in self.pointers:
            found = list(resolve_pointer(arguments, parts))
            if not found and self.required:
                yield text, _MISSING
            for pointer, value in found:
                if self.kind == "path" and isinstance(value, list):  # `paths: [...]` named without `/*`
                    for index, item in enumerate(value):
                        yield f"{pointer}/{index}", item
                else:
                    yield pointer, value


_MISSING = object()


class ArgumentRules:
    """The compiled `arguments` section with the `paths` defaults; per-tool rule lists are cached."""

    def __init__(self, document: Mapping[str, Any], source: str = "policy") -> None:
        problems: list[str] = []
        section = document.get("paths") or {}
        fold = section.get("case_insensitive")
        self.resolve: bool = bool(section.get("resolve_symlinks", True))
        self.fold_case: bool = default_fold_case() if fold is None else bool(fold)
        roots = [expand_env(r, f"paths.roots[{i}]", problems) for i, r in enumerate(section.get("roots") or ())]
        for index, root in enumerate(roots):
            if root and not os.path.isabs(os.path.expanduser(root)):
                problems.append(f"paths.roots[{index}]: must be an absolute directory")
        home = expand_env(section.get("home") or "", "paths.home", problems) or os.path.expanduser("~")
        base = section.get("base")
        base = expand_env(base, "paths.base", problems) if isinstance(base, str) else (roots[0] if roots else None)
        self.root_list = tuple(r for r in roots if r)
        self.default_roots = root_forms(self.root_list, self.resolve, self.fold_case) if self.root_list else None
        self.default_deny = [
            expand_env(p, f"paths.deny[{i}]", problems) for i, p in enumerate(section.get("deny") or ())
        ]
        self.context = PathContext(home.rstrip("/") or "/", base, self.resolve, self.fold_case)
        rules: list[ArgumentRule] = []
        for index, body in enumerate(document.get("arguments") or ()):
            rules.append(self._compile(index, body, problems))
        if problems:
            raise PolicyError(source, problems)
        self.rules = tuple(rules)
        self._by_tool: OrderedDict[str, tuple[ArgumentRule, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def _compile(self, index: int, body: Mapping[str, Any], problems: list[str]) -> ArgumentRule:
        where = f"arguments[{index}]"
        kind = body.get("type", "text")
        pointers: list[tuple[str, tuple[str, ...]]] = []
        for i, pointer in enumerate(body.get("arguments") or ()):
            try:
                pointers.append((pointer, parse_pointer(pointer)))
            except ValueError as exc:
                problems.append(f"{where}.arguments[{i}]: {exc}")
        expand: Callable[[str, str], str] = lambda value, at: expand_env(value, at, problems)  # noqa: E731
        allow = [expand(p, f"{where}.allow[{i}]") for i, p in enumerate(body.get("allow") or ())]
        deny = [expand(p, f"{where}.deny[{i}]") for i, p in enumerate(body.get("deny") or ())]
        roots: tuple[str, ...] | None = None
        if kind == "path":
            deny = [*self.default_deny, *deny]
            if body.get("roots") is not None:
                own = [expand(r, f"{where}.roots[{i}]") for i, r in enumerate(body["roots"])]
                roots = root_forms([r for r in own if r], self.resolve, self.fold_case)
            else:
                roots = self.default_roots
        has_allow = body.get("allow") is not None
        return ArgumentRule(
            name=body.get("name") or where,
            tools=Globs(body.get("tools") or ()),
            pointers=tuple(pointers),
            kind=kind,
            allow_text=Globs(allow) if has_allow and kind != "path" else None,
            deny_text=Globs([p.casefold() for p in deny]) if kind != "path" else Globs(()),
            allow_paths=PathGlobs(allow) if has_allow and kind == "path" else None,
            deny_paths=PathGlobs(deny) if kind == "path" else PathGlobs(()),
            roots=roots,
            results=body.get("results", "none") if kind == "path" else "none",
            required=bool(body.get("required", False)),
        )

    def __bool__(self) -> bool:
        return bool(self.rules)

    def for_tool(self, name: str) -> tuple[ArgumentRule, ...]:
        with self._lock:
            hit = self._by_tool.get(name)
            if hit is not None:
                return hit
        found = tuple(rule for rule in self.rules if rule.tools.match(name))
        with self._lock:
            self._by_tool[name] = found
            if len(self._by_tool) > _CACHE:
                self._by_tool.popitem(last=False)
        return found

    def touches_filesystem(self, name: str) -> bool:
        """Whether judging this tool's call reads the file system (symlinks): run it off the event loop."""
        return self.resolve and any(rule.kind == "path" for rule in self.for_tool(name))

    def filters_results(self, name: str) -> bool:
        return any(rule.results != "none" for rule in self.for_tool(name))

    # Arguments -------------------------------------------------------------------------------------------

    def check(self, name: str, arguments: Any) -> Refusal | None:
        """The first refused argument of a call to `name` (None: every rule passes). Blocking for path rules."""
        rules = self.for_tool(name)
        if not rules:
            return None
        if arguments is not None and not isinstance(arguments, Mapping):
            return Refusal("", "arguments that are not an object")
        for rule in rules:
            for count, (pointer, value) in enumerate(rule.values(arguments or {}), 1):
                if count > MAX_VALUES:
                    return Refusal("", f"more than {MAX_VALUES} values for rule '{rule.name}'")
                if value is _MISSING:
                    return Refusal(pointer, f"required by rule '{rule.name}'")
                reason = self._judge(rule, value)
                if reason is not None:
                    return Refusal(pointer, f"{reason} (rule '{rule.name}')")
        return None

    def _judge(self, rule: ArgumentRule, value: Any) -> str | None:
        if rule.kind == "path":
            return self.judge_path(rule, value)
        if not isinstance(value, str):
            value = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() if value is not None else ""
        views = tuple(dict.fromkeys((value, _fold_text(value))))
        for view in views:
            if rule.deny_text.match(view.casefold()):  # patterns are casefolded too
                return "matches a denied pattern"
            if rule.allow_text is not None and not rule.allow_text.match(view):
                return "not in the allowed patterns"
        return None

    def judge_path(self, rule: ArgumentRule, value: Any) -> str | None:
        if not isinstance(value, str):
            return "a path that is not a string"
        try:
            views = path_views(value, self.context) if self.resolve else lexical_views(value, self.context)
        except PathRefused as exc:
            return f"cannot be judged: {exc}"
        reason = judge_views(views, rule.roots, rule.deny_paths)
        if reason is None and rule.allow_paths is not None and not all(rule.allow_paths.match(v) for v in views):
            return "not in the allowed paths"
        return reason

    def bases(self, name: str, arguments: Any) -> tuple[str, ...]:
        """The absolute spellings of the call's path arguments: where relative names in its result lead."""
        out: list[str] = []
        for rule in self.for_tool(name):
            if rule.results == "none":
                continue
            for _, value in rule.values(arguments if isinstance(arguments, Mapping) else {}):
                if isinstance(value, str):
                    try:
                        out.append(lexical_views(value, self.context)[0])
                    except PathRefused:
                        continue
        return tuple(dict.fromkeys(out))

    # Results ---------------------------------------------------------------------------------------------

    def filter_result(self, name: str, bases: Sequence[str], result: Any) -> tuple[Any, int, str]:
        """`(result, withheld, mode)`: entries naming a refused path removed (`filter`), or counted (`refuse`).

        Blocking (symlinks are resolved). Lines of text are judged as absolute paths, as `[FILE] name` /
        `[DIR] name` entries, or as names relative to each base; JSON trees (`name`/`children`) node by node.
        """
        rules = [rule for rule in self.for_tool(name) if rule.results != "none"]
        if not rules or not isinstance(result, Mapping):
            return result, 0, "none"
        mode = "refuse" if any(rule.results == "refuse" for rule in rules) else "filter"
        judge = _ResultJudge(self, rules, tuple(bases) or ((self.context.base,) if self.context.base else ()))
        out = dict(result)
        content = result.get("content")
        if isinstance(content, list):
            blocks: list[Any] = []
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
                    text = judge.text(block["text"])
                    blocks.append(block if text == block["text"] else {**block, "text": text})
                elif isinstance(block, Mapping) and block.get("type") in ("resource_link", "resource"):
                    uri = block.get("uri") or (block.get("resource") or {}).get("uri")
                    if isinstance(uri, str) and uri.startswith("file:") and judge.denied(uri):
                        continue
                    blocks.append(block)
                else:
                    blocks.append(block)
            out["content"] = blocks
        in_content = judge.withheld
        if "structuredContent" in result:
            out["structuredContent"] = judge.structured(result["structuredContent"])
        if judge.withheld == 0:
            return result, 0, mode
        return out, max(in_content, judge.withheld - in_content), mode  # the same entries, in both forms


class _ResultJudge:
    def __init__(self, rules: ArgumentRules, applying: Sequence[ArgumentRule], bases: Sequence[str]) -> None:
        self.rules = rules
        self.applying = applying
        self.bases = bases
        self.withheld = 0
        self._memo: dict[str, bool] = {}

    def denied(self, path: str) -> bool:
        hit = self._memo.get(path)
        if hit is None:
            hit = any(self.rules.judge_path(rule, path) is not None for rule in self.applying)
            if len(self._memo) < 65536:
                self._memo[path] = hit
        return hit

    def _candidates(self, entry: str) -> list[str]:
        entry = entry.strip()
        if not entry:
            return []
        names = [entry]
        tagged = _TAGGED.match(entry)
        if tagged is not None:
            name = tagged.group(1)
            names = [name, name.rstrip()]
            sized = _SIZE.sub("", name)
            if sized != name:
                names.append(sized.rstrip())
        out: list[str] = []
        for name in names:
            if name.startswith(("/", "~", "file:")):
                out.append(name)
            else:
                out.extend(base.rstrip("/") + "/" + name for base in self.bases)
        return out

    def _line_denied(self, line: str) -> bool:
        return any(self.denied(candidate) for candidate in self._candidates(line))

    def text(self, text: str) -> str:
        stripped = text.strip()
        if stripped.startswith(("[", "{")):
            try:
                tree = orjson.loads(text)
            except orjson.JSONDecodeError:
                tree = None
            if isinstance(tree, list | dict):
                before = self.withheld
                pruned = self.tree(tree, None)
                if self.withheld == before:
                    return text
                return _json_like_node(pruned)
        lines = text.split("\n")
        kept = [line for line in lines if not self._line_denied(line)]
        if len(kept) == len(lines):
            return text
        self.withheld += len(lines) - len(kept)
        return "\n".join(kept)

    def tree(self, node: Any, parents: Sequence[str] | None) -> Any:
        """A `name`/`children` tree (directory_tree): a node whose path is refused goes with its children."""
        if isinstance(node, list):
            kept = []
            for item in node:
                if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                    paths = self._node_paths(item["name"], parents)
                    if any(self.denied(path) for path in paths):
                        self.withheld += 1
                        continue
                    children = item.get("children")
                    if isinstance(children, list):
                        item = {**item, "children": self.tree(children, paths)}
                kept.append(item)
            return kept
        if isinstance(node, Mapping):
            return {key: self.tree(value, parents) if isinstance(value, list) else value for key, value in node.items()}
        return node

    def _node_paths(self, name: str, parents: Sequence[str] | None) -> list[str]:
        if name.startswith("/"):
            return [name]
        return [parent.rstrip("/") + "/" + name for parent in (parents if parents is not None else self.bases)]

    def structured(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            if all(isinstance(item, Mapping) and "name" in item for item in value) and value:
                return self.tree(value, None)
            return [self.structured(item) for item in value]
        if isinstance(value, Mapping):
            return {key: self.structured(item) for key, item in value.items()}
        return value


def _json_like_node(value: Any) -> str:
    """A pruned tree in the layout the filesystem server writes (`JSON.stringify(tree, null, 2)`)."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
