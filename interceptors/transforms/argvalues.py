"""The request guard's own reading of argument values: secrets with no label a detector could see.

The output redactor judges documents, where a lone random run is usually a digest, an id or a blob, so its entropy
fallback scores 0.5 and the guard (at 0.75) never acts on it. A tool argument is different: a model fills it with
one value, and when that value is, in full, one random token of a credential's alphabet, it is far more likely a
key lifted from a result or the user than anything a tool needs. Two rules, both only for strings that are a
member's value (an argument, or a member of JSON inside one):

- **bare**: the whole value (trimmed, quotes aside) is one token with the statistics of random text
  (`looks_random`, the redactor's measured rule; 16 to 23 characters need all of lower case, upper case and
  digits), and it is none of what opaque non-secrets are: a GUID, hex (digests, commit ids), digits, a URL, a
  path, an e-mail address, a host name, a dotted name, base64 of text (judged by what it says), a placeholder or
  a documentation value. A member whose name says what the value is (`file_id`, `cursor`, `sha256`, `etag`, …)
  is left alone: ids and page tokens are opaque by design.
- **labelled**: a line of the value holds a credential's label (`pass`, `pwd`, `secret`, `token`, `key`, `auth`,
  `credential`, `nonce`, `salt`, `IDENTIFIED BY`) then `:`, `=` or a blank, then a value that is not code, a
  template, a placeholder or a word: 8+ characters with lower case, upper case and digits (or 12+ dense
  characters with letters and digits; 16+ hex digits in one case need 3 bits per character, hex's alphabet being
  16 symbols, not the 3.3 others need).

- **shaped**: a secret known by its shape in a line (`shaped_secret`): a GUID in a `<SERVICE>_KEY` constant, a
  key as an array of byte literals, an `Authorization:` scheme's credentials, `-u user:password`, a password's
  literal fallback, a product key after a label, a Jira or Confluence Data Center personal access token by what its
  base64 spells (12 digits, `:`, 20 random bytes), inside a longer base64 run too.
- **vendor** (only where the guard is asked to be strict: the channels that carry no documents, `vendor_token`): a
  token in a vendor's format, or a vendor's prefix then a token's characters, whatever its body looks like; the
  detectors spare one whose body reads like documentation's sample (`ghp_0000…`), as the output path must.

Where no name was given (a URI's views), a line with blanks or quotes gets the short-line rule and a query
member is judged under its own name, and each line of a text of several lines (a URI's parts, one per line) is
judged alone; a one-token value stays an id unless a vendor's prefix or a secret's
alphabet marks it (`lone_secret`: `|`, `+`, upper case and digits only), and what it spells decoded (or a base64
token that spells a line of text, whole) is judged as a member's value (`DECODED_KEY`).

Each text is also read decoded (`%XX`, base64, hex, gzip then base64, JSON inside a string, terminal codes
stripped and `\\xNN` escapes read, escaped quotes read layer by layer), the views the redactor reads, so an encoded
value is judged as what it spells. Nothing here runs unless the guard's detectors found nothing: it only adds refusals.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any
from urllib.parse import unquote

import orjson

from .assignments import LABEL_PAIR
from .catalog import BUILTIN_BY_NAME, BUILTIN_DETECTORS, GUID
from .context import GENERIC, decoded_binary, digest_or_nonce, public_object_id
from .detectors import Detector, Scanner
from .docvalues import ciphertext, documentation_value
from .encoded import decode_base64, decode_gzip_base64, decode_hex, decode_percent
from .entities import fold_for_hints, is_placeholder, is_template, looks_random, normalize_key, shannon_entropy
from .triepattern import literal_alternation

ENTITY = "secret_value"
"""What the rules report (the entropy fallback's entity: the same kind of finding, judged in its place)."""

MAX_DEPTH = 4
"""Decoded and nested views are followed this many layers deep."""
MIN_TEXT = 8
"""Nothing these rules report fits in fewer characters (and a decoded view is shorter than its encoding)."""
MAX_TEXT = 1 << 16
"""A text longer than this is left to the detectors (a document, not a value)."""

OPAQUE_KEY = re.compile(
    r"(?:^|_)(?:ids?|uuid|guid|hash|hashes|digest|checksum|fingerprint|sha\d*|md5|etag|cursor|page|offset|next|commit|rev|"
    r"revision|version|path|paths|file|files|filename|url|uri|href|link|ref|slug|signature_id|"
    r"nonce_id|request|trace|span|handle)$"
)
"""Member names (normalised: `fileId` → `file_id`) whose values are opaque by design: the bare rule skips them."""

_GUID = re.compile(r"\{?" + GUID + r"\}?")
_HEX_OR_DIGITS = re.compile(r"(?:0x)?[0-9A-Fa-f]+|[0-9]+")
_EMAIL = re.compile(r"[^@\s]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_HOST = re.compile(r"(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}(?::\d{1,5})?")
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:[.:]{1,2}[A-Za-z_$][\w$]*)+(?:\(\))?")
_BARE = re.compile(r"[A-Za-z0-9+/_.|:~-]+={0,2}")
"""A bare token: the entropy fallback's alphabet, and the separators of an id joined to a secret."""
_TOKEN_PARTS = re.compile(r"[.|:~]")
_SHORT_ALPHABET = re.compile(r"[A-Za-z0-9_-]+")
"""A token of 16 to 23 characters is judged only in this alphabet (`/` and `:` join names and paths)."""
_BASE32 = re.compile(r"[A-Z2-7]{16,128}={0,6}")
_ONE_CASE = re.compile(r"[A-Z0-9]{32,1024}")
_LONG_PART = re.compile(r"(?:^|[.:])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{32,}(?:$|[.:])")
KEY_IDS = ("aws_access_key_id", "sumologic_access_id")
"""Credentials' public halves: the ids that name a key (`AKIA…`, `su…`). Results mask them (category `credential`),
but the guard lets them pass by default (its default `disabled_detectors`): tools that manage keys take them as
arguments, and the key's secret half is a `secret` the guard refuses. These rules spare what they match too."""


def names_a_key(value: str) -> bool:
    """Whether `value` is, whole, what one of the `KEY_IDS` detectors matches (an AWS access key id)."""
    for name in KEY_IDS:
        detector = BUILTIN_BY_NAME.get(name)
        if detector is not None and detector.pattern.fullmatch(value) is not None:
            return True
    return False


_FOREIGN_ASCII = "passwort|kennwort|senha|wachtwoord|mot de passe"
_FOREIGN_OTHER = "비밀번호|비번|암호|패스워드|パスワード|密码|密碼|口令|пароль|contraseña|hasło"
FOREIGN_PASSWORD_WORDS = _FOREIGN_ASCII + "|" + _FOREIGN_OTHER
"""`password` in other languages (lower case): a label as good as the English word."""

_SPLIT = re.compile(r"[\s\"'`,;=(){}\[\]<>]+")
MAX_LINE = 200
"""A one-line value this short is read token by token (longer text is a document: the detectors' call)."""
_LABEL = re.compile(  # (after a Korean label word, Hangul words may stand where a separator would)
    r"(?i)(?:(?<![A-Za-z0-9+])|(?<=[_.-])|(?-i:(?<=[a-z])(?=[A-Z])|(?<=[A-Z]{2})(?=[a-z])))"  # a label word
    # starts a name, follows `_`, `.`, `-` in one, or starts a camelCase part (`adminPass`, `ANYpw`, `APIkey`)
    r"(?:" + FOREIGN_PASSWORD_WORDS + r"|pa{0,2}s{0,2}wo?r?s?d|pa?ss(?:phrase)?|pw|p/w|secret|token|api[_-]?key|key|"
    r"authori[sz]ation|authentication|auth|credentials?|nonce|salt|session|identified[ \t]+by)"
    r"(?P<tail>[A-Za-z0-9_.-]{0,24}?)(?:\([A-Za-z0-9_.-]{1,24}\)|\))?"
    r"(?P<gap>(?:[ \t]{1,2}for[ \t]{1,2}[A-Za-z]{1,16}|,[A-Za-z]{1,12})?)"
    r"[ \t]{0,3}[\"']?[ \t]{0,3}(?P<sep>:=|:{1,3}=?|=>|!?==?=?|[ \t]|/|[\uac00-\ud7a3]{1,6}[ \t]{0,2}[:=]?)"
    r"[ \t]{0,3}(?:[bBuU](?=[\"']))?[\"'(]?"
    r"(?P<value>[^\s\"'`<>;,(){}\[\]]{8,1024})(?![^\s\"'`<>;,(){}\[\]])"
)
_NOT_A_SECRET_LABEL = re.compile(
    r"(?i)public|publish|csrf|xsrf|authenticity|schema|store|file|vault|select|mesh|name|path|url|type|size|len|mask|"
    r"hash|format|algo|dir|prefix|id$|_id|length|count|word_?list|pattern|regex|timeout|expir|ttl"
)
_NOT_SECRET_BEFORE = re.compile(
    r"(?i)public|publish|pub_?key|csrf|xsrf|authenticity|anti.?forgery|(?:id|Id|ID|sha\d*|hash|digest|checksum|nonce|image/\w+)"
    r"[\"'\s]*[:=]+[\s\"']*$"
)
"""A label right before a token that names it public, per-request, an id, a digest or an image (a `nonce` is left to
the labelled rule, which knows a page's CSP nonce from a protocol's)."""
_CODE = re.compile(
    r"[(){}\[\]<>\\`]|\$(?=[A-Za-z_{(])|^(?:self|this|os|process|env|config|settings|args|kwargs|params|options)\."
)
"""Code or a template in a value: brackets, a backslash, a variable (`$NAME`, `${…}`, `$(…)`; a `$` before anything
else is a password's character), a member of a well-known object."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_]*[0-9]?")
_LETTER_RUN = re.compile(r"[A-Z]?[a-z]{4,}|[A-Z]{5,}")
_FIVE_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xz]{5}", re.IGNORECASE)
_VENDOR_PREFIX = re.compile(r"[A-Za-z]{2,10}[0-9]{0,2}[_-]")


def _wordy(text: str) -> int:
    """How many characters of `text` are in pronounceable letter runs (a quarter to two thirds vowels, no five
    consonants in a row): words and names have many, random letters few."""
    size = 0
    for run in _LETTER_RUN.findall(text):
        vowels = sum(c in "aeiouyAEIOUY" for c in run)
        if 0.25 <= vowels / len(run) <= 0.67 and not _FIVE_CONSONANTS.search(run):
            size += len(run)
    return size


def _host(text: str) -> bool:
    """A host name as people write one: dotted labels in one letter case (`api.example.com`)."""
    return (text.islower() or text.isupper()) and _HOST.fullmatch(text) is not None


def _classes(text: str) -> tuple[bool, bool, bool]:
    return (any(c.islower() for c in text), any(c.isupper() for c in text), any(c.isdigit() for c in text))


ADDRESS_KEY = re.compile(r"(?:^|_)(?:path|paths|filename|url|uri|href|link|slug|name)$")
"""Member names (normalised) whose values are addresses or names: words and segments, never one random token by
design as an id is (a URI template's `{path}` part is judged segment by segment, an `{id}` part as an id)."""


def address_key(key: str | None) -> bool:
    """Whether a member's name says its value is a path, a URL or a name (`ADDRESS_KEY`)."""
    return key is not None and ADDRESS_KEY.search(normalize_key(key)) is not None


def opaque_key(key: str | None) -> bool:
    """Whether a member's name says its value is an id, a digest, a cursor, a path or a name (never a secret)."""
    return key is not None and OPAQUE_KEY.search(normalize_key(key)) is not None


def _not_secret_shape(token: str) -> bool:
    """An opaque value that is no secret by its shape: a GUID, hex or digits, a URL, a path, an e-mail address, a
    host name, a dotted name, a placeholder, a documentation value, a ciphertext, base64 of a binary file."""
    if is_placeholder(token) or is_template(token) or documentation_value(token):
        return True
    if _GUID.fullmatch(token) or _HEX_OR_DIGITS.fullmatch(token) or "://" in token or token.startswith(("/", "./")):
        return True
    if _EMAIL.fullmatch(token) or _host(token) or (_DOTTED.fullmatch(token) and not _LONG_PART.search(token)):
        return True  # (a dotted name's parts are names: a part of 32+ letters and digits is no name)
    if token.startswith(("...", "…")) or token.endswith(("...", "…")):
        return True  # an excerpt, elided
    if names_a_key(token) or public_object_id(token) or digest_or_nonce(token):
        return True  # (an object id an API hands out, `cus_…`; a digest or a CSP nonce, `sha384-…`, `nonce-…`)
    return ciphertext(token, "") or decoded_binary(token, strict_magic=True)


def _random(token: str) -> bool:
    """The redactor's randomness rule (24+ characters); 16 to 23 need lower case, upper case, digits, few
    word-like runs and 3.5 bits per character."""
    if looks_random(token):
        return True
    if _BASE32.fullmatch(token):
        # An OTP seed or a base32 key: upper case and 2-7 only, digits spread through it, no words.
        digits = sum(c.isdigit() for c in token)
        return digits >= 2 and 3 * _wordy(token) <= 2 * len(token) and shannon_entropy(token) >= 3.5
    if len(token) >= 32 and _ONE_CASE.fullmatch(token) and not _HEX_OR_DIGITS.fullmatch(token):
        # Upper-case letters and digits (`dt0c01.<24>.<64>`'s parts): digits through it, no words, dense.
        digits = sum(c.isdigit() for c in token)
        return digits >= 4 and 3 * _wordy(token) <= len(token) and shannon_entropy(token) >= 4.0
    if not 16 <= len(token) < 24 or not all(_classes(token)) or _SHORT_ALPHABET.fullmatch(token) is None:
        return False
    return 3 * _wordy(token) < len(token) and shannon_entropy(token) >= 3.5


def bare_secret(text: str) -> bool:
    """Whether `text`, as a whole, is one random token of a credential's alphabet (see the module docstring)."""
    token = text.strip().strip("\"'`")
    if not 16 <= len(token) <= 1024 or _BARE.fullmatch(token) is None or _not_secret_shape(token):
        return False
    # An id and a secret joined (`<app id>|<secret>`, `<key id>.<secret>`): the longest part decides.
    parts = [part for part in _TOKEN_PARTS.split(token) if part]
    core = max(parts, key=len) if parts else ""
    if len(core) >= 16 and _random(core):
        return True
    # A vendor's prefix (`glpat-`, `sk_live_`) is words, not randomness: the rest decides.
    prefix = _VENDOR_PREFIX.match(core)
    rest = core[prefix.end() :].lstrip("_-") if prefix is not None else ""
    return len(rest) >= 16 and _random(rest)


def short_line_secret(text: str, decode: bool = True) -> bool:
    """Whether a short one-line value holds a token of 20+ characters that `bare_secret` calls random, and no
    label before it says what else it is (`public_key`, `csrf-token`, `credentialId`, `image/png`). A token that
    is base64 of text is judged by what it says (`pkey = ("LS0tLS1CRUdJTi…")`), one layer deep."""
    line = text.strip()
    if len(line) > MAX_LINE or "\n" in line:
        return False
    start = 0
    for token in _SPLIT.split(line):
        at = line.find(token, start)
        start = at + len(token)
        if len(token) < 20 or _NOT_SECRET_BEFORE.search(line[max(0, at - 40) : at]):
            continue
        if bare_secret(token):
            return True
        said = _base64_text(token) if decode and token != line else None
        if said is not None and (short_line_secret(said, decode=False) or labelled_secret(said)):
            return True
    return False


_UNSEPARATED_PREFIX = re.compile(r"EAA[A-Z][A-Za-z0-9]{90,}|IGQ[VW][A-Za-z0-9_-]{90,}")
"""Facebook and Instagram Graph API access tokens (`EAA…`, `IGQV…`): a vendor's prefix with no separator after it."""


def lone_secret(text: str) -> bool:
    """Whether `text`, whole, is a token `bare_secret` calls random that has what ids in a URI's path lack: an id
    joined to a secret by `|` (`<app id>|<secret>`), base64's `+`, or a run of upper-case letters and digits only
    (a base32 OTP seed, `dt0c01.<upper-case runs>`). For values with no name, where a lone token is otherwise an id
    (mixed-case and lower-case ids, `_`, `-`, `/` are what ids are made of)."""
    token = text.strip()
    if len(token) < 16 or not bare_secret(token):
        return False
    if "|" in token or "+" in token:
        return True
    parts = [part for part in _TOKEN_PARTS.split(token) if part]
    core = max(parts, key=len) if parts else ""
    if _BASE32.fullmatch(core) is not None or _ONE_CASE.fullmatch(core) is not None:
        return True
    return _UNSEPARATED_PREFIX.match(token) is not None


_B64_TOKEN = re.compile(r"[A-Za-z0-9+/]{20,}={0,2}|[A-Za-z0-9_-]{20,}")


def _base64_text(token: str) -> str | None:
    """The text a base64 token spells, read leniently (a token cut short in a line is still read, up to its last
    whole quad), or None when it spells no text (binary, control characters)."""
    if _B64_TOKEN.fullmatch(token) is None:
        return None
    body = token.rstrip("=")
    body = body[: len(body) - len(body) % 4]
    try:
        raw = base64.b64decode(body, altchars=b"-_" if ("-" in body or "_" in body) else None, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if text.isprintable() else None


_BASE64_BODY = re.compile(r"[A-Za-z0-9+/]{23,1023}={0,2}")


def _slash_led_base64(text: str) -> bool:
    """Whether a labelled value that starts with `/` is base64 rather than a path: no other `/`, 24+ characters of
    base64's alphabet, and the rest random with lower case, upper case and digits (a path's one segment is a word
    or a name)."""
    rest = text[1:]
    return "/" not in rest and _BASE64_BODY.fullmatch(text) is not None and all(_classes(rest)) and bare_secret(rest)


def credential_like(value: str, before: str = "") -> bool:
    """Whether a labelled value could be a credential: not code, a template, a placeholder or a word."""
    if value.endswith(("..", "…")):
        return False  # an elided excerpt (`ops_eyJz..`)
    text = value.rstrip(".,;:!?\\")
    if len(text) < 8 or is_placeholder(text) or is_template(text) or ciphertext(text, before):
        return False
    if _CODE.search(text) or _DOTTED.fullmatch(text) or _IDENTIFIER.fullmatch(text) or _GUID.fullmatch(text):
        return False
    if text[:1] == "/" and _slash_led_base64(text):
        return True  # base64 may start with `/`: one random segment is no path
    if "://" in text or text.startswith(("/", "./", "~")) or _EMAIL.fullmatch(text) or _host(text):
        return False
    if "/" in text and not bare_secret(text):
        return False  # `master/iPp0@GRq`: a user and a password (or a path), judged as a pair elsewhere
    if documentation_value(text, strict=False) or documentation_value(text) or decoded_binary(text, strict_magic=True):
        return False
    if names_a_key(text):
        return False
    lower, upper, digit = _classes(text)
    if _PRODUCT_KEY.fullmatch(text):
        return not any(_alphabet_run(group) for group in text.split("-"))  # `KLMNO`, `12345`: a sample
    if 2 * _wordy(text) > len(text):
        return False
    if digest_or_nonce(text) or public_object_id(text):
        return False  # published, whatever the label says: `integrity="sha384-…"`, `"verification_session": "vs_…"`
    if lower and upper and digit:
        return True
    if len(text) >= MIN_HEX_LABELLED and digit and _HEX_RUN.fullmatch(text):
        return shannon_entropy(text) >= HEX_BITS  # hex: 16 symbols, 4 bits at most (a 16-character one has ~3.3)
    return len(text) >= 12 and (lower or upper) and digit and shannon_entropy(text) >= 3.3


MIN_HEX_LABELLED = 16
"""A labelled hex value this long (a salt, a key of 8+ bytes) is judged against `HEX_BITS`."""
_HEX_RUN = re.compile(r"(?=[0-9]*[a-f])[0-9a-f]+|(?=[0-9]*[A-F])[0-9A-F]+")
"""Hex digits in one case, letters among them (a `0x` literal is a number in code: a mask, a constant)."""
HEX_BITS = 3.0
"""The entropy a labelled hex value needs: the 3.3 bits other values need is measured on alphabets of 36 and more
symbols; half of random 16-character hex values fall below it."""


_WORD_GOES_ON = re.compile(r"[a-rt-z]|s[a-z]")
"""A label followed by lower-case letters (but a plural `s`) is part of another word: `keying`, `tokenizer`."""
_SECRET_WORD = re.compile(r"(?i)secret|passw|token|api[_-]?key|credential")
_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")


def _name_before(text: str, end: int) -> tuple[str, str]:
    """The part of a name that ends at `end` (at most 24 characters of `[A-Za-z0-9_.-]`), and the character
    before the name (empty at the start)."""
    start = end
    while start > 0 and end - start < 24 and text[start - 1] in _NAME_CHARS:
        start -= 1
    return text[start:end], text[start - 1 : start]


_LABEL_WORD = re.compile(
    r"p(?:a{0,2}s{0,2}wo?r?s?d|a?ss|w|/w)|secret|token|key|auth|credential|nonce|salt|session|identified|"
    + _FOREIGN_ASCII
)
"""Where `_LABEL` can start, in lower-cased text: found first, because a case-blind scan is several times slower."""
_FOREIGN_WORD = re.compile(_FOREIGN_OTHER)
"""The labels outside ASCII, looked for only in a text that is not ASCII (in one alternation they would double the
cost of `_LABEL_WORD` on every text)."""


def _labels(text: str) -> Iterator[re.Match[str]]:
    low = text.lower()
    if len(low) != len(text):  # a character whose lower case is longer: positions would not line up
        yield from _LABEL.finditer(text)
        return
    for hit in _LABEL_WORD.finditer(low):
        match = _LABEL.match(text, hit.start())
        if match is not None:
            yield match
    if not low.isascii():
        for hit in _FOREIGN_WORD.finditer(low):
            match = _LABEL.match(text, hit.start())
            if match is not None:
                yield match


_HTML_TAG = re.compile(r"(?i)<(?:script|style|link)\b[^<>]*$")


def _html_nonce(text: str, at: int) -> bool:
    """Whether the `nonce` at `at` is an attribute of a tag that carries one for a Content Security Policy."""
    opened = text.rfind("<", max(0, at - 400), at)
    return opened >= 0 and _HTML_TAG.match(text, opened, at) is not None


def labelled_secret(text: str) -> bool:
    """Whether a line of `text` holds a credential's label and then a value that could be one."""
    for match in _labels(text):
        prefix, before = _name_before(text, match.start())
        tail = match.group("tail")
        sep = match.group("sep")
        slash = (before == "/") != (sep == "/") and match.group(0).isascii() and not (before == "/" and sep[:1] == ":")
        if before == "+" or slash or _NOT_A_SECRET_LABEL.search(prefix + tail):
            continue  # `/` only around a URL's path segment (`/token/<value>`), never inside base64; a `/` before
            # a label then `:` is a field after another (`ID:master/PASS:<value>`): base64 has no `:`
        if _WORD_GOES_ON.match(tail):
            continue  # `keying`, `tokenizer`: the label word goes on as another word
        if text[match.start() : match.start() + 6].lower() == "nonce=" and _html_nonce(text, match.start()):
            continue  # `<script nonce="…">`: a CSP nonce, sent with the page to every reader
        if _GUID.fullmatch(match.group("value")) and _SECRET_WORD.search(match.group(0)[: match.start("value")]):
            return True  # a GUID is an id, unless the label says secret (`--secret-token <GUID>`)
        if credential_like(match.group("value"), text[max(0, match.start() - 24) : match.start("value")]):
            return True
    return False


_GUID_KEY_NAME = re.compile(r"[A-Z][A-Z0-9]{1,23}[_-](?:API[_-])?KEY")
"""`HEROKU_KEY`, `SNYK_API_KEY`: a constant named for one service's key (some services' keys are GUIDs)."""
_ID_KEY_WORDS = re.compile(
    r"(?:CACHE|PRIMARY|SORT|PARTITION|IDEMPOTENCY|OBJECT|FOREIGN|ROUTING|DEDUP|LOOKUP|MAP|ROW|INDEX|REF|REQUEST|"
    r"TRACE|SESSION_ID|STORAGE|LOCK|QUEUE|TOPIC|EVENT|PUBLIC|PUB|SIGNING_KEY_ID)[_-]"
)
_CAMEL_GUID_KEY = re.compile(r"(?:Key|Token|Secret)[\"']?[ \t]{0,3}(?::=|:|=)[ \t]{0,3}[\"']\{?" + GUID + r"\}?[\"']")
"""`hubspotKey = "<GUID>"`: a camelCase name for one service's key, token or secret, then a quoted GUID (found from
the name's last word, the rest of the name read back from there: a pattern starting at a lower-case letter would
be tried at every position)."""
_CAMEL_HEAD = re.compile(r"(?<![A-Za-z0-9_])[a-z][a-z0-9]{1,24}(?:Api)?$")
_CAMEL_ID_WORDS = re.compile(
    r"(?i)^(?:cache|primary|sort|partition|idempotency|object|foreign|routing|dedup|lookup|map|row|index|ref|request|"
    r"trace|session|storage|lock|queue|topic|event|public|pub|signing|unique|item|entity|record|instrumentation|"
    r"license|product|registration|csrf|xsrf|page|next|continuation|cursor|sync|resume|push|device|node|cluster)"
)
_NTLM_AUTHENTICATE = re.compile(r"(?<![A-Za-z0-9+/])TlRMTVNTUAAD[A-Za-z0-9+/]{40,}")
"""An NTLM AUTHENTICATE message in base64 (`TlRMTVNTUAAD…`, MS-NLMP 2.2.1.3): it carries the challenge responses,
crackable, whether or not its fields add up."""
_SQL_HASH = re.compile(
    r"(?i)identified[ \t]+(?:with[ \t]+'?\w{1,40}'?[ \t]+)?(?:as|by[ \t]+password)[ \t]+'\*[0-9A-F]{40}'"
)
"""`IDENTIFIED WITH 'mysql_native_password' AS '*92FD…'`: a MySQL password hash (SHA-1 twice), crackable."""
_DEFAULT_ARG = re.compile(
    r"(?i)(?:getenv|environ\.get|env\.get|\.get|GetEnvOrDefault|env)[ \t]*\([ \t]*[\"'][^\"'\n]{1,64}[\"'][ \t]*,[ \t]*"
    r"[bu]?[\"'](?P<value>[^\s\"'`]{8,128})[\"']"
)
"""A literal default of an environment lookup (`getenv("DBPW", b"GEHE1MNIS")`): on a line that names a password or a
secret, the value the program runs with when the variable is unset."""
_GUID_KEY = re.compile(
    r"(?<![A-Za-z0-9_])(?P<name>[A-Z][A-Z0-9_-]{3,40})[\"']?[ \t]{0,3}(?::=|:|=)[ \t]{0,3}[\"']?"
    r"\{?" + GUID + r"\}?(?![0-9A-Za-z-])"
)
_BYTE = r"(?:0[xX][0-9A-Fa-f]{1,2}|\d{1,3})"
_BYTE_RUN = re.compile(r"[{\[(][ \t]*(?P<bytes>(?:" + _BYTE + r"[ \t]*,[ \t]*){7,}" + _BYTE + r")")
_BYTES_LABEL = re.compile(
    r"(?:(?<![A-Za-z])(?:key|secret|salt|nonce|iv|passw(?:or)?d)|(?<![A-Z])(?:Key|Secret|Salt|Nonce|IV|Passw(?:or)?d)|"
    r"(?:KEY|SECRET|SALT|NONCE|PASSW(?:OR)?D))(?:_[A-Za-z0-9]{1,12})?[\"']?[ \t]{0,3}(?::=|:|=|[ \t])"
    r"[^0-9\n;]{0,24}$"
)
"""A key, a secret, a salt or a nonce written as a literal array of 8 or more bytes (`#define AESKEY {0x35, …}`,
`Secret: []byte{33, 9, …}`): the label may end an upper-case name (`AESKEY`)."""
_AUTH_SCHEME = re.compile(
    r"(?i)(?<![A-Za-z])(?:proxy-)?authori[sz]ation[\"']?[ \t]{0,3}[:=][ \t]{0,3}[\"']?"
    r"(?:basic|bearer|token|digest|ntlm|negotiate)[ \t]+(?P<value>[A-Za-z0-9+/=._~-]{8,})"
)
_USER_OPTION = re.compile(
    r"-(?<!\S-)(?:u|U|-user|-proxy-user)(?:[ \t]+|=)[\"']?\{?[^\s\"':{}]{1,64}\}?[\"']?:[\"']?\{?"
    r"(?P<value>[^\s\"'{}]{6,128})"
)
"""`curl -u user:password`, `--user "name":"{password}"`: the password after the user's name."""
_LITERAL = re.compile(r"(?<!\()(?<!\(\s)[\"'](?P<value>[^\s\"'`]{8,128})[\"']")
_SECRET_LABEL_WORD = re.compile(r"(?i)(?<![A-Za-z])(?:pass(?:word|wd|phrase)?|pwd|secret)(?![a-rt-z])")
_PRODUCT_KEY = re.compile(r"[A-Z0-9]{4,6}(?:-[A-Z0-9]{4,6}){3,7}")
"""A product or licence key (`ZAQWS-XCDER-VBGTR-FRTGU-KLMNX`): groups of upper-case letters and digits."""


def _alphabet_run(group: str) -> bool:
    """Whether `group` is a run of the alphabet or of digits (`KLMNO`, `12345`)."""
    return all(ord(b) - ord(a) == 1 for a, b in pairwise(group))


def _distinct_bytes(run: str) -> bool:
    values = {item.strip().lower() for item in run.split(",")}
    return len(values) >= 5


def _default_secret(value: str) -> bool:
    """Whether an environment lookup's literal default could be a password: letters and digits, not a placeholder,
    a template, a documentation value, code, a path or a URL (a word with digits counts: `GEHEIMN1S`)."""
    lower, upper, digit = _classes(value)
    if not digit or not (lower or upper) or is_placeholder(value) or is_template(value) or _CODE.search(value):
        return False
    if "://" in value or value.startswith(("/", "./", "~")) or _DOTTED.fullmatch(value) or _GUID.fullmatch(value):
        return False
    return not (documentation_value(value, strict=False) or _HEX_OR_DIGITS.fullmatch(value))


SHAPED_LINES = 64
"""The shaped rules read a value's first lines only (a longer text is a document: the detectors' call)."""
_DIGITS_THEN_COLON = re.compile("[MNO][DTjz][AEIMQUYcgk][w-z0-5]" * 4 + "O[g-v][A-Za-z0-9+/]{26}")
"""Base64 of 12 ASCII digits, `:` and 20 more bytes, quad by quad (each quad of three digits is `[MNO][DTjz]…`): a
Jira or Confluence Data Center personal access token (an id, `:`, 20 random bytes), found wherever it sits, inside
a longer base64 run too (a data value that says `image/png` and is not one). Unrolled: `(?:…){4}` is 4x slower."""
MIN_BINARY_TAIL = 6
"""Of a token's 20 random bytes, at least this many are outside printable ASCII (base64 of a line of text that
starts with a 12-digit stamp is not a token; 20 random bytes have about 12)."""


def _atlassian_pat(token: str) -> bool:
    """Whether a 44-character base64 run is a Data Center personal access token: 12 digits, `:`, 20 bytes that are
    not text."""
    try:
        raw = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        return False
    tail = raw[13:]
    return raw[:12].isdigit() and raw[12:13] == b":" and sum(not 32 <= b < 127 for b in tail) >= MIN_BINARY_TAIL


def shaped_secret(text: str) -> bool:
    """Secrets whose shape, not their randomness, says what they are, in a line of `text` (its first
    `SHAPED_LINES`): a GUID in a constant named for one service's key, a key written as an array of bytes, the
    credentials of an `Authorization` header or of `curl -u user:password`, a password given as a literal fallback
    in a short line that names a password (`PASSWORD = env.get("PASSWORD") or "…"`), a Jira or Confluence personal
    access token by its decoded structure (`_atlassian_pat`). Each pattern runs once over those lines (none crosses
    a line), and only when a literal it needs is there."""
    head = text if text.count("\n") < SHAPED_LINES else "\n".join(text.split("\n", SHAPED_LINES)[:-1])
    if "O" in head:
        for match in _DIGITS_THEN_COLON.finditer(head):
            if _atlassian_pat(match.group()):
                return True
    if "-" in head:
        for match in _GUID_KEY.finditer(head):
            name = match.group("name").upper()
            if _GUID_KEY_NAME.fullmatch(name) and not _ID_KEY_WORDS.match(name):
                return True
    if "Key" in head or "Token" in head or "Secret" in head:
        for match in _CAMEL_GUID_KEY.finditer(head):
            name = _CAMEL_HEAD.search(head, max(0, match.start() - 30), match.start())
            if name is not None and not _CAMEL_ID_WORDS.match(name.group()):
                return True
    if "TlRMTVNTUAAD" in head:
        for match in _NTLM_AUTHENTICATE.finditer(head):
            if not documentation_value(match.group(), shape=False):
                return True
    if "," in head:
        for match in _BYTE_RUN.finditer(head):  # the run first (it starts at a bracket), then its label
            label = _BYTES_LABEL.search(head, max(0, match.start() - 64), match.start())
            if label is not None and _distinct_bytes(match.group("bytes")):
                return True
    low = head.lower()
    if "identified" in low and _SQL_HASH.search(head):
        return True
    if "uthori" in low:
        for match in _AUTH_SCHEME.finditer(head):
            value = match.group("value")
            if not (is_placeholder(value) or is_template(value) or documentation_value(value)):
                return True
    if "-u" in head or "-U" in head or "--user" in head or "--proxy-user" in head:
        for match in _USER_OPTION.finditer(head):
            if credential_like(match.group("value").rstrip("}")):
                return True
    if "pass" in low or "pwd" in low or "secret" in low:
        done = -1
        for word in _SECRET_LABEL_WORD.finditer(head):
            if word.start() < done:
                continue  # its line was judged
            start, end = head.rfind("\n", 0, word.start()) + 1, head.find("\n", word.end())
            done = end = len(head) if end < 0 else end
            line = head[start:end]
            if len(line) <= MAX_LINE:
                for match in _LITERAL.finditer(line):
                    value = match.group("value")
                    if not _SECRET_LABEL_WORD.search(value) and credential_like(value):
                        return True
                for match in _DEFAULT_ARG.finditer(line) if "(" in line else ():
                    if _default_secret(match.group("value")):
                        return True
    return False


_ID_PW_LABEL = re.compile(
    r"(?i)(?:id|user|login|계정|아이디)[ \t]*[/(,]?[ \t]*(?:pw|pwd|pass(?:wd|word)?|비번|암호|비밀번호)(?![a-z])"
)
"""A label naming an account and its password together (`ID/PW`, `ID/Pass`, `IP ID PW`, `아이디/PW`)."""
_IPV4 = r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.])"
_PAIR = (
    r"(?P<user>[A-Za-z][\w.@-]{1,31})(?P<sep>[ \t]{0,2}//?[ \t]{0,2}|\(|,[ \t]{0,2}|[ \t]+)"
    r"(?P<value>[^\s/()\"'`,;]{8,64})(?!/)"
)
_AFTER_LABEL_PAIR = re.compile(r"(?:->|[ \t:()]){1,3}(?:[xX]{2,8}:)?" + _PAIR)
"""Right after the label (`ID/PW->`, `ID/Pass:xxxx:`): a pair further on, or after `-`, `/port:`, is another field."""
_IP_PAIR = re.compile(_IPV4 + r"[ \t,;(:]{1,3}" + _PAIR)
"""A host's address then `user/password` (`192.168.0.1 master/iP30dT_o`): an account written down with its host."""


def _short_line(text: str, at: int) -> bool:
    """Whether the line of `text` holding position `at` is at most `MAX_LINE` characters."""
    start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
    return (len(text) if end < 0 else end) - start <= MAX_LINE


_PW_MARK = re.compile("pw|pass|비번|암호|비밀번호")
"""What `_ID_PW_LABEL` ends with, in lower-cased text: found first (literals), because the label's pattern has no
literal to start at."""
_DOTTED_QUAD = re.compile(r"\d\.\d{1,3}\.\d{1,3}\.\d")
"""What an IPv4 address holds, without the look-behind that makes `_IP_PAIR` try every position."""


def paired_secret(text: str) -> bool:
    """Whether a short line of `text` (of its first `SHAPED_LINES`) writes an account as `user/password`,
    `user(password)` or `user password` after a label that names both (`ID/PW master(…)`) or after a host's IPv4
    address, with a password that could be a credential (`credential_like`: not a word, a path, a placeholder).
    Each pattern runs once over those lines (none crosses a line), the label's only when a literal it needs is
    there."""
    head = text if text.count("\n") < SHAPED_LINES else "\n".join(text.split("\n", SHAPED_LINES)[:-1])
    pairs: list[re.Match[str]] = []
    low = head.lower()
    if len(low) == len(head):  # (a character whose lower case is longer: positions would not line up)
        for mark in _PW_MARK.finditer(low):  # the password word first, then the account's word just before it
            label = _ID_PW_LABEL.search(head, max(0, mark.start() - 12), mark.end() + 6)
            after = _AFTER_LABEL_PAIR.match(head, label.end()) if label is not None else None
            if label is None or after is None:
                continue
            if not after.group("sep").isspace() or (
                all(_classes(after.group("value"))) and not head[max(0, label.start() - 1) : label.start()].isalpha()
            ):  # `user password`: only after a label of its own (`ID PW`, not `ANYID PW`), all three classes
                pairs.append(after)
    if _DOTTED_QUAD.search(head) is not None:
        pairs.extend(_IP_PAIR.finditer(head))
    for match in pairs:
        value = match.group("value")
        if LABEL_PAIR.match(value) is not None:
            continue  # `10.245.1.3   kubernetes.io/hostname=10.245.1.3`: a node's label, not a login
        if value != match.group("user") and _short_line(head, match.start()) and credential_like(value):
            return True
    return False


_PREFIX_HINT = re.compile(r"[a-z][a-z0-9]{1,11}[_-]")
KNOWN_PREFIXES = frozenset(
    hint
    for detector in BUILTIN_DETECTORS
    if detector.category == "secret"
    for hint in detector.hints
    if _PREFIX_HINT.fullmatch(hint)
)
"""The vendor prefixes the catalog's secret detectors start at (`ntn_`, `hrku-`, `glpat-`), lower case."""
_PREFIXED = re.compile(r"(?P<prefix>[A-Za-z][A-Za-z0-9]{1,11}[_-])[_-]*(?P<rest>[A-Za-z0-9_-]{16,1024})")
MIN_UNKNOWN_PREFIXED = 32
"""A token behind a prefix no detector knows (`figd_`) must be this long: ids behind a prefix (`pi_…`, `cus_…`) are
shorter."""


def prefixed_secret(text: str) -> bool:
    """Whether `text`, whole, is a vendor's prefix then a random run: a prefix a secret detector knows (its format
    otherwise off: a sample cut short, a character outside its alphabet) and 16+ random characters, or another
    lower-case prefix and `MIN_UNKNOWN_PREFIXED`+. For values with no name (a URI's path), where a lone random token
    is otherwise an id."""
    match = _PREFIXED.fullmatch(text.strip())
    if match is None:
        return False
    rest, prefix = match.group("rest"), match.group("prefix")
    known = prefix.lower() in KNOWN_PREFIXES
    if not known and (not prefix[:-1].islower() or len(rest) < MIN_UNKNOWN_PREFIXED):
        return False
    return _random(rest) and not _not_secret_shape(rest)


@dataclass(frozen=True, slots=True)
class Vendors:
    """The vendor formats `vendor_token` reads: a scanner of the vendors' API token detectors and a pattern of
    their prefixes (`vendor_rules`)."""

    scanner: Scanner
    prefixed: re.Pattern[str] | None
    hints: re.Pattern[str] | None
    """Every hint of the scanner's detectors (lower case): a text without one holds none of their tokens."""


def _vendor_family(detector: Detector) -> bool:
    """A vendor's API token format that a literal starts (its hints: `ghp_`, `xox`, `sk-ant-`, `squ_`), not a label's
    rule nor a heuristic."""
    return (
        detector.category == "secret"
        and detector.entity == "api_token"
        and bool(detector.hints)
        and detector.name not in GENERIC
        and detector.enabled
    )


@functools.lru_cache(maxsize=64)
def vendor_rules(disabled: frozenset[str] = frozenset()) -> Vendors:
    """The built-in vendor token formats but `disabled` (a guard's `disabled_detectors`), and their prefixes."""
    chosen = tuple(d for d in BUILTIN_DETECTORS if _vendor_family(d) and d.name not in disabled)
    prefixes = sorted({hint for d in chosen for hint in d.hints if _PREFIX_HINT.fullmatch(hint)})
    pattern = (
        re.compile(
            r"(?<![A-Za-z0-9_-])(?i:(?P<prefix>" + literal_alternation(prefixes) + r"))"
            r"[_-]*(?P<rest>[A-Za-z0-9_-]{16,256})(?![A-Za-z0-9_-])"
        )
        if prefixes
        else None
    )
    hints = sorted({hint for d in chosen for hint in d.hints})
    return Vendors(Scanner(chosen), pattern, re.compile(literal_alternation(hints)) if hints else None)


VENDOR_RULES = vendor_rules()
VENDOR_NAMES = tuple(d.name for d in VENDOR_RULES.scanner.detectors)
"""The detectors `vendor_token` reads (a guard that does not guard `secret` leaves them all out)."""


def _marked(value: str, after: str) -> bool:
    """A documentation value by what it says, not by its shape: a marker word (`EXAMPLE`, `your_token`, `xxxxxx`), a
    name at its end (`-token`), a mask right after it, a placeholder or a template."""
    return documentation_value(value, after, shape=False) or is_placeholder(value) or is_template(value)


def vendor_token(text: str, vendors: Vendors = VENDOR_RULES) -> bool:
    """Whether `text` holds a vendor's API token, judged strictly: a token in a vendor's format (`ghp_…`, `xoxb-…`,
    `sk-ant-…`) or a vendor's prefix then 16+ token characters with letters and digits, not words (a sample in a
    format gone wrong: `squ_` then upper case), unless a marker says it is a sample. The detectors spare such values
    by their shape too (runs, repeats, few distinct characters: `ghp_0000…`, `xoxb-123456789012-…`), so a document
    that shows one reads unaltered; asked only for a channel that carries no documents (a URI, `_meta`, a form's
    answer), where a value a vendor's prefix starts is refused whatever its body looks like."""
    if len(text) < MIN_TEXT or vendors.hints is None:
        return False
    folded = fold_for_hints(text)
    if vendors.hints.search(folded) is None:
        return False  # (one pass: most texts hold no vendor's hint, and the scanner's own test is one per hint)
    scanner = vendors.scanner.narrow(folded, text)
    for finding in scanner.scan(text) if scanner else ():
        if not _marked(finding.value, text[finding.end : finding.end + 12]):
            return True
    if vendors.prefixed is None:
        return False
    for match in vendors.prefixed.finditer(text):
        rest = match.group("rest")
        if not (any(c.isdigit() for c in rest) and any(c.isalpha() for c in rest)) or 2 * _wordy(rest) > len(rest):
            continue
        if not _marked(match.group(), text[match.end() : match.end() + 12]):
            return True
    return False


_ANSI = re.compile(
    r"(?:\x1b|\\x1[bB]|\\033|\\u001[bB]|\\e)\[[0-9;?]{0,16}[A-Za-z]|(?<![\w\]])\[(?:\d{1,3};){0,4}\d{1,3}m"
)
r"""A terminal's colour or cursor code (`ESC[32m`, written raw or escaped: `\x1b[`, `\033[`, `\u001b[`, `\e[`;
or an SGR code that lost its ESC: `[0m`): glued to a value, it hides the value's start or end."""
_ESCAPE_MARKS = ("\x1b", "[0m", "[m", "\\x", "\\u", "\\0", "\\e[")
"""Substrings one of which any text `unescaped` changes holds (a cheap test before the patterns run)."""
_ESCAPE = re.compile(r"\\x([0-9A-Fa-f]{2})|\\u([0-9A-Fa-f]{4})|\\(0[0-7]{0,2})(?![0-9])")
"""`\\xNN`, `\\uNNNN` and an octal escape from `\\0` (NUL, `\\033`): a string literal's characters."""


_TERMINAL_MARKS = ("\x1b", "[0m", "\\x1b", "\\x1B", "\\033", "\\u001b", "\\u001B", "\\e[")
_TERMINAL_GATE = re.compile("|".join(map(re.escape, _TERMINAL_MARKS)))
"""Any of the marks, found by one search in C (the test runs on every argument string the guard reads)."""


def without_terminal_codes(text: str) -> str | None:
    r"""`text` without terminal colour and cursor codes (raw, escaped, or an SGR code that lost its ESC), or None when
    it has none: a code glued to a key (`ESC[93msk-…`) hides the key's start from a detector's boundary."""
    if _TERMINAL_GATE.search(text) is None:
        return None
    out = _ANSI.sub("", text)
    return out if out != text else None


def _escaped_character(match: re.Match[str]) -> str:
    hexadecimal = match.group(1) or match.group(2)
    return chr(int(hexadecimal, 16)) if hexadecimal else chr(int(match.group(3), 8))


def unescaped(text: str) -> str | None:
    r"""`text` without terminal codes and with `\xNN`, `\uNNNN` and octal (`\0`) escapes read as what they spell, or
    None when neither is there (the view a log line or a string literal hides a value in)."""
    if not any(mark in text for mark in _ESCAPE_MARKS):
        return None
    out = _ESCAPE.sub(_escaped_character, _ANSI.sub("", text))
    return out if out != text else None


_STRING_ESCAPE = re.compile(r'\\(["\\/])')
"""A JSON (or C, Python, shell) string's escaped quote, backslash or slash."""
MAX_ESCAPE_LAYERS = 4
"""Escaped quotes are read this many layers deep (JSON in a string in a string: `\\\"` is two layers)."""


def json_unescaped(text: str) -> str | None:
    r"""`text` with its escaped quotes and backslashes read, layer after layer while an escaped quote is left
    (`{\\\"salt\\\":\\\"…` → `{"salt":"…`), or None when it has none: a labelled value in JSON written inside a
    string, inside another, hides its label's quotes from the label rules behind backslashes."""
    if '\\"' not in text:
        return None
    out = text
    for _ in range(MAX_ESCAPE_LAYERS):
        out = _STRING_ESCAPE.sub(r"\1", out)
        if '\\"' not in out:
            break
    return out


def _decoded(text: str) -> Iterator[Any]:
    r"""What `text` spells: `%XX`, base64, hex and gzip+base64 of text, JSON (a structure or a string), the text
    without terminal codes and with `\xNN`, `\uNNNN` escapes read, and with escaped quotes read (`json_unescaped`)."""
    stripped = text.strip()
    plain = unescaped(stripped)
    if plain is not None:
        yield plain
    quoted = json_unescaped(stripped)
    if quoted is not None:
        yield quoted
    for decode in (decode_percent, decode_gzip_base64, decode_base64, decode_hex):
        try:
            got = decode(stripped)
        except (ValueError, TypeError):
            got = None
        if got is not None and got[0] != stripped:
            yield got[0]
    if stripped[:1] in ("{", "[", '"') and stripped[-1:] in ("}", "]", '"'):
        try:
            parsed = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return
        yield parsed


DECODED_KEY = "decoded"
"""The name a nameless value's decoded view is judged under (no name that says opaque: the bare rule applies)."""
_QUERY_PAIR = re.compile(r"(?:^|[?&;\n])(?P<name>[A-Za-z][A-Za-z0-9_.-]{0,63})=(?P<value>[^&#;\s]{16,1024})")
"""A URI's query member (`?name=value`): its value judged as the member `name` (the bare rule by its name)."""


def _query_holds(text: str, depth: int, vendors: Vendors | None) -> bool:
    """Whether a query member of `text` (a URI where no name was given) holds a secret judged under its name: a
    `?q=<random token>` is a secret as the same value in an argument `q` would be; `?cursor=` and `?id=` are not."""
    for match in _QUERY_PAIR.finditer(text):
        name = match.group("name")
        if _NOT_A_SECRET_LABEL.search(name) is None and _text_holds(
            unquote(match.group("value")), name, depth + 1, vendors
        ):
            return True
    return False


_SPACED = re.compile(r"\S[\s\"'`]+\S")
"""A text with a blank or a quote inside: a line of words or code, not one opaque token."""
MAX_NAMELESS_LINES = 64
"""A nameless text's lines judged alone, at most (a URI's segments: the detectors read every line of the text)."""


def _spells_a_line(text: str) -> bool:
    """Whether `text`, whole, is one base64 token that spells a line of text (a blank or a quote in it): an id is
    opaque bytes or a name, never an encoded line."""
    token = text.strip()
    if len(token) < 16 or _SPACED.search(token) is not None:
        return False
    said = _base64_text(token)
    return said is not None and _SPACED.search(said.strip()) is not None


def _lines_hold(text: str, depth: int, vendors: Vendors | None) -> bool:
    """Whether a line of a nameless text of several lines (a URI's userinfo, segments and query parts, one per line)
    holds a secret judged alone, as the same text would as the only segment (`MAX_NAMELESS_LINES` at most)."""
    lines = [line for line in text.split("\n") if len(line.strip()) >= MIN_TEXT]
    return any(_text_holds(line, None, depth, vendors) for line in lines[:MAX_NAMELESS_LINES])


def _text_holds(text: str, key: str | None, depth: int, vendors: Vendors | None) -> bool:
    if not MIN_TEXT <= len(text) <= MAX_TEXT:
        return False
    last = depth >= MAX_DEPTH  # (or not decoding: then base64 of text is not read either, even by `looks_random`)
    bare = key is not None and not opaque_key(key) and not (last and decode_base64(text.strip()) is not None)
    if bare and (bare_secret(text) or short_line_secret(text)):
        return True
    if key is None and _SPACED.search(text.strip()) is not None and short_line_secret(text):
        return True  # a line of text where no name was given (a URI's path): an id is one token, a line is not
    if key is None and "=" in text and depth < MAX_DEPTH and _query_holds(text, depth, vendors):
        return True
    if (key is None or key == DECODED_KEY) and (prefixed_secret(text) or lone_secret(text)):
        return True  # a vendor's prefix or a secret's alphabet says what a lone token is, where one is an id
    if key is None and _spells_a_line(text) and bare_secret(text):
        return True  # base64 of a line of text is no id: judged as the same value under a name would be
    if key is None and "\n" in text and _lines_hold(text, depth, vendors):
        return True
    if labelled_secret(text) or shaped_secret(text) or paired_secret(text):
        return True
    if vendors is not None and vendor_token(text, vendors):
        return True
    if depth >= MAX_DEPTH:
        return False
    # What an encoded value spells is judged as a member's value even where the value had no name: an id is an opaque
    # token as sent, never base64 or hex of a line of text.
    named = DECODED_KEY if key is None else key
    return any(holds_secret(view, named, depth + 1, vendors=vendors) for view in _decoded(text))


JWK_PUBLIC_MEMBERS = frozenset(
    ("kty", "use", "key_ops", "alg", "kid", "x5u", "x5c", "x5t", "x5t#S256", "crv", "x", "y", "n", "e")
)
"""A JSON Web Key's public parameters (RFC 7517, 7518): a public key's modulus, exponent, curve point and ids. Only
its private ones (`d`, `p`, `q`, `dp`, `dq`, `qi`, `oth`, `k`) are judged, and the key rules find those by name."""


JWK_KEY_TYPES = frozenset(("RSA", "EC", "OKP", "oct"))
"""The key types of RFC 7518 and 8037: a mapping whose `kty` is one of them is a JSON Web Key."""


def _unjudged(value: Mapping[Any, Any]) -> frozenset[str]:
    """The members of a mapping these rules leave alone: a JSON Web Key's public parameters (a mapping with a
    registered `kty`), since a JWKS that publishes public keys is no secret; none elsewhere. The detectors still read
    every member."""
    return JWK_PUBLIC_MEMBERS if "kty" in value and value["kty"] in JWK_KEY_TYPES else frozenset()


def holds_secret(
    value: Any, key: str | None = None, depth: int = 0, nesting: int = 0, *, vendors: Vendors | None = None
) -> bool:
    """Whether `value` (an argument's value under `key`, or a structure of them) holds a secret by these rules.
    `depth=MAX_DEPTH`: judged as spelled, no decoded view. `vendors`: the vendor formats `vendor_token` judges
    strictly (None: not asked; the detectors judged them with the output path's sparing of samples)."""
    if isinstance(value, str):
        return _text_holds(value, key, depth, vendors)
    if nesting >= 64:
        return False
    if isinstance(value, Mapping):
        members: Any = value.items()
        if "kty" in value and (skip := _unjudged(value)):  # (a JSON Web Key: rare; other mappings pay one lookup)
            members = [(name, item) for name, item in members if name not in skip]
        return any(
            holds_secret(item, name if isinstance(name, str) else None, depth, nesting + 1, vendors=vendors)
            for name, item in members
        )
    if isinstance(value, list | tuple):
        return any(holds_secret(item, key, depth, nesting + 1, vendors=vendors) for item in value)
    return False


def scrubbed(
    value: Any, key: str | None = None, depth: int = 0, nesting: int = 0, *, vendors: Vendors | None = None
) -> Any:
    """`value` with every string these rules find a secret in replaced by a marker (the same object when none)."""
    if isinstance(value, str):
        return f"[REDACTED:{ENTITY}]" if _text_holds(value, key, depth, vendors) else value
    if nesting >= 64:
        return value
    if isinstance(value, Mapping):
        skip = _unjudged(value)
        items = {
            n: v if n in skip else scrubbed(v, n if isinstance(n, str) else None, depth, nesting + 1, vendors=vendors)
            for n, v in value.items()
        }
        return value if all(items[n] is value[n] for n in value) else items
    if isinstance(value, list | tuple):
        out = [scrubbed(item, key, depth, nesting + 1, vendors=vendors) for item in value]
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    return value
