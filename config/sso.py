"""Single sign-on with OpenID Connect and two-factor login, read by config/settings.py
(docs/sso.md): django-allauth's OpenID Connect provider, which reads the issuer's discovery
document, and allauth's MFA (TOTP). Every value is checked here, so a bad one stops the
process with a message naming the variable."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_list, env_str

# The id in the sign-in URLs: the redirect URI to register at the provider is
# <ARBITER_BASE_URL>/accounts/oidc/sso/login/callback/.
OIDC_PROVIDER_ID = "sso"
ROLES = ("annotator", "curator", "researcher")
MFA_GROUPS = ("curators", "operators")

ARBITER_OIDC_ISSUER = env_str("ARBITER_OIDC_ISSUER", "").rstrip("/")
ARBITER_OIDC_CLIENT_ID = env_str("ARBITER_OIDC_CLIENT_ID", "")
ARBITER_OIDC_CLIENT_SECRET = env_str("ARBITER_OIDC_CLIENT_SECRET", "")
# The button reads "Sign in with <name>".
ARBITER_OIDC_NAME = env_str("ARBITER_OIDC_NAME", "single sign-on")
# The claim that lists the user's groups (off when empty), and which project role each group
# gives: "group=project-slug:role,...".
ARBITER_OIDC_GROUPS_CLAIM = env_str("ARBITER_OIDC_GROUPS_CLAIM", "")
# The scopes asked for (a provider may need one more for the groups claim, Okta's "groups").
ARBITER_OIDC_SCOPES = env_list("ARBITER_OIDC_SCOPES", ["openid", "email", "profile"])
# Local passwords: off leaves single sign-on as the only way in.
ARBITER_LOCAL_PASSWORDS = env_bool("ARBITER_LOCAL_PASSWORDS", True)
# Who must use two-factor login: "curators" (anyone curating a project), "operators" (staff).
ARBITER_MFA_REQUIRED_FOR = tuple(env_list("ARBITER_MFA_REQUIRED_FOR", []))


def _issuer(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc or parts.query or parts.fragment:
        raise ImproperlyConfigured(
            f"ARBITER_OIDC_ISSUER={value!r} is not an issuer URL (https://host/path, no query)"
        )
    return value


def group_roles(value: str) -> dict[str, list[tuple[str, str]]]:
    """``ARBITER_OIDC_GROUP_ROLES`` read: each group and the (project slug, role) pairs it gives."""
    mapping: dict[str, list[tuple[str, str]]] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        group, _, target = item.partition("=")
        slug, _, role = target.partition(":")
        if not group.strip() or not slug.strip() or role.strip() not in ROLES:
            raise ImproperlyConfigured(
                f"ARBITER_OIDC_GROUP_ROLES: {item!r} is not group=project-slug:role "
                f"(role one of {', '.join(ROLES)})"
            )
        mapping.setdefault(group.strip(), []).append((slug.strip(), role.strip()))
    return mapping


def oidc_providers(
    *, issuer: str, client_id: str, secret: str, name: str, scopes: list[str]
) -> dict:
    """allauth's ``SOCIALACCOUNT_PROVIDERS``: the OpenID provider (none without an issuer), with
    the authorization code flow and PKCE, the client's secret sent in the token request."""
    apps = [
        {
            "provider_id": OIDC_PROVIDER_ID,
            "name": name,
            "client_id": client_id,
            "secret": secret,
            "settings": {
                "server_url": issuer,
                "oauth_pkce_enabled": True,
                "token_auth_method": "client_secret_post",
                "scope": scopes,
            },
        }
    ]
    return {
        "openid_connect": {
            # Accounts are keyed by (issuer, subject): annotation/accounts/sso.py. allauth reads
            # the class once, so it is named even while no provider is configured.
            "provider_class": "annotation.accounts.sso.IssuerOpenIDConnectProvider",
            "APPS": apps if issuer else [],
        }
    }


if ARBITER_OIDC_ISSUER:
    _issuer(ARBITER_OIDC_ISSUER)
    for _name, _value in (
        ("ARBITER_OIDC_CLIENT_ID", ARBITER_OIDC_CLIENT_ID),
        ("ARBITER_OIDC_CLIENT_SECRET", ARBITER_OIDC_CLIENT_SECRET),
    ):
        if not _value:
            raise ImproperlyConfigured(f"ARBITER_OIDC_ISSUER is set: {_name} is needed too")
elif ARBITER_OIDC_CLIENT_ID or ARBITER_OIDC_CLIENT_SECRET:
    raise ImproperlyConfigured("ARBITER_OIDC_CLIENT_ID and _SECRET need ARBITER_OIDC_ISSUER")
if not ARBITER_LOCAL_PASSWORDS and not ARBITER_OIDC_ISSUER:
    raise ImproperlyConfigured(
        "ARBITER_LOCAL_PASSWORDS=off needs ARBITER_OIDC_ISSUER: nobody could sign in"
    )
if "openid" not in ARBITER_OIDC_SCOPES:
    raise ImproperlyConfigured("ARBITER_OIDC_SCOPES must include openid")
ARBITER_OIDC_GROUP_ROLES = group_roles(env_str("ARBITER_OIDC_GROUP_ROLES", ""))
if ARBITER_OIDC_GROUP_ROLES and not ARBITER_OIDC_GROUPS_CLAIM:
    raise ImproperlyConfigured("ARBITER_OIDC_GROUP_ROLES needs ARBITER_OIDC_GROUPS_CLAIM")
for _group in ARBITER_MFA_REQUIRED_FOR:
    if _group not in MFA_GROUPS:
        raise ImproperlyConfigured(
            f"ARBITER_MFA_REQUIRED_FOR: {_group!r} is not one of {', '.join(MFA_GROUPS)}"
        )

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
SSO_APPS = [
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "allauth.mfa",
]
SSO_MIDDLEWARE = [
    "allauth.account.middleware.AccountMiddleware",
    # After the one-time password's: a password is changed first, then a second factor set up.
    "annotation.accounts.mfa.MfaRequiredMiddleware",
]
# The login page's button posts to Arbiter, which redirects to the provider: the CSP's
# form-action must allow that redirect.
SSO_FORM_ACTIONS = (
    ["{0.scheme}://{0.netloc}".format(urlsplit(ARBITER_OIDC_ISSUER))] if ARBITER_OIDC_ISSUER else []
)
SOCIALACCOUNT_PROVIDERS = oidc_providers(
    issuer=ARBITER_OIDC_ISSUER,
    client_id=ARBITER_OIDC_CLIENT_ID,
    secret=ARBITER_OIDC_CLIENT_SECRET,
    name=ARBITER_OIDC_NAME,
    scopes=ARBITER_OIDC_SCOPES,
)
ACCOUNT_ADAPTER = "annotation.projects.sso.AccountAdapter"
SOCIALACCOUNT_ADAPTER = "annotation.projects.sso.SocialAccountAdapter"
MFA_ADAPTER = "annotation.projects.sso.MFAAdapter"
# Arbiter's own login page, password reset and invitations make accounts; allauth only signs
# in through the provider and keeps the second factor.
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_UNIQUE_EMAIL = False
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_STORE_TOKENS = False
SOCIALACCOUNT_QUERY_EMAIL = True
MFA_SUPPORTED_TYPES = ["totp"]
MFA_TOTP_ISSUER = "Arbiter"
