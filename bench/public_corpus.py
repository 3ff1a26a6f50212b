"""Build detection-quality corpora from public material nobody on this project wrote, outside the repository.

Nothing fetched is committed: this module reads local checkouts (or snapshots) of public repositories and
installed packages at run time and writes JSON-lines corpora to a directory outside the repository
(`--out`, default `$MCPI_CORPORA` or `/work/corpora`). The bench (`bench.public_quality`) reads them when
they are there and says "not built" when they are not.

Corpora (one `<name>.jsonl` each; an item is `{"id", "corpus", "family", "label", "text", "secret", "split"}`,
`label` is `secret` or `benign`, `secret` the planted value when it is known, `kind` `image` for a binary
image sent as an image block):

- `gitleaks_tps`, `gitleaks_fps`: the literal strings in the `tps` / `fps` lists of gitleaks' rule sources
  (`cmd/generate/config/rules/*.go`), the maintainers' own true and false positives per rule;
- `gitleaks_generated`: secrets drawn from each rule's own sample expression (`secrets.NewSecret(regex)`,
  literals, `utils.Hex("32")`, …) and planted in gitleaks' own context shapes (the `samples` map of
  `cmd/generate/config/utils/generate.go`, read from the checkout, not copied here);
- `credsweeper_pos`, `credsweeper_neg`: the lines of CredSweeper's `tests/samples` that its maintainers'
  expected report (`tests/data/output.json`) lists as credentials, and the lines its rules match with
  filters and ML off (`tests/data/no_filters_no_ml.json`) that the expected report leaves out, plus lines
  marked `FP`. The `doc_*` samples are written for its documentation mode (`--doc`), so for them the
  expected report of that mode (`tests/data/doc.json`) counts as well: `ID/PW:master/iPp0@GRq` is a
  credential there;
- `detect_secrets_pos`: lines of detect-secrets' `test_data` that detect-secrets' own scan reports, when
  detect-secrets is installed (its maintainers' test data; labels are its own findings);
- `realworld_benign`: real files of installed packages (`--packages`, default this interpreter's
  site-packages and `/usr/share/doc`): Python sources, docs, `RECORD` digests and lockfile-like manifests,
  JSON/TOML/YAML, certificate bundles split per certificate, and images sent as image blocks;
- `tool_outputs`: realistic benign tool results in 40 categories (`bench.public_tooloutputs`), built from
  snapshots of public repositories under `--tool-sources DIR` (Stripe's OpenAPI fixtures, botocore's test
  responses, lockfiles, manifests, git history, OpenTelemetry examples, …) and the machine's public files
  (CA certificates and what a tool prints for them, apt's PGP public keys, PostgreSQL's SQL, PNGs); an item
  with `structured` also travels as `structuredContent`.

Each item goes to the `tune` or the `heldout` split by the first byte of the SHA-256 of its id, so the split
never changes between builds. `python -m bench.public_corpus build --gitleaks DIR --credsweeper DIR
[--detect-secrets DIR] [--tool-sources DIR] [--out DIR]`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import re
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

DEFAULT_OUT = "/work/corpora"
MAX_ITEM = 6000


def corpora_dir() -> Path:
    """Where corpora live: `$MCPI_CORPORA`, else /work/corpora (never inside the repository)."""
    return Path(os.environ.get("MCPI_CORPORA") or DEFAULT_OUT)


def split_of(item_id: str) -> str:
    """`heldout` for half of the ids, `tune` for the other half, by a hash of the id (stable across builds)."""
    return "heldout" if hashlib.sha256(item_id.encode()).digest()[0] & 1 else "tune"


def _item(corpus: str, item_id: str, family: str, label: str, text: str, secret: str | None = None,
          kind: str = "text") -> dict[str, Any]:  # fmt: skip
    return {"id": item_id, "corpus": corpus, "family": family, "label": label, "text": text, "secret": secret,
            "kind": kind, "split": split_of(item_id)}  # fmt: skip


# --- Go source reading ----------------------------------------------------------------------------------------

_GO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "a": "\a", "b": "\b", "f": "\f",
               "v": "\v"}  # fmt: skip
_TOKEN = re.compile(
    r'\s*(?:(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<str>"(?:[^"\\\n]|\\.)*")|(?P<raw>`[^`]*`)|(?P<name>[A-Za-z_][\w.]*)|(?P<op>[()+,{}\[\]]|\.\.\.))',
    re.S,
)


def go_string(literal: str) -> str:
    """The value of a Go string literal (interpreted or raw)."""
    if literal.startswith("`"):
        return literal[1:-1]
    body, out, at = literal[1:-1], [], 0
    while at < len(body):
        char = body[at]
        if char != "\\":
            out.append(char)
            at += 1
            continue
        code = body[at + 1]
        if code in _GO_ESCAPES:
            out.append(_GO_ESCAPES[code])
            at += 2
        elif code == "x":
            out.append(chr(int(body[at + 2 : at + 4], 16)))
            at += 4
        elif code in "uU":
            width = 4 if code == "u" else 8
            out.append(chr(int(body[at + 2 : at + 2 + width], 16)))
            at += 2 + width
        else:
            out.append(code)
            at += 2
    return "".join(out)


def _tokens(source: str) -> list[tuple[str, str]]:
    out, at = [], 0
    while at < len(source):
        match = _TOKEN.match(source, at)
        if match is None:
            if source[at:].strip() == "":
                break
            out.append(("?", source[at]))
            at += 1
            continue
        kind = match.lastgroup or "?"
        if kind != "comment":
            out.append((kind, match.group(kind)))
        at = match.end()
    return out


class GoExpr:
    """A tiny evaluator for the string expressions of gitleaks' samples: literals, `+`, `secrets.NewSecret(re)`
    and the `utils` character-class helpers. Anything else raises `ValueError` (the item is skipped)."""

    CLASSES = {"utils.Numeric": "[0-9]{%s}", "utils.Hex": "[a-f0-9]{%s}", "utils.AlphaNumeric": "[a-z0-9]{%s}",
               "utils.AlphaNumericExtendedShort": "[a-z0-9_-]{%s}", "utils.AlphaNumericExtended": "[a-z0-9=_\\-]{%s}",
               "utils.AlphaNumericExtendedLong": "[a-z0-9\\/=_\\+\\-]{%s}"}  # fmt: skip

    def __init__(self, tokens: list[tuple[str, str]], rng: random.Random) -> None:
        self.tokens, self.at, self.rng = tokens, 0, rng

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if value is not None and token[1] != value:
            raise ValueError(f"expected {value}, got {token[1]}")
        self.at += 1
        return token

    def expr(self) -> str:
        value = self.term()
        while self.peek()[1] == "+":
            self.take()
            value += self.term()
        return value

    def term(self) -> str:
        kind, text = self.take()
        if kind in ("str", "raw"):
            return go_string(text)
        if kind == "name" and text == "secrets.NewSecret":
            self.take("(")
            pattern = self.expr()
            self.take(")")
            return generate(pattern, self.rng)
        if kind == "name" and text in self.CLASSES:
            self.take("(")
            size = self.expr()
            self.take(")")
            return self.CLASSES[text] % size
        if kind == "name" and text == "utils.Hex8_4_4_4_12":
            self.take("(")
            self.take(")")
            return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        raise ValueError(f"cannot evaluate {text!r}")


def _balanced(source: str, start: int, open_: str, close: str) -> int:
    """The index just past the bracket closing the one at `start` (strings and raw strings skipped)."""
    depth, at = 0, start
    while at < len(source):
        char = source[at]
        if char == '"':
            at = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(source, at).end()  # type: ignore[union-attr]
            continue
        if char == "`":
            at = source.index("`", at + 1) + 1
            continue
        if char == "/" and source.startswith("//", at):
            at = source.find("\n", at)
            at = len(source) if at < 0 else at
            continue
        if char == open_:
            depth += 1
        elif char == close:
            depth -= 1
            if depth == 0:
                return at + 1
        at += 1
    return len(source)


def _split_top(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    parts: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for token in tokens:
        if token[1] in "([{" and token[0] == "op":
            depth += 1
        elif token[1] in ")]}" and token[0] == "op":
            depth -= 1
        if token == ("op", ",") and depth == 0:
            parts.append([])
        else:
            parts[-1].append(token)
    return [p for p in parts if p]


def _functions(source: str) -> Iterator[tuple[str, str]]:
    """`(rule id, body)` per `func` of a rule file."""
    for match in re.finditer(r"^func [^\n]*\{", source, re.M):
        body = source[match.start() : _balanced(source, match.end() - 1, "{", "}")]
        rule = re.search(r'RuleID:\s*"([^"]+)"', body)
        if rule:
            yield rule.group(1), body


def _string_lists(body: str, name: str) -> Iterator[list[tuple[str, str]]]:
    """The element tokens of every `name := []string{…}`, `name := call(…)` and `name = append(name, …)`."""
    for match in re.finditer(rf"\b{name}\s*:?=\s*", body):
        at = match.end()
        if body.startswith("[]string{", at):
            end = _balanced(body, at + 8, "{", "}")
            yield _tokens(body[at + 9 : end - 1])
        elif body.startswith(f"append({name},", at):
            end = _balanced(body, at + 6, "(", ")")
            inner = body[at + 7 + len(name) + 1 : end - 1].strip()
            yield [t for t in _tokens(inner) if t[1] != "..."]
        else:
            paren = body.find("(", at)
            if paren < 0 or "\n" in body[at:paren]:
                continue
            end = _balanced(body, paren, "(", ")")
            yield [(*t,) for t in _tokens(body[at:end])] + [("op", ",")]


def _shapes(generate_go: str) -> tuple[dict[str, str], str]:
    """gitleaks' context shapes, read from its generate.go: the `samples` map and the one-line sample format."""
    start = generate_go.index("samples := map[string]string{")
    end = _balanced(generate_go, generate_go.index("{", start + 20), "{", "}")
    shapes: dict[str, str] = {}
    for entry in _split_top(_tokens(generate_go[start + 29 : end - 1])):
        strings = [go_string(t[1]) for t in entry if t[0] in ("str", "raw")]
        if len(strings) == 2:
            shapes[strings[0]] = strings[1]
    single = re.search(r"func GenerateSampleSecret\(.*?Sprintf\((\"(?:[^\"\\]|\\.)*\")", generate_go, re.S)
    return shapes, go_string(single.group(1)) if single else '%s_api_token = "%s"'


