"""The Agreement page and one annotator's votes: who may see them (an annotator never sees
agreement or others' votes, an outsider sees nothing), the cached report as figures, charts,
tables and CSV, hostile names escaped, how fresh the report is, and the first visit."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError

from annotation import tasks
from annotation.agreement.views import report as page
from annotation.models import AgreementReport
from tests.annotation.agreement.conftest import PER_JUDGE, cached_report, vote, voted_pairs
from tests.annotation.agreement.test_agreement_report_refresh import claim_and_vote
from tests.factories import PairFactory, UserFactory

pytestmark = pytest.mark.django_db

CHARTS = ("history", "tasks", "annotators", "kappa", "values", "statuses", "judges")
HOSTILE_USER = "<script>alert('user')</script>"
HOSTILE_TASK = '"><svg onload=alert(1)>'


@pytest.fixture
def reported(project, alice, bob):
    voted_pairs(project, alice, bob)
    return cached_report(project)


@pytest.fixture
def queued(monkeypatch):
    """The refreshes queued, as their arguments, instead of running them."""
    calls: list[tuple] = []
    monkeypatch.setattr(
        tasks.agreement_report_refresh,
        "apply_async",
        lambda args, **options: calls.append(tuple(args)),
    )
    return calls


@pytest.fixture
def broker_down(monkeypatch):
    def refuse(*args, **options):
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(tasks.agreement_report_refresh, "apply_async", refuse)


def url(name: str = "agreement", *args, source: str = "all") -> str:
    return f"{reverse(name, args=['demo', *args])}?source={source}"


def text_of(response) -> str:
    """The page's text as a reader sees it: tags gone, spaces collapsed."""
    text = unescape(re.sub(r"<[^>]+>", " ", response.content.decode()))
    return re.sub(r" ([,.])", r"\1", re.sub(r"\s+", " ", text))


def csv_rows(response) -> list[list[str]]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode())))


# ---- Who may see it -----------------------------------------------------------------------


def test_curators_and_researchers_see_it_annotators_get_403_outsiders_404(
    reported, project, alice, carol, dave, eve, client_for, queued
):
    every_url = [
        url(),
        url("agreement-csv", "annotators"),
        url("agreement-annotator", "quick"),
        url("agreement-annotator", "alice"),
    ]
    # The researcher may recompute too, but the curator's is queued and has not run: 409.
    recomputed = {carol: 302, dave: 409}
    for user, status in ((carol, 200), (dave, 200), (alice, 403), (eve, 404)):
        client = client_for(user)
        for address in every_url:
            assert client.get(address).status_code == status, (user, address)
        recompute = client.post(reverse("agreement-recompute", args=["demo"]), {"source": "all"})
        assert recompute.status_code == recomputed.get(user, status), user
    assert queued == [(project.pk, "all")]
    anonymous = Client()
    assert anonymous.get(url()).status_code == 302  # to the login page
    # The outsider's 404 says nothing of the project; nor of an unknown user to staff.
    assert "Demo" not in client_for(eve).get(url()).content.decode()
    assert client_for(dave).get(url("agreement-annotator", "nobody")).status_code == 404
    UserFactory(username="stranger")  # a user of the site, not of this project
    assert client_for(dave).get(url("agreement-annotator", "stranger")).status_code == 404


def test_the_project_page_links_to_it_for_curators_and_researchers_only(
    project, alice, carol, dave, client_for
):
    link = f'href="{reverse("agreement", args=["demo"])}"'
    for user, shown in ((carol, True), (dave, True), (alice, False)):
        page_html = client_for(user).get(reverse("project-detail", args=["demo"])).content
        assert (link in page_html.decode()) is shown, user


