"""`redact`'s `decode` step: values the payload itself marks as encoded are decoded, redacted and re-encoded.

Only where the payload says a value is encoded — never a base64-looking identifier on its own:

- `base64`, `hex`: string fields of a JSON object that also has `"encoding": "base64"` or `"hex"` (or
  `contentEncoding`, `content_encoding`, `transfer_encoding`, `content_transfer_encoding`; `b64`,
  `base64url` and `base16` are read too). Line-wrapped base64 (equal lines, as the GitHub contents API
  sends it) keeps its wrapping;
- `data_url`: `data:<mime>;base64,<blob>`;
- `k8s_secret`: the `data` map of a Kubernetes `kind: Secret`, as a JSON object or as YAML text (one or
  more documents, or a `List`); each value is redacted under its own key, so key rules apply;
- `url_query`: percent-encoded query values of URLs (`…/path?a=b%40c&…`), redacted as `name=value`;
- `hex` also covers `0x`-prefixed runs of 4 bytes or more.

A value is decoded strictly — canonical base64 (padding and trailing bits as an encoder writes them), hex
in whole bytes, well-formed `%XX` escapes — into UTF-8 text without control characters (tab, line feed
and carriage return aside) and at most `MAX_ENCODED_CHARS` long. Anything else is left to the ordinary
scan. The decoded text goes through the same redaction (so JSON inside is data, and encodings nest up to
`MAX_DEPTH` deep); when that changes it, the result is encoded the same way (alphabet, padding, line
width, letter case, literal characters of a query value), so the payload stays well-formed. The ordinary
scan of the surrounding text sees the decoded spans blanked out: their content has been judged decoded.
Every step is a single left-to-right pass: linear time, memory bounded by the text.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import quopri
import re
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import quote, unquote_to_bytes

from .base import safe_name
from .strategies import DROP

ENCODINGS = ("base64", "hex", "data_url", "k8s_secret", "url_query", "bare")
"""What `decode` can name (`decode: true` is all of them)."""
MAX_ENCODED_CHARS = 1 << 20
"""Longer encoded values are left to the ordinary scan."""
MAX_DEPTH = 3
"""Encodings inside decoded text are decoded this many layers deep."""

UNDECODED: Any = object()
"""`Decoder.field`'s answer for a value it does not decode (the caller carries on as usual)."""

Encode = Callable[[str], str]
Span = tuple[int, int]

