"""The OpenID provider for the single sign-on tests: panva's ``oidc-provider`` (npm, pinned in
tests/oidc_provider/package-lock.json) run by Node on a free loopback port, one per test
session. ``npm ci`` installs it when tests/oidc_provider/node_modules is missing (as .ci/run
does); without Node and npm the tests that need it skip, saying so.

    def test_something(oidc_provider, sso_settings):
        oidc_provider.account("ann", email="ann@example.org", email_verified=True)
        callback = oidc_provider.sign_in(client, "ann")   # Django test client, signed in after
        client.get(callback)
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from config.sso import OIDC_PROVIDER_ID, oidc_providers

PROVIDER_DIR = Path(__file__).parent / "oidc_provider"
CLIENT_ID = "arbiter-tests"
CLIENT_SECRET = "arbiter-tests-secret"
CALLBACK_PATH = f"/accounts/oidc/{OIDC_PROVIDER_ID}/login/callback/"
LOGIN_PATH = f"/accounts/oidc/{OIDC_PROVIDER_ID}/login/"
NAME = "Example ID"
SCOPES = ["openid", "email", "profile", "groups"]
START_S = 30


@dataclass
class OidcProvider:
    issuer: str
    accounts_file: Path

    def account(self, login: str, **claims) -> None:
        """Adds (or replaces) the provider's account ``login`` with these claims."""
        accounts = json.loads(self.accounts_file.read_text())
        accounts[login] = claims
        self.accounts_file.write_text(json.dumps(accounts))

    def use(self, settings) -> None:
        """Configures Arbiter for this provider, as the ``ARBITER_OIDC_*`` variables would."""
        settings.ARBITER_OIDC_ISSUER = self.issuer
        settings.ARBITER_OIDC_CLIENT_ID = CLIENT_ID
        settings.ARBITER_OIDC_CLIENT_SECRET = CLIENT_SECRET
        settings.ARBITER_OIDC_NAME = NAME
        settings.SOCIALACCOUNT_PROVIDERS = oidc_providers(
            issuer=self.issuer,
            client_id=CLIENT_ID,
            secret=CLIENT_SECRET,
            name=NAME,
            scopes=SCOPES,
        )
        policy = {**settings.CONTENT_SECURITY_POLICY}
        directives = {**policy["DIRECTIVES"]}
        directives["form-action"] = [*directives["form-action"], self.issuer]
        settings.CONTENT_SECURITY_POLICY = {**policy, "DIRECTIVES": directives}

    def sign_in(self, client, login: str, next_url: str = "/") -> str:
        """Starts a sign-in with the Django test ``client``, signs in as ``login`` at the
        provider (its own login form, over HTTP), and returns the callback URL (path and
        query) the provider sends the browser back to, not yet followed."""
        response = client.post(LOGIN_PATH, {"next": next_url})
        assert response.status_code == 302, response
        url = response["Location"]
        assert url.startswith(self.issuer), url
        with httpx.Client(timeout=10) as http:
            while True:
                answer = http.get(url)
                if answer.status_code == 200 and 'name="login"' in answer.text:
                    action = answer.text.split('action="', 1)[1].split('"', 1)[0]
                    answer = http.post(
                        urljoin(url, action),
                        data={"prompt": "login", "login": login, "password": "any"},
                    )
                assert answer.status_code in (302, 303), answer.text[:500]
                url = urljoin(url, answer.headers["location"])
                if not url.startswith(self.issuer):
                    parts = urlsplit(url)
                    assert parts.path == CALLBACK_PATH, url
                    return f"{parts.path}?{parts.query}"


def _installed() -> str | None:
    """Installs the provider's packages when missing; the reason when it cannot."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "Node.js and npm are needed for the OpenID provider (apt-get install nodejs npm)"
    with open(Path(tempfile.gettempdir()) / "arbiter-oidc-provider-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other test process may be installing
        if (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
            return None
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=PROVIDER_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode:
            return f"npm ci for the OpenID provider failed: {done.stderr[-500:]}"
    return None


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory) -> Iterator[OidcProvider]:
    reason = _installed()
    if reason:
        pytest.skip(reason)
    accounts_file = tmp_path_factory.mktemp("oidc") / "accounts.json"
    accounts_file.write_text("{}")
    process = subprocess.Popen(
        ["node", "server.js", str(accounts_file), CLIENT_ID, CLIENT_SECRET, CALLBACK_PATH],
        cwd=PROVIDER_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "listening ISSUER", or "" if it died
        assert line.startswith("listening "), f"the OpenID provider did not start: {line!r}"
        yield OidcProvider(issuer=line.split()[1], accounts_file=accounts_file)
    finally:
        process.terminate()
        process.wait(timeout=START_S)


@pytest.fixture
def sso_settings(settings, oidc_provider) -> OidcProvider:
    oidc_provider.use(settings)
    return oidc_provider
