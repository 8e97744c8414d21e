"""The curator's queue page: the figures it shows, the levers it pulls, and who may use it."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Pair, PairRestriction, PairStatus, Skip, Vote
from annotation.queue.selectors import FAST_MIN_VOTES, annotator_throughput, queue_overview
from annotation.queue.services.claim import assignment_claim
from annotation.queue.services.skips import assignment_skip
from annotation.queue.services.votes import vote_submit
from tests.annotation.queue.conftest import annotator, secret_pair
from tests.factories import PairFactory


def page_url(project) -> str:
    return reverse("curator-queue", args=[project.slug])


def action_url(project, action: str) -> str:
    return reverse("curator-queue-action", args=[project.slug, action])


def text_of(response) -> str:
    """The page's visible text, tags dropped and whitespace collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def vote(project, user, choice: str, ms: int | None) -> Vote:
    assignment = assignment_claim(project=project, annotator=user)
    return vote_submit(assignment=assignment, annotator=user, choice=choice, time_on_task_ms=ms)[0]


@pytest.fixture
def busy_project(project, alice, bob, carol):
    """Six queued pairs, two imported, one easy; alice voted three times, bob once and skipped
    once, and holds a lease."""
    for n in range(6):
        secret_pair(project, n, task="t2i" if n < 3 else "edit")
    PairFactory.create_batch(2, project=project, status=PairStatus.IMPORTED, task="t2i")
    PairFactory(project=project, status=PairStatus.EASY)
    for ms in (1000, 8000, 3000):
        vote(project, alice, "left", ms)
    vote(project, bob, "right", 5000)
    skipped = assignment_claim(project=project, annotator=bob)
    assignment_skip(assignment=skipped, annotator=bob, reason="unsafe", note="gore in image 2")
    assignment_claim(project=project, annotator=bob)
    return project


def test_page_shows_counts_throughput_and_skips(client_for, carol, busy_project):
    response = client_for(carol).get(page_url(busy_project))
    assert response.status_code == 200
    text = text_of(response)
    assert "Imported 2" in text
    assert "Easy (filtered by judges) 1" in text
    pairs = Pair.objects.filter(project=busy_project)
    annotating = pairs.filter(status=PairStatus.ANNOTATING).count()
    queued = pairs.filter(status=PairStatus.QUEUED).count()
    assert annotating + queued == 6
    assert f"Annotating {annotating}" in text
    assert f"Queued {queued}" in text
    assert "Total 9" in text
    assert "Leases: 1 live, 0 expired" in text
    # Alice: 3 votes, median of 1, 3 and 8 seconds; Bob: one vote of 5 s, one skip, one lease.
    assert re.search(r"alice 3 3 3\.0 s 0 0 ", text)
    assert re.search(r"bob 1 1 5\.0 s 1 1 ", text)
    assert "Unsafe content gore in image 2 bob" in text


def test_throughput_median_and_last_hour(busy_project, alice, bob):
    Vote.objects.filter(annotator=alice, time_on_task_ms=8000).update(
        created_at=timezone.now() - timedelta(hours=2)
    )
    rows = {row["annotator"].username: row for row in annotator_throughput(project=busy_project)}
    assert (rows["alice"]["votes"], rows["alice"]["last_hour"]) == (3, 2)
    assert rows["alice"]["median_seconds"] == 3.0
    assert (rows["bob"]["skips"], rows["bob"]["live_leases"]) == (1, 1)
    overview = queue_overview(project=busy_project)
    assert (overview["open_votes"], overview["open_target"]) == (4, 18)


def test_annotators_with_an_implausibly_short_median_are_flagged(client_for, carol, project):
    quick, careful = annotator(project, "quick"), annotator(project, "careful")
    for n in range(FAST_MIN_VOTES):
        secret_pair(project, n)
    for _ in range(FAST_MIN_VOTES):
        vote(project, quick, "left", 900)
        vote(project, careful, "left", 12_000)
    text = text_of(client_for(carol).get(page_url(project)))
    assert re.search(rf"quick {FAST_MIN_VOTES} {FAST_MIN_VOTES} 0\.9 s too fast: under 3 s", text)
    assert "careful 5 5 12.0 s 0" in text
    # The project's own minimum is the bar when it sets one.
    project.min_seconds_per_vote = 15
    project.save(update_fields=["min_seconds_per_vote"])
    text = text_of(client_for(carol).get(page_url(project)))
    assert "12.0 s too fast: under 15 s" in text


