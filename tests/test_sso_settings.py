"""config/sso.py refuses what it cannot use, naming the variable (docs/sso.md, "Settings")."""

from __future__ import annotations

import importlib

import pytest
from django.core.exceptions import ImproperlyConfigured

import config.sso

ISSUER = {
    "ARBITER_OIDC_ISSUER": "https://id.example.org/realms/lab",
    "ARBITER_OIDC_CLIENT_ID": "arbiter",
    "ARBITER_OIDC_CLIENT_SECRET": "s3cret",
}


@pytest.fixture
def load(monkeypatch):
    """Reads config/sso.py again under the given environment; as it was afterwards."""

    def read(**environ):
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        return importlib.reload(config.sso)

    yield read
    monkeypatch.undo()
    importlib.reload(config.sso)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"ARBITER_OIDC_ISSUER": "id.example.org"}, "ARBITER_OIDC_ISSUER='id.example.org'"),
        (
            {"ARBITER_OIDC_ISSUER": "https://id.example.org", "ARBITER_OIDC_CLIENT_ID": "a"},
            "ARBITER_OIDC_CLIENT_SECRET is needed",
        ),
        ({"ARBITER_OIDC_CLIENT_ID": "a"}, "need ARBITER_OIDC_ISSUER"),
        ({"ARBITER_LOCAL_PASSWORDS": "off"}, "ARBITER_LOCAL_PASSWORDS=off needs"),
        ({"ARBITER_LOCAL_PASSWORDS": "maybe"}, "ARBITER_LOCAL_PASSWORDS='maybe'"),
        ({**ISSUER, "ARBITER_OIDC_SCOPES": "email"}, "ARBITER_OIDC_SCOPES must include openid"),
        ({**ISSUER, "ARBITER_OIDC_GROUP_ROLES": "a=demo:curator"}, "needs ARBITER_OIDC_GROUPS"),
        ({"ARBITER_MFA_REQUIRED_FOR": "curators,admins"}, "'admins' is not one of"),
    ],
)
def test_bad_values_are_refused_by_name(load, environ, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        load(**environ)


def test_a_provider_with_pkce_and_the_issuer_in_form_action(load):
    sso = load(**ISSUER, ARBITER_LOCAL_PASSWORDS="off", ARBITER_MFA_REQUIRED_FOR="operators")
    (app,) = sso.SOCIALACCOUNT_PROVIDERS["openid_connect"]["APPS"]
    assert app["settings"]["server_url"] == "https://id.example.org/realms/lab"
    assert app["settings"]["oauth_pkce_enabled"] is True
    assert sso.SSO_FORM_ACTIONS == ["https://id.example.org"]
    assert sso.ARBITER_LOCAL_PASSWORDS is False
    assert sso.ARBITER_MFA_REQUIRED_FOR == ("operators",)