def test_recompute_needs_the_csrf_token(reported, project, dave, queued):
    client = Client(enforce_csrf_checks=True)
    client.force_login(dave)
    html = client.get(url()).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    recompute = reverse("agreement-recompute", args=["demo"])
    assert client.post(recompute, {"source": "votes"}).status_code == 403
    assert queued == []
    response = client.post(recompute, {"source": "votes", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert response["Location"] == url(source="votes")
    assert queued == [(project.pk, "votes")]
    assert "being recomputed" in text_of(client.get(response["Location"]))


def test_recompute_says_so_when_the_broker_is_down(reported, dave, client_for, broker_down):
    response = client_for(dave).post(reverse("agreement-recompute", args=["demo"]))
    assert response.status_code == 503
    assert "The report was not recomputed." in text_of(response)
    assert "Side alpha" in text_of(response)  # the page, with the report it has


def test_a_source_that_does_not_exist_is_refused_naming_the_field(reported, dave, client_for):
    response = client_for(dave).get(url(source="<b>everything</b>"))
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("source: must be one of all, votes, prior")


# ---- What it shows ------------------------------------------------------------------------


def test_headline_figures_and_every_chart_with_its_table_and_csv(reported, dave, client_for):
    response = client_for(dave).get(url())
    html = response.content.decode()
    report = reported.data
    for level, alpha in report["krippendorff_alpha"].items():
        assert f'data-alpha="{level}">{alpha:.3f}<' in html
    low, high = report["alpha_ci95"]["side"]
    assert f"{low:.3f} to {high:.3f}" in html
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg"') == len(CHARTS)
    for chart in CHARTS:
        assert f'aria-labelledby="chart-{chart}-title"' in html, chart
        assert f'href="{url("agreement-csv", chart)}"' in html, chart
    assert html.count("<summary>Table</summary>") == len(CHARTS)
    # Flagged annotators are highlighted and their bars link to their votes.
    assert f'href="{url("agreement-annotator", "quick")}" class="chart-link"' in html
    assert "chart-flagged" in html
    assert "low agreement, too fast" in text_of(response)
    assert "By task" in html
    assert "By criterion" in html


def test_each_csv_holds_the_reports_numbers(reported, dave, client_for):
    report = reported.data
    client = client_for(dave)

    def rows(chart: str) -> list[list[str]]:
        response = client.get(url("agreement-csv", chart))
        assert response.status_code == 200, chart
        assert f"demo-agreement-all-{chart}.csv" in response["Content-Disposition"]
        return csv_rows(response)

    annotators = rows("annotators")
    assert annotators[0] == ["annotator", "agreement with the others", "flags"]
    assert {row[0]: float(row[1]) for row in annotators[1:]} == {
        row["annotator"]: row["agreement_with_others"] for row in report["per_annotator"]
    }
    kappa = {(a, b): float(v) for a, b, v in rows("kappa")[1:] if v}
    assert kappa == {
        (row["annotator"], other): value
        for row in report["per_annotator"]
        for other, value in row["cohen_kappa"].items()
    }
    history = rows("history")[1:]
    assert [(int(v), float(a)) for v, a, *_ in history] == [
        (point["votes"], point["alpha_side"]) for point in report["history"]
    ]
    values = {row[0].split()[0]: int(row[1]) for row in rows("values")[1:]}
    assert values == report["value_distribution"]
    statuses = {row[0]: int(row[1]) for row in rows("statuses")[1:]}
    assert statuses == report["pairs_by_status"]
    assert statuses["consensus"] == 24
    tasks_csv = {row[0]: float(row[1]) for row in rows("tasks")[1:]}
    assert tasks_csv == {
        task: figures["krippendorff_alpha"]["side"] for task, figures in report["by_task"].items()
    }
    by_task = rows("by-task")
    assert by_task[0][:5] == ["task", "votes", "pairs", "annotators", "alpha nominal"]
    for name, votes, pairs, *rest in by_task[1:]:
        figures = report["by_task"][name]
        assert (int(votes), int(pairs)) == (figures["votes"], figures["pairs"])
        assert float(rest[-3]) == figures["pairwise_agreement"]
    judges = rows("judges")[1:]
    assert [float(row[1]) for row in judges] == [
        value
        for judge in PER_JUDGE
        for value in (judge["agreement"], judge["by_order"]["AB"], judge["by_order"]["BA"])
    ]
    assert client.get(url("agreement-csv", "nothing")).status_code == 404


def test_hostile_usernames_and_task_names_are_escaped_everywhere(
    project, alice, bob, dave, client_for
):
    voted_pairs(project, alice, bob, quick_name=HOSTILE_USER, task_names=(HOSTILE_TASK, "t2i"))
    cached_report(project)
    client = client_for(dave)
    html = client.get(url()).content.decode()
    for hostile in (HOSTILE_USER, HOSTILE_TASK, "<svg onload"):
        assert hostile not in html
    assert "&lt;script&gt;alert(&#x27;user&#x27;)&lt;/script&gt;" in html
    assert "&lt;svg onload=alert(1)&gt;" in html
    # Their bar still links to their votes, and the page there escapes the name too.
    link = re.search(r'href="(/p/demo/agreement/annotators/[^"]*)" class="chart-link"', html)
    votes_page = client.get(unescape(link.group(1)))
    assert votes_page.status_code == 200
    assert HOSTILE_USER not in votes_page.content.decode()
    assert f"Votes of {HOSTILE_USER}" in text_of(votes_page)


def test_a_spreadsheet_never_runs_a_task_name_as_a_formula(project, alice, bob, dave, client_for):
    voted_pairs(project, alice, bob, task_names=('=HYPERLINK("http://x")', "t2i"))
    cached_report(project)
    rows = csv_rows(client_for(dave).get(url("agreement-csv", "by-task")))
    assert '\'=HYPERLINK("http://x")' in [row[0] for row in rows]


def test_big_reports_are_capped_on_the_page_and_whole_in_the_csv(reported, dave, client_for):
    names = [f"rater{n:03d}" for n in range(70)]
    many = [
        {
            "annotator": name,
            "source": "vote",
            "votes": 100 - n,
            "median_seconds": 10.0,
            "agreement_with_others": 0.9,
            "gold_votes": 0,
            "gold_accuracy": None,
            "cohen_kappa": {other: 0.5 for other in names if other != name},
            "flags": ["too_fast"] if name == "rater069" else [],
        }
        for n, name in enumerate(names)
    ]
    AgreementReport.objects.filter(pk=reported.pk).update(
        data={**reported.data, "per_annotator": many}
    )
    client = client_for(dave)
    response = client.get(url())
    shown = text_of(response)
    assert "Drawn: 60 of 70 annotators" in shown
    assert "Drawn: the 30 most active of 70 annotators" in shown
    # The least active annotator is flagged, so drawn; the next least active is not.
    html = response.content.decode()
    assert ">\u25b2 rater069<" in html
    assert ">rater068<" not in html
    assert len(csv_rows(client.get(url("agreement-csv", "kappa")))) == 1 + 70 * 69
    assert len(csv_rows(client.get(url("agreement-csv", "annotators")))) == 1 + 70


# ---- Freshness and the first visit --------------------------------------------------------


def test_it_says_how_fresh_the_report_is_and_when_new_votes_are_on_their_way(
    reported,
    project,
    alice,
    dave,
    client_for,
    api_for,
    queued,
    django_capture_on_commit_callbacks,
):
    AgreementReport.objects.filter(pk=reported.pk).update(
        computed_at=timezone.now() - timedelta(minutes=3)
    )
    client = client_for(dave)
    shown = text_of(client.get(url()))
    assert "Computed 3 minutes ago, over 72 votes." in shown
    assert "New votes since" not in shown
    PairFactory(project=project, status="queued")
    with django_capture_on_commit_callbacks(execute=True):
        claim_and_vote(api_for(alice))
    assert queued == [(project.pk, "all")]  # the debounced refresh
    assert "Computed 3 minutes ago, over 72 votes. New votes since: refreshing…" in text_of(
        client.get(url())
    )


def test_the_first_visit_of_a_small_project_computes_the_report(
    project, alice, bob, dave, client_for
):
    voted_pairs(project, alice, bob)
    assert not AgreementReport.objects.exists()
    response = client_for(dave).get(url(source="votes"))
    assert response.status_code == 200
    assert "Computed just now, over 72 votes." in text_of(response)
    assert AgreementReport.objects.get().source == "votes"


def test_the_first_visit_of_a_big_project_queues_the_report_and_says_so(
    project, alice, bob, dave, client_for, queued, monkeypatch
):
    voted_pairs(project, alice, bob)
    monkeypatch.setattr(page, "FIRST_VISIT_BUILD_MAX_VOTES", 71)
    response = client_for(dave).get(url())
    assert response.status_code == 200
    assert "No report yet. The project has more than 71 votes, so a worker is computing" in (
        text_of(response)
    )
    assert "<svg" not in response.content.decode()
    assert queued == [(project.pk, "all")]
    assert not AgreementReport.objects.exists()
    assert client_for(dave).get(url("agreement-csv", "values")).status_code == 404


def test_the_first_visit_says_when_the_report_cannot_be_queued(
    project, alice, bob, dave, client_for, broker_down, monkeypatch
):
    voted_pairs(project, alice, bob)
    monkeypatch.setattr(page, "FIRST_VISIT_BUILD_MAX_VOTES", 10)
    response = client_for(dave).get(url())
    assert response.status_code == 503
    assert "No report yet. It could not be queued: The task queue is unreachable" in (
        text_of(response)
    )


def test_the_page_reads_the_cached_report_and_nothing_else(
    reported, dave, client_for, django_assert_num_queries
):
    client = client_for(dave)
    client.get(url())  # the session, warmed
    # The session, the user, their membership with the project, the cached report.
    with django_assert_num_queries(4):
        assert client.get(url()).status_code == 200


# ---- One annotator's votes ----------------------------------------------------------------


def test_an_annotators_votes_say_what_they_chose_and_whether_it_agreed(
    reported, project, dave, client_for
):
    response = client_for(dave).get(url("agreement-annotator", "alice"))
    html, shown = response.content.decode(), text_of(response)
    assert "Votes of alice" in shown
    # Pair ag-23, the newest: canonical 2 (tie), shown A-left; it agreed with the consensus.
    pair = project.pairs.get(external_id="ag-23")
    assert f'href="{reverse("adjudication-pair", args=["demo", pair.pk])}">ag-23</a>' in html
    assert "ag-23 edit About the same (A left) 2 · About the same reason 23 12 tie yes" in shown
    # Pair ag-0: canonical 3 (A), shown with B on the left, so chosen on screen as "right".
    assert "ag-0 t2i Right is better (B left) 3 · A better reason 0 12 A yes" in shown


def test_an_annotators_figures_and_flags_come_from_the_report(reported, dave, client_for):
    shown = text_of(client_for(dave).get(url("agreement-annotator", "quick")))
    assert "Median seconds per vote 0.8" in shown
    assert "Flagged: low agreement, too fast." in shown
    # quick voted against the consensus on most pairs.
    assert " no " in shown


def test_an_annotators_votes_come_a_page_at_a_time(project, alice, dave, client_for, monkeypatch):
    monkeypatch.setattr(page, "ANNOTATOR_VOTES_PAGE_SIZE", 2)
    monkeypatch.setattr("annotation.agreement.selectors.ANNOTATOR_VOTES_PAGE_SIZE", 2)
    for n in range(5):
        pair = PairFactory(project=project, external_id=f"v{n}")
        vote(pair, alice, 3, seconds=5)
    client = client_for(dave)
    seen, address = [], url("agreement-annotator", "alice")
    while address:
        html = client.get(address).content.decode()
        seen.append(re.findall(r">(v\d)</a>", html))
        older = re.search(r'href="(\?source=all&amp;before=\d+)">Older votes', html)
        address = (
            reverse("agreement-annotator", args=["demo", "alice"]) + unescape(older.group(1))
            if older
            else None
        )
    assert seen == [["v4", "v3"], ["v2", "v1"], ["v0"]]
    assert client.get(url("agreement-annotator", "alice") + "&before=x").status_code == 400


def test_an_annotator_never_sees_their_own_or_others_votes_here(reported, alice, client_for):
    client = client_for(alice)
    for name in ("alice", "bob", "quick"):
        response = client.get(url("agreement-annotator", name))
        assert response.status_code == 403
        assert "reason" not in response.content.decode()