def test_page_stats_take_a_fixed_number_of_queries(
    client_for, carol, busy_project, django_assert_max_num_queries
):
    client = client_for(carol)
    # A dispute waiting for an extra vote from the start: the extra votes below may split a
    # pair (which pairs they reach depends on the annotators' ids), and a waiting dispute
    # costs its two queries whatever the number of annotators.
    PairFactory(
        project=busy_project,
        status=PairStatus.ANNOTATING,
        target_votes=busy_project.overlap + 1,
        extra_slots=1,
    )
    client.get(page_url(busy_project))  # caches that a process fills once (content types)
    with django_assert_max_num_queries(18) as captured:
        client.get(page_url(busy_project))
    before = len(captured)
    for n in range(6, 12):
        user = annotator(busy_project, f"extra{n}")
        secret_pair(busy_project, n)
        vote(busy_project, user, "tie", 2000)
    with django_assert_max_num_queries(before):
        client.get(page_url(busy_project))


def test_who_may_see_the_queue_page(client_for, alice, carol, dave, eve, project, other_project):
    url = page_url(project)
    assert client_for(eve).get(url).status_code == 404
    assert client_for(alice).get(url).status_code == 403
    assert client_for(dave).get(url).status_code == 403
    assert client_for(carol).get(page_url(other_project)).status_code == 404
    html = client_for(carol).get(reverse("project-detail", args=[project.slug])).content.decode()
    assert f'href="{url}"' in html


def test_annotators_cannot_pull_the_levers(client_for, alice, eve, project):
    assert (
        client_for(alice).post(action_url(project, "pause"), {"pause-paused": "1"}).status_code
        == 403
    )
    assert (
        client_for(eve).post(action_url(project, "pause"), {"pause-paused": "1"}).status_code == 404
    )
    project.refresh_from_db()
    assert not project.paused


def test_pause_and_resume(client_for, carol, alice, project):
    secret_pair(project, 0)
    client = client_for(carol)
    response = client.post(action_url(project, "pause"), {"pause-paused": "1"}, follow=True)
    project.refresh_from_db()
    assert project.paused
    assert "Project paused" in text_of(response)
    assert "Resume the project" in text_of(response)
    assert assignment_claim(project=project, annotator=alice) is None
    client.post(action_url(project, "pause"), {"pause-paused": "0"})
    project.refresh_from_db()
    assert not project.paused
    assert assignment_claim(project=project, annotator=alice) is not None


def test_set_priority_by_ids_and_by_task(client_for, carol, alice, project):
    pairs = [secret_pair(project, n, task="t2i" if n < 2 else "edit") for n in range(4)]
    client = client_for(carol)
    response = client.post(
        action_url(project, "priority"),
        {"priority-pair_ids": f"{pairs[3].external_id}", "priority-priority": "5"},
        follow=True,
    )
    assert "Priority 5 set on 1 pair." in text_of(response)
    # The prioritised pair is served first.
    assert assignment_claim(project=project, annotator=alice).pair_id == pairs[3].pk
    client.post(
        action_url(project, "priority"), {"priority-task": "t2i", "priority-priority": "-3"}
    )
    assert {p.external_id: p.priority for p in Pair.objects.filter(project=project)} == {
        pairs[0].external_id: -3,
        pairs[1].external_id: -3,
        pairs[2].external_id: 0,
        pairs[3].external_id: 5,
    }


