"""An annotator's own history (My votes, docs/curators.md "An annotator's own history"): their
votes only, in the terms they gave them, never a model's name or another annotator's vote;
whether a vote matched the consensus only where the curators chose it and only for pairs whose
decision is final; the speed; the page, its filters and pages; the API; who may see it."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, PairStatus, Project, Side, Vote
from annotation.queue.history import (
    HISTORY_PAGE_SIZE,
    SESSION_GAP,
    HistoryFilter,
    HistoryInputError,
    annotator_speed,
    consensus_outcome,
    history_rows,
    own_votes,
)
from annotation.queue.services.claim import assignment_claim
from annotation.queue.services.votes import vote_submit
from tests.annotation.queue.conftest import (
    SECRET_EXTERNAL,
    SECRET_JUDGE,
    SECRET_MODEL_A,
    SECRET_MODEL_B,
    secret_pair,
)
from tests.factories import PairFactory, ProjectFactory, UserFactory, VoteFactory


def page_url(project) -> str:
    return reverse("vote-history", args=[project.slug])


def votes_api(project) -> str:
    return reverse("api-my-votes", args=[project.slug])


def speed_api(project) -> str:
    return reverse("api-my-speed", args=[project.slug])


def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def show_consensus(project, on: bool = True) -> None:
    Project.objects.filter(pk=project.pk).update(history_shows_consensus=on)
    project.refresh_from_db()


def vote_as_shown(project, annotator, choice: str, rationale: str = "") -> Vote:
    """A vote through the annotator's own lease, as the comparison page gives it."""
    assignment = assignment_claim(project=project, annotator=annotator)
    assert assignment is not None
    return vote_submit(
        assignment=assignment, annotator=annotator, choice=choice, rationale=rationale
    )[0]


@pytest.fixture
def decided(project, alice, bob):
    """A pair decided A by consensus and a pair still collecting votes; alice voted A on both
    with A on her left, bob voted B on the live one with a reason of his own."""
    final = PairFactory(
        project=project, status=PairStatus.CONSENSUS, consensus_label=Side.A, vote_count=3
    )
    live = PairFactory(project=project, status=PairStatus.ANNOTATING, vote_count=2)
    now = timezone.now()
    VoteFactory(pair=final, annotator=alice, side=Side.A, created_at=now - timedelta(minutes=2))
    VoteFactory(pair=live, annotator=alice, side=Side.A, created_at=now - timedelta(minutes=1))
    VoteFactory(pair=live, annotator=bob, side=Side.B, rationale="bob's own secret reason")
    return final, live


# Selectors


def test_rows_are_the_annotators_own_votes_in_on_screen_terms(project, alice, bob):
    pair = secret_pair(project)
    mine = vote_as_shown(project, alice, "left", "crisper lighthouse")
    vote_as_shown(project, bob, "right", "bob thinks otherwise")
    (row,) = history_rows(own_votes(project=project, annotator=alice), project=project)
    assert row["id"] == mine.pk
    assert (row["choice"], row["value"], row["label"]) == ("left", None, "Left is better")
    assert row["rationale"] == "crisper lighthouse"
    assert row["prompt"] == "Draw a lighthouse at dusk, variant 0"
    assert row["consensus"] is None
    # Stored canonically: left was A or B as this lease showed it; the row speaks of left.
    assert mine.side == (Side.A if mine.left_is_a else Side.B)
    assert pair.pk == mine.pair_id


def test_a_vote_shown_with_b_on_the_left_reads_as_the_side_she_saw(project, alice):
    pair = PairFactory(project=project, status=PairStatus.ANNOTATING)
    VoteFactory(pair=pair, annotator=alice, side=Side.A, left_is_a=False)
    (row,) = history_rows(own_votes(project=project, annotator=alice), project=project)
    assert (row["choice"], row["label"]) == ("right", "Right is better")


def test_a_likert6_vote_reads_as_the_value_on_her_screen(alice):
    project = ProjectFactory(scale="likert6")
    pair = PairFactory(project=project, status=PairStatus.ANNOTATING)
    # Canonical 5 (A better), shown with B on the left: 5 on her screen, right better.
    VoteFactory(pair=pair, annotator=alice, side=Side.A, value=5, left_is_a=False)
    (row,) = history_rows(own_votes(project=project, annotator=alice), project=project)
    assert (row["choice"], row["value"], row["label"]) == (None, 5, "Right better")


def test_consensus_outcome_only_when_shown_and_final(project, alice, decided):
    final, live = decided
    votes = {vote.pair_id: vote for vote in own_votes(project=project, annotator=alice)}
    assert consensus_outcome(votes[final.pk], project=project) is None  # off by default
    show_consensus(project)
    assert consensus_outcome(votes[final.pk], project=project) == "matched"
    assert consensus_outcome(votes[live.pk], project=project) is None
    for status in (PairStatus.DISPUTED, PairStatus.ANNOTATING):
        votes[final.pk].pair.status = status
        assert consensus_outcome(votes[final.pk], project=project) is None


