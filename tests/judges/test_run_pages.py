"""Filter run pages and API: who may see, start and cancel runs; live progress; and annotators
never seeing anything that comes from judges."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import PairStatus
from judges.models import FilterRun, Verdict
from judges.runs import services as runs
from tests.factories import PairFactory
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    canonical,
    celery_eager,
    first_shown,
    make_judges,
    use_scripted_judges,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]

JUDGES = ("zeta-grader", "omega-critic")


@pytest.fixture
def judges(monkeypatch):
    use_scripted_judges(monkeypatch, {JUDGES[0]: canonical("A"), JUDGES[1]: first_shown()})
    return make_judges(*JUDGES)


@pytest.fixture
def finished_run(project, judges, django_capture_on_commit_callbacks):
    PairFactory.create_batch(3, project=project)
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.filter_run_create(project=project, judges=judges)  # 3 of 4: queued
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    return run


@pytest.fixture
def running_run(project, judges):
    """A run with 3 of its 8 verdicts written, still running."""
    pairs = PairFactory.create_batch(2, project=project)
    run = runs.filter_run_create(project=project, judges=judges)
    FilterRun.objects.filter(pk=run.pk).update(status=FilterRun.Status.RUNNING)
    for order, latency in (("AB", 100), ("BA", 300)):
        Verdict.objects.create(
            run=run,
            judge=judges[0],
            pair=pairs[0],
            order=order,
            outcome="ok",
            side="A",
            latency_ms=latency,
            prompt_tokens=50,
            completion_tokens=5,
        )
    Verdict.objects.create(
        run=run, judge=judges[1], pair=pairs[0], order="AB", outcome="unparseable", raw="??"
    )
    run.refresh_from_db()
    return run


def urls(run: FilterRun) -> dict[str, str]:
    args = [run.project.slug, run.number]
    return {
        "detail": reverse("judges:run", args=args),
        "cancel": reverse("judges:run-cancel", args=args),
        "resume": reverse("judges:run-resume", args=args),
        "api": f"/api/v1/projects/{run.project.slug}/filter-runs/{run.number}/",
    }


def assert_no_inline_code(body: str) -> None:
    assert not re.search(r"\sstyle\s*=", body)
    assert not re.search(r"\son[a-z]+\s*=|hx-on", body)
    for chunk in body.split("<script")[1:]:
        assert chunk.split(">", 1)[0].strip().startswith("src=")


# Pages ------------------------------------------------------------------------------------


def test_curator_sees_runs_and_the_start_form(client_for, carol, finished_run):
    response = client_for(carol).get(reverse("judges:runs", args=[finished_run.project.slug]))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'name="judges"' in body
    assert 'name="threshold"' in body
    assert f"Run {finished_run.number}</a>" in body
    assert JUDGES[0] in body
    assert_no_inline_code(body)


def test_pages_say_how_many_votes_the_threshold_means(client_for, carol, finished_run):
    page = client_for(carol)
    listing = page.get(reverse("judges:runs", args=[finished_run.project.slug])).content.decode()
    # the form, before any judge is chosen: MMRB2's 9 judges and a small ensemble of 3
    assert "at 0.9: 17 of 18 with 9 judges, 6 of 6 with 3 judges" in listing
    assert "4 of 4 votes" in listing  # the finished run: 2 judges, 90% of 4 is 3.6
    detail = page.get(urls(finished_run)["detail"]).content.decode()
    assert (
        "easy when one side holds at least 90% of the valid votes: 4 of 4 with 2 judges" in detail
    )


def test_researcher_watches_but_cannot_start(client_for, dave, project, judges, finished_run):
    client = client_for(dave)
    body = client.get(reverse("judges:runs", args=[project.slug])).content.decode()
    assert f"Run {finished_run.number}</a>" in body
    assert 'name="threshold"' not in body
    assert client.get(urls(finished_run)["detail"]).status_code == 200
    PairFactory(project=project)
    post = client.post(
        reverse("judges:runs", args=[project.slug]), {"judges": [judges[0].pk], "threshold": 0.9}
    )
    assert post.status_code == 403
    assert client.post(urls(finished_run)["cancel"]).status_code == 403
    assert FilterRun.objects.count() == 1


@pytest.mark.parametrize(("persona", "status"), [("alice", 403), ("eve", 404)])
def test_annotators_get_403_and_outsiders_404(request, client_for, finished_run, persona, status):
    client = client_for(request.getfixturevalue(persona))
    for url in (
        reverse("judges:runs", args=[finished_run.project.slug]),
        urls(finished_run)["detail"],
    ):
        assert client.get(url).status_code == status
    assert client.post(urls(finished_run)["cancel"]).status_code == status
    assert client.post(urls(finished_run)["resume"]).status_code == status


def test_a_run_is_only_reachable_through_its_own_project(
    client_for, carol, finished_run, other_project
):
    from tests.factories import MembershipFactory

    MembershipFactory(project=other_project, user=carol, role="curator")
    url = reverse("judges:run", args=[other_project.slug, finished_run.number])
    assert client_for(carol).get(url).status_code == 404


def test_curator_starts_a_run_from_the_page(
    client_for, carol, project, judges, django_capture_on_commit_callbacks
):
    pairs = PairFactory.create_batch(2, project=project)
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(carol).post(
            reverse("judges:runs", args=[project.slug]),
            {"judges": [j.pk for j in judges], "threshold": "0.75", "budget_per_task": ""},
        )
    run = FilterRun.objects.get()
    assert response.status_code == 302
    assert response.url == urls(run)["detail"]
    assert run.created_by == carol
    assert run.threshold == 0.75
    assert set(run.pairs.all()) == set(pairs)
    body = client_for(carol).get(response.url).content.decode()
    assert '<progress class="run-bar" value="8" max="8">' in body
    assert "Succeeded" in body
    assert "3 pairs" not in body
    assert "2 pairs:" in body
    assert_no_inline_code(body)


def test_start_form_errors_name_the_field(client_for, carol, project, judges):
    PairFactory(project=project)
    url = reverse("judges:runs", args=[project.slug])
    body = client_for(carol).post(url, {"threshold": "0.4"}).content.decode()
    assert "This field is required" in body  # no judges chosen
    assert "greater than or equal to 0.5" in body
    assert not FilterRun.objects.exists()


def test_detail_shows_live_progress_and_per_judge_stats(client_for, carol, running_run):
    body = client_for(carol).get(urls(running_run)["detail"]).content.decode()
    assert '<progress class="run-bar" value="3" max="8">' in body
    assert "3 of 8 verdicts" in body
    row = body.split(JUDGES[0], 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r'<td class="num">(.*?)</td>', row, re.S)
    assert cells[0].strip() == "2 / 4"
    assert cells[1].strip() == "100% of 2"  # agrees with the ensemble on both its verdicts
    assert cells[2].strip() == "100% of 1"  # same side in both orders, on the one pair
    assert cells[6].strip() == "0"  # skipped
    assert cells[7].strip() == "200 ms"
    assert cells[8].strip() == "100 / 10"
    other = body.split(JUDGES[1], 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="num">(.*?)</td>', other, re.S)[3].strip() == "1"  # unparseable
    assert 'hx-trigger="every 2s"' in body
    assert "Cancel run" in body


def test_htmx_poll_gets_the_progress_fragment_until_the_run_ends(client_for, carol, running_run):
    client = client_for(carol)
    fragment = client.get(urls(running_run)["detail"], HTTP_HX_REQUEST="true")
    body = fragment.content.decode()
    assert fragment.status_code == 200
    assert "<html" not in body
    assert body.lstrip().startswith('<section id="run-progress"')
    assert 'hx-trigger="every 2s"' in body
    runs.filter_run_cancel(run=running_run)
    body = client.get(urls(running_run)["detail"], HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in body
    assert "Cancelled" in body


def test_curator_cancels_a_run(client_for, carol, running_run):
    client = client_for(carol)
    assert client.get(urls(running_run)["cancel"]).status_code == 405
    response = client.post(urls(running_run)["cancel"], follow=True)
    assert "cancelled; its pairs are imported again" in response.content.decode()
    running_run.refresh_from_db()
    assert running_run.status == FilterRun.Status.CANCELLED
    assert set(running_run.pairs.values_list("status", flat=True)) == {PairStatus.IMPORTED}


def test_curator_resumes_a_failed_run(client_for, carol, running_run):
    runs.filter_run_fail(run_id=running_run.pk, error="RuntimeError: worker lost the plot")
    body = client_for(carol).get(urls(running_run)["detail"]).content.decode()
    assert "worker lost the plot" in body
    assert "Resume" in body
    client_for(carol).post(urls(running_run)["resume"])
    running_run.refresh_from_db()
    assert running_run.status == FilterRun.Status.SUCCEEDED
    assert running_run.verdicts.count() == 8


def test_posts_need_the_csrf_token(carol, project, judges, running_run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    PairFactory(project=project)
    start_url = reverse("judges:runs", args=[project.slug])
    assert client.post(start_url, {"judges": [judges[0].pk], "threshold": "0.9"}).status_code == 403
    assert client.post(urls(running_run)["cancel"]).status_code == 403
    assert FilterRun.objects.count() == 1
    page = client.get(urls(running_run)["detail"]).content.decode()
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)
    # htmx sends the token from hx-headers on <body>
    assert client.post(urls(running_run)["cancel"], HTTP_X_CSRFTOKEN=token).status_code == 302
    running_run.refresh_from_db()
    assert running_run.status == FilterRun.Status.CANCELLED


def test_runs_are_numbered_per_project(
    client_for, carol, project, other_project, judges, django_capture_on_commit_callbacks
):
    from tests.factories import MembershipFactory

    MembershipFactory(project=other_project, user=carol, role="curator")
    client = client_for(carol)
    started = []
    for target in (project, other_project, project):
        PairFactory(project=target)
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(
                reverse("judges:runs", args=[target.slug]),
                {"judges": [j.pk for j in judges], "threshold": "0.9"},
                follow=True,
            )
        started.append(response.content.decode())
    numbers = list(FilterRun.objects.order_by("pk").values_list("project__slug", "number"))
    assert numbers == [(project.slug, 1), (other_project.slug, 1), (project.slug, 2)]
    assert "Run 2 started." in started[2]
    assert "<h1>Filter run 2</h1>" in started[2]
    listing = client.get(reverse("judges:runs", args=[project.slug])).content.decode()
    assert "Run 1</a>" in listing
    assert "Run 2</a>" in listing


def test_a_disabled_start_button_says_why(client_for, carol, project, judges):
    url = reverse("judges:runs", args=[project.slug])
    body = client_for(carol).get(url).content.decode()
    assert 'disabled aria-describedby="start-blocked">Start run</button>' in body
    assert (
        '<span id="start-blocked" class="muted">Nothing to judge: no pair is imported and '
        "waiting. Import pairs first.</span>" in body
    )
    PairFactory(project=project)
    body = client_for(carol).get(url).content.decode()
    assert '<button type="submit" class="primary">Start run</button>' in body
    assert "start-blocked" not in body


def test_without_judges_the_start_button_says_so(client_for, carol, project):
    PairFactory(project=project)
    body = client_for(carol).get(reverse("judges:runs", args=[project.slug])).content.decode()
    assert "disabled" in body
    assert "No judge is available to this project yet." in body


def test_the_started_banner_clears_when_the_run_ends(
    client_for, carol, project, judges, django_capture_on_commit_callbacks
):
    PairFactory.create_batch(2, project=project)
    client = client_for(carol)
    with django_capture_on_commit_callbacks(execute=False) as start:  # the worker is slow
        response = client.post(
            reverse("judges:runs", args=[project.slug]),
            {"judges": [j.pk for j in judges], "threshold": "0.9"},
            follow=True,
        )
    page = response.content.decode()
    assert (
        '<ul id="messages" class="messages"><li class="msg-success">Run 1 started.</li></ul>'
        in (page)
    )
    run = FilterRun.objects.get()
    poll = client.get(urls(run)["detail"], HTTP_HX_REQUEST="true").content.decode()
    assert "hx-swap-oob" not in poll  # still running: the banner stays
    for callback in start:
        callback()  # the worker takes the run and finishes it
    poll = client.get(urls(run)["detail"], HTTP_HX_REQUEST="true").content.decode()
    assert "Succeeded" in poll
    assert "hx-trigger" not in poll
    assert '<ul id="messages" class="messages" hx-swap-oob="true"></ul>' in poll
    full = client.get(urls(run)["detail"]).content.decode()
    assert "hx-swap-oob" not in full
    assert "Run 1 started." not in full


# API --------------------------------------------------------------------------------------


def test_api_curator_starts_lists_and_reads_runs(
    api_for, carol, project, judges, django_capture_on_commit_callbacks
):
    PairFactory.create_batch(2, project=project)
    named = PairFactory(project=project, external_id="only-me")
    api = api_for(carol)
    base = f"/api/v1/projects/{project.slug}/filter-runs/"
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(
            base, {"judges": list(JUDGES), "threshold": 0.75, "pairs": ["only-me"]}, format="json"
        )
    assert created.status_code == 201, created.content
    run = FilterRun.objects.get()
    assert list(run.pairs.all()) == [named]
    detail = api.get(f"{base}{run.number}/").json()
    assert detail["status"] == "succeeded"
    assert detail["judges"] == sorted(JUDGES)
    assert detail["progress"]["done"] == detail["progress"]["expected"] == 4
    per_judge = {j["name"]: j for j in detail["progress"]["judges"]}
    assert per_judge["omega-critic"]["position_consistency"] == 0.0
    assert per_judge["zeta-grader"]["agreement"] == 1.0
    assert detail["progress"]["pairs"]["pairs"] == 1
    listing = api.get(base).json()
    assert [r["id"] for r in listing] == [run.number]
    assert listing[0]["progress"]["percent"] == 100


def test_api_validation_errors_name_the_field(api_for, carol, project, judges):
    api = api_for(carol)
    base = f"/api/v1/projects/{project.slug}/filter-runs/"
    bad = api.post(base, {"judges": ["ghost"], "threshold": 0.9}, format="json")
    assert bad.status_code == 400
    assert "ghost" in str(bad.json()["judges"])
    bad = api.post(base, {"judges": [JUDGES[0]], "threshold": 1.5}, format="json")
    assert bad.status_code == 400
    assert "threshold" in bad.json()
    nothing = api.post(base, {"judges": [JUDGES[0]]}, format="json")
    assert nothing.status_code == 400
    assert "no imported pairs" in str(nothing.json()["pairs"])


def test_api_permissions(api_for, alice, dave, eve, project, judges, running_run):
    base = f"/api/v1/projects/{project.slug}/filter-runs/"
    payload = {"judges": [JUDGES[0]]}
    assert api_for(dave).get(base).status_code == 200
    assert api_for(dave).get(urls(running_run)["api"]).status_code == 200
    assert api_for(dave).post(base, payload, format="json").status_code == 403
    assert api_for(dave).post(f"{urls(running_run)['api']}cancel/").status_code == 403
    for user, status in ((alice, 403), (eve, 404)):
        api = api_for(user)
        assert api.get(base).status_code == status
        assert api.get(urls(running_run)["api"]).status_code == status
        assert api.post(base, payload, format="json").status_code == status
        assert api.post(f"{urls(running_run)['api']}cancel/").status_code == status
    running_run.refresh_from_db()
    assert running_run.status == FilterRun.Status.RUNNING


def test_api_cancel(api_for, carol, running_run):
    api = api_for(carol)
    response = api.post(f"{urls(running_run)['api']}cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    again = api.post(f"{urls(running_run)['api']}cancel/")
    assert again.status_code == 400
    assert "cancelled" in str(again.json())


def test_api_with_a_session_needs_csrf(carol, running_run):
    api = APIClient(enforce_csrf_checks=True)
    api.force_login(carol)
    assert api.post(f"{urls(running_run)['api']}cancel/").status_code == 403
    running_run.refresh_from_db()
    assert running_run.status == FilterRun.Status.RUNNING


# Annotators see nothing from judges -------------------------------------------------------


def test_project_page_links_runs_for_staff_only(client_for, alice, carol, dave, project):
    link = reverse("judges:runs", args=[project.slug])
    for user in (carol, dave):
        assert (
            link
            in client_for(user).get(reverse("project-detail", args=[project.slug])).content.decode()
        )
    body = client_for(alice).get(reverse("project-detail", args=[project.slug])).content.decode()
    assert link not in body
    assert "Filter run" not in body


def test_annotators_see_no_judge_output(client_for, api_for, alice, project, finished_run):
    queued = list(finished_run.pairs.filter(status=PairStatus.QUEUED))
    assert queued
    assert all(p.ensemble_summary["judges"] for p in queued)
    client = client_for(alice)
    page = client.get(reverse("project-detail", args=[project.slug])).content.decode()
    workbench = client.get(reverse("annotate", args=[project.slug]))
    assert workbench.status_code == 200
    assert "Prompt for pair-" in workbench.content.decode()
    claim = api_for(alice).post(f"/api/v1/projects/{project.slug}/claim/")
    assert claim.status_code == 200, claim.content
    payload = claim.content.decode()
    assert claim.json()["id"]
    for text in (page, workbench.content.decode(), payload):
        for leak in (*JUDGES, "ensemble", "verdict", "agreement", "judging"):
            assert leak not in text.lower(), leak


def test_large_running_runs_defer_per_judge_statistics(client_for, carol, running_run, monkeypatch):
    from judges.runs import selectors

    monkeypatch.setattr(selectors, "LIVE_STATS_MAX_VERDICTS", 2)
    body = client_for(carol).get(urls(running_run)["detail"]).content.decode()
    assert "appear when the run ends" in body
    assert '<progress class="run-bar" value="3" max="8">' in body
    row = body.split(JUDGES[0], 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="num">(.*?)</td>', row, re.S)[1].strip() == "—"


# Judges a project may use -----------------------------------------------------------------


@pytest.fixture
def restricted(judges, project, other_project):
    """JUDGES[0] listed for the other project only; JUDGES[1] lists none, so every project."""
    judges[0].projects.set([other_project])
    return judges[0]


def test_the_page_offers_and_accepts_only_the_projects_judges(
    client_for, carol, project, judges, restricted
):
    PairFactory(project=project)
    url = reverse("judges:runs", args=[project.slug])
    client = client_for(carol)
    page = client.get(url).content.decode()
    assert JUDGES[1] in page
    assert restricted.name not in page
    chose_restricted = client.post(url, {"judges": [restricted.pk], "threshold": "0.9"})
    chose_missing = client.post(url, {"judges": [999_999], "threshold": "0.9"})
    for response, pk in ((chose_restricted, restricted.pk), (chose_missing, 999_999)):
        assert response.status_code == 200
        assert f"Select a valid choice. {pk} is not one of the available choices." in (
            response.content.decode()
        )
    assert not FilterRun.objects.exists()


def test_the_api_refuses_another_projects_judge_like_an_unknown_one(
    api_for, carol, project, restricted
):
    PairFactory(project=project)
    base = f"/api/v1/projects/{project.slug}/filter-runs/"
    api = api_for(carol)
    refused = api.post(base, {"judges": [restricted.name]}, format="json")
    unknown = api.post(base, {"judges": ["ghost"]}, format="json")
    assert (refused.status_code, unknown.status_code) == (400, 400)
    assert refused.json() == {"judges": [f"Unknown judges: {restricted.name}"]}
    assert unknown.json() == {"judges": ["Unknown judges: ghost"]}
    assert not FilterRun.objects.exists()


def test_a_judge_listing_the_project_runs_there(
    api_for, carol, project, judges, restricted, django_capture_on_commit_callbacks
):
    restricted.projects.add(project)
    PairFactory(project=project)
    with django_capture_on_commit_callbacks(execute=True):
        created = api_for(carol).post(
            f"/api/v1/projects/{project.slug}/filter-runs/",
            {"judges": [restricted.name]},
            format="json",
        )
    assert created.status_code == 201, created.content