MARKER_KEYS = frozenset({"encoding", "content_encoding", "transfer_encoding", "content_transfer_encoding"})
"""Normalised keys whose value can say the other fields of an object are encoded."""
_MARKER_VALUES = {"base64": "base64", "b64": "base64", "base64url": "base64", "base64_url": "base64",
                  "hex": "hex", "base16": "hex"}  # fmt: skip
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_B64_STD = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_B64_URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_QUERY_SAFE = frozenset("!$'()*+,;:@/?~-._")
_DATA_URL = re.compile(
    r"data:[A-Za-z0-9.+/-]*+(?:;[A-Za-z0-9.+-]++=[^;,\s\"'<>]*+)*+;base64,([A-Za-z0-9+/_-]++={0,2}+)"
)
_HEX_0X = re.compile(r"(?<![0-9A-Za-z_])0[xX]((?:[0-9a-fA-F]{2}){4,}+)(?![0-9A-Za-z_])")
_TOKEN_END = re.compile(r"[\s\"'<>`]")
_TOKEN_STOPS = (" ", "\t", "\n", "\r", '"', "'", "<", ">", "`")
_YAML_ENTRY = re.compile(r"( *)((?:- +)?)([A-Za-z0-9_./-]+|\"[^\"]*\"|'[^']*')[ \t]*:(?:[ \t]+(.*))?")
_YAML_SKIP = re.compile(r"[ \t]*(?:#|$)")
# Bare encodings (nothing marks them): runs that could be base64 (possibly wrapped in lines), hex, `%XX` or a
# quoted-printable text with soft line breaks. Only a run whose decoded view is text holding a real detector's
# finding is rewritten; anything else is left to the ordinary scan untouched.
# The cheap prefilter is the shape of *text* encoded: base64 of ASCII text has a letter from I-Z or a-f (the top
# six bits of a printable byte; C or D for a tab or line break) at the start of every quad, hex of ASCII text a
# digit from 2 to 7 before every byte's second digit (or 09, 0a, 0d), gzip's base64 begins `H4sI`. Random
# tokens and digests rarely have either shape. Text in other scripts (UTF-8 with multi-byte characters) has no
# such shape at the quads' starts: a run that fails it is decoded for its first 15 bytes (`_utf8_head`), and
# passes when they are UTF-8 text with a character beyond ASCII (random bytes and binary headers almost never
# are).
_ASCII_B64 = r"(?:(?:[CDI-Za-f][A-Za-z0-9+/_-]{3}){5}|H4sI)"
_BARE_B64 = re.compile(
    r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,2}(?:\r?\n[A-Za-z0-9+/_-]{4,}={0,2})*(?![A-Za-z0-9+/=_-])"
)
_ASCII_B64_AT = re.compile(_ASCII_B64)
# Hex of UTF-8 text: the ASCII bytes above, or a lead byte (c2-f4) and its continuation bytes (80-bf).
_BARE_HEX = re.compile(
    r"(?<![0-9A-Za-z])(?:[2-7][0-9a-fA-F]|0[9aAdD]|[c-fC-F][0-9a-fA-F](?:[89abAB][0-9a-fA-F]){1,3}){10,}"
    r"(?![0-9A-Za-z])"
)
_HEX_HEAD = re.compile(r"[0-9a-fA-F]{20}")
_B64_TEXT_START = frozenset("CDIJKLMNOPQRSTUVWXYZabcdefwxyz0123456789")
"""The first character of base64 of UTF-8 text: the top six bits of a printable ASCII byte or of a lead byte."""
_URLSAFE_TO_STD = str.maketrans("-_", "+/")
# Not text, though valid UTF-8: C1 controls, private use, noncharacters and the replacement character.
_NOT_TEXT = re.compile("[\x80-\x9f\ue000-\uf8ff\ufdd0-\ufdef\ufffd-\uffff]")
_BARE_PCT = re.compile(r"[A-Za-z0-9._~+-]*(?:%[0-9A-Fa-f]{2}[A-Za-z0-9._~+-]*){4,}")
_SHAPE_AT = re.compile(_ASCII_B64 + r"|(?:[2-7][0-9a-fA-F]|0[9aAdD]){10}")
_PCT4 = re.compile(r"(?:%[0-9A-Fa-f]{2}){4}")
# A token wrapped in lines of one width (a terminal or a log at 40, 64 or 76 columns): a full line of 32 token
# characters or more, then a line break and more token characters. The runs (`_WRAPPED`) are cut to the lines of
# the first line's width and the shorter last line (`_wrapped_runs`).
_WRAP_CHARS = r"[A-Za-z0-9_+/=.~:@$!%&?#-]"
_WRAP_SET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.~:@$!%&?#-")
_WRAPPED = re.compile(r"(?m)^" + _WRAP_CHARS + r"{32,4096}+(?:\r?\n" + _WRAP_CHARS + r"{1,4096}+)+$")
_LABEL_LINE = re.compile(r"(?m)^[A-Za-z_][\w.-]*[ \t]*[=:](?=[^=\s])")
"""A line that assigns a value of its own (`NAME=value`, `key: value`; base64 padding at a line's end is none)."""
_RUN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")


