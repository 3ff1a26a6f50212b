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
# A name that ends with a credential word, just before a comparison (`password == `, `apiToken !== `): one
# fixed-width look-behind per word, spacing and operator, placed after the operator it precedes.
_CHECKED_WORDS = ("password", "passwd", "pwd", "secret", "token", "apikey", "api_key", "passphrase")
_COMPARISONS = ("==", "== ", "===", "=== ", "!=", "!= ", "!==", "!== ")
_COMPARED_NAME = "|".join(
    [f"(?<=(?i:{word}){gap}{op})" for word in _CHECKED_WORDS for gap in ("", " ") for op in _COMPARISONS]
    + [rf"(?<=(?i:{word})\.equals\()" for word in _CHECKED_WORDS]
)
# Korean words for account and user id, and the Korean, Japanese and Chinese words for password.
_KO_ACCOUNT, _KO_USER_ID = "\uacc4\uc815", "\uc544\uc774\ub514"
_CJK_PASSWORD = ("\ube44\ubc00\ubc88\ud638", "\ube44\ubc88", "\uc554\ud638", "\ud328\uc2a4\uc6cc\ub4dc",
                 "\u30d1\u30b9\u30ef\u30fc\u30c9", "\u5bc6\u7801", "\u5bc6\u78bc")  # fmt: skip
# `ID/`, `user(`, `계정/`: what comes before the slash or parenthesis of an ID/PW label (a look-behind each).
_ID_WORDS = ("(?i:id)", "(?i:user)", "(?i:username)", "(?i:login)", "(?i:account)", _KO_ACCOUNT, _KO_USER_ID)
_ID_LABEL = "|".join(f"(?<={word}{gap}[/(])" for word in _ID_WORDS for gap in ("", " "))
# The same labels seen from the `P` of `PW` (`ID/PW`, `User(Password`): `prose_password` leaves them to the pair.
_NOT_AFTER_ID_LABEL = "".join(f"(?<!{word}[/(].)" for word in (*_ID_WORDS, "(?i:name)") if word != "(?i:username)")
_BARE = r"""([^\s"'`;,&<>(){}\[\]\\]{4,256})"""
_QUOTED = r"""(?:"([^"\\\r\n]{4,256})"|'([^'\\\r\n]{4,256})')"""
_VALUE = r"(?:" + _QUOTED + "|" + _BARE + ")"
_SAMPLE = "<[A-Za-z0-9!#%^*_+]{5,20}[0-9!#%^*_+][A-Za-z0-9!#%^*_+]{4,9}>"
"""A password as these detectors define one (`_looks_like_password`): 10 to 30 characters with a digit or a symbol
somewhere (letters of one case alone read as a word, and a sample must be what its detector promises to find)."""


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


def _strong_password(value: str, entity: str) -> str | None:
    """A value with no label of its own (`10.0.0.5 bob/…`): a password mixes three of lower case, upper case,
    digits and symbols, and is no path (`src/main.py` has no digit and no upper case)."""
    core = value.rstrip(".,;:!?)")
    if len(core) < 6 or is_placeholder(core):
        return None
    kinds = (any(c.islower() for c in core) + any(c.isupper() for c in core) + any(c.isdigit() for c in core)
             + any(not c.isalnum() for c in core))  # fmt: skip
    return entity if kinds >= 3 and any(c.isdigit() for c in core) else None


LABEL_PAIR = re.compile(r"[A-Za-z][\w.-]*=\S")
"""A `name=value` label (a Kubernetes node label), which stands where a password would in `host user/…`."""


