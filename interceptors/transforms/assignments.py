"""Labelled credentials in the code and config shapes the generic `secret_assignment` does not read.

`secret_assignment` (catalog) reads `label = value` and `label: value` in env, INI, YAML, JSON, TOML and shell.
These detectors add the other shapes a secret is written in: Make's `::=` and `?=`, PHP's `.=` and
`$config["db_password"] =`, typed declarations (`var dbPassword string = "…"`), calls that set a named value
(`System.setProperty("db.password", "…")`), XML elements and attributes (`<password>…</password>`, the value on
its own line; `<add key="ApiKey" value="…"/>`), SQL (`IDENTIFIED BY '…'`, `SET PASSWORD … = '…'`, `WITH PASSWORD
'…'`), prose (`pw:…`, `PW:… ID:…`, `password hunter2x`), HTTP `Authorization: token …`, `--token …` flags,
`curl -su user:pass`, `docker login -p …`, `echo … | … --password-stdin` and PowerShell `ConvertTo-SecureString`.

Each is anchored at its label or literal, and every quantifier is bounded, so a pattern stays linear on hostile
input. A value that is a placeholder or code (`secret.secret_value`, `getPassword()`) is spared by `context`.
"""

from __future__ import annotations

import re

from .detectors import Detector, Validator, validate_secret
from .entities import is_placeholder

# The word that makes a name a credential's name; the name ends with it (`dbPassword`, `SMTP_PASS`, `bind_pw`).
_WORD = (
    r"(?:password|passwd|passphrase|passcode|pwd|pw|pass|secret|secret[_.-]?key|client[_.-]?secret|api[_.-]?key|"
    r"apikey|access[_.-]?key|private[_.-]?key|auth[_.-]?token|access[_.-]?token|refresh[_.-]?token|token|"
    r"credentials?|key[_.-]?base)"
)
_BARE = r"""([^\s"'`;,&<>(){}\[\]\\]{4,256})"""
_QUOTED = r"""(?:"([^"\\\r\n]{4,256})"|'([^'\\\r\n]{4,256})')"""
_VALUE = r"(?:" + _QUOTED + "|" + _BARE + ")"
_SAMPLE = "<[A-Za-z0-9!#%^*_+]{10,30}>"


def _looks_like_password(value: str, entity: str) -> str | None:
    """A value written after `password` with only a blank between: a credential has letters and a digit or a
    symbol, or mixed case, and is no plain word (`Password reset`, `password policy`)."""
    core = value.lstrip("=:>").strip("\"'.,;:!?)")
    if len(core) < 6 or is_placeholder(core):
        return None
    letters = any(c.isalpha() for c in core)
    digits = any(c.isdigit() for c in core)
    symbols = any(not c.isalnum() for c in core)
    mixed = any(c.islower() for c in core) and any(c.isupper() for c in core[1:])
    return entity if letters and (digits or symbols or mixed) else None


def _validate_value(value: str, entity: str) -> str | None:
    """Not a placeholder, a variable, a flag or a path; not digits alone."""
    core = value.strip().lstrip("=:>")
    if core.startswith(("$", "-", "/", "~/", "./")) or core.isdigit() or is_placeholder(core):
        return None
    return validate_secret(core, entity)


def _validate_flag_value(value: str, entity: str) -> str | None:
    """A `--token` value: a secret has a digit or is long; a word, a path or a variable is not one."""
    checked = _validate_value(value, entity)
    if checked is None or ("." in value and "/" in value):
        return None
    return checked if any(c.isdigit() for c in value) or len(value) >= 20 else None


def _a(
    name: str,
    pattern: str,
    hints: tuple[str, ...],
    spec: str,
    source: str,
    description: str,
    *,
    entity: str = "secret_value",
    group: int | tuple[int, ...] = (1, 2, 3),
    min_length: int = 8,
    validator: Validator | None = _validate_value,
    confidence: float = 0.85,
) -> Detector:
    return Detector(
        name=name,
        entity=entity,
        category="secret",
        pattern=re.compile(pattern),
        confidence=confidence,
        hints=hints,
        min_length=min_length,
        group=group,
        validator=validator,
        description=description,
        spec=spec,
        source=source,
    )