def test_bad_lever_input_names_what_is_wrong(client_for, carol, project):
    secret_pair(project, 0)
    client = client_for(carol)
    response = client.post(
        action_url(project, "priority"),
        {"priority-pair_ids": "no-such-pair, other-missing", "priority-priority": "1"},
    )
    assert response.status_code == 400
    assert "No pair with id no-such-pair, other-missing in this project." in text_of(response)
    response = client.post(action_url(project, "priority"), {"priority-priority": "9999"})
    assert "Ensure this value is less than or equal to 1000." in text_of(response)
    response = client.post(action_url(project, "priority"), {"priority-priority": "2"})
    assert "Give pair ids or choose a task." in text_of(response)
    assert client.post(action_url(project, "explode"), {}).status_code == 404
    assert not Pair.objects.exclude(priority=0).exists()


def test_release_stuck_leases(client_for, carol, alice, bob, project):
    secret_pair(project, 0)
    secret_pair(project, 1)
    old = assignment_claim(project=project, annotator=alice)
    Assignment.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=45))
    fresh = assignment_claim(project=project, annotator=bob)
    response = client_for(carol).post(
        action_url(project, "release"), {"release-older_than_minutes": "30"}, follow=True
    )
    assert "Released 1 lease;" in text_of(response)
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert (old.status, fresh.status) == (Assignment.Status.RELEASED, Assignment.Status.LIVE)
    # Only bob's lease still holds a slot.
    assert sum(Pair.objects.values_list("lease_count", flat=True)) == 1


def test_restrict_pairs_to_chosen_annotators(client_for, carol, alice, bob, project):
    pairs = [secret_pair(project, n) for n in range(2)]
    response = client_for(carol).post(
        action_url(project, "restrict"),
        {"restrict-pair_ids": pairs[0].external_id, "restrict-annotators": [bob.pk]},
        follow=True,
    )
    assert "1 pair restricted to bob." in text_of(response)
    assert list(PairRestriction.objects.values_list("pair_id", "annotator_id")) == [
        (pairs[0].pk, bob.pk)
    ]
    # Alice is only ever offered the other pair.
    first = assignment_claim(project=project, annotator=alice)
    assert first.pair_id == pairs[1].pk
    vote_submit(assignment=first, annotator=alice, choice="left")
    assert assignment_claim(project=project, annotator=alice) is None


def test_restrict_offers_only_annotators(client_for, carol, dave, project):
    secret_pair(project, 0)
    response = client_for(carol).post(
        action_url(project, "restrict"),
        {"restrict-pair_ids": "import-id-narwhal-0", "restrict-annotators": [dave.pk]},
    )
    assert response.status_code == 400
    assert "Select a valid choice." in text_of(response)
    assert not PairRestriction.objects.exists()


def test_enqueue_imported_pairs(client_for, carol, project):
    imported = PairFactory.create_batch(3, project=project, status=PairStatus.IMPORTED)
    easy = PairFactory(project=project, status=PairStatus.EASY)
    client = client_for(carol)
    response = client.post(
        action_url(project, "enqueue"), {"enqueue-pair_ids": imported[0].external_id}, follow=True
    )
    assert "Sent 1 imported pair to the annotators' queue." in text_of(response)
    response = client.post(action_url(project, "enqueue"), {"enqueue-pair_ids": ""}, follow=True)
    assert "Sent 2 imported pairs" in text_of(response)
    statuses = dict(Pair.objects.filter(project=project).values_list("pk", "status"))
    assert [statuses[p.pk] for p in imported] == [PairStatus.QUEUED] * 3
    assert statuses[easy.pk] == PairStatus.EASY


def test_levers_need_the_csrf_token(carol, project):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    client.get(page_url(project))
    token = client.cookies["csrftoken"].value
    assert client.post(action_url(project, "pause"), {"pause-paused": "1"}).status_code == 403
    project.refresh_from_db()
    assert not project.paused
    response = client.post(
        action_url(project, "pause"), {"pause-paused": "1", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.paused


def test_skips_appear_for_review(client_for, carol, alice, project):
    secret_pair(project, 0)
    assignment = assignment_claim(project=project, annotator=alice)
    assignment_skip(assignment=assignment, annotator=alice, reason="broken", note="<b>blank</b>")
    html = client_for(carol).get(page_url(project)).content.decode()
    assert "&lt;b&gt;blank&lt;/b&gt;" in html
    assert "<b>blank</b>" not in html
    assert Skip.objects.count() == 1
