"""One spelling per resource URI, so that no other spelling of a denied resource gets past the globs.

A server that resolves paths serves `/srv/secret.txt` for `/srv/./secret.txt`, `/srv//secret.txt`,
`/srv/x/../secret.txt` or `/srv/%73ecret.txt`; the policy must judge all of them as that one URI. The
normal form: scheme and host in lower case, a host's trailing dots dropped, `file:` URIs spelled with an
empty authority, the path percent-decoded once, repeated slashes collapsed, `.` and `..` segments resolved
(RFC 3986 §5.2.4, never above the root), `;params` dropped from each segment (so `..;/` is `../`), the trailing
dots and spaces of each segment removed (what Windows file systems ignore), a trailing slash dropped; for
`file:` also alternate data streams (`name::$DATA`) and `/proc/<pid>/root` prefixes.

Spellings that a server could read in more than one way are refused rather than guessed at
(`UriRefused`): percent-escapes that decode to more escapes (double encoding), malformed escapes, bytes
that are not UTF-8, control characters (`%00` truncation), backslashes, a missing scheme, invisible characters
(zero-width, soft hyphen) and compatibility characters (fullwidth letters, ligatures, the long s), and paths
through `/proc/<pid>/cwd` or `/proc/<pid>/fd`.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from urllib.parse import unquote_to_bytes

from ..errors import InterceptorsError
from .paths import DRIVE, INVISIBLE, PROC_LINK, PROC_ROOT, proc_detour

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SLASHES = re.compile(r"/{2,}")


class UriRefused(InterceptorsError, ValueError):
    """A resource URI that cannot be read one way only. The message says why and never quotes the URI."""


def _decode(text: str) -> str:
    """Percent-decode once; refuse what would decode again, malformed escapes and bytes that are not UTF-8."""
    if "%" not in text:
        return text
    if _BAD_ESCAPE.search(text):
        raise UriRefused("malformed percent-escape")
    try:
        decoded = unquote_to_bytes(text).decode("utf-8")
    except UnicodeDecodeError:
        raise UriRefused("percent-escapes that are not UTF-8") from None
    if _ESCAPE.search(decoded):
        raise UriRefused("double percent-encoding")
    return decoded


def _check_characters(text: str) -> None:
    if "\\" in text:
        raise UriRefused("backslash in the URI")
    if any(ord(char) < 0x20 or ord(char) == 0x7F or 0x80 <= ord(char) < 0xA0 for char in text):
        raise UriRefused("control character in the URI")


def _check_unicode(text: str) -> str:
    """Invisible characters and compatibility characters are refused (a reader and a server would disagree on
    the name); canonically equivalent spellings (NFD, NFC) become NFC."""
    if text.isascii():
        return text
    if any(char in INVISIBLE for char in text):
        raise UriRefused("an invisible character (zero-width, soft hyphen, bidi control) in the URI")
    composed = unicodedata.normalize("NFC", text)
    if unicodedata.normalize("NFKC", composed) != composed:
        raise UriRefused("a compatibility character (fullwidth, ligature, long s) in the URI")
    return composed


def _segments(path: str, file: bool = False) -> str:
    """Collapse slashes, drop `;params` (and, for `file:`, alternate data streams), resolve dot segments (never
    above the root), strip trailing dots and spaces, and drop a trailing slash."""
    rooted = path.startswith("/")
    parts = _SLASHES.sub("/", path).split("/")
    out: list[str] = []
    for part in parts:
        if ";" in part:  # `..;/`, `name;jsessionid=x`: path parameters, which servers drop
            part = part.split(";", 1)[0]
        if file and ":" in part and not DRIVE.fullmatch(part):  # `name::$DATA`, `name:stream`: `name` on NTFS
            part = part.split(":", 1)[0] or part
        if part in (".", ""):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        stripped = part.rstrip(". ")
        if not stripped:  # a segment of only dots and spaces (`...`, `. .`) names nothing but its parent
            raise UriRefused("a path segment of only dots or spaces")
        out.append(stripped)
    joined = "/".join(out)
    return "/" + joined if rooted else joined


def _proc(path: str) -> str:
    """`/proc/self/root/etc/shadow` is `/etc/shadow` on Linux (and `/proc/<pid>/root`); a path through a
    process's cwd or file descriptors names a file no URI rule can see, and is refused."""
    if PROC_LINK.match(path):
        raise UriRefused("a path through /proc or /dev/fd links")
    while True:
        match = PROC_ROOT.match(path)
        if match is None:
            return path
        path = path[match.end() :] or "/"