_HINTS = ("pass", "pwd", "pw", "secret", "key", "token", "credential")

ASSIGNMENT_DETECTORS: tuple[Detector, ...] = (
    _a("assignment_extra_labels",
       r"""(?i)(?:(?<=[a-z0-9][_.-])pw|passcode|key[_.-]?base)\d{0,2}["']?[ \t]{0,4}"""
       r"""[:=][ \t]{0,4}""" + _VALUE,
       ("_pw", "-pw", ".pw", "passcode", "key_base", "keybase"),
       "('ldap_bind_pw = '|'secret_key_base: '|'SMTP_PW='|'passcode: ') " + _SAMPLE,
       "labels the generic assignment does not know: LDAP bind_pw, Rails secret_key_base, passcodes",
       "a credential assigned to a name ending in pw, passcode or key_base"),
    _a("array_key_secret",
       r"""(?i)\[[ \t]{0,4}["'](?:[\w.-]{0,40}?)""" + _WORD + r"""["'][ \t]{0,4}\][ \t]{0,4}=[ \t]{0,4}""" + _QUOTED,
       _HINTS,
       "('$config[\"db_password\"] = \"'|'$settings[\"api_key\"] = \"') " + _SAMPLE + " '\";'",
       "PHP and Perl arrays, Python and Ruby dictionaries assigned by key",
       "a credential stored under a credential-named key of an array or dictionary", group=(1, 2)),
    _a("xml_secret_element",
       r"(?i)<((?:[\w-]{1,24}:)?(?:[\w.-]{0,40}?)" + _WORD + r")(?:[ \t][^<>]{0,200})?>[ \t\r\n]{0,200}"
       r"([^<>\s]{4,256})[ \t\r\n]{0,200}</\1>",
       ("</",),
       "('<password>' " + _SAMPLE + " '</password>'|'<Password>\n    ' " + _SAMPLE + " '\n</Password>'"
       "|'<db.password>' " + _SAMPLE + " '</db.password>')",
       "XML configuration (Maven settings.xml, Tomcat, .NET, Spring)",
       "a credential element's text, also on a line of its own", group=2),
    _a("xml_secret_attribute",
       # each pattern starts with a character class, its boundary checked after it: the engine then skips ahead to
       # candidate characters at C speed (a leading look-behind or `\b` makes it try every position)
       r"""[KkNn](?<![\w-].)(?i:ey|ame)[ \t]{0,4}=[ \t]{0,4}["'](?i:[\w.:-]{0,40}?""" + _WORD
       + r""")["'](?:[^<>"']{0,60}?\b(?i:value)[ \t]{0,4}=[ \t]{0,4}"([^"<>\r\n]{4,256})"|[^<>"']{0,60}?\b(?i:value)"""
       r"""[ \t]{0,4}"""
       r"""=[ \t]{0,4}'([^'<>\r\n]{4,256})'|[ \t]{0,4}>[ \t\r\n]{0,40}([^<>\s]{4,256})[ \t\r\n]{0,40}<)""",
       ("key=", "name="),
       "('<add key=\"ApiKey\" value=\"'|'<property name=\"db.password\" value=\"') " + _SAMPLE + " '\" />'",
       ".NET appSettings, Java properties and Spring beans in XML",
       "the value beside a credential-named key or name attribute"),
    _a("sql_password",
       r"(?i)\b(?:identified[ \t]{1,4}(?:with[ \t]{1,4}[\w-]{1,40}[ \t]{1,4})?by(?:[ \t]{1,4}password)?|"
       r"with[ \t]{1,4}(?:encrypted[ \t]{1,4}|unencrypted[ \t]{1,4})?password|"
       r"set[ \t]{1,4}password(?:[ \t]{1,4}for[ \t]{1,4}[^\s=]{1,100})?[ \t]{0,4}=?(?:[ \t]{0,4}password[ \t]{0,4}\()?)"
       r"""[ \t]{0,4}(?:"([^"\r\n]{3,256})"|'([^'\r\n]{3,256})')""",
       ("identified", "password"),
       "('CREATE USER app IDENTIFIED BY \\''|'ALTER ROLE app WITH PASSWORD \\''|'SET PASSWORD FOR root = \\'') "
       + _SAMPLE + " '\\';'",
       "SQL: MySQL and Oracle IDENTIFIED BY, PostgreSQL WITH PASSWORD, MySQL SET PASSWORD",
       "the password of a SQL statement that creates or changes a login", entity="password", group=(1, 2)),
    _a("prose_password",
       r"[Pp](?<![\w-].)(?i:w|wd|asswd|assword|assphrase|asscode)(?:[ \t]{0,3}(?::=|=>|[:=])[ \t]{0,3}|[ \t]{1,3}"
       r"(?i:(?:is|was)[ \t]{1,3})?)(?:\"([^\"\r\n]{4,128})\"|'([^'\r\n]{4,128})'|([^\s\"'<>;,&(){}\[\]]{4,128}))",
       ("pw", "pwd", "pass"),
       "('pw:'|'PW:'|'the password is '|'my pw is '|'the pw is ') " + _SAMPLE + " (' ID:admin'|'')",
       "prose and notes: pw:…, PW:… ID:…, 'password is …', passphrase \"…\"",
       "a password written after the word in prose, when it looks like one", entity="password",
       validator=_looks_like_password),
    _a("curl_combined_user",
       r"""-(?<![\w-]-)[a-zA-Z]{1,6}u(?:[ \t]{1,4}|=)["']?[^\s:"'@]{1,128}:([^\s"'@]{4,256})""",
       ("curl",),
       "'curl -su ' [a-z]{4,10} ':' " + _SAMPLE + " ' https://ci.example.com/'",
       "curl(1) combined short flags (-su user:password)",
       "the password of curl's -u given with other short flags", entity="password", group=1),
    _a("authorization_scheme",
       r"[Aa](?<![\w-].)(?i:uthorization)[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?(?i:token|apikey|api-key|key|sso-key|"
       r"ssws|bot|splunk|gitlab|klaviyo-api-key|zoho-oauthtoken|dsn|hmac)[ \t]{1,4}([A-Za-z0-9._~+/=:-]{8,512}+)",
       ("auth",),
       "('Authorization: token '|'Authorization: SSWS '|'authorization: Bot ') <[A-Za-z0-9_+]{20,40}>",
       "HTTP Authorization schemes other than Bearer and Basic (GitHub token, Okta SSWS, Discord Bot, GoDaddy)",
       "the credential of an Authorization header with a vendor scheme", group=1),
    _a("registry_login_password",
       r"[dphnosbc](?<![\w-].)(?:ocker|odman|elm|erdctl|ras|kopeo|uildah|rane)[ \t]{1,4}(?:registry[ \t]{1,4})?login\b"
       r"[^\n|]{0,160}?[ \t](?:-p|--password)(?:[ \t]{1,4}|=)(?:\"([^\"\r\n]{4,256})\"|'([^'\r\n]{4,256})'|"
       r"([^\s\"']{4,256}))",
       ("login",),
       "('docker login -u bob -p '|'helm registry login reg.example.com -u ci -p ') " + _SAMPLE,
       "docker login, podman login, helm registry login -p",
       "the password of a container registry login", entity="password"),
    _a("password_stdin",
       r"""[ep](?<![\w-].)(?:cho|rintf)[ \t]{1,4}(?:-n[ \t]{1,4})?(?:"([^"\r\n$]{4,256})"|'([^'\r\n]{4,256})'|"""
       r"""([^\s"'|$]{4,256}))[ \t]{0,4}\|[^\n|]{0,160}?--password-stdin""",
       ("--password-stdin",),
       "'echo ' " + _SAMPLE + " ' | docker login -u ci --password-stdin'",
       "docker login --password-stdin fed by echo",
       "a password echoed into a login that reads it from standard input", entity="password"),
)  # fmt: skip

ASSIGNMENT_NAMES = frozenset(d.name for d in ASSIGNMENT_DETECTORS)

__all__ = ["ASSIGNMENT_DETECTORS", "ASSIGNMENT_NAMES"]
