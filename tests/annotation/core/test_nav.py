"""The project navigation: the same header on every project page, each tab shown only to the
roles that may use it and only once its page exists, the current tab marked; the API docs
linked for signed-in users, the admin for operators only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.http import HttpResponse
from django.urls import include, path, reverse

from annotation.core.navigation import PROJECT_TABS, project_url
from tests.factories import FilterRunFactory, PairFactory, UserFactory

pytestmark = pytest.mark.django_db

NAV = re.compile(r'<nav class="project-nav"[^>]*>(.*?)</nav>', re.S)
TAB = re.compile(r'<li><a href="([^"]+)"( aria-current="page")?>([^<]+)</a></li>')

# Every tab each role may use, in the header's order, with its URL name.
ROLE_TABS = {
    "alice": [
        ("Overview", "project-detail"),
        ("Annotate", "annotate"),
        ("My votes", "vote-history"),
    ],
    "dave": [
        ("Overview", "project-detail"),
        ("Pairs", "pairs"),
        ("Filter runs", "judges:runs"),
        ("Leaderboard", "judges:leaderboard"),
        ("Agreement", "agreement"),
        ("Releases", "releases"),
        ("Reward models", "judges:training"),
        ("Best-of-N", "judges:best-of-n"),
        ("Judges", "judges:project-judges"),
        ("Model leaderboard", "model-leaderboard"),
    ],
    "carol": [
        ("Overview", "project-detail"),
        ("Pairs", "pairs"),
        ("Queue", "curator-queue"),
        ("Import", "imports"),
        ("Filter runs", "judges:runs"),
        ("Leaderboard", "judges:leaderboard"),
        ("Agreement", "agreement"),
        ("Releases", "releases"),
        ("Reward models", "judges:training"),
        ("Best-of-N", "judges:best-of-n"),
        ("Judges", "judges:project-judges"),
        ("Model leaderboard", "model-leaderboard"),
        ("Webhooks", "webhooks"),
        ("Audit log", "audit"),
        ("Settings", "project-settings"),
    ],
}


def nav_tabs(body: str) -> list[tuple[str, str, bool]]:
    """(label, url, current) for each tab of the page's one project navigation."""
    navs = NAV.findall(body)
    assert len(navs) == 1, "one project navigation per page"
    return [(label, url, bool(current)) for url, current, label in TAB.findall(navs[0])]


def existing(slug: str, tabs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(label, url) for label, name in tabs if (url := project_url(name, slug))]


@pytest.mark.parametrize("persona", ["alice", "dave", "carol"])
def test_each_role_gets_exactly_the_tabs_it_may_use(request, client_for, project, persona):
    user = request.getfixturevalue(persona)
    client = client_for(user)
    body = client.get(reverse("project-detail", args=[project.slug])).content.decode()
    shown = [(label, url) for label, url, _ in nav_tabs(body)]
    assert shown == existing(project.slug, ROLE_TABS[persona])
    for _, url in shown:
        assert client.get(url).status_code == 200, url
    # Every other project page of the header is refused to this role.
    hidden = {url for _, url in existing(project.slug, ROLE_TABS["carol"] + ROLE_TABS["alice"])}
    for url in hidden - {url for _, url in shown}:
        assert client.get(url).status_code == 403, url


def test_curator_pages_all_carry_the_same_header_with_their_tab_current(client_for, carol, project):
    from judges.models import TrainingRun

    run = FilterRunFactory(project=project, number=1)
    training = TrainingRun.objects.create(
        project=project, epochs=1, lr=0.01, batch_size=8, seed=0, patience=1, holdout=0.2
    )
    pair = PairFactory(project=project, status="disputed")
    client = client_for(carol)
    pages = {
        reverse("project-detail", args=[project.slug]): "Overview",
        reverse("curator-queue", args=[project.slug]): "Queue",
        reverse("adjudication", args=[project.slug]): "Queue",
        reverse("adjudication-pair", args=[project.slug, pair.pk]): "Queue",
        reverse("imports", args=[project.slug]): "Import",
        reverse("judges:runs", args=[project.slug]): "Filter runs",
        reverse("judges:run", args=[project.slug, run.number]): "Filter runs",
        reverse("judges:training", args=[project.slug]): "Reward models",
        reverse("judges:training-run", args=[project.slug, training.pk]): "Reward models",
        reverse("judges:leaderboard", args=[project.slug]): "Leaderboard",
        reverse("model-leaderboard", args=[project.slug]): "Model leaderboard",
        reverse("project-settings", args=[project.slug]): "Settings",
    }
    headers = set()
    for url, current in pages.items():
        response = client.get(url)
        assert response.status_code == 200, url
        tabs = nav_tabs(response.content.decode())
        assert [label for label, _, is_current in tabs if is_current] == [current], url
        headers.add(tuple((label, href) for label, href, _ in tabs))
    assert len(headers) == 1