def normalize_uri(uri: str) -> str:
    """The one spelling the policy judges a requested resource URI by (see the module docstring)."""
    if not isinstance(uri, str) or not uri:
        raise UriRefused("empty URI")
    _check_characters(uri)
    scheme_match = _SCHEME.match(uri)
    if scheme_match is None:
        raise UriRefused("no scheme")
    scheme = scheme_match.group(1).lower()
    rest = uri[scheme_match.end() :]
    fragment = ""
    if "#" in rest:
        rest, fragment = rest.split("#", 1)
        fragment = "#" + _decode(fragment)
    query = ""
    if "?" in rest:
        rest, query = rest.split("?", 1)
        query = "?" + _decode(query)
    authority: str | None = None
    if rest.startswith("//"):
        raw_authority, slash, path = rest[2:].partition("/")
        path = slash + path
        raw_userinfo, at, raw_host = raw_authority.rpartition("@")
        userinfo, host = _decode(raw_userinfo), _decode(raw_host)
        if any(char in host for char in "@/?#"):  # `evil%40good`: which host is it?
            raise UriRefused("an encoded delimiter in the host")
        host, colon, port = host.partition(":") if not host.startswith("[") else (host, "", "")
        host = host.lower().rstrip(".")
        authority = f"{userinfo}{at}{host}{colon}{port}"
    else:
        path = rest
    path = _check_unicode(_decode(path))
    _check_characters(path + query + fragment + (authority or ""))
    query, fragment = _check_unicode(query), _check_unicode(fragment)
    if authority:
        authority = _check_unicode(authority)
    if scheme == "file" and proc_detour(path):
        raise UriRefused("a path through /proc or /dev/fd links")
    path = _segments(path, scheme == "file")
    if scheme == "file":
        path = _proc(path if path.startswith("/") else "/" + path)
        if authority in (None, "localhost"):
            authority = ""
        if authority == "" and not path.startswith("/"):
            path = "/" + path
    if authority is not None:
        if path and not path.startswith("/"):
            path = "/" + path
        return f"{scheme}://{authority}{path}{query}{fragment}"
    return f"{scheme}:{path}{query}{fragment}"


def uri_idents(uri: str) -> tuple[str, ...]:
    """What resource globs are matched against for a requested URI: its normal form, and that form without
    its query and fragment (the resource a path-resolving server would serve). Raises `UriRefused`."""
    normal = normalize_uri(uri)
    bare = normal.split("#", 1)[0].split("?", 1)[0]
    return (normal,) if bare == normal else (normal, bare)


def normalize_pattern(pattern: str) -> str:
    """A resource glob in the same spelling as the URIs it is matched against: scheme and host in lower case,
    percent-escapes decoded. Dot segments and slashes are left as written (they may be part of a glob)."""
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    match = _SCHEME.match(body)
    if match is None:
        return pattern
    scheme = match.group(1).lower()
    rest = body[match.end() :]
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = "//" + authority.lower() + slash + path
    with contextlib.suppress(UnicodeDecodeError):  # undecodable: left as written (it then matches nothing decoded)
        rest = unquote_to_bytes(rest).decode("utf-8")
    if scheme == "file" and rest.startswith("//localhost/"):
        rest = "//" + rest[len("//localhost") :]
    elif scheme == "file" and rest.startswith("/") and not rest.startswith("//"):
        rest = "//" + rest
    return ("!" if negated else "") + f"{scheme}:{rest}"


def parent_patterns(pattern: str) -> tuple[str, ...]:
    """For a denied `file:` glob, its directory when that is spelled without wildcards: reading the directory
    would list the denied file. `file:///srv/secret.txt` gives `file:///srv`; `file:///srv/*` gives nothing more
    (its own pattern already covers what it lists) unless the directory is literal; a pattern with a wildcard
    before its last `/` gives nothing."""
    if pattern.startswith("!") or not pattern.startswith("file://"):
        return ()
    path = pattern[len("file://") :].rstrip("/")
    head = path.rsplit("/", 1)[0] if "/" in path else ""
    if any(char in head for char in "*?["):
        return ()
    return (f"file://{head or '/'}",)
