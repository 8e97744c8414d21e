"""Filter runs go by one number everywhere: the project's own count (``FilterRun.number``), on
the runs list, a run's page and its URL, the pair page's judges section and in the API (its
``id`` and its URLs), never the database id that counts the runs of every project together;
the URLs that carried that id lead to the run's own."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from judges.models import FilterRun
from judges.runs import services as runs
from tests.factories import MembershipFactory, PairFactory
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    canonical,
    celery_eager,
    first_shown,
    make_judges,
    use_scripted_judges,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]


def test_the_pair_page_numbers_runs_as_the_runs_list_does(
    client_for,
    api_for,
    carol,
    project,
    other_project,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    use_scripted_judges(monkeypatch, {"zeta": canonical("A"), "omega": first_shown()})
    judges = make_judges("zeta", "omega")
    MembershipFactory(project=other_project, user=carol, role="curator")
    # Another project's run first: this project's first run then has database id 2.
    PairFactory(project=other_project)
    pair = PairFactory(project=project)
    with django_capture_on_commit_callbacks(execute=True):
        runs.filter_run_create(project=other_project, judges=judges)
        run = runs.filter_run_create(project=project, judges=judges)
    run.refresh_from_db()
    assert (run.number, run.status) == (1, FilterRun.Status.SUCCEEDED)
    assert run.pk != run.number

    client = client_for(carol)
    listing = client.get(reverse("judges:runs", args=[project.slug])).content.decode()
    assert "Run 1</a>" in listing
    page = client.get(reverse("pair", args=[project.slug, pair.pk])).content.decode()
    section = page[page.index('<section class="card pair-verdicts"') :]
    section = section[: section.index("</section>")]
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", section)).split())
    assert "Run 1 20" in text
    assert "( run 1 , threshold" in text
    assert f"#{run.pk}" not in text
    assert f'href="/judges/p/{project.slug}/filter-runs/1/"' in section
    assert f"Run {run.pk}" not in text

    # The API names the run by its number too, and finds it by the number in its URL.
    detail = api_for(carol).get(f"/api/v1/projects/{project.slug}/filter-runs/1/")
    assert detail.status_code == 200
    assert (detail.json()["id"], detail.json()["number"]) == (1, 1)
    listed = api_for(carol).get(f"/api/v1/projects/{project.slug}/filter-runs/").json()
    assert [(r["id"], r["number"]) for r in listed] == [(1, 1)]
    by_id = api_for(carol).get(f"/api/v1/projects/{project.slug}/filter-runs/{run.pk}/")
    assert by_id.status_code == 404


def test_a_runs_url_carries_its_number_and_its_old_urls_lead_there(
    client_for,
    alice,
    carol,
    eve,
    project,
    other_project,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    """ "Run 1" is at /filter-runs/1/ (its page, its title, the list's link, the start's
    redirect); the URLs from before, by database id, are sent on there with the method kept,
    to those who may see the run."""
    use_scripted_judges(monkeypatch, {"zeta": canonical("A"), "omega": first_shown()})
    judges = make_judges("zeta", "omega")
    PairFactory(project=other_project)
    PairFactory.create_batch(2, project=project)
    with django_capture_on_commit_callbacks(execute=True):
        runs.filter_run_create(project=other_project, judges=judges)
    client = client_for(carol)
    listing = reverse("judges:runs", args=[project.slug])
    assert listing == f"/judges/p/{project.slug}/filter-runs/"
    data = {"judges": [j.pk for j in judges], "threshold": "0.9"}
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(listing, data)
    run = FilterRun.objects.get(project=project)
    assert run.pk != run.number == 1
    url = f"/judges/p/{project.slug}/filter-runs/1/"
    assert started.status_code == 302
    assert started["Location"] == url
    assert reverse("judges:run", args=[project.slug, run.number]) == url
    assert f'<a href="{url}">Run 1</a>' in client.get(listing).content.decode()
    page = client.get(url).content.decode()
    assert "<title>Run 1 · Filter runs" in page
    assert "<h1>Filter run 1</h1>" in page
    # The database id is not a run's number: no run of this project is numbered so.
    assert client.get(f"/judges/p/{project.slug}/filter-runs/{run.pk}/").status_code == 404

    old = f"/judges/p/{project.slug}/runs/{run.pk}/"
    moved = client.get(old)
    assert (moved.status_code, moved["Location"]) == (308, url)
    assert client.get(old, follow=True).status_code == 200
    resume = client.post(f"{old}resume/")
    assert (resume.status_code, resume["Location"]) == (308, f"{url}resume/")
    cancel = client.post(f"{old}cancel/")
    assert (cancel.status_code, cancel["Location"]) == (308, f"{url}cancel/")
    assert client.get(f"{old}nonsense/").status_code == 404
    listed = client.get(f"/judges/p/{project.slug}/runs/?x=1")
    assert (listed.status_code, listed["Location"]) == (308, f"{listing}?x=1")
    # Only to those who may see the run: outsiders 404, annotators 403, as on its page; the
    # other project's run is not found under this project by its id.
    assert client_for(eve).get(old).status_code == 404
    assert client_for(alice).get(old).status_code == 403
    elsewhere = FilterRun.objects.get(project=other_project)
    curator = client_for(carol)
    assert curator.get(f"/judges/p/{project.slug}/runs/{elsewhere.pk}/").status_code == 404