def _fill(shape: str, identifier: str, secret: str) -> str:
    return shape.replace("{i}", identifier).replace("{I}", identifier.upper()).replace("{s}", secret)


def gitleaks_items(root: Path, seed: int = 20261204) -> Iterator[dict[str, Any]]:
    rules = root / "cmd" / "generate" / "config" / "rules"
    shapes, single = _shapes((root / "cmd" / "generate" / "config" / "utils" / "generate.go").read_text())
    shape_names = sorted(shapes)
    rng = random.Random(seed)
    for path in sorted(rules.glob("*.go")):
        if path.name.endswith("_test.go"):
            continue
        for rule, body in _functions(path.read_text(encoding="utf-8")):
            for label, name in (("secret", "tps"), ("benign", "fps")):
                corpus = "gitleaks_tps" if label == "secret" else "gitleaks_fps"
                for index, element in enumerate(e for tokens in _string_lists(body, name) for e in _split_top(tokens)):
                    kinds = {t[0] for t in element}
                    item_id = f"{corpus}:{rule}:{index}"
                    if kinds <= {"str", "raw", "op"} and all(t[1] == "+" for t in element if t[0] == "op"):
                        text = "".join(go_string(t[1]) for t in element if t[0] != "op")
                        if text.strip():
                            yield _item(corpus, item_id, rule, label, text)
                        continue
                    if label != "secret" or element[0][1] not in ("utils.GenerateSampleSecrets",
                                                                  "utils.GenerateSampleSecret"):  # fmt: skip
                        continue
                    try:
                        args = _split_top(element[2:-1] if element[-1][1] == ")" else element[2:-2])
                        identifier = GoExpr(args[0], rng).expr()
                        secret = GoExpr(args[1], rng).expr()
                    except (ValueError, IndexError, KeyError):
                        continue
                    if element[0][1] == "utils.GenerateSampleSecret":
                        text = single.replace("%s", identifier, 1).replace("%s", secret, 1)
                        yield _item("gitleaks_generated", f"gen:{rule}:{index}:single", rule, "secret", text, secret)
                        continue
                    offset = rng.randrange(len(shape_names))
                    for k in range(min(8, len(shape_names))):  # eight of the shapes per sample, rotating
                        shape = shape_names[(offset + k * 3) % len(shape_names)]
                        text = _fill(shapes[shape], identifier, secret)
                        yield _item("gitleaks_generated", f"gen:{rule}:{index}:{shape}", rule, "secret", text, secret)