@pytest.mark.parametrize(
    ("mine", "label", "outcome"),
    [
        (Side.A, Side.A, "matched"),
        (Side.TIE, Side.TIE, "matched"),
        (Side.A, Side.B, "differed"),
        (Side.TIE, Side.B, "differed"),
        (Side.B, Side.TIE, "tie"),
    ],
)
def test_consensus_outcome_words(project, alice, mine, label, outcome):
    show_consensus(project)
    pair = PairFactory(project=project, status=PairStatus.CONSENSUS, consensus_label=label)
    vote = VoteFactory(pair=pair, annotator=alice, side=mine)
    assert consensus_outcome(vote, project=project) == outcome


def test_a_gold_pair_never_tells(project, alice):
    show_consensus(project)
    pair = PairFactory(
        project=project,
        status=PairStatus.CONSENSUS,
        consensus_label=Side.A,
        is_gold=True,
        gold_label=Side.A,
    )
    vote = VoteFactory(pair=pair, annotator=alice, side=Side.A)
    assert consensus_outcome(vote, project=project) is None


def test_days_and_pages(project, alice, bob, other_project):
    now = timezone.now()
    pairs = PairFactory.create_batch(5, project=project, status=PairStatus.ANNOTATING)
    mine = [
        VoteFactory(pair=pair, annotator=alice, created_at=now - timedelta(days=n))
        for n, pair in enumerate(pairs)
    ]
    VoteFactory(pair=pairs[0], annotator=bob)
    elsewhere = VoteFactory(pair=PairFactory(project=other_project), annotator=alice)
    listed = list(own_votes(project=project, annotator=alice))
    assert listed == mine  # newest first, hers, this project's
    today = timezone.localdate(now)
    since = today - timedelta(days=2)
    history = HistoryFilter(since=since, until=today - timedelta(days=1))
    assert list(own_votes(project=project, annotator=alice, history=history)) == mine[1:3]
    after = own_votes(project=project, annotator=alice, history=HistoryFilter(before=mine[1].pk))
    assert list(after) == mine[2:]
    # Same time: the id breaks the tie, so a page never repeats or drops a vote.
    Vote.objects.filter(pk__in=[v.pk for v in mine]).update(created_at=now)
    first = list(own_votes(project=project, annotator=alice))[:2]
    rest = own_votes(project=project, annotator=alice, history=HistoryFilter(before=first[-1].pk))
    assert first + list(rest) == sorted(mine, key=lambda v: -v.pk)
    for foreign in (elsewhere.pk, Vote.objects.get(annotator=bob).pk):
        with pytest.raises(HistoryInputError, match="before: not one of your votes"):
            own_votes(project=project, annotator=alice, history=HistoryFilter(before=foreign))
    with pytest.raises(HistoryInputError, match="until: must be on or after"):
        HistoryFilter(since=today, until=today - timedelta(days=1))


def test_speed_from_the_lease_to_the_vote_and_sessions_by_gap(project, alice, bob):
    start = timezone.now() - timedelta(hours=5)

    def vote_at(minutes: float, took_seconds: float | None, annotator=alice) -> None:
        voted = start + timedelta(minutes=minutes)
        pair = PairFactory(project=project, status=PairStatus.ANNOTATING)
        assignment = None
        if took_seconds is not None:
            assignment = Assignment.objects.create(
                pair=pair,
                annotator=annotator,
                left_is_a=True,
                status=Assignment.Status.VOTED,
                created_at=voted - timedelta(seconds=took_seconds),
                expires_at=voted,
            )
        VoteFactory(pair=pair, annotator=annotator, assignment=assignment, created_at=voted)

    # Session one: 3 votes over 6 minutes from the first lease; session two after a long gap.
    vote_at(1, 60)
    vote_at(3, 20)
    vote_at(6, 40)
    vote_at(6 + SESSION_GAP.total_seconds() / 60 + 30, 30)
    vote_at(6 + SESSION_GAP.total_seconds() / 60 + 32, None)  # no lease: not timed
    vote_at(2, 1, annotator=bob)
    speed = annotator_speed(project=project, annotator=alice)
    assert speed["votes"] == 5
    assert speed["timed_votes"] == 4
    assert speed["median_seconds_per_vote"] == 35.0
    newest, oldest = speed["sessions"]
    assert (oldest["votes"], oldest["votes_per_hour"]) == (3, 30.0)  # 3 in 6 minutes
    assert (newest["votes"], newest["votes_per_hour"]) == (2, 48.0)  # 2 in 2.5 minutes
    assert speed["votes_per_hour"] == round(5 / (8.5 / 60), 1)


