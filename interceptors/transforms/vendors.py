"""Vendor credential families, one entry per family: pattern, hints, documented format (`spec`) and its source.

Each pattern was written from the vendor's documented (or, where the vendor publishes none, its observed and
widely catalogued) token format: a literal prefix, then bounded runs of the format's alphabet, with a boundary
on both sides where the alphabet could run on. Each `spec` restates that format in the `tokenspec` language,
independently of the pattern, so the kit and the bench test the pattern against the vendor's format rather
than against itself. Patterns stay linear: every one starts at a literal or behind a look-behind, and every
quantifier is bounded (possessive where a look-ahead follows).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re

from .detectors import Detector, Validator, validate_secret
from .entities import is_placeholder, random_letters
from .tokenspec import bech32_valid, crc32_token_valid

_B62 = "A-Za-z0-9"
_URLSAFE = "A-Za-z0-9_-"


def _word_like(payload: str) -> bool:
    """An identifier rather than random text: letters only, all in one case (`cioabcdef…`, `NPM_…`)."""
    return payload.isalpha() and (payload.islower() or payload.isupper())


def validate_crc32_token(value: str, entity: str) -> str | None:
    """GitHub's and npm's tokens end in a CRC32 of their random part: a valid checksum is a token; a value
    whose checksum fails is still reported unless it reads like an identifier (`npm_config_…` shapes), so
    hand-made test tokens stay covered while look-alike names do not."""
    _, sep, payload = value.partition("_")
    if value.startswith("github_pat_") or not sep:
        return entity
    if len(payload) == 36 and crc32_token_valid(payload):
        return entity
    return None if _word_like(payload) else entity


def validate_bech32(value: str, entity: str) -> str | None:
    """An age key is Bech32 (BIP 173): its six-character checksum catches any error of up to four characters, and
    age refuses a key whose checksum fails, so such a value (an example with a character changed) is no key."""
    return entity if bech32_valid(value) else None


def _v(
    name: str,
    pattern: str,
    hints: tuple[str, ...],
    spec: str,
    source: str,
    description: str,
    *,
    entity: str = "api_token",
    category: str = "secret",
    confidence: float = 0.99,
    group: int | tuple[int, ...] = 0,
    min_length: int = 12,
    validator: Validator | None = None,
    flags: int = 0,
    gate: str | None = None,
) -> Detector:
    return Detector(
        name=name,
        entity=entity,
        category=category,
        pattern=re.compile(pattern, flags),
        confidence=confidence,
        hints=hints,
        min_length=min_length,
        group=group,
        validator=validator,
        gate=None if gate is None else re.compile(gate),
        description=description,
        spec=spec,
        source=source,
    )


_LA_DOT = r"(?![A-Za-z0-9_-]|\.[A-Za-z0-9_-])"
"""The end of a token whose alphabet has dots: a full stop after it ends a sentence, not the token."""


def _lb(chars: str = _URLSAFE) -> str:
    return f"(?<![{chars}])"


def _la(chars: str = _URLSAFE) -> str:
    return f"(?![{chars}])"


VENDOR_DETECTORS: tuple[Detector, ...] = (
    # --- AI providers --------------------------------------------------------------------------------------
    _v("anthropic_api_key", _lb() + r"sk-ant-(?:api|admin|sid)\d\d-[A-Za-z0-9_-]{80,200}+",
       ("sk-ant-",), "'sk-ant-' ('api03'|'admin01') '-' [A-Za-z0-9_-]{93} 'AA'",
       "Anthropic Console API keys (docs.anthropic.com, API keys; GitHub secret scanning partner pattern)",
       "Anthropic API and admin keys: sk-ant-api03-/sk-ant-admin01- + 95 URL-safe characters"),
    _v("openai_api_key",
       _lb() + r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,250}+"
       r"|" + _lb() + r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}" + _la(),
       ("sk-proj-", "sk-svcacct-", "sk-admin-", "t3blbkfj"),
       "('sk-' ('proj'|'svcacct'|'admin') '-' [A-Za-z0-9_-]{74} 'T3BlbkFJ' [A-Za-z0-9_-]{74}"
       "|'sk-' [A-Za-z0-9]{20} 'T3BlbkFJ' [A-Za-z0-9]{20})",
       "OpenAI platform API keys (platform.openai.com/api-keys; GitHub secret scanning partner pattern)",
       "OpenAI project, service-account and admin keys (sk-proj-, sk-svcacct-, sk-admin-) and legacy sk-…T3BlbkFJ…"),
    _v("huggingface_token", _lb() + r"(?:hf|api_org)_[A-Za-z0-9]{34,40}+" + _la(),
       ("hf_", "api_org_"), "('hf_'|'api_org_') [A-Za-z]{34}",
       "Hugging Face user access tokens (huggingface.co/docs/hub/security-tokens)",
       "Hugging Face user and organisation tokens: hf_/api_org_ + 34 letters"),
    _v("groq_api_key", _lb() + r"gsk_[A-Za-z0-9]{52}" + _la(), ("gsk_",), "'gsk_' [A-Za-z0-9]{52}",
       "Groq API keys (console.groq.com/keys)", "Groq API keys: gsk_ + 52 base62"),
    _v("replicate_token", _lb() + r"r8_[A-Za-z0-9]{37}" + _la(), ("r8_",), "'r8_' [A-Za-z0-9]{37}",
       "Replicate API tokens (replicate.com/account/api-tokens)", "Replicate API tokens: r8_ + 37 base62"),
    _v("perplexity_api_key", _lb() + r"pplx-[A-Za-z0-9]{48}" + _la(), ("pplx-",), "'pplx-' [A-Za-z0-9]{48}",
       "Perplexity API keys (docs.perplexity.ai)", "Perplexity API keys: pplx- + 48 base62"),
    _v("xai_api_key", _lb() + r"xai-[A-Za-z0-9]{80}" + _la(), ("xai-",), "'xai-' [A-Za-z0-9]{80}",
       "xAI API keys (docs.x.ai)", "xAI API keys: xai- + 80 base62"),
    _v("openrouter_api_key", _lb() + r"sk-or-v1-[0-9a-f]{64}" + _la(), ("sk-or-v1-",), "'sk-or-v1-' [0-9a-f]{64}",
       "OpenRouter API keys (openrouter.ai/keys)", "OpenRouter API keys: sk-or-v1- + 64 hex"),
    # --- code hosts, package registries, CI ------------------------------------------------------------------
    _v("gitlab_token",
       _lb() + r"gl(?:pat|dt|rtr|rt|ptt|cbt|ft|imt|oas|soat|ffct|agent|wt)-[A-Za-z0-9_-]{20,300}+"
       r"(?:\.[0-9a-z]{2}\.[0-9a-z]{7,12}+|\.[0-9a-z]{7,12}+)?" + _LA_DOT
       + r"|" + _lb() + r"GR1348941[A-Za-z0-9_-]{20,64}+" + _la(),
       ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "gloas-", "glsoat-", "glffct-",
        "glagent-", "glrtr-", "glwt-", "gr1348941"),
       "(('glpat-'|'gldt-'|'glrt-'|'glrtr-'|'glptt-'|'glcbt-'|'glft-'|'glsoat-'|'glwt-') [A-Za-z0-9_-]{20}"
       "|'glpat-' [A-Za-z0-9_-]{27,40} '.01.' [0-9a-z]{9}|'GR1348941' [A-Za-z0-9_-]{20})",
       "GitLab token prefixes (docs.gitlab.com/security/tokens, 'Token prefixes')",
       "GitLab personal, deploy, runner, trigger, CI job, feed, OAuth and agent tokens (glpat-, gldt-, glrt-, …)"),
    _v("atlassian_api_token",
       _lb() + r"AT(?:ATT|CTT)3[A-Za-z0-9_=-]{150,300}+" + _la(r"A-Za-z0-9_=-")
       + r"|" + _lb() + r"ATBB[A-Za-z0-9]{28,36}+" + _la(),
       ("atatt3", "atctt3", "atbb"),
       "('ATATT3xFfGF0' [A-Za-z0-9_-]{170,180} '=' [0-9A-F]{8}|'ATBB' [A-Za-z0-9]{32})",
       "Atlassian API tokens and Bitbucket app passwords (support.atlassian.com, 'Manage API tokens')",
       "Atlassian (Jira, Confluence) API tokens ATATT3…/ATCTT3… and Bitbucket app passwords ATBB…"),
    _v("npm_token", _lb() + r"npm_[A-Za-z0-9]{36}" + _la(), ("npm_",), "'npm_' [A-Za-z0-9]{30} @crc32b62",
       "npm access tokens (github.blog/changelog 2021-09-23, 'npm has a new access token format')",
       "npm access tokens: npm_ + 30 base62 + 6-character CRC32 (checked)", validator=validate_crc32_token),
    _v("pypi_token", _lb() + r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{40,600}+",
       ("pypi-age",), "('pypi-AgEIcHlwaS5vcmc'|'pypi-AgENdGVzdC5weXBpLm9yZw') [A-Za-z0-9_-]{70,180}",
       "PyPI API tokens (pypi.org/help/#apitoken: macaroons prefixed pypi-)",
       "PyPI and TestPyPI API tokens: pypi- + a base64url macaroon naming pypi.org"),
    _v("rubygems_api_key", _lb() + r"rubygems_[0-9a-f]{48}" + _la(), ("rubygems_",), "'rubygems_' [0-9a-f]{48}",
       "RubyGems API keys (guides.rubygems.org/api-key-scopes)", "RubyGems API keys: rubygems_ + 48 hex"),
    _v("nuget_api_key", _lb() + r"oy2[a-z0-9]{43}" + _la(), ("oy2",), "'oy2' [a-z0-9]{43}",
       "NuGet.org API keys (GitHub secret scanning partner pattern)", "NuGet API keys: oy2 + 43 lower-case base36"),
    _v("docker_hub_token", _lb() + r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,64}+" + _la(), ("dckr_",),
       "('dckr_pat_'|'dckr_oat_') [A-Za-z0-9_-]{27}",
       "Docker Hub personal and organisation access tokens (docs.docker.com/security/for-developers/access-tokens)",
       "Docker Hub access tokens: dckr_pat_/dckr_oat_ + 27"),
    _v("crates_io_token", _lb() + r"cio[A-Za-z0-9]{32}" + _la(), ("cio",), "'cio' [A-Za-z0-9]{32}",
       "crates.io API tokens (GitHub secret scanning partner pattern)", "crates.io API tokens: cio + 32 base62",
       validator=lambda v, e: None if _word_like(v[3:]) else e),
    _v("clojars_token", _lb() + r"CLOJARS_[a-z0-9]{60}" + _la(), ("clojars_",), "'CLOJARS_' [a-z0-9]{60}",
       "Clojars deploy tokens (github.com/clojars/clojars-web wiki, 'Deploy Tokens')",
       "Clojars deploy tokens: CLOJARS_ + 60"),
    _v("circleci_token", _lb() + r"CCIPAT_[A-Za-z0-9]{22}_[0-9a-f]{40}" + _la(), ("ccipat_",),
       "'CCIPAT_' [A-Za-z0-9]{22} '_' [0-9a-f]{40}",
       "CircleCI personal API tokens (circleci.com/docs/managing-api-tokens)",
       "CircleCI personal API tokens: CCIPAT_ + 22 + _ + 40 hex"),
    _v("buildkite_token", _lb() + r"bk(?:ua|ct)_[0-9a-f]{40}" + _la(), ("bkua_", "bkct_"), "'bkua_' [0-9a-f]{40}",
       "Buildkite API access tokens (buildkite.com/docs/apis/managing-api-tokens)",
       "Buildkite API tokens: bkua_ + 40 hex"),
    _v("jfrog_token",
       _lb() + r"cmVmdGtuOjAxOj[A-Za-z0-9]{40,128}+" + _la() + r"|" + _lb() + r"AKCp[A-Za-z0-9]{69}" + _la(),
       ("cmvmdgtuojaxoj", "akcp"), "('cmVmdGtuOjAxOj' [A-Za-z0-9]{50}|'AKCp' [A-Za-z0-9]{69})",
       "JFrog reference tokens and API keys (jfrog.com/help, 'Access Tokens')",
       "JFrog Artifactory reference tokens (base64 of reftkn:01:) and legacy API keys (AKCp…)"),
    # --- cloud providers and platforms ---------------------------------------------------------------------------
    _v("google_oauth_secret", _lb() + r"GOCSPX-[A-Za-z0-9_-]{28}" + _la(), ("gocspx-",), "'GOCSPX-' [A-Za-z0-9_-]{28}",
       "Google OAuth client secrets (GitHub secret scanning partner pattern)",
       "Google OAuth client secrets: GOCSPX- + 28"),
    _v("google_oauth_token", _lb() + r"ya29\.[A-Za-z0-9_-]{30,2048}+|" + _lb() + r"1//0[A-Za-z0-9_-]{40,512}+",
       ("ya29.", "1//0"), "('ya29.' [A-Za-z0-9_-]{120,200}|'1//0' [A-Za-z0-9_-]{96})",
       "Google OAuth 2.0 access and refresh tokens (developers.google.com/identity/protocols/oauth2)",
       "Google OAuth access tokens (ya29.…) and refresh tokens (1//0…)"),
    _v("azure_client_secret",
       r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}+(?![A-Za-z0-9_~-]|\.[A-Za-z0-9_~-])",
       ("q~",), "[A-Za-z0-9_.] [A-Za-z0-9_.]{2} [0-9] 'Q~' [A-Za-z0-9_~.-]{34}",
       "Microsoft Entra ID application client secrets (GitHub secret scanning partner pattern)",
       "Microsoft Entra ID (Azure AD) client secrets: 3 characters, a digit, Q~, 31 to 34 characters"),
    _v("digitalocean_token", _lb() + r"do[opr]_v1_[0-9a-f]{64}" + _la(), ("dop_v1_", "doo_v1_", "dor_v1_"),
       "('dop_v1_'|'doo_v1_'|'dor_v1_') [0-9a-f]{64}",
       "DigitalOcean tokens (docs.digitalocean.com/reference/api/create-personal-access-token)",
       "DigitalOcean personal, OAuth and refresh tokens: dop_v1_/doo_v1_/dor_v1_ + 64 hex"),
    _v("databricks_token", _lb() + r"dapi[0-9a-f]{32}(?:-\d)?" + _la(), ("dapi",), "'dapi' [0-9a-f]{32} ('' | '-2')",
       "Databricks personal access tokens (docs.databricks.com/dev-tools/auth/pat)",
       "Databricks personal access tokens: dapi + 32 hex"),
    _v("hashicorp_vault_token", _lb() + r"hv[sbr]\.[A-Za-z0-9_-]{24,512}+" + _la(), ("hvs.", "hvb.", "hvr."),
       "('hvs.'|'hvb.') [A-Za-z0-9_-]{90,120}",
       "HashiCorp Vault token prefixes (developer.hashicorp.com/vault/docs/concepts/tokens)",
       "HashiCorp Vault service, batch and recovery tokens: hvs./hvb./hvr. + base62"),
    _v("terraform_cloud_token", _lb(_B62) + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,100}+" + _la(r"A-Za-z0-9_=-"),
       ("atlasv1",), "[A-Za-z0-9]{14} '.atlasv1.' [A-Za-z0-9_-]{67}",
       "HCP Terraform (Terraform Cloud) API tokens "
       "(developer.hashicorp.com/terraform/cloud-docs/users-teams-organizations/api-tokens)",
       "HCP Terraform API tokens: 14 + .atlasv1. + 60 or more"),
    _v("doppler_token", _lb() + r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}" + _la(), ("dp.",),
       "'dp.' ('pt'|'st'|'sa'|'ct'|'scim'|'audit') '.' [A-Za-z0-9]{43}",
       "Doppler token formats (docs.doppler.com/reference/auth-token-formats)",
       "Doppler personal, service, service-account, CLI, SCIM and audit tokens: dp.<kind>. + 43"),
    _v("pulumi_token", _lb() + r"pul-[0-9a-f]{40}" + _la(), ("pul-",), "'pul-' [0-9a-f]{40}",
       "Pulumi access tokens (GitHub secret scanning partner pattern)", "Pulumi access tokens: pul- + 40 hex"),
    _v("postman_api_key", _lb() + r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}" + _la(), ("pmak-",),
       "'PMAK-' [0-9a-f]{24} '-' [0-9a-f]{34}", "Postman API keys (learning.postman.com, 'Postman API keys')",
       "Postman API keys: PMAK- + 24 hex + - + 34 hex"),
    _v("linear_api_key", _lb() + r"lin_(?:api|oauth)_[A-Za-z0-9]{40}" + _la(), ("lin_api_", "lin_oauth_"),
       "('lin_api_'|'lin_oauth_') [A-Za-z0-9]{40}", "Linear API keys (linear.app/developers, 'Personal API keys')",
       "Linear personal API keys and OAuth tokens: lin_api_/lin_oauth_ + 40"),
    _v("heroku_api_key",
       _lb() + r"HRKU-(?:AA[A-Za-z0-9_-]{58}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
       + _la(), ("hrku-",), "'HRKU-AA' [A-Za-z0-9_-]{58}",
       "Heroku API keys, new format (devcenter.heroku.com, 'Heroku API tokens')", "Heroku API keys: HRKU-AA + 58"),
    _v("supabase_token",
       _lb() + r"sbp_(?:v0_)?[0-9a-f]{40}" + _la() + r"|" + _lb() + r"sb_secret_[A-Za-z0-9_-]{20,64}+" + _la(),
       ("sbp_", "sb_secret_"), "('sbp_' [0-9a-f]{40}|'sb_secret_' [A-Za-z0-9_-]{31})",
       "Supabase access tokens and secret API keys (supabase.com/docs/guides/api/api-keys)",
       "Supabase personal access tokens (sbp_ + 40 hex) and secret keys (sb_secret_…)"),
    _v("planetscale_token", _lb() + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}+" + _LA_DOT,
       ("pscale_",), "('pscale_tkn_'|'pscale_pw_'|'pscale_oauth_') [A-Za-z0-9_-]{43}",
       "PlanetScale service tokens and passwords (planetscale.com/docs)",
       "PlanetScale tokens: pscale_tkn_/pw_/oauth_ + 43"),
    _v("grafana_token", _lb() + r"glsa_[A-Za-z0-9]{32}_[0-9a-f]{8}" + _la()
       + r"|" + _lb() + r"glc_[A-Za-z0-9+/]{32,400}+={0,2}" + _la(r"A-Za-z0-9+/=_-"),
       ("glsa_", "glc_"), "('glsa_' [A-Za-z0-9]{32} '_' [0-9a-f]{8}|'glc_eyJ' [A-Za-z0-9+/]{80,120})",
       "Grafana service account tokens and Grafana Cloud tokens (grafana.com/docs, 'Service account tokens')",
       "Grafana service-account tokens (glsa_…) and Grafana Cloud access policy tokens (glc_…)"),
    _v("new_relic_key", _lb() + r"NR(?:AK|AA|II)-[A-Z0-9]{27}" + _la(), ("nrak-", "nraa-", "nrii-"),
       "('NRAK-'|'NRII-') [A-Z0-9]{27}",
       "New Relic user and ingest keys (docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys)",
       "New Relic user (NRAK-) and ingest (NRII-) keys + 27"),
    _v("sentry_token", _lb() + r"sntry[us]_[A-Za-z0-9+/=_-]{40,600}+" + _la(r"A-Za-z0-9+/=_-"), ("sntrys_", "sntryu_"),
       "('sntryu_' [0-9a-f]{64}|'sntrys_eyJ' [A-Za-z0-9+/]{120,160})",
       "Sentry auth tokens (docs.sentry.io/account/auth-tokens)",
       "Sentry user (sntryu_) and organisation (sntrys_) tokens"),
    _v("age_secret_key", r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}", ("age-secret-key-1",),
       "'AGE-SECRET-KEY-1' [QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{52} @bech32",
       "age secret keys (age-encryption.org/v1, Bech32 upper case; BIP 173 checksum)",
       "age secret keys: AGE-SECRET-KEY-1 + 52 Bech32 + a 6-character Bech32 checksum (checked)",
       validator=validate_bech32),
    _v("onepassword_token", _lb() + r"ops_eyJ[A-Za-z0-9+/=_-]{50,4096}+", ("ops_eyj",),
       "'ops_eyJ' [A-Za-z0-9+/]{200,300}",
       "1Password service account tokens (developer.1password.com/docs/service-accounts)",
       "1Password service account tokens: ops_ + base64 JSON"),
    # --- payment ---------------------------------------------------------------------------------------------
    _v("square_token",
       _lb() + r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}+" + _la() + r"|" + _lb() + r"EAAA[A-Za-z0-9_-]{60}" + _la(),
       ("sq0atp-", "sq0csp-", "eaaa"),
       "('sq0atp-' [A-Za-z0-9_-]{22}|'sq0csp-' [A-Za-z0-9_-]{43}|'EAAA' [A-Za-z0-9_-]{60})",
       "Square access tokens and application secrets (developer.squareup.com/docs/build-basics/access-tokens)",
       "Square access tokens (EAAA…, sq0atp-) and application secrets (sq0csp-)"),
    _v("braintree_token", r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}", ("access_token$",),
       "'access_token$' ('production'|'sandbox') '$' [0-9a-z]{16} '$' [0-9a-f]{32}",
       "PayPal Braintree access tokens (GitHub secret scanning partner pattern)",
       "Braintree access tokens: access_token$production$<16>$<32 hex>"),
    _v("shopify_token", _lb() + r"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}" + _la(), ("shpat_", "shpca_", "shppa_", "shpss_"),
       "('shpat_'|'shpca_'|'shppa_'|'shpss_') [0-9a-f]{32}",
       "Shopify access tokens and shared secrets (shopify.dev/docs/apps/build/authentication-authorization)",
       "Shopify admin, custom-app, private-app tokens and shared secrets: shp??_ + 32 hex"),
    # --- chat, mail and webhooks -----------------------------------------------------------------------------------
    _v("slack_webhook", r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,200}+",
       ("hooks.slack.com/",), "'https://hooks.slack.com/services/T' [A-Z0-9]{10} '/B' [A-Z0-9]{10} '/' [A-Za-z0-9]{24}",
       "Slack incoming webhooks (api.slack.com/messaging/webhooks)", "Slack incoming and workflow webhook URLs"),
    _v("discord_webhook",
       r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{17,20}/[A-Za-z0-9_-]{60,80}+",
       ("discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
       "'https://discord.com/api/webhooks/' [1-9] [0-9]{18} '/' [A-Za-z0-9_-]{68}",
       "Discord webhooks (discord.com/developers/docs/resources/webhook)", "Discord webhook URLs (id and token)"),
    _v("teams_webhook", r"https://[a-z0-9-]{1,64}\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{40,400}+",
       ("webhook.office.com/webhookb2/",),
       "'https://acme.webhook.office.com/webhookb2/' [0-9a-f]{8} '-' [0-9a-f]{4} '-' [0-9a-f]{4} '-' [0-9a-f]{4} '-' "
       "[0-9a-f]{12} '@' [0-9a-f]{8} '-' [0-9a-f]{4} '-' [0-9a-f]{4} '-' [0-9a-f]{4} '-' [0-9a-f]{12} "
       "'/IncomingWebhook/' [0-9a-f]{32} '/' [0-9a-f]{8} '-' [0-9a-f]{4} '-' [0-9a-f]{4} '-' [0-9a-f]{4} '-' "
       "[0-9a-f]{12}",
       "Microsoft Teams incoming webhooks (learn.microsoft.com, 'Create an Incoming Webhook')",
       "Microsoft Teams incoming webhook URLs"),
    _v("discord_bot_token",
       r"(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}+" + _LA_DOT,
       (), "('M'|'N'|'O') [A-Za-z0-9]{23} '.' [A-Za-z0-9_-]{6} '.' [A-Za-z0-9_-]{27,38}",
       "Discord bot tokens (discord.com/developers/docs/reference#authentication)",
       "Discord bot tokens: base64 user id (M/N/O…) . 6 . 27 or more", min_length=59,
       # `[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.`, started from the dot (a literal the engine skips to)
       gate=r"\.[A-Za-z0-9_-]{6}\.(?:" + "|".join(rf"(?<=[MNO][A-Za-z0-9_-]{{{n}}}\.[A-Za-z0-9_-]{{6}}\.)"
                                                  for n in range(23, 28)) + ")", confidence=0.9),
    _v("telegram_bot_token", r"(?<![A-Za-z0-9_:-])\d{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])", (":aa",),
       "[1-9] [0-9]{7,9} ':AA' [A-Za-z0-9_-]{33}",
       "Telegram Bot API tokens (core.telegram.org/bots/api#authorizing-your-bot)",
       "Telegram bot tokens: bot id : AA + 33", min_length=44),
    _v("twilio_api_key", _lb(_B62) + r"SK[0-9a-f]{32}" + _la(_B62), ("sk",), "'SK' [0-9a-f]{32}",
       "Twilio API key SIDs (twilio.com/docs/iam/api-keys)", "Twilio API keys: SK + 32 hex", min_length=34),
    _v("sendgrid_api_key", _lb() + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _la(), ("sg.",),
       "'SG.' [A-Za-z0-9_-]{22} '.' [A-Za-z0-9_-]{43}",
       "Twilio SendGrid API keys (GitHub secret scanning partner pattern)", "SendGrid API keys: SG. + 22 + . + 43"),
    _v("mailgun_api_key", _lb(_B62) + r"key-[0-9a-f]{32}" + _la(_B62)
       + r"|(?<![0-9A-Za-z-])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![0-9A-Za-z-])",
       (), "('key-' [0-9a-f]{32}|[0-9a-f]{32} '-' [0-9a-f]{8} '-' [0-9a-f]{8})",
       "Mailgun API keys (documentation.mailgun.com, 'API keys')",
       "Mailgun private API keys: key- + 32 hex, or 32 hex - 8 hex - 8 hex", min_length=36,
       # the same test as `[0-9a-f]{32}-…`, started from the dash (a rare character the engine skips to)
       gate=r"key-[0-9a-f]{32}|-[0-9a-f]{8}-[0-9a-f]{8}(?<=[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})"),
    _v("mailchimp_api_key", r"(?<![0-9A-Za-z])[0-9a-f]{32}-us\d{1,2}(?![0-9A-Za-z])", ("-us",),
       "[0-9a-f]{32} '-us' [1-9] [0-9]",
       "Mailchimp Marketing API keys (mailchimp.com/developer/marketing/guides/quick-start)",
       "Mailchimp API keys: 32 hex + -us + data centre"),
    _v("brevo_api_key", _lb() + r"xkeysib-[0-9a-f]{64}-[A-Za-z0-9]{16}" + _la(), ("xkeysib-",),
       "'xkeysib-' [0-9a-f]{64} '-' [A-Za-z0-9]{16}", "Brevo (Sendinblue) API keys (developers.brevo.com)",
       "Brevo API keys: xkeysib- + 64 hex + - + 16"),
    # --- private keys in the containers PEM does not cover -
    _v("putty_private_key", r"Private-Lines:[ \t]*\d{1,3}[ \t]*\r?\n(?:[A-Za-z0-9+/=]{1,128}+(?:\r?\n)?){1,128}+",
       ("private-lines:",),
       "'Private-Lines: 14\n' [A-Za-z0-9+/]{64} '\n' [A-Za-z0-9+/]{64} '\n' [A-Za-z0-9+/]{20} '=='",
       "PuTTY .ppk files, versions 2 and 3 (the.earth.li/~sgtatham/putty/0.78/htmldoc/AppendixC.html)",
       "the private lines of a PuTTY .ppk key file", entity="private_key", confidence=1.0, flags=re.MULTILINE),
    _v("jwk_private_key", r"\\?\"(?:d|p|q|dp|dq|qi|k)\\?\"[ \t]*:[ \t]*\\?\"([A-Za-z0-9_-]{16,2048}+)",
       ("\"kty",), "'{\"kty\": \"EC\", \"crv\": \"P-256\", \"d\": \"' <[A-Za-z0-9_-]{43}> '\", \"x\": \"abc\"}'",
       "JSON Web Key private members (RFC 7517, RFC 7518 section 6)",
       "the private members (d, p, q, dp, dq, qi, k) of a JSON Web Key", entity="private_key",
       group=1, confidence=0.95),
)  # fmt: skip


def _validate_base64_pem(value: str, entity: str) -> str | None:
    """Verification: the base64 run decodes to a PEM header naming a private key (a base64 certificate, as in
    a kubeconfig's `certificate-authority-data`, is public and passes)."""
    head = value[:96]
    head = head[: len(head) // 4 * 4]
    try:
        decoded = base64.b64decode(head, validate=True)
    except (binascii.Error, ValueError):
        return None
    first = decoded.split(b"\n", 1)[0]
    return entity if first.startswith(b"-----BEGIN ") and b"PRIVATE KEY" in first else None


def _validate_ntlm_authenticate(value: str, entity: str) -> str | None:
    """Verification: the base64 decodes to an NTLMSSP message of type 3 (AUTHENTICATE, which carries the
    challenge responses); NEGOTIATE and CHALLENGE messages carry nothing secret."""
    head = value[:32]
    try:
        decoded = base64.b64decode(head, validate=True)
    except (binascii.Error, ValueError):
        return None
    return entity if decoded[:12] == b"NTLMSSP\x00\x03\x00\x00\x00" else None


def _validate_bedrock(value: str, entity: str) -> str | None:
    """Verification: a short-term key whose payload is base64 of the Bedrock host must decode to it exactly
    (`…bWF6b25hd3MuY29x` spells `amazonaws.co1`: a look-alike)."""
    payload = value.removeprefix("bedrock-api-key-")
    if payload.startswith("YmVkcm9jay"):
        head = payload[:28]
        try:
            decoded = base64.b64decode(head, validate=True)
        except (binascii.Error, ValueError):
            return None
        return entity if decoded.startswith(b"bedrock.amazonaws.com") else None
    return entity


def _validate_grafana_key(value: str, entity: str) -> str | None:
    """Verification: a Grafana provisioned key is base64 JSON with its key (`k`), name (`n`) and org id."""
    padded = value + "=" * (-len(value) % 4)
    try:
        decoded = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None
    return entity if decoded.startswith(b'{"k":"') and b'"n":"' in decoded else None


def _validate_plain(value: str, entity: str) -> str | None:
    """A value read from a command line or a credential file is no secret when it is a variable, a flag or
    a placeholder."""
    if value.startswith(("$", "-", "@(")) or re.fullmatch(r"%\w+%", value) or is_placeholder(value):
        return None
    return entity


_HEX = "0-9a-f"
_GUID_LOWER = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_GUID_SPEC = "[0-9a-f]{8} '-' [0-9a-f]{4} '-' [0-9a-f]{4} '-' [0-9a-f]{4} '-' [0-9a-f]{12}"
_CRYPT = "./A-Za-z0-9"

# Families measured as caught 0 times on public corpora (issue 29), each written from its documented (or, where
# the vendor publishes none, observed) format.
GAP_DETECTORS: tuple[Detector, ...] = (
    _v("mapbox_secret_token", _lb(r"A-Za-z0-9_.-") + r"(?:sk|tk)\.eyJ[A-Za-z0-9_-]{20,600}+\.[A-Za-z0-9_-]{20,40}+"
       + _LA_DOT, ("sk.eyj", "tk.eyj"),
       "('sk.eyJ1Ijoi'|'tk.eyJ1Ijoi') [A-Za-z0-9]{40,70} '.' [A-Za-z0-9_-]{22}",
       "Mapbox access tokens: sk. (secret) and tk. (temporary) scopes (docs.mapbox.com/help/dive-deeper/access-tokens)",
       "Mapbox secret and temporary tokens: sk./tk. + base64url JSON + . + 22"),
    _v("base64_pem_private_key", _lb(r"A-Za-z0-9+/") + r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{40,16384}+={0,2}"
       + _la(r"A-Za-z0-9+/="),
       ("ls0tls1crudjti",),
       "('LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ'|'LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tC'"
       "|'LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tC'|'LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0K')"
       " [A-Za-z0-9+/]{200,400}",
       "base64 of a PEM private key (RFC 7468): kubeconfig client-key-data (kubernetes.io, 'Organizing Cluster "
       "Access Using kubeconfig Files'), Kubernetes Secret data, CI variables",
       "a base64-encoded PEM private key (LS0tLS1CRUdJTi…), verified by decoding its header",
       entity="private_key", confidence=0.98, min_length=56, validator=_validate_base64_pem),
    _v("sentry_dsn", r"(?<![A-Za-z0-9+.-])https?://[0-9a-f]{32}(?::[0-9a-f]{32})?@[a-z0-9.-]{0,128}sentry\.io/\d{1,12}",
       ("sentry.io/",),
       "'https://' [0-9a-f]{32} '@o' [1-9] [0-9]{5} '.ingest.sentry.io/' [1-9] [0-9]{6}",
       "Sentry DSNs (docs.sentry.io/concepts/key-terms/dsn-explainer: https://PUBLIC_KEY@HOST/PROJECT_ID)",
       "a Sentry DSN, whole (its key, and the secret of a legacy key:secret DSN)", confidence=0.9),
    _v("pgpass_password",
       r"(?<![\w.:/@*-])(?:\*|(?=[0-9-]{0,252}[A-Za-z.])[A-Za-z0-9.-]{1,253}+):(?:\d{2,5}|\*):[\w.*-]{1,63}+:"
       # the password ends at a blank, a quote, a separator, markup around the line (`]]>`, `</…>`) or the next
       # parameter of a query it was put in (`&`)
       r"[\w.*@-]{1,63}+:([^\s:'\"`,;<\]&]{6,128}+)(?=[\s'\"`,;<\]&]|$)",
       (":5432:", ":*:"), "('db.example.com'|'localhost'|'*') ':' ('5432'|'*') ':' [a-z]{3,8} ':' [a-z]{3,8} ':' "
       "<[A-Za-z0-9!%^*_+]{10,24}>",
       "PostgreSQL password file lines (postgresql.org/docs/current/libpq-pgpass.html: "
       "hostname:port:database:username:password)",
       "the password field of a .pgpass line", entity="password", category="credential", group=1,
       # Hints: PostgreSQL's port or a wildcard field (a gate regex over every payload cost more than the family)
       confidence=0.85, min_length=6, validator=_validate_plain),
    _v("crypt_password_hash",
       r"(?<![\w$./])(?:\$(?:1|5|6)\$(?:rounds=\d{1,9}\$)?[" + _CRYPT + r"]{1,16}\$[" + _CRYPT + r"]{22,86}+"
       r"|\$2[abxy]?\$\d\d\$[" + _CRYPT + r"]{53}|\$y\$[" + _CRYPT + r"]{1,16}\$[" + _CRYPT + r"]{1,86}\$["
       + _CRYPT + r"]{43})(?![A-Za-z0-9]|[./][" + _CRYPT + "])",  # a full stop may end the sentence
       ("$1$", "$5$", "$6$", "$2a$", "$2b$", "$2y$", "$2x$", "$2$", "$y$"),
       "('$6$' [A-Za-z0-9./]{16} '$' [A-Za-z0-9./]{86}|'$5$' [A-Za-z0-9./]{16} '$' [A-Za-z0-9./]{43}"
       "|'$1$' [A-Za-z0-9./]{8} '$' [A-Za-z0-9./]{22}|'$2b$12$' [A-Za-z0-9./]{53}"
       "|'$y$j9T$' [A-Za-z0-9./]{24} '$' [A-Za-z0-9./]{43})",
       "crypt(5) password hashes as in /etc/shadow: md5crypt $1$, sha256crypt $5$, sha512crypt $6$, bcrypt $2b$, "
       "yescrypt $y$ (man7.org/linux/man-pages/man5/crypt.5.html)",
       "a crypt(3) password hash (a crackable stand-in for the password)", entity="password_hash",
       confidence=0.95, min_length=30),
    _v("sidekiq_credentials",
       # the variable, any suffix and operator (`=`, `: `, `:=`, `.=`, `string =`, an XML element), then user:pass
       r"(?i:BUNDLE_(?:ENTERPRISE|GEMS)__CONTRIBSYS__COM)[A-Za-z_]{0,20}+[^0-9a-f]{1,24}?([0-9a-f]{8}:[0-9a-f]{8})"
       + _la(r"0-9a-f")
       + r"|https?://([0-9a-f]{8}:[0-9a-f]{8})@(?:enterprise|gems)\.contribsys\.com",
       ("contribsys",),
       "('BUNDLE_ENTERPRISE__CONTRIBSYS__COM='|'BUNDLE_GEMS__CONTRIBSYS__COM: ') <[0-9a-f]{8} ':' [0-9a-f]{8}>",
       "Sidekiq Pro/Enterprise gem server credentials (github.com/sidekiq/sidekiq wiki, 'Sidekiq Pro' and "
       "'Ent' installation: bundle config gems.contribsys.com user:pass)",
       "Sidekiq Pro/Enterprise credentials in BUNDLE_*__CONTRIBSYS__COM or a contribsys.com URL",
       entity="password", category="credential", group=(1, 2)),
    _v("sourcegraph_token", _lb() + r"sgp_(?:[0-9a-fA-F]{16}_|local_)?[0-9a-fA-F]{40}" + _la(), ("sgp_",),
       "('sgp_' [0-9a-fA-F]{40}|'sgp_' [0-9a-f]{16} '_' [0-9a-f]{40}|'sgp_local_' [0-9a-f]{40})",
       "Sourcegraph access tokens (sourcegraph.com/docs/cli/how-tos/creating_an_access_token)",
       "Sourcegraph access tokens: sgp_ (+ instance id or local_) + 40 hex"),
    _v("hubspot_token", _lb() + r"pat-(?:na|eu|ap)\d-" + _GUID_LOWER + _la(), ("pat-na", "pat-eu", "pat-ap"),
       "('pat-na1-'|'pat-eu1-'|'pat-na2-') " + _GUID_SPEC,
       "HubSpot private app access tokens (developers.hubspot.com/docs/api/private-apps)",
       "HubSpot private app tokens: pat-<region>- + a GUID"),
    _v("plaid_token", _lb() + r"(?:access|public)-(?:production|development|sandbox)-" + _GUID_LOWER + _la(),
       ("access-production-", "access-development-", "access-sandbox-", "public-production-", "public-sandbox-"),
       "('access-production-'|'access-sandbox-'|'access-development-') " + _GUID_SPEC,
       "Plaid access and public tokens (plaid.com/docs/api/tokens: access-<environment>-<identifier>)",
       "Plaid access tokens: access-production-/-development-/-sandbox- + a GUID"),
    _v("shippo_token", _lb() + r"shippo_(?:live|test)_[0-9a-f]{40}" + _la(), ("shippo_live_", "shippo_test_"),
       "('shippo_live_'|'shippo_test_') [0-9a-f]{40}",
       "Shippo API tokens (docs.goshippo.com/docs/guides_general/authentication)",
       "Shippo live and test API tokens: shippo_live_/shippo_test_ + 40 hex"),
    _v("flutterwave_key", _lb() + r"FLWSECK(?:_TEST)?-[0-9a-f]{32}-X" + _la() + r"|" + _lb()
       + r"FLWSECK(?:_TEST)?-?[0-9a-h]{12}" + _la(), ("flwseck",),
       "('FLWSECK-' [0-9a-f]{32} '-X'|'FLWSECK_TEST-' [0-9a-f]{32} '-X'|'FLWSECK_TEST' [0-9a-f]{12})",
       "Flutterwave secret and encryption keys (developer.flutterwave.com/docs/authentication)",
       "Flutterwave secret keys (FLWSECK-…-X) and encryption keys (FLWSECK_TEST + 12 hex)"),
    _v("onepassword_secret_key",
       r"(?<![A-Za-z0-9-])A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"
       r"(?![A-Za-z0-9-])", ("a3-",),
       "'A3-' [A-Z0-9]{6} '-' ([A-Z0-9]{11}|[A-Z0-9]{6} '-' [A-Z0-9]{5}) '-' [A-Z0-9]{5} '-' [A-Z0-9]{5} '-' "
       "[A-Z0-9]{5}",
       "1Password account Secret Keys (support.1password.com/secret-key: version A3, account id, 26 characters)",
       "1Password Secret Keys: A3- + account id + grouped random characters"),
    _v("cloudflare_origin_ca_key", _lb() + r"v1\.0-[0-9a-f]{24}-[0-9a-f]{146}" + _la(), ("v1.0-",),
       "'v1.0-' [0-9a-f]{24} '-' [0-9a-f]{146}",
       "Cloudflare Origin CA keys (developers.cloudflare.com/fundamentals/api/get-started/ca-keys)",
       "Cloudflare Origin CA keys: v1.0- + 24 hex + - + 146 hex"),
    _v("aws_mws_key", _lb() + r"amzn\.mws\.[0-9a-z]{8}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{12}" + _la(),
       ("amzn.mws.",), "'amzn.mws.' " + _GUID_SPEC,
       "Amazon Marketplace Web Service auth tokens (developer docs: amzn.mws. + a GUID)",
       "Amazon MWS auth tokens: amzn.mws. + a GUID"),
    _v("deepseek_api_key", r"sk-(?<![A-Za-z0-9_-]sk-)[0-9a-f]{32}" + _la(), ("sk-",), "'sk-' [0-9a-f]{32}",
       "DeepSeek API keys (platform.deepseek.com/api_keys: sk- + 32 hex)", "DeepSeek API keys: sk- + 32 hex",
       validator=lambda v, e: None if len(set(v[3:])) < 6 else e),
    _v("together_api_key", _lb() + r"tgp_v1_[A-Za-z0-9_-]{43}" + _la(), ("tgp_v1_",), "'tgp_v1_' [A-Za-z0-9_-]{43}",
       "Together AI API keys (docs.together.ai/reference/authentication)", "Together AI API keys: tgp_v1_ + 43"),
    _v("salesforce_access_token", r"(?<![A-Za-z0-9])00D[A-Za-z0-9]{12}(?:[A-Za-z0-9]{3})?![A-Za-z0-9._]{40,400}+"
       + _LA_DOT, ("00d",),
       "'00D' [A-Za-z0-9]{12} '!' [A-Za-z0-9]{20} '.' [A-Za-z0-9._]{80,90}",
       "Salesforce session and OAuth access tokens (help.salesforce.com: org id 00D… ! session part)",
       "Salesforce access tokens: the 15- or 18-character org id (00D…), !, the session part",
       gate=r"00D[A-Za-z0-9]{12}(?:[A-Za-z0-9]{3})?!"),
    _v("github_installation_token", _lb() + r"ghs_\d{8}_eyJ[A-Za-z0-9_-]{20,4000}+\.[A-Za-z0-9_-]{20,4000}+"
       r"(?:\.[A-Za-z0-9_-]{10,1000}+)?" + _LA_DOT, ("ghs_",),
       "'ghs_20260523_eyJ' [A-Za-z0-9_-]{60,80} '.eyJ' [A-Za-z0-9_-]{80,120} '.' [A-Za-z0-9_-]{40,43}",
       "GitHub App installation tokens in the dated JWT form (observed: ghs_ + date + a JWT)",
       "GitHub App installation tokens: ghs_<date>_<JWT>"),
    _v("ntlm_authenticate_message", _lb(r"A-Za-z0-9+/") + r"TlRMTVNTUAAD[A-Za-z0-9+/]{40,4000}+={0,2}"
       + _la(r"A-Za-z0-9+/="), ("tlrmtvntuaad",),
       "'TlRMTVNTUAADAAAAGAAYA' [A-Za-z0-9+/]{120,160} '='",
       "NTLM AUTHENTICATE messages (MS-NLMP section 2.2.1.3) in an HTTP Authorization header",
       "a base64 NTLM AUTHENTICATE message (it carries the challenge responses), verified by decoding",
       entity="password_hash", validator=_validate_ntlm_authenticate),
    _v("ntlm_hash_dump", r"(?<![\w.$@-])[^\s:]{1,64}:\d{1,10}:[0-9A-Fa-f]{32}:([0-9A-Fa-f]{32}):::",
       (":::",), "[a-z]{4,10} ':' [1-9] [0-9]{3} ':aad3b435b51404eeaad3b435b51404ee:' <[0-9a-f]{32}> ':::'",
       "pwdump/secretsdump SAM lines (user:rid:LM hash:NT hash:::)", "the NT hash of a pwdump line",
       entity="password_hash", group=1, min_length=32),
    _v("otpauth_secret", r"otpauth://[th]otp/[^\s?#]{0,256}\?(?:[^\s#]{0,512}?&)?secret=([A-Za-z2-7]{16,128}+=*)",
       ("otpauth://",),
       "'otpauth://totp/Example:alice@example.com?secret=' <[A-Z2-7]{32}> '&issuer=Example'",
       "one-time password provisioning URIs (github.com/google/google-authenticator/wiki/Key-Uri-Format)",
       "the shared secret of an otpauth:// URI", entity="otp_secret", group=1, min_length=16),
    _v("powershell_secure_string",
       r"(?i:ConvertTo-SecureString)(?:[ \t]{1,4}-(?!String\b)[A-Za-z]{2,20}){0,3}(?:[ \t]{1,4}-String)?"
       r"(?:[ \t]{1,4}-(?!String\b)[A-Za-z]{2,20}){0,3}[ \t]{1,4}"
       r"(?:\\?\"([^\"\\\r\n]{4,256})\\?\"|'([^'\r\n]{4,256})'|([^\s'\"$(-][^\s'\"|;]{3,255}))",
       ("convertto-securestring",),
       "'$p = ConvertTo-SecureString \"' <[A-Za-z0-9!%^*_+]{10,24}> '\" -AsPlainText -Force'",
       "PowerShell ConvertTo-SecureString with a plain-text string (learn.microsoft.com, ConvertTo-SecureString)",
       "the plain-text password given to ConvertTo-SecureString", entity="password", category="credential",
       group=(1, 2, 3), min_length=4, validator=_validate_plain, confidence=0.9),
    _v("sonarqube_token", _lb() + r"sq[upa]_[A-Za-z0-9]{40}" + _la(), ("squ_", "sqp_", "sqa_"),
       "('squ_'|'sqp_'|'sqa_') [0-9a-f]{40}",
       "SonarQube user, project-analysis and global-analysis tokens (docs.sonarsource.com, 'Managing your tokens')",
       "SonarQube tokens: squ_/sqp_/sqa_ + 40"),
    _v("intra42_client_secret", _lb() + r"s-s4t2(?:ud|af)-[0-9a-f]{64}" + _la(), ("s-s4t2",),
       "('s-s4t2ud-'|'s-s4t2af-') [0-9a-f]{64}", "42 Intra API application secrets (api.intra.42.fr/apidoc)",
       "42 Intra client secrets: s-s4t2ud-/s-s4t2af- + 64 hex"),
    _v("flyio_token", _lb() + r"fo1_[A-Za-z0-9_-]{43}" + _la() + r"|" + _lb(r"A-Za-z0-9+/_-")
       + r"fm[12][ar]?_[A-Za-z0-9+/_-]{40,4000}+={0,2}" + _la(r"A-Za-z0-9+/=_-"),
       ("fo1_", "fm1_", "fm1a_", "fm1r_", "fm2_"),
       "('fo1_' [A-Za-z0-9_-]{43}|'fm2_lJPE' [A-Za-z0-9+/]{120,200})",
       "Fly.io access tokens (fly.io/docs/security/tokens: FlyV1 fm1_/fm2_ macaroons, fo1_ OAuth tokens)",
       "Fly.io tokens: fo1_ + 43, and fm1_/fm2_ macaroons"),
    _v("new_relic_browser_key", _lb() + r"NRJS-[0-9a-f]{19}" + _la(), ("nrjs-",), "'NRJS-' [0-9a-f]{19}",
       "New Relic browser API keys (docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys)",
       "New Relic browser keys: NRJS- + 19 hex"),
    _v("frameio_token", _lb() + r"fio-u-[A-Za-z0-9_=-]{64}" + _la(r"A-Za-z0-9_=-"), ("fio-u-",),
       "'fio-u-' [A-Za-z0-9_-]{64}", "Frame.io developer tokens (developer.frame.io/docs/getting-started)",
       "Frame.io tokens: fio-u- + 64"),
    _v("settlemint_token", _lb() + r"sm_(?:pat|aat|sat)_[A-Za-z0-9]{16}" + _la(), ("sm_pat_", "sm_aat_", "sm_sat_"),
       "('sm_pat_'|'sm_aat_'|'sm_sat_') [A-Za-z0-9]{16}",
       "SettleMint personal, application and service access tokens (console.settlemint.com/documentation)",
       "SettleMint tokens: sm_pat_/sm_aat_/sm_sat_ + 16"),
    _v("duffel_token", _lb() + r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}" + _la(r"A-Za-z0-9_=-"),
       ("duffel_test_", "duffel_live_"), "('duffel_test_'|'duffel_live_') [A-Za-z0-9_-]{43}",
       "Duffel API access tokens (duffel.com/docs/api/overview/making-requests/authentication)",
       "Duffel tokens: duffel_test_/duffel_live_ + 43"),
    # `%2B`/`%3D` read as `+`/`=` once a URL query is decoded
    _v("twitter_bearer_token", r"(?<![A-Za-z0-9+/%])A{21}(?=[A-Za-z0-9%]{0,40}[a-z])[A-Za-z0-9%+/=]{80,140}+"
       + _la(r"A-Za-z0-9+/=%"), ("aaaaaaaaaaaaaaaaaaaaa",),
       "'AAAAAAAAAAAAAAAAAAAAA' [B-Z] [a-z]{3} 'AAAAAAAA' [A-Za-z0-9]{20} '%2B' [A-Za-z0-9]{60}",
       "X (Twitter) app-only bearer tokens (developer.x.com/en/docs/authentication/oauth-2-0/bearer-tokens)",
       "X (Twitter) bearer tokens: 21 A + 80 or more URL-encoded base64", min_length=101),
    # the literal first, its look-behind after it: the regex engine then scans for `pat` quickly
    _v("airtable_token", r"pat(?<![A-Za-z0-9_-]pat)[A-Za-z0-9]{14}\.[0-9a-f]{64}" + _la(), ("pat",),
       "'pat' [A-Za-z0-9]{14} '.' [0-9a-f]{64}",
       "Airtable personal access tokens (airtable.com/developers/web/guides/personal-access-tokens)",
       "Airtable personal access tokens: pat + 14 + . + 64 hex"),
    _v("defined_networking_key", _lb() + r"dnkey-[A-Z0-9=_-]{26}-[A-Z0-9=_-]{52}" + _la(r"A-Za-z0-9=_-"), ("dnkey-",),
       "'dnkey-' [A-Z2-7]{26} '-' [A-Z2-7]{52}",
       "Defined Networking (Managed Nebula) API keys (docs.defined.net/api)",
       "Defined Networking keys: dnkey- + 26 + - + 52"),
    _v("aws_bedrock_api_key", _lb(r"A-Za-z0-9+/") + r"ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{20,4000}+={0,2}"
       + _la(r"A-Za-z0-9+/=") + r"|" + _lb() + r"bedrock-api-key-[A-Za-z0-9+/=]{20,4000}+",
       ("absk", "bedrock-api-key-"),
       "('ABSKQmVkcm9ja0FQSUtleS' [A-Za-z0-9+/]{100,140}|'bedrock-api-key-' [A-Za-z0-9+/]{200,260})",
       "Amazon Bedrock API keys (docs.aws.amazon.com/bedrock/latest/userguide/api-keys.html): long-term ABSK… "
       "(base64 of BedrockAPIKey-…) and short-term bedrock-api-key-…",
       "Amazon Bedrock long-term (ABSK…) and short-term (bedrock-api-key-…) API keys",
       validator=_validate_bedrock),
    _v("grafana_provisioned_key", _lb(r"A-Za-z0-9+/") + r"eyJrIjoi[A-Za-z0-9+/]{40,600}+={0,2}" + _la(r"A-Za-z0-9+/="),
       ("eyjrijoi",), "'eyJrIjoi' [A-Za-z0-9]{40} 'IiwibiI6Im' [a-z]{8} 'IiwiaWQiOjF9'",
       "Grafana provisioned API keys (grafana.com/docs/grafana/latest/administration/api-keys: base64 JSON "
       "{\"k\":…,\"n\":…,\"id\":…})", "Grafana API keys (base64 JSON with k, n and id), verified by decoding",
       validator=_validate_grafana_key),
    _v("new_relic_license_key", r"(?<![A-Za-z0-9])(?:[a-z]{2}\d{2}x[0-9a-f]{31}|[0-9a-f]{36})NRAL(?![A-Za-z0-9])"
       + r"|" + _lb() + r"NRBR-[0-9a-f]{19}" + _la(), ("nral", "nrbr-"),
       "('eu01x' [0-9a-f]{31} 'NRAL'|[0-9a-f]{36} 'NRAL'|'NRBR-' [0-9a-f]{19})",
       "New Relic license (ingest) keys: 40 characters ending NRAL, with a region prefix outside the US "
       "(docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys)",
       "New Relic license keys (…NRAL) and browser keys (NRBR-)", min_length=24),
    _v("wundergraph_key", _lb() + r"cosmo_[0-9a-f]{32}" + _la(), ("cosmo_",), "'cosmo_' [0-9a-f]{32}",
       "WunderGraph Cosmo API keys (cosmo-docs.wundergraph.com, 'API keys')",
       "WunderGraph Cosmo keys: cosmo_ + 32 hex"),
    # labelled families: a credential with no prefix of its own, known by the vendor's name right before it
    _v("sourcegraph_labelled_token",
       r"(?i:sourcegraph)[\w.-]{0,24}?[\s\"'`]{0,4}(?::{1,3}=|\?=|=>|:|=)[\s\"'`]{0,4}([0-9a-fA-F]{40})" + _la(),
       ("sourcegraph",), "('sourcegraph: '|'SOURCEGRAPH_TOKEN='|'sourcegraph_access_token = \"') <[0-9a-f]{40}>",
       "Sourcegraph access tokens before the sgp_ prefix (sourcegraph.com/docs/cli/how-tos/creating_an_access_token:"
       " 40 hex)", "a 40-hex Sourcegraph token after a label naming Sourcegraph", group=1, confidence=0.9),
    _v("sumologic_access_id",
       r"(?i:sumo(?:logic)?[\w.-]{0,12}?access[_.-]?id)[\w.-]{0,8}?[\s\"'`]{0,4}(?::{1,3}=|\?=|=>|:|=)[\s\"'`]{0,4}"
       r"(su[A-Za-z0-9]{12})" + _la(),
       ("accessid", "access_id", "access-id", "access.id"),
       "('SUMO_ACCESS_ID = \"'|'sumologic.accessId: '|'SUMOLOGIC_ACCESSID=') <'su' [A-Za-z0-9]{12}>",
       "Sumo Logic access keys: an access id (su + 12) and an access key (help.sumologic.com/docs/manage/security/"
       "access-keys)", "a Sumo Logic access id (su + 12) after a label naming it", entity="api_token",
       category="credential", group=1, confidence=0.85),
    _v("dropbox_token", r"sl\.(?<![A-Za-z0-9_.-]sl\.)(?:u\.)?[A-Za-z0-9_-]{130,1400}+" + _la(), ("sl.",),
       "'sl.' [A-Za-z0-9_-]{138}",
       "Dropbox short-lived access tokens (developers.dropbox.com/oauth-guide)",
       "Dropbox short-lived access tokens: sl. (or sl.u.) + 130 or more", min_length=133),
    # Families with a documented prefix that CredSweeper's labelled samples showed passing (issue 30's public run)
    _v("vercel_token", _lb() + r"vc[pikar]_[A-Za-z0-9]{40,64}+" + _la(), ("vcp_", "vci_", "vck_", "vca_", "vcr_"),
       "('vcp_'|'vci_'|'vck_'|'vca_'|'vcr_') [A-Za-z0-9]{56}",
       "Vercel access tokens with a type prefix (vercel.com/docs, 'Account tokens'; vercel.com/changelog, "
       "'new token formats')", "Vercel personal, integration, API-key, app and refresh tokens: vc?_ + 56 base62"),
    _v("posthog_personal_api_key", _lb() + r"phx_[A-Za-z0-9]{40,70}+" + _la(), ("phx_",), "'phx_' [A-Za-z0-9]{60}",
       "PostHog personal API keys (posthog.com/docs/api: phx_; the project key phc_ is public and not matched)",
       "PostHog personal API keys: phx_ + 40-70 base62"),
    _v("notion_token", _lb() + r"ntn_\d{11}[A-Za-z0-9]{35}" + _la(), ("ntn_",), "'ntn_' [0-9]{11} [A-Za-z0-9]{35}",
       "Notion integration tokens, ntn_ format (developers.notion.com, 'Authorization')",
       "Notion integration tokens: ntn_ + 11 digits + 35 base62"),
    _v("tavily_api_key", _lb() + r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{32}" + _la(), ("tvly-",),
       "('tvly-'|'tvly-dev-') [A-Za-z0-9]{32}", "Tavily API keys (docs.tavily.com, 'API key')",
       "Tavily API keys: tvly- (or tvly-dev-) + 32 base62"),
    _v("llamacloud_api_key", _lb() + r"llx-[A-Za-z0-9_-]{40,60}+" + _la(), ("llx-",), "'llx-' [A-Za-z0-9]{48}",
       "LlamaCloud API keys (docs.cloud.llamaindex.ai, 'API keys')", "LlamaCloud API keys: llx- + 48"),
    _v("cloudflare_api_token", _lb() + r"cf(?:ut|at)_[A-Za-z0-9]{40,60}+" + _la(), ("cfut_", "cfat_"),
       "('cfut_'|'cfat_') [A-Za-z0-9]{48}",
       "Cloudflare user and account API tokens with a scannable prefix (developers.cloudflare.com, 'API token "
       "formats')", "Cloudflare user/account API tokens: cfut_/cfat_ + 40-60 base62"),
    _v("netlify_access_token", _lb() + r"nf[pc]_[A-Za-z0-9]{36,40}" + _la(), ("nfp_", "nfc_"),
       "'nfp_' [A-Za-z0-9]{36}", "Netlify personal access tokens (docs.netlify.com, 'Personal access tokens')",
       "Netlify personal access tokens: nfp_ + 36 base62"),
    _v("postman_collection_token", _lb() + r"PMAT-[0-9A-Z]{26}" + _la(), ("pmat-",), "'PMAT-' [0-9A-Z]{26}",
       "Postman collection access tokens (learning.postman.com, 'Collection access keys')",
       "Postman collection access tokens: PMAT- + 26 (a ULID alphabet)"),
    _v("docker_swarm_secret", _lb() + r"(?:SWMTKN-1-[a-z0-9]{50}-[a-z0-9]{25}|SWMKEY-1-[A-Za-z0-9+/]{43})"
       + _la(r"A-Za-z0-9+/"), ("swmtkn-1-", "swmkey-1-"),
       "('SWMTKN-1-' [a-z0-9]{50} '-' [a-z0-9]{25}|'SWMKEY-1-' [A-Za-z0-9+/]{43})",
       "Docker Swarm join tokens and unlock keys (docs.docker.com/engine/swarm/join-nodes, swarm_manager_locking)",
       "Docker Swarm join tokens (SWMTKN-1-…) and autolock unlock keys (SWMKEY-1-…)"),
    # No literal to hint at (two letters would wake it everywhere): a gate over the payload decides.
    _v("nats_nkey_seed", r"(?<![A-Z2-7])S[UAONCXP][A-Z2-7]{56}(?![A-Z2-7])", (),
       "'S' ('U'|'A'|'O'|'N'|'C') [A-Z2-7]{56}",
       "NATS NKEY seeds: private Ed25519 seeds, base32 with an S then the key's role (docs.nats.io, 'NKeys')",
       "NATS NKEY private seeds: S + role letter + 56 base32", confidence=0.9,
       gate=r"S[UAONCXP][A-Z2-7]{56}"),
)  # fmt: skip

_DUMMY = re.compile(
    r"(?i)example|(?:x[-_]?){6}|thisis|your[-_]?(?:token|key|secret)|redacted|placeholder|(?-i:abcdef|012345|123456)"
)
_RUN = re.compile(r"(.)\1{7}")
_DUMMY_B64 = ("RVhBTVBMR", "V4YW1wbG", "FWEFNUExF", "ZXhhbXBsZ")  # "EXAMPLE"/"example" at each base64 alignment


def _not_dummy(validator: Validator | None, runs: bool = True) -> Validator:
    """Documentation values are not secrets: a value spelling out EXAMPLE, a run of x, one character eight times
    (`runs`; not for formats with runs of their own, such as X bearer tokens), also inside a base64 run; then the
    family's own check."""

    def check(value: str, entity: str) -> str | None:
        if _DUMMY.search(value) or (runs and _RUN.search(value)) or any(m in value for m in _DUMMY_B64):
            return None
        return entity if validator is None else validator(value, entity)

    return check


GAP_DETECTORS = tuple(
    dataclasses.replace(d, validator=_not_dummy(d.validator, runs=d.name != "twitter_bearer_token"))
    for d in GAP_DETECTORS
)
# Older families whose documentation values showed up in the public false positives (`glpat-xxxx….xxxx`,
# `sbp_v0_…abcdef`); the AWS family keeps redacting its documentation key on purpose.
VENDOR_DETECTORS = tuple(
    dataclasses.replace(d, validator=_not_dummy(d.validator)) if d.name in ("gitlab_token", "supabase_token") else d
    for d in VENDOR_DETECTORS
)


# --- labelled and command-line credentials -------------------------------------------------------------------------

_CLI_VALUE = r"""(?:'([^'\r\n]{1,256})'|"([^"\r\n]{1,256})"|([^\s'"]{1,256}))"""


_CLI_PLACEHOLDER = frozenset({"test", "pass", "password", "passwd", "pwd", "secret", "token", "foo", "bar"})


def _validate_cli(value: str, entity: str) -> str | None:
    """A command-line password is not a flag, a placeholder (`[PASSWORD]`, `<user:password>`, `test`, `yyy`) or a
    port mapping."""
    if value.startswith(("-", "$")) or re.fullmatch(r"[\d:./]+", value):
        return None
    bracketed = value[-1:] in "]>}" and (value[:1] in "[<{" or not any(c in value for c in "[<{"))  # `<user:pw>`
    if value.lower() in _CLI_PLACEHOLDER or bracketed or len(set(value)) == 1:
        return None
    return validate_secret(value, entity)


def _validate_plain_secret(value: str, entity: str) -> str | None:
    """A header value is a credential when it is not a variable, a command substitution or a placeholder, and
    has a digit or a symbol, or is letters that read as random (a word is a scheme or prose)."""
    if _validate_plain(value, entity) is None or value.startswith(("$", "`", "{")):
        return None
    if value.isalpha() and not random_letters(value):
        return None
    return entity


def _validate_cli_secret(value: str, entity: str) -> str | None:
    """A flag's value is a secret only with a letter and a digit or a symbol: `--token file` or `--secret name`
    name things, `--password Xy9!kLm2` does not."""
    if not any(c.isalpha() for c in value) or value.isalpha() or re.fullmatch(r"[a-z]+(?:[-_.][a-z]+)*", value):
        return None
    if value.startswith(("/", "~", "./", "arn:", "file:")) or "://" in value:
        return None  # a path, a URL or a resource name: where the secret is, not the secret
    return _validate_cli(value, entity)


CLI_DETECTORS: tuple[Detector, ...] = (
    _v("curl_user_credentials",
       # user:password (the password may be quoted on its own: `kevin:'pw'`); `:password` (no user); `key:` (an
       # API key as the user, no password: Stripe, Elasticsearch)
       r"(?<![\w-])(?:-u|--user|--proxy-user)(?:[ \t]{1,4}|=)?['\"]?(?:[^\s:'\"]{0,128}:['\"]?([^\s'\"]{1,256})"
       r"|([^\s:'\"$<{\[]{12,256}):['\"]?(?=[\s'\"]|$))",
       ("-u", "--user"), "'curl -u ' [a-z]{4,10} ':' <[A-Za-z0-9!%^*_+]{10,24}> ' https://api.example.com/'",
       "curl(1) --user user:password", "the password of curl -u/--user user:PASSWORD",
       entity="password", group=(1, 2), min_length=8, validator=_validate_cli, confidence=0.9),
    _v("curl_authorization_header",
       r"(?i)(?<![\w-])(?:-H|--header)[ \t]{1,4}[\"']Authorization:[ \t]{0,4}"
       r"(?:(?!bearer\b|basic\b)[A-Za-z][\w-]{0,24}[ \t]{1,4})?([^\s\"']{8,4096})",
       ("authorization:",),
       "('curl -H \"Authorization: Api-Token '|'curl --header \"Authorization: ') <[A-Za-z0-9]{32,40}> '\"'",
       "curl(1) -H/--header 'Authorization: [scheme] credentials' with a scheme other than Bearer and Basic "
       "(RFC 9110 section 11.6.2), or none",
       "the credentials of a curl Authorization header (any scheme, or none)", entity="secret_value", group=1,
       min_length=8, validator=_validate_plain_secret, confidence=0.85),
    _v("mysql_password_flag",
       r"(?<!\S)-p(?![\s'\"])" + _CLI_VALUE.replace("{1,256}", "{3,256}"),
       ("mysql", "mariadb"), "'mysql -u root -p' <[A-Za-z0-9!%^*_+]{10,24}> ' -h db.internal shop'",
       "mysql(1) -pPASSWORD (dev.mysql.com/doc/refman/en/connection-options.html)",
       "the password glued to mysql's -p flag", entity="password", group=(1, 2, 3), min_length=6,
       validator=_validate_cli, confidence=0.85),
    _v("cli_password_flag",
       r"(?<![\w-])(?:sshpass[ \t]{1,4}-p|redis-cli\b[^\n]{0,80}?[ \t]-a|--password|--passwd|--pass)(?:[ \t]{1,4}|=)"
       + _CLI_VALUE,
       ("sshpass", "redis-cli", "--pass"),
       "('sshpass -p '|'redis-cli -h cache -a '|'backup --password ') <[A-Za-z0-9!%^*_+]{10,24}> ' now'",
       "sshpass(1) -p, redis-cli -a, --password/--pass flags",
       "the value of sshpass -p, redis-cli -a and --password/--pass flags", entity="password", group=(1, 2, 3),
       min_length=12, validator=_validate_cli, confidence=0.85),
    # the value ends at a blank, or where XML around the entry closes (`]]>` of a CDATA section, `</tag>`)
    _v("netrc_password", r"(?<![\w-])(?:login|user)[ \t]+\S{1,256}[ \t\r\n]+password[ \t]+((?:(?!\]\]>|</)\S){1,256})",
       ("password",), "'machine api.example.com login deploy password ' <[A-Za-z0-9!%^*_+]{10,24}>",
       ".netrc(5) entries (machine … login … password …)", "the password of a .netrc entry",
       entity="password", group=1, min_length=12, validator=validate_secret, confidence=0.9),
    _v("openssl_pass_argument", r"(?<![\w-])-(?:passin|passout|password|pass|k)[ \t]{1,4}[\"']?pass:([^\s\"']{4,256})",
       ("pass:",), "'openssl pkcs12 -export -in c.pem -passout pass:' <[A-Za-z0-9!%^*_+]{10,24}> ' -out c.p12'",
       "OpenSSL pass phrase arguments (docs.openssl.org, openssl-passphrase-options: pass:password)",
       "the password of an OpenSSL -passin/-passout pass:PASSWORD argument", entity="password",
       category="credential", group=1, min_length=4, validator=_validate_cli, confidence=0.9),
    _v("curlopt_password",
       r"CURLOPT_(?:PROXY)?(?:PASSWORD|USERPWD|KEYPASSWD|TLSAUTH_PASSWORD)[ \t]{0,4},[ \t]{0,4}"
       r"\"(?:[^\":\r\n]{1,128}:)?"
       r"([^\"\r\n]{4,256})\"",
       ("curlopt_",), "'curl_easy_setopt(curl, CURLOPT_USERPWD, \"svc:' <[A-Za-z0-9!%^*_+]{10,24}> '\");'",
       "libcurl password options (curl.se/libcurl/c/CURLOPT_USERPWD.html, CURLOPT_PASSWORD)",
       "the password given to libcurl's CURLOPT_PASSWORD/USERPWD/PROXYPASSWORD/PROXYUSERPWD", entity="password",
       category="credential", group=1, min_length=4, validator=_validate_cli, confidence=0.9),
    _v("call_argument_secret",
       r"(?i)\b(?:setProperty|setenv|putenv|put|set|define|setdefault|add|getenv|GetEnvOrDefault|getOrDefault)"
       r"\([ \t]{0,4}[\"']"
       r"[\w.-]{0,40}?(?:token|secret|password|passwd|pwd|api[_-]?key|apikey|credentials?)s?[\"'][ \t]{0,4},[ \t]{0,4}"
       r"(?:\"([^\"\r\n]{4,256})\"|'([^'\r\n]{4,256})')",
       ("setproperty", "setenv", "putenv", "put(", "set(", "define(", "setdefault(", "add(", "getenv(", "ordefault("),
       "('System.setProperty(\"DB_PASSWORD\", \"'|'define(\"API_TOKEN\", \"'|'props.put(\"app.secret\", \"') "
       "<[A-Za-z0-9!%^*_+]{10,24}> '\")'",
       "a secret given by name to a setter: Java System.setProperty, PHP define, putenv, Properties.put; or as the "
       "default of a lookup: getenv(\"API_TOKEN\", \"…\"), GetEnvOrDefault, getOrDefault",
       "the literal value of setProperty/define/putenv/put(\"…TOKEN|SECRET|PASSWORD|API_KEY…\", \"value\")",
       entity="password", category="credential", group=(1, 2), min_length=4, validator=_validate_cli,
       confidence=0.85),
    _v("cli_secret_flag",
       r"(?i)(?<![\w-])-{1,2}(?:passphrase|password|passwd|pwd|secret|client-secret|token|access-token|auth-token|"
       r"api-key|apikey|oauth2-bearer)(?![\w-])(?:[ \t]{1,4}|=)" + _CLI_VALUE,
       ("-pass", "-pwd", "-secret", "-token", "-api-key", "-apikey", "-oauth2-bearer"),
       "('gpg --batch --passphrase '|'Connect-Server -Password '|'tool --token '|'svc -secret '"
       "|'curl --oauth2-bearer ') <[A-Za-z0-9!%^*_+]{6,10} [0-9]{2} [!%^*_+]>",
       "command-line secret flags: gpg(1) --passphrase, PowerShell -Password, --token/--secret/--api-key options",
       "the value of a --passphrase/-Password/--token/--secret/--api-key style flag (with a digit or a symbol)",
       entity="password", group=(1, 2, 3), min_length=8, validator=_validate_cli_secret, confidence=0.8),
)  # fmt: skip


__all__ = ["CLI_DETECTORS", "GAP_DETECTORS", "VENDOR_DETECTORS", "validate_crc32_token"]
