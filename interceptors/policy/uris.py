"""One spelling per resource URI, so that no other spelling of a denied resource gets past the globs.

A server that resolves paths serves `/srv/secret.txt` for `/srv/./secret.txt`, `/srv//secret.txt`,
`/srv/x/../secret.txt` or `/srv/%73ecret.txt`; the policy must judge all of them as that one URI. The
normal form: scheme and host in lower case, a host's trailing dots dropped, `file:` URIs spelled with an
empty authority, the path percent-decoded once, repeated slashes collapsed, `.` and `..` segments resolved
(RFC 3986 §5.2.4, never above the root), and the trailing dots and spaces of each segment removed (what
Windows file systems ignore).

Spellings that a server could read in more than one way are refused rather than guessed at
(`UriRefused`): percent-escapes that decode to more escapes (double encoding), malformed escapes, bytes
that are not UTF-8, control characters (`%00` truncation), backslashes, and a missing scheme.
"""

from __future__ import annotations

import contextlib
import re
from urllib.parse import unquote_to_bytes

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SLASHES = re.compile(r"/{2,}")


class UriRefused(ValueError):
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


def _segments(path: str) -> str:
    """Collapse slashes, resolve dot segments (never above the root), strip trailing dots and spaces."""
    rooted = path.startswith("/")
    parts = _SLASHES.sub("/", path).split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part in (".", ""):
            if last and out:
                out.append("")  # keep a trailing slash: `/dir/` and `/dir/.` name the directory
            continue
        if part == "..":
            if out and out[-1] == "":
                out.pop()
            if out:
                out.pop()
            if last:
                out.append("")
            continue
        stripped = part.rstrip(". ")
        if not stripped:  # a segment of only dots and spaces (`...`, `. .`) names nothing but its parent
            raise UriRefused("a path segment of only dots or spaces")
        out.append(stripped)
    joined = "/".join(out)
    return "/" + joined if rooted else joined


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
    path = _decode(path)
    _check_characters(path + query + fragment + (authority or ""))
    path = _segments(path)
    if scheme == "file":
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
