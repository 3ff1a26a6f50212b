"""Path semantics for tool arguments: every spelling of a file is judged as the file a server would open.

A file server opens `/p/.ssh/id_rsa` for `/p/x/../.ssh/id_rsa`, `/p//.ssh/id_rsa`, `~/.ssh/id_rsa`, a symlink
into `.ssh`, `/proc/self/root/p/.ssh/id_rsa`, and, on a file system that folds case, `/P/.SSH/ID_RSA`. So a
path is judged in several **views**, and it passes only if every view does:

- the literal view: `~` expanded, made absolute, repeated slashes collapsed, `.` and `..` resolved;
- the folded view: surrounding whitespace and quotes dropped, percent-escapes decoded once, zero-width
  characters and soft hyphens removed, NFKC applied (fullwidth letters, ligatures, the long s), Windows-isms
  removed (trailing dots and spaces of a segment, `::$DATA` and other alternate data streams, `;param` path
  parameters), `/proc/<pid>/root` collapsed;
- the real view of each (when the path is on this machine): symlinks resolved as the operating system does
  (`..` after a symlink goes up from the link's target).

A view passes when it lies under an allowed root (when roots are set) and no deny glob matches it or any of
its parent directories. Anything that cannot be normalised one way (a NUL, a `~user`, double percent-encoding,
a relative path with no base, an escape that is not UTF-8) is refused: `PathRefused` says why and never quotes
the path.
"""

from __future__ import annotations

import os
import posixpath
import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from ..errors import InterceptorsError

MAX_PATH = 4096
INVISIBLE = frozenset(
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u200b\u200c\u200d\u200e\u200f"
    "\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
)
"""Characters a file name can hold but a reader cannot see: soft hyphen, zero-width and bidi controls."""
FOLDING_PLATFORMS = ("darwin", "win32", "cygwin")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
DRIVE = re.compile(r"[A-Za-z]:")
PROC_ROOT = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/root(?=/|$)")
PROC_ANY = re.compile(r"/proc/+(?:self|thread-self|\d+)/+(?:task/+\d+/+)?(?:cwd|fd|map_files|exe|root)(?:/|$)")
PROC_LINK = re.compile(r"^/(?:proc/(?:self|thread-self|\d+)(?:/task/\d+)?/(?:cwd|fd|map_files|exe)|dev/fd)(?:/|$)")


class PathRefused(InterceptorsError, ValueError):
    """A path that cannot be judged one way only. The message says why and never quotes the path."""


def default_fold_case() -> bool:
    """Whether this platform's file systems usually fold case (macOS, Windows)."""
    return sys.platform in FOLDING_PLATFORMS


# Globs --------------------------------------------------------------------------------------------------------


def _translate(pattern: str) -> str:
    """A path glob as a regex: `**` crosses `/`, `*` and `?` do not, `[...]` is a class."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):  # `**/` : any number of leading directories, none included
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                out.append(f"[{'^' if negate else ''}{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


class PathGlobs:
    """Deny globs over absolute paths. Matching is case-insensitive (denying `.SSH` too costs nothing); a glob
    ending in `/**` also matches the directory itself, and a path matches when any of its parents does."""

    __slots__ = ("_regex", "patterns")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        parts: list[str] = []
        for pattern in self.patterns:
            parts.append(_translate(pattern))
            if pattern.endswith("/**"):
                parts.append(_translate(pattern[:-3]))
        self._regex = re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE | re.DOTALL) if parts else None

    def match(self, path: str) -> str | None:
        """The first pattern matching the path or one of its parents (None: no match)."""
        if self._regex is None:
            return None
        probe = path
        while True:
            if self._regex.fullmatch(probe):
                return self._which(probe)
            parent = posixpath.dirname(probe)
            if parent == probe:
                return None
            probe = parent

    def _which(self, path: str) -> str:
        for pattern in self.patterns:
            own = [_translate(pattern)] + ([_translate(pattern[:-3])] if pattern.endswith("/**") else [])
            if any(re.fullmatch(p, path, re.IGNORECASE | re.DOTALL) for p in own):
                return pattern
        return self.patterns[0]  # pragma: no cover - the combined regex matched one of them

    def __bool__(self) -> bool:
        return bool(self.patterns)


# Normalisation ------------------------------------------------------------------------------------------------


def _check(raw: str) -> None:
    if not raw:
        raise PathRefused("an empty path")
    if len(raw) > MAX_PATH:
        raise PathRefused(f"a path longer than {MAX_PATH} characters")
    bad = _UNSAFE.search(raw)
    if bad is not None:
        surrogate = 0xD800 <= ord(bad.group()) < 0xE000
        raise PathRefused("a lone surrogate in the path" if surrogate else "a control character in the path")


def _decode(text: str) -> str:
    """Percent-decode once (a server may); refuse what would decode again or is not UTF-8."""
    if not _ESCAPE.search(text):
        return text
    try:
        decoded = unquote_to_bytes(text).decode("utf-8")
    except UnicodeDecodeError:
        raise PathRefused("percent-escapes that are not UTF-8") from None
    if _ESCAPE.search(decoded):
        raise PathRefused("double percent-encoding")
    _check(decoded)
    return decoded


def _fold_text(text: str) -> str:
    """Invisible characters removed, then NFKC (fullwidth letters, ligatures and the long s become plain letters)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", "".join(c for c in text if c not in INVISIBLE))


def _unquote(text: str) -> str:
    """Surrounding whitespace and a leading and a trailing quote dropped, as some servers' path normalisers do."""
    text = text.strip()
    if text[:1] in ("'", '"'):
        text = text[1:]
    if text[-1:] in ("'", '"'):
        text = text[:-1]
    text = text.strip()
    if not text:
        raise PathRefused("an empty path")
    return text