def test_the_comparison_page_has_the_annotators_header(client_for, alice, project, queued_pairs):
    body = client_for(alice).get(reverse("annotate", args=[project.slug])).content.decode()
    assert [(label, current) for label, _, current in nav_tabs(body)] == [
        ("Overview", False),
        ("Annotate", True),
        ("My votes", False),
    ]


def test_pages_outside_a_project_have_no_project_header(client_for, carol, project):
    assert not NAV.search(client_for(carol).get(reverse("home")).content.decode())


def test_outsiders_get_no_header_but_a_404(client_for, eve, project):
    assert client_for(eve).get(reverse("project-detail", args=[project.slug])).status_code == 404


def _page(request, slug):
    return HttpResponse("a page of its own")


urlpatterns = [
    path("p/<slug:slug>/agreement/", _page, name="agreement"),
    path("", include("config.urls")),
]


@pytest.mark.urls(__name__)
def test_a_tab_appears_once_its_page_exists(client_for, dave, project):
    body = client_for(dave).get(reverse("project-detail", args=[project.slug])).content.decode()
    labels = [label for label, _, _ in nav_tabs(body)]
    assert "Agreement" in labels
    assert ("Agreement", f"/p/{project.slug}/agreement/", False) in nav_tabs(body)


def test_api_docs_for_signed_in_users_and_the_admin_for_operators_only(
    client, client_for, carol, project
):
    docs, admin = reverse("api-docs"), reverse("admin:index")
    signed_out = client.get(reverse("login")).content.decode()
    assert f'href="{docs}"' not in signed_out
    body = client_for(carol).get(reverse("project-detail", args=[project.slug])).content.decode()
    assert f'href="{docs}"' in body
    assert f'href="{admin}"' not in body
    operator = UserFactory(username="root", is_superuser=True, is_staff=True)
    body = client_for(operator).get(reverse("project-detail", args=[project.slug])).content.decode()
    assert f'href="{admin}"' in body
    assert [label for label, _, _ in nav_tabs(body)] == [
        label for label, _ in existing(project.slug, ROLE_TABS["carol"])
    ]


def test_every_page_links_the_favicon_and_favicon_ico_leads_to_it(client, client_for, carol):
    icon = "/static/favicon.svg"
    assert f'<link rel="icon" href="{icon}" type="image/svg+xml">' in (
        client.get(reverse("login")).content.decode()
    )
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response.url == icon
    assert (
        (Path(__file__).resolve().parents[3] / "static" / "favicon.svg")
        .read_text()
        .startswith("<svg")
    )


def test_every_page_under_a_tab_marks_it(client_for, carol, dave, alice, project):
    """A member's page under Agreement, and a Settings form posted back with its errors, mark
    their tab like the tab's own page does."""
    annotator_page = reverse("agreement-annotator", args=[project.slug, alice.username])
    response = client_for(dave).get(annotator_page)
    assert response.status_code == 200
    assert [label for label, _, current in nav_tabs(response.content.decode()) if current] == [
        "Agreement"
    ]
    refused = client_for(carol).post(
        reverse("project-member-add", args=[project.slug]), {"username": "", "role": "annotator"}
    )
    assert refused.status_code == 400
    assert [label for label, _, current in nav_tabs(refused.content.decode()) if current] == [
        "Settings"
    ]


@pytest.mark.parametrize("doc", ["README.md", "docs/curators.md"])
def test_the_docs_list_every_tab_in_the_headers_order(doc):
    text = (Path(__file__).resolve().parents[3] / doc).read_text()
    [listed] = re.findall(r"\*\*(Overview \|[^*]+)\*\*", text)
    assert [label.strip() for label in re.split(r"\s*\|\s*", listed)] == [
        tab.label for tab in PROJECT_TABS
    ]