# --- a generator of strings from a regular expression -------------------------------------------------------------


def generate(pattern: str, rng: random.Random) -> str:
    """A string the (RE2-style) `pattern` matches, drawn with `rng`; look-arounds and anchors are ignored."""
    import re._parser as sre_parse  # type: ignore[import-not-found]
    from re._constants import MAXREPEAT  # type: ignore[import-not-found]

    posix = {"[:alnum:]": "a-zA-Z0-9", "[:alpha:]": "a-zA-Z", "[:digit:]": "0-9", "[:upper:]": "A-Z",
             "[:lower:]": "a-z", "[:xdigit:]": "0-9a-fA-F", "[:space:]": " \\t", "[:punct:]": "!-/"}  # fmt: skip
    for name, chars in posix.items():
        pattern = pattern.replace(name, chars)
    pattern = pattern.replace("\\z", "\\Z")
    pattern = pattern[:4] + re.sub(r"\(\?[a-z]+\)", "", pattern[4:]) if pattern.startswith("(?i)") else re.sub(
        r"\(\?[a-z]+\)", "", pattern)  # fmt: skip
    parsed = sre_parse.parse(pattern)
    word = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

    def category(cat: Any) -> list[str]:
        name = str(cat).lower()
        if "digit" in name:
            return list("0123456789") if "not" not in name else list("abcXYZ")
        if "space" in name:
            return [" "] if "not" not in name else list(word)
        return list(word + "_") if "not" not in name else list("-.!")

    def chars_of(items: Any) -> list[str]:
        negate, pool = False, []
        for op, arg in items:
            name = str(op)
            if name == "NEGATE":
                negate = True
            elif name == "LITERAL":
                pool.append(chr(arg))
            elif name == "RANGE":
                pool.extend(chr(c) for c in range(arg[0], min(arg[1], arg[0] + 200) + 1))
            elif name == "CATEGORY":
                pool.extend(category(arg))
        if negate:
            excluded = set(pool)
            return [c for c in word if c not in excluded] or ["~"]
        return pool or ["a"]

    def emit(seq: Any) -> str:
        out = []
        for op, arg in seq:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(arg))
            elif name == "NOT_LITERAL":
                out.append(rng.choice([c for c in word if ord(c) != arg]))
            elif name == "ANY":
                out.append(rng.choice(word))
            elif name == "IN":
                out.append(rng.choice(chars_of(arg)))
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                low, high, sub = arg
                high = low + 4 if high == MAXREPEAT else high
                count = rng.randint(low, max(low, high))
                out.extend(emit(sub) for _ in range(count))
            elif name == "SUBPATTERN":
                out.append(emit(arg[-1]))
            elif name == "BRANCH":
                out.append(emit(rng.choice(arg[1])))
            elif name == "CATEGORY":
                out.append(rng.choice(category(arg)))
            elif name == "ATOMIC_GROUP":
                out.append(emit(arg))
        return "".join(out)

    return emit(parsed)


