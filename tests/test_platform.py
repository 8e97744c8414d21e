"""The platform itself: pages, health, security headers, login lockout, production settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

ROOT = Path(__file__).resolve().parent.parent


def test_home_lists_my_projects_with_my_role(client_for, alice, project, other_project):
    response = client_for(alice).get(reverse("home"))
    assert response.status_code == 200
    body = response.content.decode()
    assert project.name in body
    assert "annotator" in body
    assert other_project.name not in body


def test_home_requires_login(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_outsider_gets_404_on_project_page(client_for, eve, project):
    assert client_for(eve).get(reverse("project-detail", args=[project.slug])).status_code == 404


def test_guidelines_markdown_is_rendered_without_script(client_for, alice, project):
    project.guidelines = "**Be careful** <script>alert(1)</script> [x](javascript:alert(1))"
    project.save(update_fields=["guidelines"])
    body = client_for(alice).get(reverse("project-detail", args=[project.slug])).content.decode()
    assert "<strong>Be careful</strong>" in body
    assert "<script>alert(1)" not in body
    assert "javascript:" not in body


def test_csp_forbids_inline_and_eval_script(client):
    response = client.get(reverse("login"))
    policy = response.headers["Content-Security-Policy"]
    script_src = next(d for d in policy.split(";") if d.strip().startswith("script-src"))
    assert "'self'" in script_src
    assert "unsafe-inline" not in script_src
    assert "unsafe-eval" not in script_src
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"


def _directives(policy: str) -> set[str]:
    """A policy's directives, in whatever order it lists them."""
    return {part.strip() for part in policy.split(";")}


def test_the_policy_built_once_is_django_csps_own(client, api_for, alice, project, settings):
    """config.csp.CSPMiddleware reuses the header django-csp builds from the settings, on
    pages and API answers alike, follows a change of the settings, and leaves a response a
    view changed the policy of (or asked a nonce for) to django-csp's own code."""
    from csp.constants import NONCE
    from csp.middleware import CSPMiddleware as DjangoCSPMiddleware
    from csp.utils import build_policy
    from django.http import HttpRequest, HttpResponse

    expected = _directives(build_policy())
    assert "frame-ancestors 'none'" in expected
    api = api_for(alice)
    for response in (
        client.get(reverse("login")),
        client.get(reverse("login")),
        api.post(f"/api/v1/projects/{project.slug}/claim/"),
    ):
        assert _directives(response.headers["Content-Security-Policy"]) == expected
        assert "Content-Security-Policy-Report-Only" not in response.headers
    from config.csp import CSPMiddleware

    def answer(request, response):
        return CSPMiddleware(lambda _: response).process_response(request, response)

    def django_csp(request, response):
        return DjangoCSPMiddleware(lambda _: response).process_response(request, response)

    for changed in ("_csp_update", "_csp_replace"):
        ours, theirs = HttpResponse(), HttpResponse()
        for one in (ours, theirs):
            setattr(one, changed, {"img-src": ["https://cdn.example"]})
        request = HttpRequest()
        request.path_info = "/"
        assert (
            answer(request, ours).headers["Content-Security-Policy"]
            == (django_csp(request, theirs).headers["Content-Security-Policy"])
        )
        assert "cdn.example" in ours.headers["Content-Security-Policy"]
    exempt = HttpResponse()
    exempt._csp_exempt = True
    assert "Content-Security-Policy" not in answer(HttpRequest(), exempt).headers
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"script-src": ["'self'", NONCE]}}
    request = HttpRequest()
    request.path_info = "/"
    request._csp_nonce = "abc123"
    nonced = answer(request, HttpResponse()).headers["Content-Security-Policy"]
    assert "script-src 'self' 'nonce-abc123'" in _directives(nonced)
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    settings.CONTENT_SECURITY_POLICY_REPORT_ONLY = {"DIRECTIVES": {"img-src": ["'self'"]}}
    response = client.get(reverse("login"))
    assert response.headers["Content-Security-Policy"] == "default-src 'none'"
    report_only = _directives(response.headers["Content-Security-Policy-Report-Only"])
    assert report_only == _directives(build_policy(report_only=True))
    assert "img-src 'self'" in report_only


