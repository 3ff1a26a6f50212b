"""The verbatim secret formats the security interceptors track (public formats of live credentials)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SecretFormat:
    id: str
    label: str
    pattern: re.Pattern[str]
    prefix: str


def _fmt(id_: str, label: str, prefix: str, body: str) -> SecretFormat:
    return SecretFormat(id_, label, re.compile(re.escape(prefix) + body), prefix)


# Plain patterns, no anchors or word boundaries: a secret glued to other text is still a secret.
SECRET_FORMATS: tuple[SecretFormat, ...] = (
    _fmt("stripe_secret_live", "Stripe live secret key", "sk_live_", "[A-Za-z0-9]{16,}"),
    _fmt("stripe_pub_live", "Stripe live publishable key", "pk_live_", "[A-Za-z0-9]{16,}"),
    _fmt("github_pat", "GitHub personal access token", "ghp_", "[A-Za-z0-9]{20,}"),
    _fmt("github_oauth", "GitHub OAuth token", "gho_", "[A-Za-z0-9]{20,}"),
    _fmt("aws_access_key", "AWS access key id", "AKIA", "[0-9A-Z]{16}"),
    _fmt("slack_bot", "Slack bot token", "xoxb-", "[0-9A-Za-z-]{10,}"),
    _fmt("slack_refresh", "Slack refresh token", "xoxr-", "[0-9A-Za-z-]{10,}"),
)


def find_secrets(text: str) -> list[tuple[str, str]]:
    """Every `(format_id, value)` hit: catalog order first, then position in the text."""
    hits: list[tuple[str, str]] = []
    for fmt in SECRET_FORMATS:
        if fmt.prefix in text:  # cheap prefilter: most text carries no prefix at all
            hits.extend((fmt.id, match.group(0)) for match in fmt.pattern.finditer(text))
    return hits