def test_speed_with_no_votes(project, alice):
    assert annotator_speed(project=project, annotator=alice) == {
        "votes": 0,
        "timed_votes": 0,
        "median_seconds_per_vote": None,
        "votes_per_hour": None,
        "sessions": [],
    }


# The page


def test_page_shows_her_votes_and_nothing_of_anyone_elses(client_for, project, alice, bob):
    secret_pair(project)
    vote_as_shown(project, alice, "right", "the <b>sky</b> is wrong")
    vote_as_shown(project, bob, "left", "bob-only-reason")
    response = client_for(alice).get(page_url(project))
    assert response.status_code == 200
    html = response.content.decode()
    for secret in (SECRET_MODEL_A, SECRET_MODEL_B, SECRET_JUDGE, SECRET_EXTERNAL, "bob-only"):
        assert secret not in html
    assert "the &lt;b&gt;sky&lt;/b&gt; is wrong" in html  # escaped
    text = text_of(response)
    assert "Draw a lighthouse at dusk, variant 0 Right is better the <b>sky</b> is wrong" in text
    assert "Consensus" not in text
    assert 'aria-current="page">My votes<' in html


def test_consensus_column_only_when_the_curators_turned_it_on(client_for, project, alice, decided):
    final, live = decided
    client = client_for(alice)
    html = client.get(page_url(project)).content.decode()
    assert "Matched the consensus" not in html
    assert "Consensus" not in html
    show_consensus(project)
    response = client.get(page_url(project))
    rows = dict(re.findall(r'<tr data-vote="(\d+)">(.*?)</tr>', response.content.decode(), re.S))
    by_pair = {v.pair_id: str(v.pk) for v in Vote.objects.filter(annotator=alice)}
    assert "Matched the consensus" in rows[by_pair[final.pk]]
    live_row = rows[by_pair[live.pk]]
    assert "consensus" not in live_row.lower().replace("data-consensus", "")
    assert "bob" not in live_row
    assert "Differed" not in live_row


def test_pages_of_fifty_newest_first(client_for, project, alice):
    now = timezone.now()
    pairs = PairFactory.create_batch(
        HISTORY_PAGE_SIZE + 3, project=project, status=PairStatus.ANNOTATING
    )
    votes = [
        VoteFactory(pair=pair, annotator=alice, created_at=now - timedelta(minutes=n))
        for n, pair in enumerate(pairs)
    ]
    client = client_for(alice)
    first = client.get(page_url(project)).content.decode()
    shown = [int(i) for i in re.findall(r'data-vote="(\d+)"', first)]
    assert shown == [v.pk for v in votes[:HISTORY_PAGE_SIZE]]
    older = re.search(r'href="([^"]+)" rel="next">Older votes', first)
    assert older is not None
    second = client.get(unescape(older.group(1))).content.decode()
    assert [int(i) for i in re.findall(r'data-vote="(\d+)"', second)] == [
        v.pk for v in votes[HISTORY_PAGE_SIZE:]
    ]
    assert "Older votes" not in second
    assert ">Newest</a>" in second


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"since": "2026-13-01"}, "since"),
        ({"until": "yesterday"}, "until"),
        ({"since": "2026-05-02", "until": "2026-05-01"}, "until"),
        ({"before": "abc"}, "before"),
        ({"before": "-4"}, "before"),
        ({"before": "9" * 30}, "before"),
    ],
)
def test_page_refuses_bad_filters_naming_the_field(client_for, project, alice, query, named):
    response = client_for(alice).get(page_url(project), query)
    assert response.status_code == 400
    assert f"{named}:" in text_of(response)


def test_page_refuses_another_annotators_vote_as_a_page_start(
    client_for, project, alice, bob, decided
):
    bobs = Vote.objects.get(annotator=bob)
    response = client_for(alice).get(page_url(project), {"before": bobs.pk})
    assert response.status_code == 400
    assert "before: not one of your votes in this project" in text_of(response)
    assert "bob's own secret reason" not in response.content.decode()


def test_page_filters_by_day(client_for, project, alice):
    pair = PairFactory(project=project, status=PairStatus.ANNOTATING)
    VoteFactory(pair=pair, annotator=alice, created_at=timezone.now() - timedelta(days=3))
    today = timezone.localdate().isoformat()
    response = client_for(alice).get(page_url(project), {"since": today, "until": today})
    assert response.status_code == 200
    assert "No votes of yours on those days." in text_of(response)