class _WrapTable(dict[int, str]):
    """`str.translate` table: a token character to `a`, a line break to `\\n`, a backslash to itself (JSON escapes),
    anything else to a space (filled on first use)."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        mark = self[code] = "a" if char in _WRAP_SET else "\n" if char in "\r\n" else "\\" if char == "\\" else " "
        return mark


_WRAP_TABLE = _WrapTable()
_WRAP_PROBE = "a" * 32


def _wrapped_gate(text: str, escaped: bool) -> bool:
    """Whether `text` has 32 token characters or more, a line break and another token character (`escaped`: `text`
    is JSON, where a line break is written `\\n` or `\\r\\n`): one translation and substring searches, at C speed."""
    marks = text.translate(_WRAP_TABLE)
    if not escaped:
        return marks.find(_WRAP_PROBE + "\na") >= 0 or marks.find(_WRAP_PROBE + "\n\na") >= 0
    probe = _WRAP_PROBE + "\\"
    at = marks.find(probe)
    while at >= 0:
        after = at + len(probe) + (1 if text.startswith("n", at + len(probe)) else 3)  # `\n` or `\r\n`
        if text.startswith(("n", "r\\n"), at + len(probe)) and text[after : after + 1] in _WRAP_SET:
            return True
        at = marks.find(probe, at + len(probe))
    return False


class _RunTable(dict[int, str]):
    """`str.translate` table: a base64 character to `a`, anything else to a space (filled on first use)."""

    def __missing__(self, code: int) -> str:
        mark = self[code] = "a" if chr(code) in _RUN_CHARS else " "
        return mark


_RUN_TABLE = _RunTable()
_LONG = "a" * 20


def _text_head(raw: bytes) -> bool:
    """Whether `raw` (the first bytes of an encoded run) is UTF-8 text with a character beyond ASCII: a character
    cut at the end is allowed, controls (tab and line breaks aside), C1 controls and private use are not."""
    try:
        head = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.reason != "unexpected end of data":
            return False
        head = raw[: error.start].decode("utf-8")
    return not head.isascii() and _CONTROL.search(head) is None and _NOT_TEXT.search(head) is None


def _utf8_head(text: str, start: int) -> bool:
    """Whether the 20 characters at `start` (base64 or hex) decode to the start of UTF-8 text beyond ASCII."""
    head = text[start : start + 20]
    if len(head) < 20:
        return False
    if _HEX_HEAD.match(head) is not None and _text_head(bytes.fromhex(head)):
        return True
    if head[0] not in _B64_TEXT_START:
        return False
    if "-" in head or "_" in head:
        head = head.translate(_URLSAFE_TO_STD)
    try:
        raw = binascii.a2b_base64(head)
    except binascii.Error:
        return False
    return _text_head(raw)


def _shaped_run(text: str, escaped: bool) -> bool:
    """Whether a run of 20 base64 characters or more in `text` starts with the shape of encoded text (ASCII by the
    quads' starts, else UTF-8 by its first bytes; `escaped`: `text` is JSON, where a run after a line break starts
    with the `n` of `\\n`). The runs are found by substring search in a translated copy (C speed); only their
    starts are matched."""
    marks = text.translate(_RUN_TABLE)
    start = marks.find(_LONG)
    shape = _SHAPE_AT.match
    while start >= 0:
        if shape(text, start) is not None or _utf8_head(text, start):
            return True
        if (
            escaped
            and start > 0
            and text[start - 1] == "\\"
            and (shape(text, start + 1) is not None or _utf8_head(text, start + 1))
        ):
            return True
        end = marks.find(" ", start)
        if end < 0:
            return False
        start = marks.find(_LONG, end)
    return False


def _bare_gate(text: str) -> bool:
    """Whether `text` could hold a bare encoding of text (cheap: literals first, then the long runs' starts)."""
    if "%" in text and _PCT4.search(text) is not None:
        return True
    if "=\n" in text or "=\r\n" in text:
        return True
    if "\n" in text and _wrapped_gate(text, False):
        return True
    return len(text) >= 20 and _shaped_run(text, False)


def _bare_gate_json(raw: str) -> bool:
    """`_bare_gate` on a payload's JSON text."""
    if ("%" in raw and _PCT4.search(raw) is not None) or "=\\n" in raw or "=\\r\\n" in raw:
        return True
    if "\\n" in raw and _wrapped_gate(raw, True):
        return True
    return _shaped_run(raw, True)


_GATE_MEMO = 65_536
_GATE_MEMO_CHARS = 4096
"""Strings whose gate answer a decoder remembers (cleared when full)."""


_MAX_GUNZIP = 1 << 20
_SECRET_CATEGORIES = frozenset({"secret", "credential"})


class Run(Protocol):
    """What the decoder needs from a redaction run (`redactor._Run`)."""

    depth: int
    red: Any

    def nested(self, decoded: str, key: str | None) -> Any:
        """The redacted `decoded` text (alone, or as the value of `key`), or DROP."""
        ...

    def mapping(self, data: dict[Any, Any], encoded: Mapping[Any, str] | None = None) -> Any: ...


# --- codecs: decode strictly, and give back an encoder of the same style ---------------------------------


def _texty(text: str) -> bool:
    return _CONTROL.search(text) is None


def _utf8(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text and _texty(text) else None


def decode_base64(value: str) -> tuple[str, Encode] | None:
    """Canonical base64 (standard or URL-safe, padded or not, optionally wrapped in equal lines) of UTF-8 text."""
    if not value or len(value) > MAX_ENCODED_CHARS:
        return None
    body, newline, width, trailing = value, "", 0, ""
    if "\n" in value:
        newline = "\r\n" if "\r\n" in value else "\n"
        core = value
        if core.endswith(newline):
            trailing, core = newline, core[: -len(newline)]
        lines = core.split(newline)
        width = len(lines[0])
        if width == 0 or width % 4:
            return None
        body = "".join(lines)
    urlsafe = "-" in body or "_" in body
    if (_B64_URL if urlsafe else _B64_STD).fullmatch(body) is None:
        return None
    if len(body) % 4 == 1 or (body.endswith("=") and len(body) % 4):
        return None
    padded = len(body) % 4 == 0  # whole quads: written with padding (or needing none); else: unpadded
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_" if urlsafe else None, validate=True)
    except (binascii.Error, ValueError):
        return None

    def encode(data: bytes) -> str:
        out = (base64.urlsafe_b64encode(data) if urlsafe else base64.b64encode(data)).decode("ascii")
        if not padded:
            out = out.rstrip("=")
        if width:
            out = newline.join(out[i : i + width] for i in range(0, len(out), width))
        return out + trailing

    if encode(raw) != value:  # not as an encoder writes it (stray bits, odd wrapping): not ours to rewrite
        return None
    text = _utf8(raw)
    if text is None:
        return None
    return text, lambda new: encode(new.encode("utf-8"))


def decode_hex(value: str) -> tuple[str, Encode] | None:
    """Hex digits in whole bytes (one letter case) of UTF-8 text."""
    if not value or len(value) > MAX_ENCODED_CHARS or _HEX.fullmatch(value) is None:
        return None
    upper = value != value.lower()
    if upper and value != value.upper():
        return None
    text = _utf8(bytes.fromhex(value))
    if text is None:
        return None

    def encode(new: str) -> str:
        out = new.encode("utf-8").hex()
        return out.upper() if upper else out

    return text, encode


def decode_percent(value: str) -> tuple[str, Encode] | None:
    """A query value with `%XX` escapes (all well-formed) of UTF-8 text; literal characters stay literal."""
    if len(value) > MAX_ENCODED_CHARS:
        return None
    escapes = value.count("%")
    if not escapes or sum(1 for _ in _PERCENT.finditer(value)) != escapes:
        return None
    text = _utf8(unquote_to_bytes(value))
    if text is None:
        return None
    safe = "".join(sorted(_QUERY_SAFE.intersection(value)))
    return text, lambda new: quote(new, safe=safe)


def decode_gzip_base64(value: str) -> tuple[str, Encode] | None:
    """Base64 of gzip-compressed UTF-8 text (at most `MAX_ENCODED_CHARS` once inflated)."""
    if len(value) > MAX_ENCODED_CHARS or not value.startswith("H4sI"):
        return None
    try:
        raw = base64.b64decode(value, validate=True)
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        data = inflater.decompress(raw, _MAX_GUNZIP)
    except (binascii.Error, ValueError, zlib.error):
        return None
    if inflater.unconsumed_tail:
        return None
    text = _utf8(data)
    if text is None:
        return None
    return text, lambda new: base64.b64encode(gzip.compress(new.encode("utf-8"), mtime=0)).decode("ascii")


def decode_quoted_printable(value: str) -> tuple[str, Encode] | None:
    """Quoted-printable UTF-8 text that an encoder writes back exactly as it came."""
    if len(value) > MAX_ENCODED_CHARS:
        return None
    try:
        raw = quopri.decodestring(value.encode("ascii"))
    except (UnicodeEncodeError, ValueError, binascii.Error):
        return None
    text = _utf8(raw)
    if text is None or quopri.encodestring(raw).decode("ascii") != value:
        return None
    return text, lambda new: quopri.encodestring(new.encode("utf-8")).decode("ascii")


def decode_wrapped(value: str) -> tuple[str, Encode] | None:
    """Token characters wrapped in lines of one width (the last line shorter or equal): the lines joined, and
    written back wrapped at the same width."""
    if "\n" not in value or len(value) > MAX_ENCODED_CHARS:
        return None
    newline = "\r\n" if "\r\n" in value else "\n"
    lines = value.split(newline)
    width = len(lines[0])
    if (
        len(lines) < 2
        or width < 32
        or any(len(line) != width for line in lines[:-1])
        or not 0 < len(lines[-1]) <= width
    ):
        return None

    def encode(new: str) -> str:
        return newline.join(new[i : i + width] for i in range(0, len(new), width)) if new else new

    return "".join(lines), encode


def _wrapped_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """`(start, end, value)` of each run of lines of one width (32 or more) and a shorter or equal last line."""
    for match in _WRAPPED.finditer(text):
        block = match.group(0)
        newline = "\r\n" if "\r\n" in block else "\n"
        lines = block.split(newline)
        at = match.start()
        i = 0
        while i < len(lines) - 1:
            width = len(lines[i])
            j = i
            while j + 1 < len(lines) and len(lines[j + 1]) == width:
                j += 1
            if width >= 32 and j + 1 < len(lines) and len(lines[j + 1]) < width:
                j += 1  # the shorter last line
            if j > i and width >= 32:
                size = sum(len(line) for line in lines[i : j + 1]) + len(newline) * (j - i)
                yield at, at + size, text[at : at + size]
            at += sum(len(line) + len(newline) for line in lines[i : j + 1])
            i = j + 1


def _crosses_a_line(scanner: Any, joined: str, width: int, lines: str) -> bool:
    """Whether a real detector finds a secret in the joined lines that runs across a line break and that the same
    detector does not already find starting there in the lines as they are (a token of variable length that ends a
    line, then a next line that is something else: joining would glue the two and hide the next line's secret),
    or that runs on to the end of the last line (then it takes the lines after it whole: nothing in them hides) when
    no line after the first is an assignment of its own (`BACKUP_ENABLED=true` after a labelled key is a setting)."""
    crossing = [
        f
        for f in scanner.scan(joined)
        if f.detector.category in _SECRET_CATEGORIES and f.start // width != (f.end - 1) // width
    ]
    if not crossing:
        return False
    whole = {(f.start, f.detector.name) for f in scanner.scan(lines) if f.start < width}
    if any((f.start, f.detector.name) not in whole for f in crossing):
        return True
    return any(f.end == len(joined) for f in crossing) and _LABEL_LINE.search(lines, lines.index("\n") + 1) is None


def _bare_codec(how: str, value: str) -> tuple[str, Encode] | None:
    if how == "bare_wrap":
        return decode_wrapped(value)
    if how == "bare_hex":
        return decode_hex(value)
    if how == "bare_pct":
        return decode_percent(value)
    if how == "bare_qp":
        return decode_quoted_printable(value)
    codec = decode_base64(value)
    if codec is None and "\n" not in value:
        codec = decode_gzip_base64(value)
    return codec


def _bare_text(how: str, value: str) -> tuple[str, Encode] | None:
    """`_bare_codec`, when what it decodes to reads as text (no C1 controls, private use or noncharacters)."""
    codec = _bare_codec(how, value)
    if codec is None or (not codec[0].isascii() and _NOT_TEXT.search(codec[0]) is not None):
        return None
    return codec


def _holds_secret(scanner: Any, text: str, depth: int) -> bool:
    """Whether a real detector (no entropy fallback) finds a secret in `text`, or in a bare encoding inside it
    (`depth` layers at most): the decoded view of a bare run is used only then."""
    if any(f.detector.category in _SECRET_CATEGORIES for f in scanner.scan(text)):
        return True
    if depth <= 0 or not _bare_gate(text):
        return False
    for _, _, how, value in _bare_candidates(text):
        codec = _bare_text(how, value)
        if codec is not None and _holds_secret(scanner, codec[0], depth - 1):
            return True
    return False


def _bare_candidates(text: str) -> Iterator[tuple[int, int, str, str]]:
    """`(start, end, how, value)` of the runs of `text` that could be a bare encoding."""
    for match in _BARE_B64.finditer(text):
        start = match.start()
        if _ASCII_B64_AT.match(text, start) is None and not _utf8_head(text, start):
            continue
        value = match.group(0)
        yield start, match.end(), "bare_b64", value
        if "\n" in value:  # wrapped lines that do not decode together: the first line alone
            first = value.split("\n", 1)[0].rstrip("\r")
            yield match.start(), match.start() + len(first), "bare_b64", first
    if "%" in text:
        for match in _BARE_PCT.finditer(text):
            yield match.start(), match.end(), "bare_pct", match.group(0)
    for match in _BARE_HEX.finditer(text):
        yield match.start(), match.end(), "bare_hex", match.group(0)
    if "=\n" in text or "=\r\n" in text:
        yield 0, len(text), "bare_qp", text
    if "\n" in text and _wrapped_gate(text, False):
        for start, end, value in _wrapped_runs(text):
            yield start, end, "bare_wrap", value


# --- where the payload says a value is encoded -----------------------------------------------------------


def _decoded_value(run: Run, key: str | None, codec: tuple[str, Encode] | None) -> Any:
    """The encoded value's replacement: UNDECODED, DROP, or the re-encoded redacted text (None: unchanged)."""
    if codec is None:
        return UNDECODED
    text, encode = codec
    new = run.nested(text, key)
    if new is DROP:
        return DROP
    if not isinstance(new, str):
        new = str(new)
    return None if new == text else encode(new)


class Decoder:
    """The `decode` option of one redactor: which encodings it reads."""

    __slots__ = ("_gate_memo", "bare", "data_url", "encodings", "hex", "k8s", "marked_fields", "query")

    def __init__(self, encodings: frozenset[str]) -> None:
        self.encodings = encodings
        self.marked_fields = bool(encodings & {"base64", "hex"})
        self.data_url = "data_url" in encodings
        self.hex = "hex" in encodings
        self.k8s = "k8s_secret" in encodings
        self.query = "url_query" in encodings
        self.bare = "bare" in encodings
        self._gate_memo: dict[str, bool] = {}

    @classmethod
    def from_option(cls, value: Any, path: str) -> Decoder | None:
        """`true` (every encoding), `false`/null (none), or a list of names from `ENCODINGS`."""
        if value is True:
            return cls(frozenset(ENCODINGS))
        if value is False or value is None:
            return None
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{path}: must be true, false or a list of encodings ({', '.join(ENCODINGS)})")
        unknown = [v for v in value if v not in ENCODINGS]
        if unknown:
            names = ", ".join(safe_name(v) for v in unknown)
            raise ValueError(f"{path}: unknown encoding(s) {names} (known: {', '.join(ENCODINGS)})")
        return cls(frozenset(value)) if value else None

    def may_apply(self, folded: str, raw: str | None = None) -> bool:
        """Whether a payload (its JSON text, lower-cased; `raw`: as it is, for the case-sensitive shapes of bare
        encodings) holds anything this decoder reads."""
        return (
            (self.marked_fields and "encoding" in folded)
            or (self.k8s and "secret" in folded and "kind" in folded)
            or (self.data_url and ";base64," in folded)
            or (self.hex and "0x" in folded)
            or (self.query and "%" in folded and "?" in folded)
            or (self.bare and _bare_gate_json(raw if raw is not None else folded))
        )

    # JSON objects ---------------------------------------------------------------------------------------

    def fields(
        self, data: dict[Any, Any], normalized: Mapping[Any, str], siblings: frozenset[str]
    ) -> dict[Any, str] | None:
        """The keys of `data` holding encoded values, and how (`base64`, `hex`, `k8s_secret`: a map of base64)."""
        secret = self.k8s and data.get("kind") == "Secret" and isinstance(data.get("data"), dict)
        if not secret and (not self.marked_fields or siblings.isdisjoint(MARKER_KEYS)):
            return None
        out: dict[Any, str] = {"data": "k8s_secret"} if secret else {}
        for key, norm in normalized.items():
            if norm not in MARKER_KEYS:
                continue
            marker = data[key]
            how = _MARKER_VALUES.get(marker.strip().lower().replace("-", "_")) if isinstance(marker, str) else None
            if how is None or how not in self.encodings:
                continue
            for other, item in data.items():
                if other != key and isinstance(item, str) and other not in out:
                    out[other] = how
        return out or None

    def field(self, run: Run, key: Any, item: Any, how: str) -> Any:
        """The replacement of one marked field, DROP, or UNDECODED (not decoded: redact it as usual)."""
        if run.depth >= MAX_DEPTH:
            return UNDECODED
        if how == "k8s_secret":
            if not isinstance(item, dict):
                return UNDECODED
            return run.mapping(item, {k: "base64" for k, v in item.items() if isinstance(v, str)})
        if not isinstance(item, str):
            return UNDECODED
        codec = decode_base64(item) if how == "base64" else decode_hex(item)
        new = _decoded_value(run, key if isinstance(key, str) else None, codec)
        return item if new is None else new

    # text ---------------------------------------------------------------------------------------------------

    def marked(self, text: str) -> bool:
        """A cheap look: could `text` hold a data URL, a `0x` run, a Secret manifest or an encoded query?"""
        return (
            (self.data_url and ";base64," in text)
            or (self.hex and ("0x" in text or "0X" in text))
            or (self.k8s and "Secret" in text and "data:" in text)
            or (self.query and "%" in text and "?" in text)
            or (self.bare and self._bare_marked(text))
        )

    def _bare_marked(self, text: str) -> bool:
        """`_bare_gate`, remembered per string (the same strings recur across the parts of results)."""
        if len(text) > _GATE_MEMO_CHARS:  # a long text is looked at once; only short ones are kept
            return _bare_gate(text)
        known = self._gate_memo.get(text)
        if known is None:
            if len(self._gate_memo) >= _GATE_MEMO:
                self._gate_memo.clear()
            known = self._gate_memo[text] = _bare_gate(text)
        return known

    def rewrite(self, run: Run, text: str) -> tuple[Any, list[Span]] | None:
        """`text` with its encoded spans redacted (or DROP), and the spans that were decoded (in the new text).

        None when nothing in `text` decodes (the caller scans it as usual)."""
        if run.depth >= MAX_DEPTH:
            return None
        candidates = list(self._candidates(text))
        if not candidates:
            return None
        candidates.sort(key=lambda c: (c[0], -c[1]))
        parts: list[str] = []
        owned: list[Span] = []
        last = 0
        size = 0
        for start, end, how, key in candidates:
            if start < last:
                continue  # overlaps a span already taken
            new = self._span(run, text[start:end], how, key)
            if new is UNDECODED:
                continue
            if new is DROP:
                return DROP, []
            replacement = text[start:end] if new is None else new
            parts.append(text[last:start])
            size += start - last
            owned.append((size, size + len(replacement)))
            parts.append(replacement)
            size += len(replacement)
            last = end
        if not owned:
            return None
        parts.append(text[last:])
        new_text = "".join(parts)
        return (text if new_text == text else new_text), owned

    def _span(self, run: Run, value: str, how: str, key: str | None) -> Any:
        if how == "bare_wrap":
            codec = decode_wrapped(value)
            width = value.index("\n") - value.endswith("\r", 0, value.index("\n"))
            if codec is None or not _crosses_a_line(run.red.scanner.without_fallback(), codec[0], width, value):
                return UNDECODED  # nothing runs across a line break: the ordinary scan reads each line
            return _decoded_value(run, None, codec)
        if how.startswith("bare_"):
            codec = _bare_text(how, value)
            if codec is None or not _holds_secret(run.red.scanner.without_fallback(), codec[0], MAX_DEPTH - 1):
                return UNDECODED  # not text, or nothing a real detector finds: the ordinary scan reads it as it is
            return _decoded_value(run, None, codec)
        if how == "url_query":
            codec = decode_percent(value)
            if codec is None or not key:
                return _decoded_value(run, None, codec)
            decoded, encode = codec
            labelled = run.nested(f"{key}={decoded}", None)  # the name is context: `password=…`
            if labelled is DROP:
                return DROP
            if isinstance(labelled, str) and labelled.startswith(f"{key}="):
                new = labelled[len(key) + 1 :]
                return None if new == decoded else encode(new)
            return _decoded_value(run, None, codec)
        if how == "hex":
            return _decoded_value(run, None, decode_hex(value))
        return _decoded_value(run, key if how == "k8s_secret" else None, decode_base64(value))

    def _candidates(self, text: str) -> Iterator[tuple[int, int, str, str | None]]:
        """`(start, end, how, key)` of every value `text` marks as encoded, in no particular order."""
        if self.data_url and ";base64," in text:
            for match in _DATA_URL.finditer(text):
                yield match.start(1), match.end(1), "data_url", None
        if self.hex and ("0x" in text or "0X" in text):
            for match in _HEX_0X.finditer(text):
                yield match.start(1), match.end(1), "hex", None
        if self.k8s and "Secret" in text and "data:" in text:
            yield from _k8s_yaml_values(text)
        if self.query and "%" in text and "?" in text:
            yield from _query_values(text)
        if self.bare and _bare_gate(text):
            for start, end, how, _ in _bare_candidates(text):
                yield start, end, how, None


# --- percent-encoded query values ------------------------------------------------------------------------


def _query_values(text: str) -> Iterator[tuple[int, int, str, str | None]]:
    """Values holding `%` escapes in the query of each URL-like token (one with a `/` before its `?`).

    Each character is looked at a bounded number of times: tokens are visited left to right, once."""
    done = 0
    size = len(text)
    while done < size:
        mark = text.find("?", done)
        if mark < 0:
            return
        start = done
        for stop in _TOKEN_STOPS:
            at = text.rfind(stop, done, mark)
            if at >= start:
                start = at + 1
        found = _TOKEN_END.search(text, mark)
        end = found.start() if found is not None else size
        done = end + 1
        if "/" not in text[start:mark]:
            continue
        hash_at = text.find("#", mark, end)
        query_end = hash_at if hash_at >= 0 else end
        at = mark + 1
        while at < query_end:
            amp = text.find("&", at, query_end)
            piece_end = amp if amp >= 0 else query_end
            equals = text.find("=", at, piece_end)
            if equals > at and text.find("%", equals, piece_end) >= 0:
                name = text[at:equals]
                plain = decode_percent(name)
                yield equals + 1, piece_end, "url_query", plain[0] if plain is not None else name
            at = piece_end + 1


# --- Kubernetes Secret manifests as YAML text ------------------------------------------------------------


class _Frame:
    """One YAML mapping being read: its key column, whether it is a Secret, and its `data` entries."""

    __slots__ = ("column", "data_of", "entries", "open_data", "secret")

    def __init__(self, column: int, parent: _Frame | None) -> None:
        self.column = column
        self.secret = False
        self.open_data = False
        self.entries: list[tuple[int, int, str]] = []
        self.data_of = parent if parent is not None and parent.open_data else None


def _k8s_yaml_values(text: str) -> Iterator[tuple[int, int, str, str | None]]:
    """The values of the `data` map of every `kind: Secret` mapping in YAML text (block style), in one pass."""
    stack: list[_Frame] = []
    found: list[tuple[int, int, str]] = []
    skip_above: int | None = None  # inside a block scalar: lines indented deeper than this are its text
    offset = 0

    def close(frame: _Frame) -> None:
        if frame.secret:
            found.extend(frame.entries)

    for raw_line in text.split("\n"):
        line_start, offset = offset, offset + len(raw_line) + 1
        line = raw_line[:-1] if raw_line.endswith("\r") else raw_line
        if _YAML_SKIP.match(line):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if skip_above is not None:
            if indent > skip_above:
                continue
            skip_above = None
        if line in ("---", "...") or line.startswith(("--- ", "... ")):
            while stack:
                close(stack.pop())
            continue
        match = _YAML_ENTRY.match(line)
        if match is None:
            while stack and stack[-1].column > indent:
                close(stack.pop())
            continue
        column = len(match.group(1)) + len(match.group(2))
        if match.group(2):
            while stack and stack[-1].column >= column:
                close(stack.pop())
        else:
            while stack and stack[-1].column > column:
                close(stack.pop())
        if not stack or stack[-1].column != column:
            stack.append(_Frame(column, stack[-1] if stack else None))
        frame = stack[-1]
        key = match.group(3)
        if key[:1] in ('"', "'"):
            key = key[1:-1]
        raw_value = match.group(4) or ""
        value = raw_value.rstrip()
        frame.open_data = key == "data" and not value
        if value[:1] in ("|", ">"):
            skip_above = column
            continue
        if key == "kind" and value.strip("\"'") == "Secret":
            frame.secret = True
        if frame.data_of is not None and value:
            start = line_start + match.start(4)
            end = start + len(value)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in ('"', "'"):
                start, end = start + 1, end - 1
            frame.data_of.entries.append((start, end, key))
    while stack:
        close(stack.pop())
    for start, end, key in found:
        yield start, end, "k8s_secret", key


__all__ = [
    "ENCODINGS",
    "MARKER_KEYS",
    "MAX_DEPTH",
    "MAX_ENCODED_CHARS",
    "UNDECODED",
    "Decoder",
    "decode_base64",
    "decode_gzip_base64",
    "decode_hex",
    "decode_percent",
    "decode_quoted_printable",
]