def test_pages_carry_no_inline_script(client_for, carol, project):
    for url in (reverse("home"), reverse("project-detail", args=[project.slug]), reverse("login")):
        body = client_for(carol).get(url).content.decode()
        for chunk in body.split("<script")[1:]:
            assert chunk.split(">", 1)[0].strip().startswith("src="), f"inline script on {url}"


def test_login_locks_out_after_repeated_failures(client, alice, settings):
    url = reverse("login")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(url, {"username": "alice", "password": "wrong"}, REMOTE_ADDR="10.0.0.9")
    locked = client.post(
        url,
        {"username": "alice", "password": "correct horse battery staple"},
        REMOTE_ADDR="10.0.0.9",
    )
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()


def test_login_with_right_password_works(client, alice):
    response = client.post(
        reverse("login"), {"username": "alice", "password": "correct horse battery staple"}
    )
    assert response.status_code == 302
    assert response.url == reverse("home")


def test_logout_needs_post_with_csrf(alice):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    assert csrf_client.post(reverse("logout")).status_code == 403


def _manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _production_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(ARBITER_ENV="production", **extra)
    return env


def test_production_settings_pass_check_deploy():
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env=_production_env(
            DJANGO_SECRET_KEY="x" * 20 + "a-long-random-production-secret-key-0123456789",
            DJANGO_ALLOWED_HOSTS="arbiter.example.org",
        ),
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_secret_key():
    result = _manage("check", env=_production_env(DJANGO_ALLOWED_HOSTS="arbiter.example.org"))
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set in production" in result.stderr


def test_bad_environment_value_fails_loudly():
    env = {**os.environ, "DJANGO_DEBUG": "maybe"}
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "DJANGO_DEBUG='maybe' is not a boolean" in result.stderr


@pytest.mark.django_db
def test_api_schema_and_docs_are_served(client, alice):
    client.force_login(alice)
    schema = client.get("/api/v1/schema/")
    assert schema.status_code == 200
    assert b"openapi" in schema.content
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200
    # Nothing inline for the CSP to refuse (tests/browser/test_api_docs.py renders it).
    body = docs.content.decode()
    assert "<style" not in body
    assert " style=" not in body
    for chunk in body.split("<script")[1:]:
        assert chunk.split(">", 1)[0].strip().startswith("src=")


def test_api_schema_is_valid_without_warnings(tmp_path):
    """Every component has its own name (nested Input/Output serializers do not collide)."""
    out = tmp_path / "schema.yml"
    result = _manage(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(out), env=dict(os.environ)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = out.read_text()
    for name in ("VoteInput:", "SkipInput:", "VoteOutput:", "ProjectListOutput:"):
        assert f"\n    {name}\n" in text


# Run in a fresh interpreter: the test session itself has imported torch long before.
_WEB_IMPORTS = """
import importlib, sys
from pathlib import Path

import django

django.setup()
from django.urls import get_resolver

get_resolver().url_patterns
# The task modules too: a web process imports them to publish a job.
names = {"views", "api", "urls", "api_urls", "forms", "tasks"}
for path in sorted([*Path("annotation").rglob("*.py"), *Path("judges").rglob("*.py")]):
    parts = path.with_suffix("").parts
    if names & set(parts) and path.name != "__init__.py":
        importlib.import_module(".".join(parts))
loaded = [name for name in sys.modules if name == "torch" or name.startswith("torch.")]
print(len(loaded))
"""


def test_the_web_side_does_not_import_torch():
    """A web process (every URL, page, API, form and task module) leaves torch unimported: it
    would cost each gunicorn worker over a second of CPU and about 180 MB, and only the
    workers that train or run a reward-model judge need it."""
    result = subprocess.run(
        [sys.executable, "-c", _WEB_IMPORTS],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    loaded = result.stdout.strip()
    assert loaded == "0", f"the web side imported torch ({loaded} torch modules)"