def test_page_access(client_for, project, alice, carol, dave, eve):
    assert client_for(eve).get(page_url(project)).status_code == 404
    assert client_for(carol).get(page_url(project)).status_code == 403
    assert client_for(dave).get(page_url(project)).status_code == 403
    assert client_for(alice).get(reverse("vote-history", args=["nope"])).status_code == 404
    # A superuser acts as a curator: no votes of their own to show.
    assert client_for(UserFactory(is_superuser=True)).get(page_url(project)).status_code == 403


def test_the_tab_is_an_annotators(client_for, project, alice, carol):
    link = f'href="{page_url(project)}"'
    assert (
        link
        in client_for(alice).get(reverse("project-detail", args=[project.slug])).content.decode()
    )
    assert link in client_for(alice).get(reverse("annotate", args=[project.slug])).content.decode()
    curator_home = client_for(carol).get(reverse("project-detail", args=[project.slug]))
    assert link not in curator_home.content.decode()


# The API


def test_api_lists_her_votes_paginated_with_consensus_when_shown(api_for, project, alice, decided):
    api = api_for(alice)
    body = api.get(votes_api(project), {"limit": 1}).json()
    assert body["count"] == 2
    assert body["next"] is not None
    (newest,) = body["results"]
    assert newest["choice"] == "left"
    assert newest["consensus"] is None
    assert set(newest) == {
        "id",
        "created_at",
        "prompt",
        "choice",
        "value",
        "label",
        "rationale",
        "consensus",
    }
    show_consensus(project)
    rows = api.get(votes_api(project)).json()["results"]
    assert [row["consensus"] for row in rows] == [None, "matched"]  # live, then final
    assert "bob" not in str(rows)


def test_api_filters_and_refuses_bad_dates(api_for, project, alice, decided):
    api = api_for(alice)
    today = timezone.localdate()
    old = (today - timedelta(days=9)).isoformat()
    assert api.get(votes_api(project), {"until": old}).json()["count"] == 0
    assert api.get(votes_api(project), {"since": today.isoformat()}).json()["count"] == 2
    bad = api.get(votes_api(project), {"since": "soon"})
    assert bad.status_code == 400
    assert "since" in bad.json()
    reversed_days = api.get(votes_api(project), {"since": today.isoformat(), "until": old})
    assert reversed_days.status_code == 400
    assert reversed_days.json() == {"until": ["must be on or after the day in since"]}


def test_api_speed(api_for, project, alice, decided):
    body = api_for(alice).get(speed_api(project)).json()
    assert body["votes"] == 2
    assert body["timed_votes"] == 0
    assert body["median_seconds_per_vote"] is None
    assert [s["votes"] for s in body["sessions"]] == [2]


def test_api_access(api_for, project, alice, carol, dave, eve):
    for url in (votes_api(project), speed_api(project)):
        assert api_for(eve).get(url).status_code == 404
        assert api_for(carol).get(url).status_code == 403
        assert api_for(dave).get(url).status_code == 403
        assert api_for(alice).get(url).status_code == 200


def test_schema_documents_the_history_endpoints(client, alice):
    client.force_login(alice)
    schema = client.get("/api/v1/schema/", {"format": "json"}).json()
    votes = schema["paths"]["/api/v1/projects/{slug}/me/votes/"]["get"]
    assert {p["name"] for p in votes["parameters"]} >= {"since", "until", "limit", "offset"}
    assert "/api/v1/projects/{slug}/me/speed/" in schema["paths"]


# The setting


def test_curators_turn_the_consensus_on_in_settings(client_for, project, carol, alice):
    from tests.annotation.projects.test_settings_page import settings_data

    client = client_for(carol)
    settings_page = reverse("project-settings", args=[project.slug])
    assert "reveals a summary of others' votes" in text_of(client.get(settings_page))
    save = reverse("project-settings-save", args=[project.slug])
    assert (
        client.post(save, settings_data(project, history_shows_consensus=True)).status_code == 302
    )
    project.refresh_from_db()
    assert project.history_shows_consensus
    assert client_for(alice).post(save, settings_data(project)).status_code == 403
    project.refresh_from_db()
    assert project.history_shows_consensus


def test_speed_reads_only_the_latest_window(project, alice, monkeypatch):
    monkeypatch.setattr("annotation.queue.history.SPEED_WINDOW_VOTES", 2)
    now = timezone.now()
    for hours in (0, 1, 2):
        pair = PairFactory(project=project, status=PairStatus.ANNOTATING)
        VoteFactory(pair=pair, annotator=alice, created_at=now - timedelta(hours=hours))
    speed = annotator_speed(project=project, annotator=alice)
    assert speed["votes"] == 2
    assert [s["ended_at"] for s in speed["sessions"]] == [now, now - timedelta(hours=1)]
