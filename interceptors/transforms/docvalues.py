"""Strings in a secret's format that hold no secret: documentation values, ciphertexts, per-request tokens.

A vendor format fixes a token's prefix and alphabet; documentation and tests fill the rest with values nobody
could be issued: `ghp_xxxx…`, `glc_1111…`, `AKIAIOSFODNN7EXAMPLE`, `sk-ant-api03-abc123xyz-…klmnopqrstuvwx`,
`xoxp-1234-1234-1234-…`, `hf_3478658437…` with only a few distinct characters. `documentation_value` measures
how little information the value carries: a marker word in one case (`EXAMPLE`, `placeholder`, `your_token`,
`…Here`), one character eight times in a row (not `A`: base64 of zero bytes), a short cycle repeated
(`123123123123`), too few distinct characters for its length, long runs of consecutive characters (`abcdef`,
`0123456789`, `76543210`), a variable part of digits only, or a mask right after it (`xoxp-…-####`,
`ops_eyJ…..[Redacted]`). A random token trips these tests with a probability of about 1e-5 or less at the
lengths vendor formats use (the strict thresholds were chosen so: a run of 8 consecutive hex characters has
probability about 4e-7 in a 64-character hex token, a run of 6 right after the prefix or at the end about 2e-6
each; the digits count on in keyboard order, `7890` and `0987`, as documentation types them); labelled
values, which have no fixed alphabet, get a looser one (a run of 12: the alphabet strings code keeps,
`0123456789abcdef…`), and are no credential under 4 characters.

Ciphertexts are the other "format without secret": a Bitnami Sealed Secrets value (base64 of a 2-byte
big-endian length of an RSA-OAEP ciphertext of 256 or 512 bytes, then the AES-GCM data: `AgA…`, `AQB…`), a
Fernet token (`gAAAAA…`, version byte 0x80 and a timestamp), a Jasypt `ENC(…)` or SOPS `ENC[AES256_GCM,…]`
value. They are encrypted with a key that is not in the text.
"""

from __future__ import annotations

import base64
import binascii
import re

# Words documentation puts in a token's place, each in one case throughout (lower, upper or capitalised: a
# random base62 token spells `dummy` with mixed case, `DuMmy`, far more often than in one case).
_WORDS = ("example", "placeholder", "redacted", "dummy", "sample", "thisis", "tokenhere", "keyhere", "secrethere",
          "stringhere", "your_token", "your_key", "your_secret", "your_api_key", "your_password", "yourtoken",
          "yourkey", "yoursecret", "yourapikey", "fakekey", "fakesig", "fake_key", "faketoken")  # fmt: skip
_MARKER = re.compile(
    "|".join(sorted({v for w in _WORDS for v in (w, w.upper(), w.capitalize(), w.title().replace("_", ""))}))
    + r"|(?i:(?:x[-_]?){6})|[Tt]oken[Hh]ere|[Ss]tring[Hh]ere|[Kk]ey[Hh]ere|[Ee]xample[A-Z]?"
)
# Lower-case pieces one of which every marker contains: one scan of the lowered value before the case-exact regex.
_MARKER_HINT = re.compile("example|placeholder|redacted|dummy|sample|thisis|here|your|fake|xx|x-x|x_x")
# `A` is left out of the run and cycle tests: base64 of zero bytes is `AAAA…` in real keys and macaroons.
_RUN = re.compile(r"([^A])\1{7}")
_CYCLE = re.compile(r"(?!AA)(..)\1{4}|(?!AAA)(...)\2{3}|(?!AAAA)(....)\3{2}")
# Documentation values are short; a longer run (a base64 blob) gets the marker and mask tests only.
_SHAPE_LIMIT = 160
# Where a run of consecutive characters crosses from digits to letters (`89ab`, `BA98`).
_CROSSINGS = ("9a", "9A", "a9", "A9")
_INC = bytes((i + 1) % 256 for i in range(256))
_DEC = bytes((i - 1) % 256 for i in range(256))
# What shows a value was cut or masked right after it (`xoxp-1-2-3-####`, `ops_eyJ…..[Redacted]`).
_MASKED_AFTER = re.compile(r"(?i)#{3}|\*{3}|\.\.|\u2026|\[redacted")
_NAMED_ENDS = tuple(sep + word for sep in "-_" for word in ("token", "key", "secret", "password"))
_CONSTANT_NAME = re.compile(r"[A-Z]{2,30}(?:_[A-Z]{2,30}){1,6}")
_FORMAT_TEMPLATE = re.compile(r"\{[A-Za-z_][\w.]{0,60}\}")
# A token whose variable part is only digits, 24 or more (`hf_3478658437…`): in a hex or base62 token the chance
# is 0.625**24 (1e-5) or less.
_DIGIT_RUN = re.compile(r"[A-Za-z]{1,16}(?:[_-][A-Za-z]{1,16}){0,2}[_-][0-9]{24,}")
# Where the variable part of a token starts: after its letters-only prefix (`sk-`, `rubygems_`, `lin_api_`).
_PREFIX = re.compile(r"[A-Za-z]{1,16}(?:[_-][A-Za-z]{1,16}){0,2}[_-]")