def _ip_login_password(value: str, entity: str) -> str | None:
    """`_strong_password`, and no `name=value` label (`10.245.1.3   kubernetes.io/hostname=10.245.1.3` is a node's
    label in `kubectl get nodes --show-labels`, not a login)."""
    if LABEL_PAIR.match(value) is not None:
        return None
    return _strong_password(value, entity)


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
       # `-pw:` as a flag of its own (`-User:bob -pw:…`), never `my-pw`; `ID/PW` and `ID(PW)` are left to
       # `id_password_pair`, which keeps the user name; `pass` alone only with `:` (`pass: true` is no password)
       r"[Pp](?<!\w.)(?<!\w-.)"
       + _NOT_AFTER_ID_LABEL
       +        r"(?:(?i:w|wd|asswd|assword|assphrase|asscode)"
       r"(?:[ \t]{1,3}for[ \t]{1,3}[\w.@-]{1,64}(?=[ \t]{0,3}:|[ \t]{1,3}is[ \t]))?"
       r"(?:[ \t]{0,3}(?::=|=>|->|\u2192|[:=])[ \t]{0,3}|[\uac00-\ud7a3]{1,4}[ \t]{0,3}"
       r"|[ \t]{1,3}(?i:(?:is|was)[ \t]{1,3})?)"
       r"|(?i:ass):(?![:=])[ \t]{0,3})"
       r"(?:\"([^\"\r\n]{4,128})\"|'([^'\r\n]{4,128})'|([^\s\"'<>;,&(){}\[\]]{4,128}))",
       ("pw", "pwd", "pass"),
       "('pw:'|'PW:'|'-pw:'|'pass:'|'the password is '|'my pw is '|'password for bob:') " + _SAMPLE
       + " (' ID:admin'|'')",
       "prose and notes: pw:…, PW:… ID:…, pass:…, 'password is …', 'password for bob:…', passphrase \"…\"",
       "a password written after the word in prose, when it looks like one", entity="password",
       validator=_looks_like_password),
    _a("prose_password_cjk",
       # Korean, Japanese and Chinese words for a password, as notes write them: `비밀번호:…`, `암호 : …`
       "(?:" + "|".join(_CJK_PASSWORD) + r")(?:[ \t]{0,3}[:=\uff1a][ \t]{0,3}|[\uac00-\ud7a3]{1,4}[ \t]{0,3})"
       r"(?:\"([^\"\r\n]{4,128})\"|'([^'\r\n]{4,128})'|([^\s\"'<>;,&(){}\[\]]{4,128}))",
       _CJK_PASSWORD,
       "(" + "|".join(f"'{word}:'" for word in _CJK_PASSWORD[:3]) + "|'\u5bc6\u7801 : ') " + _SAMPLE,
       "notes in Korean, Japanese and Chinese (비밀번호, 비번, 암호, 패스워드, パスワード, 密码: password)",
       "a password written after a CJK word for password, when it looks like one", entity="password",
       validator=_looks_like_password),
    _a("id_password_pair",
       # `ID/PW:bob/…`, `ID(PW):bob(…)`, `ID/PW -> bob/…`, `ID/PW bob(…)`, `계정/PW:bob/…`: the user is kept.
       # Anchored at the slash or parenthesis, the label before it checked by fixed-width look-behinds.
       r"[/(](?:" + _ID_LABEL + r")[ \t]{0,2}"
       r"(?i:pw|pwd|passwd|password|pass|\ube44\ubc88|\uc554\ud638|\ube44\ubc00\ubc88\ud638)\)?"
       r"(?=[ \t:=(]|[-=]>)[ \t]{0,3}(?:[:=]|->|=>|(?i:is|are))?[ \t(]{0,3}"
       # the user (after an optional `xxxx:` tag), then the password; or the password alone (`ID/PW:…`)
       r"(?:(?:[^\s/:()]{1,64}:)?[^\s/:()]{1,64}(?:[ \t]{0,2}/[ \t]{0,2}|\()([^\s()/,]{4,128})|([^\s()/,:]{4,128}))",
       ("/pw", "(pw", "/pass", "(pass", "/\ube44\ubc88", "/\uc554\ud638", "/\ube44\ubc00"),
       "('ID/PW:'|'ID/Pass: '|'id/pw -> '|'User/Password ') [a-z]{4,10} '/' " + _SAMPLE,
       "prose and notes that give a login as user/password after an ID/PW label",
       "the password of an ID/PW pair (the user name is kept)", entity="password", group=(1, 2),
       validator=_looks_like_password),
    _a("ip_user_password",
       # an address, then `user/password` (`192.168.0.1 bob/…`, `10.0.0.5,bob/…`, `10.0.0.5 (bob/…)`); the first
       # digit is a character class, its boundary checked after it, so the engine skips ahead at C speed
       r"[0-9](?<![\w.][0-9])[0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?!\d|\.\d)"
       r"[ \t]{0,2}[,(]?[ \t]{0,2}[A-Za-z][\w.-]{0,31}/([^\s()/,:]{6,128})",
       ("/",),
       "('192.168.0.1 '|'10.0.0.5,'|'98.76.54.32 (') [a-z]{4,10} '/' <[A-Za-z]{3}[0-9]{2}[!#%^*_+][A-Za-z]{3}>",
       "notes that list a host's address with its login as user/password",
       "the password after an IPv4 address and a user name", entity="password", group=1, min_length=13,
       validator=_ip_login_password),
    _a("user_password_at_ip",
       # `root:…@10.0.0.5`: a login written before a host's address without a scheme (a URL's is read elsewhere)
       r":(?<=[\w.-]:)([^\s:/\"'<>]{6,128})@(?=[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?!\d|\.\d))",
       ("@",),
       "('root:'|'deploy:') <[A-Za-z]{3}[0-9]{2}[!#%^*_+][A-Za-z]{3}> ('@10.0.0.5'|'@192.168.1.20:22')",
       "notes and commands that give user:password@address",
       "the password between a user name and an IPv4 address", entity="password", group=1, validator=_strong_password),
    _a("ip_id_pw_triple",
       # under an `IP ID PW` heading: address, user and password separated by blanks or slashes
       r"[Ii](?<![\w].)[Pp][ \t/]{1,3}(?i:id)[ \t/]{1,3}(?i:pw)[ \t:]{1,3}[\d.]{7,15}[ \t/]{1,3}[A-Za-z][\w.-]{0,31}"
       r"[ \t/]{1,3}([^\s()/,]{6,128})",
       ("ip id pw", "ip/id/pw"),
       "('IP ID PW 192.168.0.1 bob '|'IP/ID/PW 10.0.0.5/bob/') <[A-Za-z]{3}[0-9]{2}[!#%^*_+][A-Za-z]{3}>",
       "notes with an IP ID PW heading and the three values after it",
       "the password of an IP ID PW triple", entity="password", group=1, validator=_strong_password),
    _a("sql_password_bare",
       # Oracle takes the password unquoted (`IDENTIFIED BY pa5sW0rd;`); bind variables and keywords are not one
       r"(?i:identified)[ \t]{1,4}(?i:by)[ \t]{1,4}([A-Za-z0-9_#$!%^*+~@-]{4,128})(?=[ \t]{0,4}(?:;|$|\r?\n))",
       ("identified",),
       "('CREATE USER app IDENTIFIED BY '|'ALTER USER app IDENTIFIED BY ') <[A-Za-z]{4}[0-9]{3}[A-Za-z]{4}> ';'",
       "SQL: Oracle IDENTIFIED BY with an unquoted password",
       "the unquoted password of a SQL statement that creates or changes a login", entity="password", group=1,
       validator=_looks_like_password),  # (the label says password: letters and a digit are enough, as the spec's)
    _a("env_default_secret",
       # the fallback a program uses when the variable is unset is a credential written in the code
       r"""(?:getenv|environ\.get|env\.get|ENV\.fetch|env)\([ \t]{0,4}\\?["']?[\w.-]{0,40}?"""
       r"(?i:" + _WORD[3:-1] + r")[\w.-]{0,20}\\?[\"']?[ \t]{0,4}(?:,|\)[ \t]{0,4}(?:or|\|\||\?\?|\?:))[ \t]{0,4}"
       r"""\\?(?:"([^"\\\r\n]{4,256})\\?"|'([^'\\\r\n]{4,256})\\?')""",
       ("getenv", "environ.get", "env.get", "env.fetch", "env("),
       "('os.environ.get(\"DB_PASSWORD\") or \"'|'env.get(\"API_TOKEN\") || \"'|'getenv(SECRET_KEY, \"') "
       + _SAMPLE + " '\"'",
       "code that falls back to a literal when a credential's environment variable is unset",
       "the default of a credential-named environment lookup", group=(1, 2)),
    _a("compared_secret",
       # anchored at the operator (rare in text, so the engine skips ahead fast); the name before it ends with a
       # credential word, checked by fixed-width look-behinds
       r"(?:[=!]==?[ \t]{0,4}|\.equals(?:IgnoreCase)?\([ \t]{0,4})(?:" + _COMPARED_NAME + ")" + _QUOTED,
       ("==", "!=", "equals"),
       "('if password == \"'|'if (apiToken !== \"'|'password.equals(\"') <[A-Za-z]{4}[0-9]{3}[A-Z][a-z]{4}> '\"'",
       "code that compares a credential with a literal (a hard-coded check)",
       "the literal a credential-named variable is compared with, when it looks like a password",
       validator=_strong_password),
    _a("sonar_login",
       # SonarQube's scanner took its token as `sonar.login` before `sonar.token` (which `secret_assignment` reads)
       r"""[Ss](?<![\w].)(?i:onar)[_.-]?(?i:login)["']?[ \t]{0,4}(?::{1,3}=|\?=|=>|[:=])[ \t]{0,4}""" + _VALUE,
       ("sonar",),
       "('sonar.login='|'SONAR_LOGIN := '|'SONAR.LOGIN :::= ') <[a-f0-9]{40}>",
       "SonarQube scanner properties and environment (sonar.login, SONAR_LOGIN: the token, named as a login)",
       "the token assigned to sonar.login"),
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
