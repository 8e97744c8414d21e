"""Filter runs go by one number everywhere: the project's own count (``FilterRun.number``), on
the runs list, a run's page, the pair page's judges section and in the API, never the
database id that counts the runs of every project together."""

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
    assert f"Run {run.pk}" not in text

    detail = api_for(carol).get(f"/api/v1/projects/{project.slug}/filter-runs/{run.pk}/")
    assert detail.status_code == 200
    assert (detail.json()["id"], detail.json()["number"]) == (run.pk, 1)