def prefixed(value: str) -> bool:
    """Whether a value starts like a vendor token, with a prefix of letters and a separator (`sk-ant-`, `xoxb-`)."""
    return _PREFIX.match(value) is not None


def _agree(whole: int, shifted: int, size: int, run: int) -> bool:
    """Whether two byte strings of `size` bytes, given as integers, agree at `run` consecutive positions."""
    return b"\x00" * run in (whole ^ shifted).to_bytes(size, "big")


def _may_repeat_or_run(value: str) -> tuple[bool, bool]:
    """Cheap supersets, with integer XORs in C: (`_RUN` or `_CYCLE` may match: a character 8 times, a period of 2,
    3 or 4 over 10-12 characters; a run of four consecutive characters may be there: two adjacent positions
    where a byte is its predecessor plus or minus one, or a digit-letter seam of `_CROSSINGS`)."""
    raw = value.encode("latin-1", "replace")  # one byte a character: positions line up with the text
    size = len(raw)
    if size < 4:
        return False, False
    whole = int.from_bytes(raw, "big")
    repeat = False
    for period, run in ((1, 7), (2, 8), (3, 9), (4, 8)):
        rest = size - period
        if rest >= run and _agree(whole & ((1 << 8 * rest) - 1), whole >> 8 * period, rest, run):
            repeat = True
            break
    tail = whole & ((1 << 8 * (size - 1)) - 1)
    head = raw[:-1]
    steps = (
        _agree(tail, int.from_bytes(head.translate(_INC), "big"), size - 1, 2)
        or _agree(tail, int.from_bytes(head.translate(_DEC), "big"), size - 1, 2)
        or any(c in value for c in _CROSSINGS)
    )
    return repeat, steps


def _index(char: str) -> tuple[int, int]:
    """(class, position) in the alphabets documentation counts through: digits (class 0, shared with both
    letter cases so `789abc` runs on), lower case (1) and upper case (2) letters after the digits."""
    if "0" <= char <= "9":
        return 0, ord(char) - 48
    if "a" <= char <= "z":
        return 1, ord(char) - 87
    if "A" <= char <= "Z":
        return 2, ord(char) - 55
    return -1, -100


def sequence_runs(text: str) -> tuple[int, int, int]:
    """(the longest run of consecutive characters, ascending or descending; the characters in runs of four or
    more; the run the text starts with): `abc123xyz-klmnopqrstuvwx` → (14, 14, 3)."""
    longest = covered = 0
    first = 0
    previous: tuple[int, int] = (-1, -100)
    length, step = 1, 0
    for position, char in enumerate(text):
        current = _index(char)
        delta = current[1] - previous[1]
        if current[0] == previous[0] == 0 and delta in (9, -9):
            delta //= -9  # the digits in keyboard order: `…7890123…` runs on, as `…3210987…` does down
        joined = current[0] >= 0 and previous[0] >= 0 and (current[0] == previous[0] or 0 in (current[0], previous[0]))
        if joined and delta in (1, -1) and (step in (0, delta)):
            length += 1
            step = delta
        else:
            if length >= 4:
                covered += length
            longest = max(longest, length)
            if position and not first:
                first = length
            # a run that turns back starts again at the previous character (`123210`: `123` then `3210`)
            length, step = (2, delta) if joined and delta in (1, -1) else (1, 0)
        previous = current
    if length >= 4:
        covered += length
    return max(longest, length), covered, first or length


def _alnum_size(value: str) -> int:
    return sum(c.isalnum() for c in value)