# --- CredSweeper's samples -----------------------------------------------------------------------------------------


def _reported_lines(path: Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for finding in json.loads(path.read_text(encoding="utf-8")):
        for line in finding.get("line_data_list", []):
            key = (line["path"].removeprefix("./").removeprefix("tests/samples/"), int(line["line_num"]))
            out.setdefault(key, []).append({"rule": finding["rule"], **line})
    return out


def _text_file(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:4096]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


_FALSE_HEADER = re.compile(r"#?[ \t]*FALSE:?[ \t]*")


def credsweeper_false_lines(root: Path) -> set[tuple[str, int]]:
    """`(sample, line number)` of the lines CredSweeper's documentation samples (`doc_*`) put under a `FALSE`
    header (`FALSE:`, `# FALSE`): lines their authors mark as no credential, which the documentation mode's expected
    report still lists (`"key":"attached_file_0"`)."""
    out: set[tuple[str, int]] = set()
    samples = root / "tests" / "samples"
    if not samples.is_dir():
        return out
    for path in sorted(samples.glob("doc_*")):
        text = _text_file(path) if path.is_file() else None
        under = False
        for number, line in enumerate((text or "").splitlines(), 1):
            if _FALSE_HEADER.fullmatch(line.strip()):
                under = True
            elif under and line.strip():
                out.add((path.name, number))
    return out


def credsweeper_items(root: Path) -> Iterator[dict[str, Any]]:
    samples = root / "tests" / "samples"
    positives = _reported_lines(root / "tests" / "data" / "output.json")
    candidates = _reported_lines(root / "tests" / "data" / "no_filters_no_ml.json")
    doc_mode = root / "tests" / "data" / "doc.json"
    if doc_mode.is_file():
        for key, findings in _reported_lines(doc_mode).items():
            if key[0].startswith("doc_"):
                positives.setdefault(key, findings)
    texts: dict[str, list[str] | None] = {}

    def lines_of(name: str) -> list[str] | None:
        if name not in texts:
            text = _text_file(samples / name) if (samples / name).is_file() else None
            texts[name] = None if text is None else text.splitlines()
        return texts[name]

    for (name, number), findings in sorted(positives.items()):
        lines = lines_of(name)
        if lines is None or not 0 < number <= len(lines):
            continue
        rule = findings[0]["rule"]
        text = lines[number - 1]
        value = findings[0].get("value") or ""
        if "PEM" in rule or "Private Key" in rule or "-----BEGIN" in text:
            text = "\n".join(lines)[:MAX_ITEM]  # a multi-line key: the whole file is the item
        if not text.strip():
            continue
        secret = value if value and value in text else None
        yield _item("credsweeper_pos", f"cs:{name}:{number}", rule, "secret", text, secret)
    marked = set()
    for name in sorted(p.name for p in samples.iterdir() if p.is_file()):
        lines = lines_of(name) or []
        for number, line in enumerate(lines, 1):
            if re.search(r"(?:^|[\s#/:])FP\b", line) and (name, number) not in positives:
                marked.add((name, number))
    for name, number in sorted(set(candidates) - set(positives) | marked):
        lines = lines_of(name)
        if lines is None or not 0 < number <= len(lines) or not lines[number - 1].strip():
            continue
        family = candidates[(name, number)][0]["rule"] if (name, number) in candidates else "marked FP"
        yield _item("credsweeper_neg", f"csn:{name}:{number}", family, "benign", lines[number - 1])


# --- detect-secrets' test data -------------------------------------------------------------------------------------


def detect_secrets_items(root: Path) -> Iterator[dict[str, Any]]:
    """Lines of detect-secrets' `test_data` its own default scan reports (needs detect-secrets installed)."""
    try:
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import default_settings
    except ImportError:
        return
    data = root / "test_data"
    with default_settings():
        for path in sorted(p for p in data.rglob("*") if p.is_file()):
            text = _text_file(path)
            if text is None:
                continue
            lines = text.splitlines()
            seen = set()
            for secret in scan_file(str(path)):
                number = secret.line_number
                if number in seen or not 0 < number <= len(lines):
                    continue
                seen.add(number)
                rel = path.relative_to(data).as_posix()
                value = secret.secret_value or ""
                known = value if value and value in lines[number - 1] else None
                yield _item("detect_secrets_pos", f"ds:{rel}:{number}", secret.type, "secret", lines[number - 1], known)


# --- real files of installed packages ----------------------------------------------------------------------------

_SKIP_PACKAGES = ("credsweeper", "detect_secrets", "interceptors", "integrations", "mcp_interceptors", "bench")
_CATEGORIES = {
    "python_source": (".py", ".pyi"), "docs": (".md", ".rst", ".txt", "METADATA"), "digests": ("RECORD",),
    "config": (".json", ".toml", ".yaml", ".yml", ".cfg", ".ini"), "certificates": (".pem", ".crt"),
    "images": (".png", ".gif", ".jpg", ".jpeg", ".ico"), "web": (".js", ".css", ".html", ".svg"),
}  # fmt: skip


def _category(path: Path) -> str | None:
    for category, endings in _CATEGORIES.items():
        if path.name.endswith(endings):
            return category
    return None


def _chunks(text: str, limit: int = MAX_ITEM) -> Iterator[str]:
    """Pieces of at most `limit` characters, cut at line ends."""
    piece: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        if size + len(line) > limit and piece:
            yield "".join(piece)
            piece, size = [], 0
        piece.append(line[:limit])
        size += len(line[:limit])
    if piece:
        yield "".join(piece)


def realworld_items(roots: Iterable[Path], per_category: int = 400) -> Iterator[dict[str, Any]]:
    by_category: dict[str, list[Path]] = {}
    for root in roots:
        if not root.is_dir():
            continue
        for path in root.rglob("*"):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or path.is_symlink() or any(rel.startswith(p) for p in _SKIP_PACKAGES):
                continue
            category = _category(path)
            if category is not None:
                by_category.setdefault(category, []).append(path)
    for category, paths in sorted(by_category.items()):
        # A stable sample: the files whose path hashes lowest.
        chosen = sorted(paths, key=lambda p: hashlib.sha256(str(p).encode()).digest())[:per_category]
        count = 0
        for path in sorted(chosen):
            ident = f"rw:{category}:{path}"
            if category == "images":
                data = path.read_bytes()
                if 0 < len(data) <= 200_000:
                    mime = "image/" + (
                        "jpeg" if path.suffix in (".jpg", ".jpeg") else path.suffix.lstrip(".").replace("ico", "x-icon")
                    )
                    yield _item("realworld_benign", ident, category, "benign", base64.b64encode(data).decode(),
                                kind="image:" + mime)  # fmt: skip
                continue
            text = _text_file(path)
            if text is None or not text.strip():
                continue
            if category == "certificates":
                pieces = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", text, re.S)
                for index, cert in enumerate(pieces[:40]):
                    yield _item("realworld_benign", f"{ident}:{index}", category, "benign", cert)
                continue
            for index, chunk in enumerate(_chunks(text)):
                if index >= 3 or count >= per_category * 2:
                    break
                count += 1
                yield _item("realworld_benign", f"{ident}:{index}", category, "benign", chunk)


def default_package_roots() -> list[Path]:
    return [Path(sysconfig.get_paths()["purelib"]), Path("/usr/share/doc"), Path("/etc/ssl/certs")]


def build(out: Path, gitleaks: Path | None, credsweeper: Path | None, detect_secrets: Path | None,
          packages: list[Path], tool_sources: Path | None = None) -> dict[str, int]:  # fmt: skip
    """Write every corpus whose source is given; returns the item count per corpus."""
    out.mkdir(parents=True, exist_ok=True)
    streams: dict[str, list[dict[str, Any]]] = {}
    sources: list[Iterable[dict[str, Any]]] = []
    if gitleaks is not None:
        sources.append(gitleaks_items(gitleaks))
    if credsweeper is not None:
        sources.append(credsweeper_items(credsweeper))
    if detect_secrets is not None:
        sources.append(detect_secrets_items(detect_secrets))
    if packages:
        sources.append(realworld_items(packages))
    tool_summary: dict[str, Any] | None = None
    if tool_sources is not None:
        from .public_tooloutputs import tool_output_items

        raw, tool_summary = tool_output_items(tool_sources)
        sources.append(_item("tool_outputs", r["id"], r["family"], "benign", r["text"]) | (
            {"structured": r["structured"]} if "structured" in r else {}) for r in raw)  # fmt: skip
    for source in sources:
        for item in source:
            streams.setdefault(item["corpus"], []).append(item)
    counts = {}
    for name, items in streams.items():
        seen: set[str] = set()
        unique = [i for i in items if not (i["id"] in seen or seen.add(i["id"]))]  # type: ignore[func-returns-value]
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            for item in unique:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        counts[name] = len(unique)
    record_path = out / "SOURCES.json"
    try:
        record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    except ValueError:
        record = {}
    # A partial build keeps what an earlier build recorded for the corpora it did not rebuild.
    fresh = {"gitleaks": gitleaks, "credsweeper": credsweeper, "detect_secrets": detect_secrets}
    record.update({k: str(v) for k, v in fresh.items() if v is not None})
    if packages:
        record["packages"] = [str(p) for p in packages]
    if tool_summary is not None:
        record["tool_outputs"] = {"folder": str(tool_sources), **tool_summary}
    record["counts"] = {**record.get("counts", {}), **counts}
    record_path.write_text(json.dumps(record, indent=2))
    return counts


def load(name: str, folder: Path | None = None) -> list[dict[str, Any]] | None:
    """A built corpus, or None when it was not built."""
    path = (folder or corpora_dir()) / f"{name}.jsonl"
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.public_corpus", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the corpora from local checkouts")
    b.add_argument("--gitleaks", type=Path, help="a checkout of gitleaks (cmd/generate/config/...)")
    b.add_argument("--credsweeper", type=Path, help="a checkout of CredSweeper (tests/samples, tests/data)")
    b.add_argument("--detect-secrets", type=Path, help="a checkout of detect-secrets (test_data)")
    b.add_argument("--tool-sources", type=Path, help="a folder of public repository snapshots (owner+name/repo)")
    b.add_argument("--packages", type=Path, action="append", help="a folder of installed files (repeatable)")
    b.add_argument("--no-packages", action="store_true", help="skip the real-world benign corpus")
    b.add_argument("--out", type=Path, default=None, help=f"output folder (default $MCPI_CORPORA or {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    out = args.out or corpora_dir()
    repo = Path(__file__).resolve().parent.parent
    if out.resolve().is_relative_to(repo):
        parser.error("the corpora are built from public material and must live outside the repository")
    packages = [] if args.no_packages else (args.packages or default_package_roots())
    counts = build(out, args.gitleaks, args.credsweeper, args.detect_secrets, packages, args.tool_sources)
    for name, count in sorted(counts.items()):
        print(f"{name}: {count} items")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