def _fold_segments(path: str) -> str:
    """What Windows and path-parameter-aware servers open: `;params`, streams, trailing dots and spaces dropped."""
    out: list[str] = []
    for segment in path.split("/"):
        if ";" in segment:
            segment = segment.split(";", 1)[0]
        if ":" in segment and not DRIVE.fullmatch(segment):  # `name::$DATA`, `name:stream`: `name` on NTFS
            segment = segment.split(":", 1)[0] or segment
        if segment not in (".", ".."):
            stripped = segment.rstrip(". ")
            segment = stripped if stripped or not segment else "."
        out.append(segment)
    return "/".join(out)


def proc_detour(path: str) -> bool:
    """A `..` after a `/proc/<pid>/root` (or `cwd`, `fd`) link: the kernel goes up from the link's target, a
    lexical reading from the link; the two disagree, so such a path is refused."""
    match = PROC_ANY.search(path)
    return match is not None and "/.." in path[match.start() :]


def _proc(path: str) -> str:
    """`/proc/self/root/x` is `/x` on Linux; a link through a process's cwd or file descriptors cannot be judged."""
    if PROC_LINK.match(path):
        raise PathRefused("a path through /proc or /dev/fd links")
    while True:
        match = PROC_ROOT.match(path)
        if match is None:
            return path
        path = path[match.end() :] or "/"


@dataclass(frozen=True, slots=True)
class PathContext:
    """Where `~` and relative paths lead, whether symlinks are resolved here, and whether case folds."""

    home: str
    base: str | None
    resolve: bool = True
    fold_case: bool = False


def _absolute(path: str, context: PathContext) -> str:
    if path == "~" or path.startswith("~/"):
        path = context.home + path[1:]
    elif path.startswith("~"):
        raise PathRefused("a ~user path")
    if path.startswith("file://"):
        rest = path[len("file://") :]
        if rest.lower().startswith("localhost/"):
            rest = rest[len("localhost") :]
        if not rest.startswith("/"):
            raise PathRefused("a file URI with a host")
        path = rest
    if "\\" in path:
        raise PathRefused("a backslash in the path")
    if not path.startswith("/"):
        if re.match(r"[A-Za-z]:", path):
            raise PathRefused("a drive-letter path")
        if context.base is None:
            raise PathRefused("a relative path with no base directory")
        path = context.base.rstrip("/") + "/" + path
    return path


def _lexical(path: str) -> str:
    """Slashes collapsed, `.` and `..` resolved, never above the root."""
    normal = posixpath.normpath(path)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    return normal


def lexical_views(raw: str, context: PathContext) -> tuple[str, ...]:
    """The literal and the folded absolute spellings of a path, lexically normalised (no file system access)."""
    if not isinstance(raw, str):
        raise PathRefused("a path that is not a string")
    _check(raw)
    if proc_detour(raw) or proc_detour(_decode(raw)):
        raise PathRefused("a path through /proc or /dev/fd links")
    literal = _proc(_lexical(_absolute(raw, context)))
    folded_raw = _unquote(_fold_text(_decode(raw)))
    if any(c in INVISIBLE for c in folded_raw):  # pragma: no cover - NFKC leaves none
        raise PathRefused("an invisible character in the path")
    folded = _proc(_lexical(_fold_segments(_absolute(folded_raw, context))))
    views = [literal] if literal == folded else [literal, folded]
    if context.fold_case:
        views = [view.casefold() for view in views]
    return tuple(dict.fromkeys(views))


def path_views(raw: str, context: PathContext) -> tuple[str, ...]:
    """Every view of a path to judge: the lexical views and, when resolving, where the OS would really go.

    Blocking (it reads the file system when `context.resolve`): call it from a worker thread in async code.
    """
    views = list(lexical_views(raw, context))
    if context.resolve:
        if not isinstance(raw, str):  # pragma: no cover - lexical_views refused it
            raise PathRefused("a path that is not a string")
        raw_absolute = _proc(_absolute(raw, context))  # symlinks first, then `..`: as the kernel resolves
        for candidate in dict.fromkeys((raw_absolute, *views)):
            try:
                real = os.path.realpath(candidate)
            except (OSError, ValueError):
                raise PathRefused("a path that cannot be resolved") from None
            views.append(_proc(_lexical(real)))
    if context.fold_case:
        views = [view.casefold() for view in views]
    return tuple(dict.fromkeys(views))


# Judging ------------------------------------------------------------------------------------------------------


def root_forms(roots: Sequence[str], resolve: bool, fold_case: bool) -> tuple[str, ...]:
    """Each root lexically normalised and, when resolving, also with its own symlinks resolved."""
    forms: list[str] = []
    for root in roots:
        lexical = _lexical(os.path.expanduser(root))
        forms.append(lexical)
        if resolve:
            forms.append(_lexical(os.path.realpath(lexical)))
    if fold_case:
        forms = [form.casefold() for form in forms]
    return tuple(dict.fromkeys(forms))


def _under(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root.rstrip("/") + "/")


def judge_views(views: Sequence[str], roots: Sequence[str] | None, deny: PathGlobs) -> str | None:
    """None when every view passes, else why not (a rule, never the path)."""
    for view in views:
        if roots is not None and not any(_under(view, root) for root in roots):
            return "outside the allowed directories"
        pattern = deny.match(view)
        if pattern is not None:
            return f"matches the denied pattern {pattern!r}"
    return None
