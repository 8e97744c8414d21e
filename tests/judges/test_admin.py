"""Filter runs and verdicts in the operators' admin: listed and readable, never added, changed
or deleted there."""

from __future__ import annotations

import pytest
from django.urls import reverse

from judges.models import FilterRun, Verdict
from tests.factories import FilterRunFactory, JudgeFactory, PairFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def verdict(project):

    run = FilterRunFactory(project=project, number=4)
    judge = JudgeFactory(name="heuristic-1")
    return Verdict.objects.create(
        run=run, judge=judge, pair=PairFactory(project=project), order="AB", outcome="ok", side="A"
    )


@pytest.mark.parametrize("model", ["filterrun", "verdict"])
def test_runs_and_verdicts_are_read_only(client, verdict, model):
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    obj = verdict if model == "verdict" else verdict.run
    listing = client.get(reverse(f"admin:judges_{model}_changelist"))
    assert listing.status_code == 200
    assert reverse(f"admin:judges_{model}_add") not in listing.content.decode()
    assert client.get(reverse(f"admin:judges_{model}_add")).status_code == 403
    change_url = reverse(f"admin:judges_{model}_change", args=[obj.pk])
    page = client.get(change_url)
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert client.post(change_url, {"status": "failed", "side": "B"}).status_code == 403
    assert client.post(reverse(f"admin:judges_{model}_delete", args=[obj.pk])).status_code == 403
    verdict.refresh_from_db()
    assert verdict.side == "A"
    assert FilterRun.objects.get().status == "pending"


def test_run_list_shows_the_projects_run_number(client, verdict):
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    body = client.get(reverse("admin:judges_filterrun_changelist")).content.decode()
    assert "field-number" in body
    assert ">4<" in body
