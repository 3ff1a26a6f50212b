"""Context that says "not a secret": signals that spare a finding, or a field, because of what it is or where it sits.

A detector judges a string by its shape (a pattern, its entropy, a label before it). These signals look at what
the string is and where it sits: a digest after `h1:` or `sha256=`, base64 inside a certificate or a PGP public
key block, an object id with a public prefix (`pi_`, `cus_`), a request id after `x-amz-id-2:`, a ULID, a value
that is code (`secret.secret_value`, `saslprep(password)`), a placeholder (`your-api-key-here`), MIME-wrapped
base64 of a PNG. A spared finding is left as it is and counted in the report's `spared` section under the
signal's name, so the annotation says why. One signal cuts instead of sparing: the entropy fallback's run that
starts in a URL's host (`…stripe.` + `me/regulatory-receipt/<id>`: its alphabet has `/` but not `.`) loses the host
and the path's fixed segments, and what is left is judged again (`url_host`, `public_document`).

Each signal names the detectors it may overrule: only those that decide by shape or by a nearby label (the
entropy fallback, labelled assignments, …), never a vendor format with a checksum or a fixed prefix, and never
the private-key detector. A finding whose format has a check of its own that fails (`verify.py`: a GitHub token
whose CRC32 does not match, a JWT whose header does not decode) is weaker evidence: the signals that may overrule
every generic detector (a digest, a public or request id, a ciphertext, …) may overrule it. The redactor's
`context` option turns signals off (`context: false`, or `context: {code_identifier: false}`); doc/TRANSFORMS.md
lists them.

Cost: nothing for a string without findings; for a finding a signal may overrule, a few anchored regex tests
around its span, and per text at most one pass for public-key blocks and one for wrapped base64 blocks.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .assignments import ASSIGNMENT_NAMES
from .catalog import BUILTIN_BY_NAME, BUILTIN_DETECTORS, PUBLIC_DOCUMENT_PATH, TLDS
from .detectors import Finding
from .docvalues import ciphertext, documentation_value, sequence_runs
from .tokenspec import bech32_valid
from .verify import CHECKED, verdict

# Detectors that decide by shape or by a label near the value (what a context signal may overrule).
ENTROPY = frozenset({"high_entropy_secret", "azure_storage_key"})
LABELLED = frozenset(
    {"secret_assignment", "labelled_key", "connection_string_secret", "authorization_header", "url_credentials",
     "cli_password_flag", "curl_user_credentials", "netrc_password", "mysql_password_flag", "curl_authorization_header",
     "call_argument_secret", "cli_secret_flag"}
) | ASSIGNMENT_NAMES  # fmt: skip
GENERIC = ENTROPY | LABELLED

# --- text signals -------------------------------------------------------------------------------------------

_PUBLIC_BLOCK = re.compile(
    r"-----BEGIN (?:CERTIFICATE|TRUSTED CERTIFICATE|X509 CRL|CERTIFICATE REQUEST|NEW CERTIFICATE REQUEST|"
    r"PUBLIC KEY|RSA PUBLIC KEY|DSA PUBLIC KEY|EC PUBLIC KEY|SSH2 PUBLIC KEY|PGP PUBLIC KEY BLOCK|PGP SIGNATURE|"
    r"PGP MESSAGE|PKCS7|CMS|DH PARAMETERS|EC PARAMETERS)-----"
    r"(?:(?!-----(?:BEGIN|END))[\s\S]){0,200000}+(?:-----END [A-Z0-9 ]{1,40}-----|\Z)"
    r"|<(?:ds:|dsig:)?X509Certificate>[A-Za-z0-9+/=\s]{1,100000}+</(?:ds:|dsig:)?X509Certificate>"
)
# A digest or a nonce: its algorithm or its role written right before it (`h1:`, `sha256=`, `'nonce-`).
_DIGEST_BEFORE = re.compile(
    r"(?i)(?:\bh1:|\bzh:|\b(?:sha|sha-?1|sha-?224|sha-?256|sha-?384|sha-?512|sha3-\d{3}|md5|crc32c?|blake2b?|"
    r"blake3|xxh\d*|murmur3)[-=:]|\bnonce[-=]\\?[\"']?|\bintegrity\s*=?\s*\\?[\"']?|\bContent-MD5:\s*|"
    r"\bx-goog-hash:\s*(?:crc32c|md5)=|\bdigest:\s*)$"
)
_DIGEST_VALUE = re.compile(r"(?i)(?:h1:|sha\d{1,3}[-=:]|sha3-\d{3}[-=]|md5[-=:]|nonce-)")
# Labels of public, per-request or per-object ids (written right before the value).
_ID_LABEL = re.compile(
    r"(?i)(?:\bhost[-_ ]?id|\bx-amz-id-2|\bx-amz-(?:request|version|cf)-id|\bversion[-_]?id|\brequest[-_ ]?id|"
    r"\btrace[-_]?id|\bspan[-_]?id|\breceipt[-_]?handle|\bcorrelation[-_]?id|\bx-request-id|\bcf-ray|\betag|\bksuid|\bulid|"
    r"\b(?:run|job|event|message|build|execution|operation|transaction|order|invoice|charge)[-_ ]?id)"
    r"[\"'>\\]{0,3}\s{0,3}[:=]?\s{0,3}[\"'\\]{0,3}$"
)
# Object ids with a public prefix: Stripe objects (its secrets are `sk_`, `rk_`, `whsec_` and client secrets).
_PUBLIC_ID = re.compile(
    r"(?:pi|ch|pm|in|il|ii|evt|cus|txn|prod|price|sub|si|src|card|ba|re|py|po|tr|acct|seti|cs|plink|prom|promo|"
    r"coupon|cbtxn|dp|du|file|link|mandate|payatt|pyr|qt|sched|sli|tax|tok|trr|fr|iar|ich|ipi|or|sku|bt|cn|"
    r"inrb|ldr|pmc|ppage|rcpt|req|acctsess|btok|fca|ic)_(?:(?:live|test)_)?[A-Za-z0-9]{8,64}"
)
# Any Stripe object id (its API has hundreds of prefixes: `fa_`, `trxn_`, `credrev_`, `mtr_test_`): a lower-case
# prefix, then an account-scoped body of 24 to 32 letters and digits of both cases that starts with a digit (a hex
# key such as Lob's `test_pub_<hex>` is not one). Stripe's secrets
# (`sk_`, `rk_`, `whsec_`, `ek_`, `pst_` and client secrets) are left out.
_STRIPE_ID = re.compile(
    r"(?!(?:sk|rk|ek|pst|whsec|live|test|key|api|token|secret)_)[a-z]{2,10}_(?:(?:live|test)_)?"
    r"[0-9](?=[a-z0-9]{0,30}[A-Z])(?=[A-Z0-9]{0,30}[a-z])[A-Za-z0-9]{23,31}"
)
_WORD = re.compile(r"[a-z]{0,20}[aeiou][a-z]{1,20}")
_PATH_PIECES = re.compile(r"[/_-]")
# Content addresses: IPFS CIDs (v1 base32 `bafy…`/`bafk…`, v0 `Qm…`).
_CONTENT_ID = re.compile(r"baf[a-z][a-z2-7]{40,120}|Qm[1-9A-HJ-NP-Za-km-z]{44}")
# Freenet keys: `CHK@`, `SSK@` or `USK@`, a routing key and a crypto key (43 characters of Freenet's base64 each),
# and a 7-character extra field.
_FREENET_KEY = re.compile(r"(CHK|SSK|USK)@[A-Za-z0-9~-]{43},[A-Za-z0-9~-]{43},([A-Za-z0-9~-]{7})(?![A-Za-z0-9~-])")
_FREENET_ALPHABET = str.maketrans("~-", "+/")
# A line of uuencoded data: every character from space to backquote (`begin 644 name` is followed by such lines).
_UU_LINE = re.compile(r"[!-`][ -`]{20,}")
_LOWER = re.compile(r"[a-z]")
_UU_MAX = 86  # the longest line: a count character, 63 bytes in 84 characters, a checksum character
# An e-mail address as a labelled value: an account's name (`"key": "someone@host.com"`), not its secret.
_EMAIL_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@(?:[A-Za-z0-9-]{1,63}\.){1,8}(?:" + TLDS + r")")
_ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_PLACEHOLDER = re.compile(
    r"(?i)(?:your|enter|insert|replace)[-_ ]?[a-z_-]{0,40}|my[-_]?(?:password|passwd|secret|token|api[-_]?key|key)"
    r"|[a-z_-]{0,40}[-_](?:here|goes[-_]here|placeholder|example|sample|dummy)"
    r"|change[-_]?(?:me|it|this)|placeholder|dummy|sample|example|redacted|notasecret|not[-_]a[-_]secret"
    r"|password|passwd|pass|secret|token|api[-_]?key|apikey|credentials?|[\w-]{0,60}(?:\.\.\.|\u2026)"
)
# A reference to a variable in the value's place: shell or Makefile `$NAME`, `${NAME}`, `$(NAME)` in upper case,
# PHP or Perl `$name` in lower case (a password that starts with `$` mixes cases or has digits and signs).
_VARIABLE = re.compile(
    r"\$(?:\{[A-Z_][A-Z0-9_]{1,60}\}|\([A-Z_][A-Z0-9_]{1,60}\)|[A-Z_][A-Z0-9_]{1,60}|[a-z_][a-z0-9_]{1,60})"
)
# An XML or HTML element that names an entry in its `key` attribute and holds it in another (`<entry key="a.b"
# value="…"/>`, .NET `<add key="ApiKey" value="…"/>`): the `key` attribute's value is a name.
_ENTRY_KEY = re.compile(r"<[A-Za-z_][\w:.-]{0,40}(?:\s+[\w:.-]{1,40}=\"[^\"<>]{0,200}\")*\s+key=\"$")
_ENTRY_VALUE = re.compile(r"(?:\s+[\w:.-]{1,40}=\"[^\"<>]{0,200}\")*\s+value=\"")
# A bare value that is code: a dotted name, a call, a keyword, a snake_case name.
# A name as code writes it: snake_case, CONSTANT_CASE, camelCase or PascalCase (not a random mix of cases and digits).
_NAME = (
    r"(?:[a-z_$][a-z_$]{0,64}|[A-Z][A-Z_]{0,64}|[a-z]{1,30}(?:[A-Z][a-z]{1,30}){1,8}|(?:[A-Z][a-z]{1,30}){1,8})\d{0,2}"
)
_NAME_RE = re.compile(_NAME)
_DOTTED = re.compile(_NAME + r"(?:\." + _NAME + r"){1,6}(?:\(\))?;?")
_DOTTED_NAME = _NAME + r"(?:\." + _NAME + r"){0,6}"
_DOTTED_NAME_RE = re.compile(_DOTTED_NAME)
# A call whose arguments are names too (`saslprep(password)`, `get(self.key, None)`): `xx(Zq9Xw8Yv)` is a password
_ARG = r"[@$:]?" + _DOTTED_NAME  # a name, a bound parameter (`@new`, `:name`) or a variable (`$x`)
_CALL = re.compile(
    _DOTTED_NAME + r"\((?:[ \t]{0,2}" + _ARG + r"(?:[ \t]{0,2},[ \t]{0,2}" + _ARG + r"){0,6}[ \t]{0,2})?\);?"
)
# A call whose one argument is such a call (`bytes(memoryview(password))`).
_NESTED_CALL = re.compile(_DOTTED_NAME + r"\([ \t]{0,2}" + _CALL.pattern.removesuffix(";?") + r"[ \t]{0,2}\);?")
_SNAKE = re.compile(r"[a-z]{2,}(?:_[a-z]{2,}){1,6}|[a-z]{2,}(?:[A-Z][a-z]{1,})+")
_KEYWORDS = frozenset(
    {"await", "new", "none", "null", "nil", "true", "false", "self", "this", "undefined", "lambda", "yield",
     "return", "not", "function", "async", "typeof", "kwargs", "args", "options", "opts", "params", "request",
     "req", "ctx", "getpass", "input", "str", "bytes", "string", "os", "env", "config", "settings", "props",
     "read", "write"}
)  # fmt: skip
_CODE_AFTER = re.compile(r"\s{0,3}(?:\(|\.[A-Za-z_]|\bor\b|\band\b|\|\||&&|\?\?|\bif\b)")
# A per-request anti-forgery token's label, right before its value (`name="authenticity_token" value="`).
_ANTI_FORGERY = re.compile(
    r"(?i)(?:authenticity_token|csrf[-_]?token|xsrf[-_]?token|csrfmiddlewaretoken|__RequestVerificationToken|_csrf)"
    r"(?:[\"']?\s{0,3}(?:[:=]|content=|value=)|[\"']\s{1,3}(?:value|content)=)\s{0,3}[\"']?$"
)
# A URL whose path ends in a static asset (an image, a style sheet, a script, a font): its segments are names.
_ASSET_URL = re.compile(
    r"(?i)https?://[^\s\"'<>()]{1,2000}?\.(?:png|jpe?g|gif|webp|svg|ico|bmp|avif|image|css|js|woff2?|ttf|mp[34])"
    r"(?![\w-])"
)
_URL_START = re.compile(r"(?i)https?://[^\s\"'<>()]{0,2000}$")
_ELIDED = ("...", "\u2026")
# Where an HTML anchor's name starts: a fragment link, an element's id (generated ids: `EAX_002dAES128-interface`).
_AGE_KEY = re.compile(r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}")
_ANCHOR_BEFORE = ('href="#', "href='#", ' id="', " id='")
_ANTI_FORGERY_HINT = re.compile(r"(?i)csrf|xsrf|authenticity|verificationtoken")
_CIPHER_STARTS = ("AQ", "Ag", "gAAAAA", "ENC", "enc(", '"', "'")
_PUBLIC_LABEL = re.compile(
    r"(?i)(?<![a-z])(?:public[_-]?(?:key|token)|publishable[_-]?key|pub[_-]?key)\w{0,12}[\"']?\s{0,3}[:=]\s{0,3}[\"']?$"
)
# A value written like a vendor token: a prefix of letters and a separator, then a run of letters and digits.
_TOKEN_LIKE = re.compile(r"[A-Za-z]{1,16}(?:[_-][A-Za-z]{1,16}){0,2}[_-][A-Za-z0-9_-]{12,}")
_RECORD_PATH = re.compile(r"[^\s,]{0,200},sha256=")
_B64_RUN = re.compile(r"[A-Za-z0-9+/_=-]{1,8192}")
_NOT_B64 = re.compile(r"[^A-Za-z0-9+/_=-]")
_CALL_OPEN = re.compile(_DOTTED_NAME + r"\((?:[ \t]{0,2}" + _ARG + r"(?:[ \t]{0,2},[ \t]{0,2}" + _ARG + r"){0,6})?,?")
# A name of code with digits inside (`base64.b64encode`, `standard_b64encode`): dotted or snake_case, then a call.
_IDENTIFIER_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+")
_PRIVATE_NAME = re.compile(r"_{1,2}[a-z][a-z]{1,30}(?:_[a-z]{2,30}){0,6}")
_DOC_PARAM = re.compile(r"(?::param|:type|:arg|:keyword|@param|@arg)[ \t]+[\w.*]{1,64}:?[ \t]*$")
# A type name: two or more capitalised parts, optionally after an acronym (`RefreshToken`, `HTTPPasswordMgr`).
_TYPE_NAME = re.compile(r"(?:[A-Z]{2,8})?(?:[A-Z][a-z]{1,20}){2,6}|[A-Z]{2,8}(?:[A-Z][a-z]{1,20}){1,6}")
_GENERIC_TYPE = re.compile(r"(?:[A-Z][a-z]{1,20}){1,6}")
_ANNOTATION_AFTER = re.compile(r"[ \t]{0,2}(?:[,|)\]\[=]|\r?\n|$)")
_HEX_LITERAL = re.compile(r"0[xX][0-9a-fA-F]{2,64}")
# Where the value of a labelled assignment is really the next line's key (`password=\njdbc.url=`).
_NEXT_KEY = re.compile(r"[A-Za-z_][\w.-]{0,80}[:=]")
# A verified token still gets one shape test: a run of this many consecutive characters (`klmnopqrstuvwx`).
_VERIFIED_RUN = 12
_SHAPE_LIMIT = 160  # as in `docvalues`: longer runs are blobs, not documentation values
# Detectors whose format has runs of its own (X bearer tokens start with 21 `A`; base64 of a binary structure has
# `AAAA`): only the marker and mask tests of `documentation_value` apply to them.
_OWN_RUNS = frozenset(
    {"twitter_bearer_token", "ntlm_authenticate_message", "ntlm_hash_dump", "jwt", "grafana_provisioned_key",
     "flyio_token", "aws_bedrock_api_key"}
)  # fmt: skip
# A fixed segment of a URL path: lower-case words (`regulatory-receipt`, `document`, `d`), a version, a number.
_FIXED_SEGMENT = re.compile(r"[a-z]{1,24}(?:[-_.][a-z]{1,24}){0,6}|v\d{1,3}|\d{1,12}|")
# A run written as names in code's cases, in segments (`BenchmarkNew/WithEntropy-8`, `TestParse/empty_input`): a
# capitalised or lower-case word, then capitalised words (an acronym before one), each segment words or a number.
_CAMEL_SEGMENT = r"(?:[A-Z][a-z]{2,20}|[a-z]{2,20})(?:[A-Z]{2,6}(?=[A-Z][a-z])|[A-Z][a-z]{1,20})*"
_CODE_NAME = re.compile(r"[+-]?" + _CAMEL_SEGMENT + r"(?:[/_.-](?:" + _CAMEL_SEGMENT + r"|\d{1,4}))+")
# The label of a signature, right before its value or a run of it (`CloudFront-Signature: …~…`, `X-Amz-Signature=`).
_SIGNATURE_BEFORE = re.compile(r"(?i)(?<![a-z])signature[\"']?[ \t]{0,3}[:=][ \t]{0,3}[\"']?[\w~=+/-]{0,4096}$")
# A destructuring assignment's target, before the label (`exposed, token = `, `data, err := `).
_TUPLE_TARGET = re.compile(r"[ \t]{0,40}(?:[A-Za-z_][\w.]{0,60}[ \t]{0,2},[ \t]{0,2}){1,6}")
_TUPLE_VALUE = re.compile(r"[ \t]{0,3}:?=[ \t]{0,3}$")
# What is left of the entropy fallback's run, cut at a URL's host, is kept as a token from this length.
_SHORT_SEGMENT = 16
_AUTHORITY_END = re.compile(r"[/?#\s\"'<>`]")
_LABEL_BEFORE = re.compile(r"[A-Za-z_][\w.]{0,60}$")
# A quoted snake_case name (`"apiKey": "oa_citations"`), and the labels where a password may be written so.
_SNAKE_NAME = re.compile(r"[a-z]{2,24}(?:_[a-z]{2,24}){1,5}")
_PASSWORD_LABEL = re.compile(r"(?i)pass|pwd|pw\b|phrase")
# Words a message about a credential starts with after its name (`pwd: expected bytes, got %s`, `password: must
# be 8 characters`, `token: invalid or expired`): function words and the verbs of validation messages.
_MESSAGE_WORDS = frozenset(
    {"expected", "expects", "expecting", "must", "should", "cannot", "could", "would", "will", "shall", "may",
     "might", "is", "are", "was", "were", "has", "have", "had", "not", "does", "did", "required", "requires",
     "missing", "invalid", "incorrect", "wrong", "empty", "unknown", "unsupported", "failed", "mismatch",
     "mismatched", "too", "the", "an", "of", "for", "from", "with", "without", "into", "and", "when", "if",
     "unless", "given", "provided", "supplied", "changed", "updated", "reset", "expired", "accepted", "rejected",
     "denied", "ignored", "deprecated", "omitted", "unset", "undefined", "disabled", "enabled", "needed", "needs",
     "see", "use", "uses", "used", "using", "set", "got", "found", "only", "then", "also"}
)  # fmt: skip
# What follows a message's first word: another word, the end of a sentence or of the line.
_MESSAGE_AFTER = re.compile(r"[ \t]{1,3}[A-Za-z%]|[ \t]*(?:[.,;:!?)\"'`]|\r?\n|$)")
# The literal prefix of a family's documented format (its `spec`): `'AIza'`, `'GOCSPX-'`, `'sk-ant-'`.
_SPEC_PREFIX = re.compile(r"'([A-Za-z][A-Za-z0-9]{1,11}(?:[_-][A-Za-z0-9]{1,8}){0,2}[_-]?)'")
_PEM_BODY = re.compile(r"-----BEGIN[ A-Z0-9]{0,40}-----(.*?)(?:-----END[ A-Z0-9]{0,40}-----|\Z)", re.S)
_PEM_HEADER_LINE = re.compile(r"(?m)^[A-Za-z-]{2,40}:[^\n]*$")
_BASE64_LINE = re.compile(r"(?m)^[ \t]*[A-Za-z0-9+/]{40,120}={0,2}[ \t]*\r?$")
_B64_LAST_LINE = re.compile(r"[ \t]*[A-Za-z0-9+/]{1,119}={0,2}[ \t]*(?=\r?\n|$)")
# A data URL with base64 content (`data:image/png;base64,iVBOR…`): its bytes decide whether it is binary.
_DATA_URL = re.compile(
    r"(?i)\bdata:([\w.+-]{1,40}/[\w.+-]{1,60})(?:;[\w.+-]{1,40}=[\w.+-]{1,40}){0,3};base64,"
    r"([A-Za-z0-9+/]{16,}={0,2})"
)
_CONTENT_TYPE = re.compile(r"(?i)content-type:\s*([\w.+-]+/[\w.+-]+)")
# Magic numbers of binary formats (decoded bytes): images, audio, video, fonts, archives, documents, executables.
_MAGIC = (
    b"\x89PNG", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF", b"BM", b"II*\x00", b"MM\x00*", b"\x00\x00\x01\x00",
    b"%PDF", b"PK\x03\x04", b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"7z\xbc\xaf", b"Rar!", b"wOFF", b"wOF2", b"OTTO",
    b"\x00\x01\x00\x00", b"ID3", b"\xff\xfb", b"\xff\xf3", b"OggS", b"fLaC", b"\x1aE\xdf\xa3", b"\x7fELF", b"MZ",
    b"\xca\xfe\xba\xbe", b"\xcf\xfa\xed\xfe", b"\x00asm", b"8BPS", b"\xd0\xcf\x11\xe0",
)  # fmt: skip


def _cased_prefixes() -> dict[str, tuple[str, ...]]:
    """The literal prefixes (four characters or more, with a letter) of the built-in families whose format is
    case-sensitive, by their first four characters in lower case."""
    found: dict[str, set[str]] = {}
    for detector in BUILTIN_DETECTORS:
        literal = _SPEC_PREFIX.match(detector.spec)
        if literal is None or detector.pattern.flags & re.IGNORECASE or len(literal.group(1)) < 4:
            continue
        prefix = literal.group(1)
        found.setdefault(prefix[:4].lower(), set()).add(prefix)
    return {key: tuple(sorted(values)) for key, values in found.items()}


_CASED_PREFIXES = _cased_prefixes()


def binary_magic(raw: bytes) -> bool:
    """Whether bytes start like a known binary file format (or `....ftyp`: MP4, MOV, HEIC, AVIF)."""
    return raw.startswith(_MAGIC) or raw[4:8] == b"ftyp"


def decoded_binary(text: str, *, strict_magic: bool = False) -> bool:
    """Whether `text` is base64 (whitespace between lines allowed) of bytes that are not UTF-8 text. With
    `strict_magic`, only bytes of a known binary format count (so a base64 random key is not spared)."""
    compact = "".join(text.split())
    if len(compact) < 16:
        return False
    try:
        raw = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError):
        try:
            raw = base64.urlsafe_b64decode(compact + "=" * (-len(compact) % 4))
        except (binascii.Error, ValueError):
            return False
    if binary_magic(raw):
        return True
    if strict_magic:
        return False
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return sum(1 for c in decoded if not c.isprintable() and c not in "\r\n\t") > len(decoded) // 20


@dataclass(frozen=True, slots=True)
class Signal:
    """One reason a finding is not a secret."""

    name: str
    detectors: frozenset[str] | None
    """Detector names the signal may overrule (None: every detector but `private_key`)."""
    description: str


SIGNALS: tuple[Signal, ...] = (
    Signal("public_material", None,
           "inside a certificate, a public key, a PGP public key block or signature, or an X509Certificate element"),
    Signal("digest", GENERIC, "a digest or nonce after its algorithm (`h1:`, `sha256=`, `sha512-`, `'nonce-`)"),
    Signal("public_id", GENERIC,
           "an object id with a public prefix (Stripe `pi_`, `ch_`, `cus_`, `evt_`, …) or an IPFS content id"),
    Signal("request_id", GENERIC, "a request, host, trace or version id after its label (`x-amz-id-2:`, `HostId`)"),
    Signal("ulid", GENERIC, "a ULID (26 Crockford base32 characters, starting 0-7)"),
    Signal("placeholder", LABELLED, "a labelled value that is a placeholder (`your-api-key-here`, `changeme`, `sk_…`)"),
    Signal("code_identifier", LABELLED - {"url_credentials"},
           "a bare labelled value that is code: a dotted name, a call, a keyword or a snake_case name"),
    Signal("prose", LABELLED - {"url_credentials"},
           "a labelled word that starts a message about the credential (`pwd: expected bytes, got %s`, `password:"
           " must be …`): a function word or a validation message's verb"),
    Signal("entry_name", LABELLED, "the `key` attribute of an element that holds the value in another"
           " (`<entry key=\"a.b\" value=\"…\"/>`, `<add key=\"ApiKey\" value=\"…\"/>`)"),
    Signal("binary_base64", ENTROPY,
           "base64 of a binary file (image, audio, font, archive, PDF), by its magic bytes or a MIME content type"),
    Signal("uuencoded", GENERIC, "inside a line of uuencoded data (`M` and 60 characters from space to backquote)"),
    Signal("email_value", LABELLED - {"url_credentials"},
           "a labelled value that is an e-mail address (`\"key\": \"someone@host.com\"`): an account, not a secret"),
    Signal("path_segment", frozenset({"high_entropy_secret"}), "a segment of a path (`/nix/store/<hash>-name`)"),
    Signal("empty_key_block", frozenset({"private_key"}),
           "a private-key block with nothing in it, or a word (`-----BEGIN PRIVATE KEY-----\\nanything\\n-----END…`)"),
    Signal("ciphertext", GENERIC,
           "encrypted data: a Sealed Secrets value, a Fernet token, a Jasypt `ENC(…)` or SOPS `ENC[AES256_GCM,…]`"),
    Signal("anti_forgery_token", GENERIC,
           "a per-request anti-forgery token after its label (`authenticity_token`, `csrf-token`, `_csrf`)"),
    Signal("asset_url", ENTROPY, "a segment of a URL to a static asset (an image, a style sheet, a script, a font)"),
    Signal("public_label", GENERIC, "a value after a label naming public material (`public_key`, `publicToken`,"
           " `publishable_key`)"),
    Signal("failed_checksum", ENTROPY, "a run in a format with a checksum of its own that fails it (an age key"
           " whose Bech32 checksum is wrong), which the format's detector rejected"),
    Signal("anchor_name", ENTROPY, "an HTML anchor: the value of an `id` attribute or of an `href` to `#` a fragment"),
    Signal("elided_excerpt", ENTROPY, "an excerpt of a longer run, elided on both sides (`...a9Fq…Zk2...`)"),
    Signal("code_name", frozenset({"high_entropy_secret"}),
           "a run written as names in code's cases (`BenchmarkNew/WithEntropy-8`: a test's name and its sub-test)"),
    Signal("signature", frozenset({"high_entropy_secret"}),
           "a value after a label naming a signature (`CloudFront-Signature:`, `X-Amz-Signature=`): made with a key,"
           " not the key"),
    Signal("cased_copy", frozenset({"high_entropy_secret"}),
           "a run in one case that starts with a family's case-sensitive prefix in the other (`AIZASY…` for `AIza…`):"
           " a copy changed in case, which the family's format rejects"),
    Signal("documentation_value", None,
           "a value with too little information to be issued: EXAMPLE, x runs, one character repeated, a short cycle,"
           " consecutive runs (`abcdef`, `0123456789`), few distinct characters, a mask right after it"),
    Signal("url_host", frozenset({"high_entropy_secret"}),
           "the host and the fixed path segments of a URL the entropy fallback's run starts in: the run is cut to the"
           " path's opaque segments, and spared when they are not random on their own"),
    Signal("public_document", frozenset({"high_entropy_secret"}),
           "an opaque URL path segment after a fixed path naming a document shown to whoever holds the link (a"
           " receipt, an invoice, a Google document's `/d/<id>`): its id"),
)  # fmt: skip
SIGNALS_BY_NAME: dict[str, Signal] = {s.name: s for s in SIGNALS}


class _TextFacts:
    """What one text's signals need, computed on first use: public blocks, binary base64 blocks."""

    __slots__ = ("_binary", "_public", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._public: list[tuple[int, int]] | None = None
        self._binary: list[tuple[int, int]] | None = None

    def public(self) -> list[tuple[int, int]]:
        if self._public is None:
            text = self.text
            if "-----BEGIN" not in text and "X509Certificate>" not in text:
                self._public = []
            else:
                self._public = [m.span() for m in _PUBLIC_BLOCK.finditer(text)]
        return self._public

    def binary(self) -> list[tuple[int, int]]:
        if self._binary is None:
            self._binary = _binary_blocks(self.text)
        return self._binary


def _binary_blocks(text: str) -> list[tuple[int, int]]:
    """Runs of wrapped base64 lines (two or more, of one width but the last) whose bytes are binary: by magic bytes,
    or under a MIME part header naming a content type that is not text."""
    blocks: list[tuple[int, int]] = []
    lines = list(_BASE64_LINE.finditer(text))
    i = 0
    while i < len(lines):
        first = lines[i]
        width = len(first.group().strip())
        j = i
        while (
            j + 1 < len(lines) and lines[j + 1].start() == lines[j].end() + 1 and len(lines[j].group().strip()) == width
        ):
            j += 1
        start, end = first.start(), lines[j].end()
        if j > i and (last := _B64_LAST_LINE.match(text, end + 1)) is not None and len(last.group().strip()) < width:
            end = last.end()  # the block's last, shorter line (below the 40 characters a line needs on its own)
        if j > i or width >= 60:
            chunk = text[start:end]
            header = text[max(0, start - 600) : start]
            typed = _CONTENT_TYPE.findall(header)
            mime_binary = (
                bool(typed)
                and not typed[-1].lower().startswith(("text/", "message/", "multipart/"))
                and ("base64" in header.lower())
            )
            if mime_binary or decoded_binary(chunk, strict_magic=True):
                blocks.append((start, end))
        i = j + 1
    for found in _DATA_URL.finditer(text) if "base64," in text else ():
        if decoded_binary(found.group(2)) and not found.group(1).lower().startswith("text/"):
            blocks.append(found.span(2))
    return blocks


def _inside(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(a <= start and end <= b for a, b in spans)


def _code_value(text: str, finding: Finding) -> bool:
    value = finding.value
    before = text[finding.start - 1] if finding.start else ""
    if before in "\"'`" or not value:
        return False  # a quoted value is a string literal, whatever it spells
    core = value.strip()
    if core.lower() in _KEYWORDS:
        return True
    if core.startswith("```"):
        return True  # a Markdown code fence opens where the value would be (`create the secret:\n\n```console`)
    if _DOTTED.fullmatch(core) or _CALL.fullmatch(core) or _NESTED_CALL.fullmatch(core):
        return not core.replace(".", "").isdigit()
    if _SNAKE.fullmatch(core) and not any(c.isdigit() for c in core):
        return True
    if _HEX_LITERAL.fullmatch(core):
        return True  # a number literal (`#define PASSWORD 0x0dead1beef`)
    if "\n" in text[max(0, finding.start - 8) : finding.start] and (
        _NEXT_KEY.fullmatch(core) or ((key := _NEXT_KEY.match(text, finding.start)) and key.end() > finding.end)
    ):
        return True  # an empty value, then the next line's key (`API_KEY=\nOTHER_API_KEY=`, cut at its label)
    if _CALL_OPEN.fullmatch(core) or (_IDENTIFIER_CALL.fullmatch(core) and text.startswith("(", finding.end)):
        return True  # a call whose arguments the value stops inside (`password.encode(`, `base64.b64encode(…)`)
    if _PRIVATE_NAME.fullmatch(core):
        return True  # `_core_token=_core_token`
    if _DOTTED_NAME_RE.fullmatch(core) and _tuple_target(text, finding.start):
        return True  # a name unpacked into several (`exposed, token = result`, `data, err := x.y`)
    if _DOC_PARAM.search(text, max(0, finding.start - 80), finding.start):
        return True  # `:param refresh_token: should …` describes a parameter
    if _GENERIC_TYPE.fullmatch(core) and text.startswith("[", finding.end):
        return True  # a generic type's name, subscripted (`token: Sequence[int | str]`, `Optional[`)
    if _TYPE_NAME.fullmatch(core) and _ANNOTATION_AFTER.match(text, finding.end):
        return True  # a type annotation (`private_key: PrivateKeyTypes,`, `passwd: HTTPPasswordMgr`)
    return _CODE_AFTER.match(text, finding.end) is not None and _NAME_RE.fullmatch(core) is not None


def _tuple_target(text: str, start: int) -> bool:
    """Whether the label before `start` is one of several names a destructuring assignment binds (`a, token = `)."""
    operator = _TUPLE_VALUE.search(text, max(0, start - 8), start)
    if operator is None:
        return False
    label = _LABEL_BEFORE.search(text, max(0, operator.start() - 64), operator.start())
    if label is None:
        return False
    line = text.rfind("\n", max(0, label.start() - 400), label.start()) + 1
    return _TUPLE_TARGET.fullmatch(text, line, label.start()) is not None


def _quoted_name(text: str, finding: Finding) -> bool:
    """A quoted snake_case name under a key or token label (`"apiKey": "oa_citations"`): an issued key is random;
    under a password's label a value may be words, so those are left out."""
    if not _SNAKE_NAME.fullmatch(finding.value) or not text.startswith(('"', "'"), finding.end):
        return False
    return _PASSWORD_LABEL.search(text, max(0, finding.start - 40), finding.start) is None


def _url_start(text: str, start: int) -> int:
    """Where the http(s) URL that runs without a blank up to `start` begins, or -1."""
    lo = max(0, start - 2000)
    at = text.rfind("://", lo, start)
    if at < 0:
        return -1
    found = _URL_START.search(text, max(lo, at - 8), start)
    return -1 if found is None else found.start()


def _public_material(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _inside(facts.public(), finding.start, finding.end)


def _digest(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return (
        digest_or_nonce(finding.value)
        or _DIGEST_BEFORE.search(text, max(0, finding.start - 40), finding.start) is not None
    )


def public_object_id(value: str) -> bool:
    """Whether `value`, whole, is an object id with a public prefix (Stripe's `cus_…`, `price_…`; never a client
    secret `…_secret_…`) or an IPFS content id: what an API hands out and takes back, never a key."""
    return (
        (_PUBLIC_ID.fullmatch(value) is not None or _STRIPE_ID.fullmatch(value) is not None) and "_secret_" not in value
    ) or _CONTENT_ID.fullmatch(value) is not None


def digest_or_nonce(value: str) -> bool:
    """Whether `value` starts with a digest's algorithm or a nonce's role (`sha384-…` in SRI, `'nonce-…'` in a
    CSP, `h1:` in go.sum): a hash or a per-response value, published by design."""
    return _DIGEST_VALUE.match(value) is not None


def _public_id(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return public_object_id(finding.value) or _inside_freenet_request(text, finding.start, finding.end)


def freenet_request_key(key: str) -> bool:
    """Whether a Freenet key (`CHK@…`, `SSK@…`, `USK@…`, as a whole) is one a node publishes for others to fetch:
    a content hash key, or a signed subspace key whose extra field (Freenet's base64, `~` and `-` for `+` and
    `/`) says "request" (its second byte 0: `AQACAAE`); an insert URI (`AQECAAE`) holds the private key."""
    found = _FREENET_KEY.fullmatch(key)
    if found is None:
        return False
    if found.group(1) == "CHK":
        return True
    try:
        extra = base64.b64decode(found.group(2).translate(_FREENET_ALPHABET) + "=", validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(extra) >= 2 and extra[1] == 0


def _inside_freenet_request(text: str, start: int, end: int) -> bool:
    """Whether `start:end` lies inside a Freenet request key (the key begins at most 100 characters before)."""
    at = text.rfind("@", max(0, start - 100), start + 1)
    if at < 3:
        return False
    found = _FREENET_KEY.match(text, at - 3)
    return found is not None and found.end() >= end and freenet_request_key(found.group(0))


def _request_id(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _ID_LABEL.search(text, max(0, finding.start - 40), finding.start) is not None


def _ulid(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _ULID.fullmatch(finding.value) is not None


def _placeholder(text: str, finding: Finding, facts: _TextFacts) -> bool:
    core = finding.value.strip().strip("\"'`").lstrip("=:>")
    if core.endswith(")") and "(" not in core:
        core = core.rstrip(")")  # a bare argument that ends a call (`as_bytes(password=password)`)
    if "***" in core and 2 * core.count("*") >= len(core):
        return True  # a value masked already (`*****1*****2`)
    return _PLACEHOLDER.fullmatch(core) is not None or _VARIABLE.fullmatch(core) is not None


def _code_identifier(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _code_value(text, finding) or _quoted_name(text, finding)


def _entry_name(text: str, finding: Finding, facts: _TextFacts) -> bool:
    start = finding.start
    if not text.endswith('key="', 0, start) or not text.startswith('"', finding.end):
        return False
    return (
        _ENTRY_KEY.search(text, max(0, start - 400), start) is not None
        and _ENTRY_VALUE.match(text, finding.end + 1) is not None
    )


def _binary_base64(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _inside(facts.binary(), finding.start, finding.end)


def uuencoded_line(line: str) -> bool:
    """Whether a line is a line of uuencoded data: its first character gives the count of bytes it encodes (`M`:
    45), the rest is that many bytes in groups of four characters, every character between space and backquote
    (no lower-case letter), it encodes 15 bytes or more, and a quarter of it or more is signs of 8 kinds or more
    (as encoded bytes are: a third of uuencode's characters are signs)."""
    line = line.rstrip("\r")
    if len(line) < 21 or not _UU_LINE.fullmatch(line):
        return False
    count = (ord(line[0]) - 32) & 63
    size = 1 + 4 * ((count + 2) // 3)
    if count < 15 or len(line) not in (size, size + 1):  # some encoders add a checksum character
        return False
    # Encoded bytes spread over the 64 characters, 28 of them signs; an upper-case config line
    # (`MYSQL_DATABASE_USER=CRED;MYSQL_DATABASE_PASSWORD=…`, 61 characters) has a few `_=;` only.
    signs = [c for c in line[1:] if not c.isalnum()]
    return 4 * len(signs) >= len(line) - 1 and len(set(signs)) >= 8


def _uuencoded(text: str, finding: Finding, facts: _TextFacts) -> bool:
    if finding.end - finding.start > _UU_MAX or _LOWER.search(finding.value):
        return False  # (most findings: a uuencoded line has no lower-case letter)
    # a uuencoded line is at most 86 characters: look for its ends that far only
    low = max(0, finding.start - _UU_MAX)
    start = text.rfind("\n", low, finding.start) + 1
    if not start and low:
        return False
    end = text.find("\n", finding.end, finding.end + _UU_MAX)
    if end < 0:
        if len(text) > finding.end + _UU_MAX:
            return False
        end = len(text)
    return uuencoded_line(text[start:end])


def _email_value(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return "@" in finding.value and _EMAIL_VALUE.fullmatch(finding.value.strip("\"'`")) is not None


def _path_segment(text: str, finding: Finding, facts: _TextFacts) -> bool:
    value = finding.value
    if _RECORD_PATH.match(text, finding.end):
        return True  # a path in a wheel's RECORD (`pkg/mod.py,sha256=…,123`)
    if "/" in value and text[finding.start - 2 : finding.start] == "/.":
        # in a dot directory (`/tmp/.tmpKUZmhW/pkg-1.0/…`: the run stops at the version's dot)
        return any(_WORD.fullmatch(p) for p in _PATH_PIECES.split(value))
    if value.count("/") < 2:
        return False
    inside = value.startswith("/") or (
        text[finding.start - 1 : finding.start] == "/" and _url_start(text, finding.start) < 0
    )  # a URL's path may carry a token (`hooks.slack.com/workflows/…`): not spared as a path
    return inside and any(_WORD.fullmatch(p) for p in value.split("/"))


def _documentation_value(text: str, finding: Finding, facts: _TextFacts) -> bool:
    value = finding.value
    detector = finding.detector
    if BUILTIN_BY_NAME.get(detector.name) is not detector:
        return False  # a custom detector's values are the operator's business
    encoded = "\\" in value or "%" in value or "&#" in value  # an escaped run repeats `\x`, `%2`
    after = text[finding.end : finding.end + 12]
    # the entropy fallback gets the vendor formats' thresholds (a random run trips them about 1e-5 of the time)
    ordinary = not encoded and detector.name not in _OWN_RUNS and detector.entity != "private_key"
    verified = ordinary and verdict(detector.name, value) == "verified"
    shape = ordinary and not verified
    labelled = detector.name in LABELLED
    if documentation_value(value, after, strict=not labelled, shape=shape):
        return True
    if verified and len(value) <= _SHAPE_LIMIT and sequence_runs(value)[0] >= _VERIFIED_RUN:
        # a check (a length, a suffix, even a CRC32) says nothing of how the body was written: a run of 12
        # consecutive characters (`klmnopqrstuvwx`) has probability about 1e-18 in a random token
        return True
    # a labelled value written like a vendor token (`SONAR_TOKEN=sqp_abcdef…`) is judged as one too
    return (
        labelled
        and shape
        and len(value) >= 20
        and _TOKEN_LIKE.fullmatch(value) is not None
        and (documentation_value(value, after, strict=True))
    )


def _prose(text: str, finding: Finding, facts: _TextFacts) -> bool:
    value = finding.value
    return (
        value.lower() in _MESSAGE_WORDS
        and (value.islower() or value.istitle())
        and _MESSAGE_AFTER.match(text, finding.end) is not None
    )


def _code_name(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _CODE_NAME.fullmatch(finding.value) is not None


def _said_before(text: str, finding: Finding, reach: int, probe: str, pattern: re.Pattern[str]) -> bool:
    """`pattern` in the `reach` characters before the finding, searched only when `probe` (lower or upper case)
    is there: a cheap `find` keeps the regex off the texts that cannot match."""
    lo = max(0, finding.start - reach)
    if text.find(probe, lo, finding.start) < 0 and text.find(probe.upper(), lo, finding.start) < 0:
        return False
    return pattern.search(text, lo, finding.start) is not None


def _signature(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _said_before(text, finding, 4200, "ignature", _SIGNATURE_BEFORE)


def _cased_copy(text: str, finding: Finding, facts: _TextFacts) -> bool:
    value = finding.value
    letters = value.upper() != value.lower()
    if not letters or value not in (value.upper(), value.lower()):
        return False  # letters of both cases: not a copy changed in case
    head = value[:4]
    for prefix in _CASED_PREFIXES.get(head.lower(), ()):
        start = value[: len(prefix)]
        if start != prefix and start.lower() == prefix.lower():
            return True
    return False


def _random_rest(finding: Finding, text: str, cut: int) -> Finding | None:
    """The finding cut to start at `cut`, when what is left could still be a token: its detector accepts it, or it
    is 16 characters or more of two character classes or more (the whole run was read as random with the host glued
    on, and a path token that the fallback would not read alone, `lAZkeNncJgQyVerdKK`, stays redacted as it was);
    else None."""
    rest = text[cut : finding.end]
    detector = finding.detector
    if len(rest) >= max(detector.min_length, 1) and (
        detector.validator is None or detector.validator(rest, finding.entity) is not None
    ):
        return Finding(cut, finding.end, rest, finding.entity, detector)
    if len(rest) >= _SHORT_SEGMENT and _character_classes(rest) >= 2:
        return Finding(cut, finding.end, rest, finding.entity, detector)
    return None


def _character_classes(text: str) -> int:
    """How many of lower case, upper case and digits `text` has."""
    return any(c.islower() for c in text) + any(c.isupper() for c in text) + any(c.isdigit() for c in text)


def _url_run(text: str, finding: Finding, documents: bool) -> tuple[str | None, Finding]:
    """The entropy fallback's run where it starts in an http(s) URL's host or among its path's fixed segments (its
    alphabet has `/` but not `.`, so `…stripe.me/regulatory-receipt/<id>` is one run from the last label of the
    host): (None, the run cut to the opaque segments after them), or (a reason, the finding) when it is spared: a
    host name's label, or what is left is not random on its own (`url_host`), or a public document's id
    (`public_document`). A run in a query or a fragment is left as it is; one in the user name or password before
    `@` loses only the `//` it may start with."""
    start = finding.start
    value = finding.value
    slashes = 2 if value.startswith("//") and text.endswith(":", 0, start) else 0  # `https:` + `//<token>@host`
    inside = start + slashes
    if text.rfind("://", max(0, inside - 2000), inside) < 0:
        return None, finding
    url = _url_start(text, inside)
    if url < 0:
        return None, finding
    authority = text.find("://", url, inside) + 3
    before = text[authority:inside]
    if "?" in before or "#" in before:
        return None, finding
    pieces = value[slashes:].split("/")
    if "/" in before:
        path = authority + before.index("/")
        if len(pieces) == 1 or not _FIXED_SEGMENT.fullmatch(pieces[0]):
            return None, finding  # a run that starts in the path with an opaque segment: judged as it is
    else:
        path = inside + len(pieces[0])
        ends = _AUTHORITY_END.search(text, path, path + 2048)
        if "@" in text[path : ends.start() if ends else len(text)]:
            # a user name or password before `@`: judged as it is, without the `//` before it
            user = _random_rest(finding, text, inside) if slashes else finding
            return ("url_host", finding) if user is None else (None, user)
        if len(pieces) == 1:
            return "url_host", finding  # a label of a host name: in every DNS answer
    cut = inside + len(pieces[0]) + 1
    for piece in pieces[1:]:
        if not _FIXED_SEGMENT.fullmatch(piece):
            break
        cut += len(piece) + 1
    rest = _random_rest(finding, text, cut)
    if rest is None:
        return "url_host", finding
    if documents and PUBLIC_DOCUMENT_PATH.search(text, path, cut) is not None:
        return "public_document", finding
    return None, rest


def _empty_key(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _empty_key_block(finding.value)


def _ciphertext(text: str, finding: Finding, facts: _TextFacts) -> bool:
    begin = finding.start
    if (
        not text.startswith(_CIPHER_STARTS, begin)
        and not text.endswith("==", 0, begin)
        and text.find("ENC", max(0, begin - 24), begin) < 0
        and text.find("enc(", max(0, begin - 24), begin) < 0
    ):
        return False  # none of the shapes `ciphertext` knows starts here
    # the whole base64 run: a labelled value may be cut at its detector's bound (256 characters)
    if text.endswith("==", 0, begin):  # a finding inside a longer run, after a `==` in it
        breaks = [m.end() for m in _NOT_B64.finditer(text, max(0, begin - 2048), begin)]
        begin = breaks[-1] if breaks else max(0, begin - 2048)
    run = _B64_RUN.match(text, begin) if text.startswith(("AQ", "Ag"), begin) else None
    whole = run.group() if run is not None and run.end() >= finding.end else finding.value
    return ciphertext(whole, text[max(0, finding.start - 24) : finding.start])


def _anti_forgery(text: str, finding: Finding, facts: _TextFacts) -> bool:
    lo = max(0, finding.start - 60)
    if _ANTI_FORGERY_HINT.search(text, lo, finding.start) is None:
        return False
    return _ANTI_FORGERY.search(text, lo, finding.start) is not None


def _asset_url(text: str, finding: Finding, facts: _TextFacts) -> bool:
    start = _url_start(text, finding.start)
    if start < 0:
        return False
    asset = _ASSET_URL.match(text, start)
    return asset is not None and asset.end() >= finding.end


def _public_label(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return _said_before(text, finding, 40, "ub", _PUBLIC_LABEL)


def _failed_checksum(text: str, finding: Finding, facts: _TextFacts) -> bool:
    lo = max(0, finding.start - 16)
    return any(not bech32_valid(m.group()) for m in _AGE_KEY.finditer(text, lo, finding.end + 64))


def _anchor_name(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return text.endswith(_ANCHOR_BEFORE, 0, finding.start) and text.startswith(("'", '"'), finding.end)


def _elided(text: str, finding: Finding, facts: _TextFacts) -> bool:
    return text.endswith(_ELIDED, 0, finding.start) and text.startswith(_ELIDED, finding.end)


_CHECKS: dict[str, Callable[[str, Finding, _TextFacts], bool]] = {
    "public_material": _public_material,
    "digest": _digest,
    "public_id": _public_id,
    "request_id": _request_id,
    "ulid": _ulid,
    "placeholder": _placeholder,
    "code_identifier": _code_identifier,
    "prose": _prose,
    "entry_name": _entry_name,
    "binary_base64": _binary_base64,
    "uuencoded": _uuencoded,
    "email_value": _email_value,
    "path_segment": _path_segment,
    "ciphertext": _ciphertext,
    "anti_forgery_token": _anti_forgery,
    "asset_url": _asset_url,
    "public_label": _public_label,
    "failed_checksum": _failed_checksum,
    "anchor_name": _anchor_name,
    "elided_excerpt": _elided,
    "empty_key_block": _empty_key,
    "url_host": lambda text, finding, facts: False,  # (cuts or spares a run before the signals: `_url_run`)
    "public_document": lambda text, finding, facts: False,
    "code_name": _code_name,
    "signature": _signature,
    "cased_copy": _cased_copy,
    "documentation_value": _documentation_value,
}


def _signal_holds(name: str, text: str, finding: Finding, facts: _TextFacts) -> bool:
    """Whether the named signal holds for a finding (one dictionary look-up: `spare` calls the checks directly)."""
    return _CHECKS[name](text, finding, facts)


def _empty_key_block(value: str) -> bool:
    """A private-key block whose body (header fields aside) is empty, a lower-case word or a placeholder."""
    found = _PEM_BODY.match(value)
    if found is None or "-----END" not in value:
        return False
    body = "".join(_PEM_HEADER_LINE.sub("", found.group(1)).split())
    return not body or (body.isalpha() and body.islower()) or set(body) <= set("x.*<>-_#\u2026")


# The key of the signals for a finding whose format's own check failed (`verify.py`): those that say the value is
# something else (a digest, a public id, a request id, a ULID, a ciphertext, an anti-forgery token, public material).
# Not those that judge only a random run by where it sits (a path, an asset URL, an excerpt): a hand-made token
# planted in an icon's URL is still a token.
_REFUTED = "\x00refuted"
_URL_RUNS = frozenset({"high_entropy_secret"})  # the detectors whose run `_url_run` may cut at a URL's path


def _first_signal(signals: tuple[Signal, ...], text: str, finding: Finding, facts: _TextFacts) -> str | None:
    """The name of the first signal that holds for a finding, or None."""
    for signal in signals:
        if _CHECKS[signal.name](text, finding, facts):
            return signal.name
    return None


class Context:
    """The active signals (a redactor's `context` option) and the decision they make on findings."""

    __slots__ = ("by_detector", "documents", "signals", "urls")

    def __init__(self, signals: tuple[Signal, ...]) -> None:
        self.signals = signals
        self.by_detector: dict[str, tuple[Signal, ...]] = {}
        names = {s.name for s in signals}
        self.urls = "url_host" in names
        self.documents = "public_document" in names

    @classmethod
    def from_option(cls, option: Any, path: str) -> Context | None:
        """`true` (every signal, the default), `false` (none) or a mapping of signal names to booleans."""
        if option is True or option is None:
            return cls(SIGNALS)
        if option is False:
            return None
        if not isinstance(option, Mapping):
            raise ValueError(f"{path}: must be true, false or a mapping of signal names to true/false")
        unknown = [k for k in option if k not in SIGNALS_BY_NAME]
        if unknown:
            raise ValueError(f"{path}: unknown signal(s); known: {', '.join(SIGNALS_BY_NAME)}")
        for key, value in option.items():
            if not isinstance(value, bool):
                raise ValueError(f"{path}.{key}: must be true or false")
        chosen = tuple(s for s in SIGNALS if option.get(s.name, True))
        return cls(chosen) if chosen else None

    def _for(self, detector: str) -> tuple[Signal, ...]:
        found = self.by_detector.get(detector)
        if found is None:
            found = self.by_detector[detector] = tuple(
                s
                for s in self.signals
                if (s.detectors is None and detector != "private_key")
                or (s.detectors and (detector in s.detectors or (detector == _REFUTED and s.detectors >= GENERIC)))
            )
        return found

    def spare(self, text: str, findings: list[Finding]) -> tuple[list[Finding], list[str]]:
        """(the findings to act on, the names of the signals that spared the others, one per finding). A finding
        to act on may be cut shorter than it came (`url_host`: the entropy fallback's run without a URL's host)."""
        kept: list[Finding] = []
        spared: list[str] = []
        facts: _TextFacts | None = None
        for finding in findings:
            reason = None
            if finding.detector.category in ("secret", "credential"):
                name = finding.detector.name
                if name in CHECKED and verdict(name, finding.value) == "refuted":
                    name = _REFUTED  # weaker evidence: what may overrule the entropy fallback may overrule it
                signals = self._for(name)
                if facts is None:
                    facts = _TextFacts(text)
                reason = _first_signal(signals, text, finding, facts)
                if reason is None and self.urls and name in _URL_RUNS:
                    # a run from a URL's host on: cut to its opaque segments, which the signals judge again
                    reason, cut = _url_run(text, finding, self.documents)
                    if reason is None and cut is not finding:
                        finding = cut
                        reason = _first_signal(signals, text, finding, facts)
            if reason is None:
                kept.append(finding)
            else:
                spared.append(reason)
        return kept, spared


# --- structure signals (a mapping says what its values are) ------------------------------------------------

_SCHEMA_TYPES = frozenset({"string", "object", "array", "integer", "number", "boolean", "null"})
_SCHEMA_WORDS = frozenset(
    {"type", "description", "title", "format", "properties", "items", "required", "enum", "const", "default",
     "examples", "example", "pattern", "minlength", "maxlength", "minimum", "maximum", "additionalproperties",
     "oneof", "anyof", "allof", "not", "$ref", "$schema", "$id", "$defs", "definitions", "nullable", "readonly",
     "writeonly", "deprecated", "x-nullable", "minitems", "maxitems", "uniqueitems", "patternproperties",
     "exclusiveminimum", "exclusivemaximum", "multipleof", "contentencoding", "contentmediatype", "discriminator",
     "xml", "externaldocs", "propertynames", "dependentrequired", "if", "then", "else", "$comment", "sensitive",
     "x-sensitive", "secret", "x-secret"}
)  # fmt: skip
# A shape of an AWS (botocore, Smithy JSON) service model: `{"type": "structure", "members": {…}}`, or a member
# that points at one (`{"shape": "SecretIdType", "documentation": "…"}`).
_SHAPE_TYPES = frozenset({"structure", "string", "list", "map", "blob", "integer", "long", "timestamp", "boolean",
                          "double", "float", "union", "enum", "short", "byte", "bigdecimal", "biginteger"})  # fmt: skip
_SHAPE_WORDS = frozenset(
    {"type", "members", "member", "key", "value", "shape", "documentation", "required", "sensitive", "min", "max",
     "pattern", "enum", "box", "error", "exception", "fault", "deprecated", "deprecatedmessage", "flattened",
     "locationname", "location", "idempotencytoken", "jsonvalue", "timestampformat", "xmlnamespace",
     "xmlattribute", "streaming", "requireslength", "eventstream", "event", "union", "document", "retryable",
     "hostlabel", "contextparam", "querystringname", "wrapper", "payload", "tags"}
)  # fmt: skip
_SCHEME_TYPES = frozenset({"http", "apikey", "oauth2", "openidconnect", "mutualtls"})
SCHEME_TYPES = frozenset({"http", "apiKey", "oauth2", "openIdConnect", "mutualTLS"})
"""OpenAPI security scheme types as written (a mapping with one is checked by `describes`)."""
_SCHEME_WORDS = frozenset(
    {"type", "scheme", "bearerformat", "in", "name", "flows", "openidconnecturl", "description", "x-amazon-apigateway"
     "-authtype", "x-amazon-apigateway-authorizer", "x-google-issuer", "x-google-jwks_uri", "x-google-audiences"}
)  # fmt: skip
_JWK_PUBLIC = frozenset({"kty", "use", "kid", "alg", "key_ops", "n", "e", "x", "y", "crv", "x5c", "x5t", "x5t#s256",
                         "x5u", "ext", "iat", "exp", "nbf"})  # fmt: skip


def describes(data: Mapping[Any, Any]) -> str | None:
    """Why a mapping describes a value rather than holding one: `schema` (a JSON Schema node), `security_scheme`
    (an OpenAPI security scheme), `public_jwk` (a JSON Web Key without private members); else None."""
    if not data:
        return None
    keys = {k.lower() for k in data if isinstance(k, str)}
    if len(keys) != len(data):
        return None
    kind = data.get("type")
    if keys <= _SCHEMA_WORDS and (
        (isinstance(kind, str) and kind in _SCHEMA_TYPES)
        or (isinstance(kind, list) and kind and all(isinstance(t, str) and t in _SCHEMA_TYPES for t in kind))
        or keys & {"$ref", "properties", "items", "oneof", "anyof", "allof"}
    ):
        return "schema"
    if (
        keys <= _SHAPE_WORDS
        and ((isinstance(kind, str) and kind in _SHAPE_TYPES) or (kind is None and isinstance(data.get("shape"), str)))
        and all(isinstance(data[k], dict) for k in ("key", "value", "member", "members") if k in data)
    ):
        return "schema"  # a map's `key`/`value` and a list's `member` point at shapes: a string there holds one
    if isinstance(kind, str) and kind.lower() in _SCHEME_TYPES and keys <= _SCHEME_WORDS and len(keys) >= 2:
        return "security_scheme"
    if "kty" in keys and keys <= _JWK_PUBLIC:
        return "public_jwk"
    return None


_BINARY_KEYS = frozenset({"data", "blob"})
_BINARY_MIME = re.compile(r"(?i)^(?:image|audio|video|font)/|^application/(?:octet-stream|pdf|zip|gzip|x-|vnd\.)")


def binary_field(key: str, data: Mapping[Any, Any], value: Any) -> bool:
    """An image or audio block's `data`, or a resource's `blob`, whose base64 decodes to binary bytes (a payload
    that decodes to text is scanned like any text)."""
    if key not in _BINARY_KEYS or not isinstance(value, str) or len(value) < 16:
        return False
    kind = data.get("type")
    mime = data.get("mimeType", data.get("mime_type", data.get("contentType")))
    marked = kind in ("image", "audio") or key == "blob" or (isinstance(mime, str) and _BINARY_MIME.match(mime))
    return bool(marked) and decoded_binary(value)


SpareFn = Callable[[str, list[Finding]], tuple[list[Finding], list[str]]]

__all__ = [
    "GENERIC",
    "SCHEME_TYPES",
    "SIGNALS",
    "SIGNALS_BY_NAME",
    "Context",
    "Signal",
    "binary_field",
    "binary_magic",
    "decoded_binary",
    "describes",
]