def documentation_value(value: str, text_after: str = "", *, strict: bool = True, shape: bool = True) -> bool:
    """Whether a value in a secret's format is a documentation or test value (see the module docstring).
    `strict`: a vendor format (a random alphabet is known); else a labelled value (looser sequence tests).
    `shape`: also the run, cycle and distinct-character tests (off for formats with runs of their own: X bearer
    tokens start with 21 `A`, base64 of binary structures has `AAAA`)."""
    lowered = value.lower()
    if (_MARKER_HINT.search(lowered) and _MARKER.search(value)) or _MASKED_AFTER.match(text_after):
        return True
    if lowered.endswith(_NAMED_ENDS):
        return True  # `xoxb-my-bot-token`: a value that ends by saying what it stands for
    if not strict:
        core = value.strip("\"'` ")
        if len(core) < 4 or _FORMAT_TEMPLATE.fullmatch(core) or _CONSTANT_NAME.fullmatch(core):
            # `password = "abc"`: too short to be issued; `token='{token}'`: a format template;
            # `access_token=ACCESS_TOKEN`: a constant's name standing for the value
            return True
        words = core.split()
        if len(words) >= 4 and all(word.isalpha() for word in words):
            return True  # prose (`'Password used to generate key'`)
    if not shape or len(value) > _SHAPE_LIMIT:
        return False
    repeat, steps = _may_repeat_or_run(value)
    if repeat and (_RUN.search(value) or _CYCLE.search(value)):
        return True
    chars = set(value)
    if len(chars) <= 12 and len(value) >= 16 and sum(c.isalnum() for c in chars) <= 4 and _alnum_size(value) >= 16:
        return True
    if strict and _DIGIT_RUN.fullmatch(value):
        return True  # 24 digits in a row inside a token of letters and digits (`hf_3478658437…`)
    if not steps:
        return False  # no run of four: none of the sequence tests below can hold
    alnum_size = _alnum_size(value)
    longest, covered, _ = sequence_runs(value)
    if strict:
        prefix = _PREFIX.match(value)
        start = sequence_runs(value[prefix.end() : prefix.end() + 12])[2] if prefix else 0
        end = sequence_runs(value[:-13:-1])[2]  # the run the value ends with (read backwards: `…f654321`)
        return (
            longest >= 8 or start >= 6 or end >= 6 or covered >= 12 or (covered >= 6 and 10 * covered >= 4 * alnum_size)
        )
    return longest >= 12 or (longest == covered == alnum_size >= 6)  # `'abcdefg'`, `123456`


# --- ciphertexts -----------------------------------------------------------------------------------------

_FERNET = re.compile(r"gAAAAA[A-Za-z0-9_-]{80,}={0,2}")
_ENCRYPTED_WRAPPER = re.compile(r"(?:\b(?:ENC|enc)\(|\bENC\[(?:AES256_GCM|PKCS7),data:)$")


def sealed_secret(value: str) -> bool:
    """A Bitnami Sealed Secrets ciphertext: base64 whose first two bytes give the length of the RSA-OAEP
    ciphertext that follows (256 or 512 bytes, 2048- or 4096-bit keys), then more bytes (the AES-GCM data)."""
    if len(value) < 360 or not value.startswith(("AQ", "Ag")):
        return False
    head = value[:8]
    try:
        raw = base64.b64decode(head, validate=True)
    except (binascii.Error, ValueError):
        return False
    size = int.from_bytes(raw[:2], "big")
    return size in (256, 512) and len(value.rstrip("=")) * 3 // 4 > size + 2


def ciphertext(value: str, text_before: str) -> bool:
    """A value that is encrypted data: a Sealed Secrets value, a Fernet token, or inside `ENC(`/`ENC[AES256_GCM,`
    (Jasypt, SOPS)."""
    core = value.strip("\"'")
    if (core.startswith("gAAAAA") and _FERNET.fullmatch(core)) or sealed_secret(core):
        return True
    if core.startswith(("ENC(", "enc(", "ENC[AES256_GCM,", "ENC[PKCS7,")):
        return True
    return ("ENC" in text_before or "enc(" in text_before) and _ENCRYPTED_WRAPPER.search(text_before[-24:]) is not None


__all__ = ["ciphertext", "documentation_value", "prefixed", "sealed_secret", "sequence_runs"]
