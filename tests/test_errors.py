"""Domain errors answer alike everywhere: one mapping (config/errors.py) for the REST API and
the pages, JSON for any path under /api/ (docs/api.md, "Errors")."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client, override_settings
from django.urls import path

from annotation.core import errors
from config.errors import api_exception_handler, status_for
from config.urls import handler500  # noqa: F401 - the real handler, for this URLconf
from config.urls import urlpatterns as real_urlpatterns


def claim_and_vote(api, **body):
    assignment = api.post("/api/v1/projects/demo/claim/").json()
    return api.post(f"/api/v1/assignments/{assignment['id']}/vote/", body, format="json")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.InvalidInput("x: bad"), 400),
        (errors.NotAllowed("no"), 403),
        (errors.NotFound("gone"), 404),
        (errors.Conflict("there already"), 409),
        (errors.DomainError("refused"), 409),
        (errors.Unavailable("broker down"), 503),
        (ValidationError({"threshold": "out of range"}), 400),
        (ValueError("a bug"), 500),
    ],
)
def test_each_kind_of_domain_error_has_one_status(error, status):
    assert status_for(error) == status


def test_a_validation_error_from_a_service_names_its_field():
    response = api_exception_handler(ValidationError({"threshold": "Must lie in (0.5, 1]."}), {})
    assert response.status_code == 400
    assert response.data["threshold"] == ["Must lie in (0.5, 1]."]
    assert response.data["detail"] == "threshold: Must lie in (0.5, 1]."


def test_an_unavailable_service_asks_the_client_to_retry_later():
    response = api_exception_handler(errors.Unavailable("The task broker is down."), {})
    assert (response.status_code, response["Retry-After"]) == (503, "30")


def test_a_conflicting_vote_answers_409_json(api_for, alice, queued_pairs):
    api = api_for(alice)
    assert claim_and_vote(api, choice="left").status_code == 201
    assignment = api.post("/api/v1/projects/demo/claim/").json()
    # The same assignment is long gone; vote on the first one again with another answer.
    first = alice.votes.get().assignment_id
    response = api.post(f"/api/v1/assignments/{first}/vote/", {"choice": "right"}, format="json")
    assert response.status_code == 409
    assert "different answer" in response.json()["detail"]
    assert assignment["id"] != first


def test_the_service_limit_on_time_on_task_is_the_api_limit(api_for, alice, queued_pairs):
    response = claim_and_vote(api_for(alice), choice="left", time_on_task_ms=25 * 3600 * 1000)
    assert response.status_code == 400
    assert "time_on_task_ms" in response.json()


def test_an_unknown_api_path_answers_json_not_the_html_page(api_for, alice):
    for url in ("/api/v1/nothing-here/", "/api/v2/projects/", "/api/"):
        response = api_for(alice).get(url)
        assert response.status_code == 404, url
        assert response["Content-Type"] == "application/json", url
        assert response.json()["detail"] == f"No API endpoint at {url}."


def test_an_api_path_missing_its_slash_says_which_one_exists(api_for, alice, project):
    response = api_for(alice).post("/api/v1/projects/demo/claim")
    assert response.status_code == 404
    assert "Did you mean /api/v1/projects/demo/claim/" in response.json()["detail"]


def test_an_unknown_api_path_answers_json_to_anonymous_clients_too(db):
    response = Client().get("/api/v1/secret-admin-thing/")
    assert response.status_code == 404
    assert response.json()["detail"].startswith("No API endpoint")


def _explode(request):
    raise RuntimeError("a bug in a view")


urlpatterns = [
    path("api/v1/explode/", _explode),
    path("explode/", _explode),
    *real_urlpatterns,
]


@override_settings(ROOT_URLCONF=__name__, DEBUG=False)
def test_a_server_error_under_api_answers_json_and_elsewhere_the_page(db):
    client = Client(raise_request_exception=False)
    response = client.get("/api/v1/explode/")
    assert response.status_code == 500
    assert response.json() == {"detail": "Internal server error; it has been logged."}
    page = client.get("/explode/")
    assert page.status_code == 500
    assert page["Content-Type"].startswith("text/html")
    # The site's own page (templates/500.html), never a traceback or the settings.
    body = page.content.decode()
    assert 'class="card error-page"' in body
    assert "Error 500" in body
    assert '<link rel="stylesheet" href="/static/css/arbiter.css">' in body
    assert "a bug in a view" not in body


LAYOUT = '<link rel="stylesheet" href="/static/css/arbiter.css">'


def test_an_annotator_on_a_curator_page_gets_the_sites_403_page_with_a_way_back(
    client_for, alice, project
):
    response = client_for(alice).get(f"/p/{project.slug}/queue/")
    assert response.status_code == 403
    body = response.content.decode()
    assert LAYOUT in body
    assert '<header class="topbar">' in body
    assert "You cannot open this page" in body
    assert "Your role in this project does not allow this" in body
    # The project's tabs for their role, and a link back to its overview.
    assert '<nav class="project-nav"' in body
    assert f'href="/p/{project.slug}/annotate/"' in body
    assert f'<a class="button primary" href="/p/{project.slug}/">Back to {project.name}</a>' in body


def test_a_missing_page_is_the_sites_404_page_and_tells_outsiders_nothing(
    client, client_for, eve, carol, project
):
    response = client_for(eve).get(f"/p/{project.slug}/queue/")
    assert response.status_code == 404
    body = response.content.decode()
    assert LAYOUT in body
    assert "Page not found" in body
    assert project.name not in body
    assert '<nav class="project-nav"' not in body
    assert 'href="/">My projects</a>' in body
    # A member's missing pair keeps the project around it.
    body = client_for(carol).get(f"/p/{project.slug}/pairs/99999/").content.decode()
    assert "No such pair" in body
    assert '<nav class="project-nav"' in body
    # Signed out, an unknown address offers to log in; the resolver's details stay hidden.
    client.logout()
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert LAYOUT in body
    assert 'href="/login/?next=/no/such/page/"' in body
    assert "tried" not in body
    assert "Resolver404" not in body
