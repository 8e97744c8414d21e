"""The next pair claimed ahead for the comparison page (docs/curators.md, "The next pair,
prepared ahead"): its lease counts against the pair's target like any other, is served (its
clock started) by the answer to the pair before it, is freed when the page is left, is never
answered before it is served, and its card is as blinded as the one on screen."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from django.test import Client
from django.urls import reverse

from annotation.imports.importer import pairs_import
from annotation.models import Assignment, Media, Pair, Vote
from annotation.queue.services import claim as queue_claim
from annotation.queue.services.leases import ahead_leases_release
from annotation.queue.services.levers import project_pause
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.media.conftest import video_write
from tests.annotation.queue.conftest import annotator
from tests.annotation.queue.test_queue_concurrency import _race
from tests.factories import PairFactory, ProjectFactory

pytestmark = pytest.mark.django_db

MODEL_A, MODEL_B = "okapi-secret-video-model", "tapir-hidden-video-model"


def _video_pairs(project, tmp_path, count: int) -> list[Pair]:
    rows = []
    for n in range(count):
        for side in "ab":
            video_write(tmp_path / f"{side}{n}-original-name.mp4", frames=4 + n, audio=False)
        row = text_pair(f"video-{n}", task="t2v")
        row["response_a"] = {
            "model_name": MODEL_A,
            "response_content": [["video", f"a{n}-original-name.mp4"]],
        }
        row["response_b"] = {
            "model_name": MODEL_B,
            "response_content": [["video", f"b{n}-original-name.mp4"]],
        }
        rows.append(row)
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", rows), media_root=tmp_path
    )
    Pair.objects.filter(project=project).update(status="queued")
    return list(Pair.objects.filter(project=project).order_by("pk"))


def _live(user) -> list[Assignment]:
    return list(Assignment.objects.filter(annotator=user, status="live").order_by("ahead", "pk"))


def _vote(client, project, assignment_id: int, choice: str = "left"):
    url = reverse("annotate-vote", args=[project.slug, assignment_id])
    return client.post(url, {"choice": choice}, HTTP_HX_REQUEST="true")


def _shown_assignment(response) -> int:
    return int(re.search(r'data-pair-card data-assignment="(\d+)"', response.content.decode())[1])


def test_the_page_claims_the_next_pair_ahead_and_it_counts_against_the_target(
    project, alice, bob, client_for, tmp_path
):
    project.overlap = 1
    project.save(update_fields=["overlap"])
    pairs = _video_pairs(project, tmp_path, 2)
    Pair.objects.filter(project=project).update(target_votes=1)
    page = client_for(alice).get(reverse("annotate", args=[project.slug]))
    shown, ahead = _live(alice)
    assert (shown.ahead, ahead.ahead) == (False, True)
    assert f'data-assignment="{shown.pk}"' in page.content.decode()
    assert "<template data-next-pair>" in page.content.decode()
    assert f'data-assignment="{ahead.pk}"' in page.content.decode()
    assert {p.pk: p.lease_count for p in Pair.objects.all()} == {pairs[0].pk: 1, pairs[1].pk: 1}
    # Both slots are taken: the second annotator is told nothing is left.
    bob_page = client_for(bob).get(reverse("annotate", args=[project.slug]))
    assert "You are all caught up" in bob_page.content.decode()
    assert not _live(bob)


def test_the_vote_serves_the_pair_claimed_ahead_and_claims_the_one_after(
    project, alice, client_for, tmp_path
):
    _video_pairs(project, tmp_path, 3)
    client = client_for(alice)
    client.get(reverse("annotate", args=[project.slug]))
    shown, ahead = _live(alice)
    claimed_at = ahead.created_at
    response = _vote(client, project, shown.pk)
    assert _shown_assignment(response) == ahead.pk
    served = Assignment.objects.get(pk=ahead.pk)
    # Its clock starts when it is served: the project's timing rules count from here.
    assert not served.ahead
    assert served.created_at > claimed_at
    current, after = _live(alice)
    assert current.pk == ahead.pk
    assert after.ahead
    assert after.pair_id != shown.pair_id
    assert f'data-assignment="{after.pk}"' in response.content.decode()
    # The last pair: nothing is claimed ahead of it, and the page says when all is done.
    response = _vote(client, project, current.pk)
    assert _shown_assignment(response) == after.pk
    assert "<template data-next-pair>" not in response.content.decode()
    assert "You are all caught up" in _vote(client, project, after.pk).content.decode()
    assert Vote.objects.filter(annotator=alice).count() == 3


def test_a_pair_claimed_ahead_takes_no_vote_before_it_is_served(
    project, alice, client_for, tmp_path
):
    _video_pairs(project, tmp_path, 2)
    client = client_for(alice)
    client.get(reverse("annotate", args=[project.slug]))
    shown, ahead = _live(alice)
    response = _vote(client, project, ahead.pk)
    assert "not on your screen yet" in response.content.decode()
    assert not Vote.objects.exists()
    assert _shown_assignment(response) == shown.pk


def test_leaving_the_page_frees_the_pair_claimed_ahead(project, alice, bob, tmp_path):
    project.overlap = 1
    project.save(update_fields=["overlap"])
    _video_pairs(project, tmp_path, 2)
    Pair.objects.filter(project=project).update(target_votes=1)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    page = client.get(reverse("annotate", args=[project.slug]))
    shown, ahead = _live(alice)
    leave = reverse("annotate-leave", args=[project.slug])
    assert client.post(leave).status_code == 403  # no CSRF token
    assert len(_live(alice)) == 2
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())[1]
    assert client.post(leave, {"csrfmiddlewaretoken": token}).status_code == 204
    assert _live(alice) == [shown]
    assert Pair.objects.get(pk=ahead.pair_id).lease_count == 0
    # The pair is free for the next annotator; the one on screen stays alice's.
    taken = queue_claim.assignment_claim(project=project, annotator=bob)
    assert taken.pair_id == ahead.pair_id


def test_an_outsider_gets_neither_the_next_pair_nor_its_media(
    project, other_project, alice, eve, client_for, tmp_path
):
    _video_pairs(project, tmp_path, 2)
    page = client_for(alice).get(reverse("annotate", args=[project.slug])).content.decode()
    template = page[page.index("<template data-next-pair>") :]
    urls = re.findall(r'src="([^"]+/media/[^"]+)"', template)
    assert urls
    outsider = client_for(eve)
    for url in urls:
        assert outsider.get(url).status_code == 404
    assert outsider.get(reverse("annotate", args=[project.slug])).status_code == 404
    assert outsider.post(reverse("annotate-leave", args=[project.slug])).status_code == 404
    assert len(_live(alice)) == 2  # the outsider freed nothing
    # A member of another project is no member of this one either.
    other = annotator(other_project, "otto")
    assert client_for(other).get(urls[0]).status_code == 404


def test_the_next_pairs_card_is_as_blinded_as_the_one_on_screen(
    project, alice, client_for, tmp_path
):
    _video_pairs(project, tmp_path, 2)
    page = client_for(alice).get(reverse("annotate", args=[project.slug])).content.decode()
    template = page[page.index("<template data-next-pair>") :]
    assert "<video" in template
    secrets = [MODEL_A, MODEL_B, "original-name", ".mp4"]
    for media in Media.objects.all():
        secrets += [media.sha256, media.served_sha256 or media.sha256]
    for secret in secrets:
        assert secret not in page, secret
    # Its media are fetched within the budget by the page: none loads on its own.
    assert 'preload="none"' in template
    assert 'preload="auto"' not in template


def test_a_paused_project_serves_no_pair_claimed_ahead(project, alice, carol, client_for, tmp_path):
    _video_pairs(project, tmp_path, 3)
    client = client_for(alice)
    client.get(reverse("annotate", args=[project.slug]))
    shown, ahead = _live(alice)
    project_pause(project=project, paused=True, actor=carol)
    response = _vote(client, project, shown.pk)
    assert "This project is paused" in response.content.decode()
    assert Vote.objects.filter(assignment_id=shown.pk).exists()
    # Still claimed ahead, never served; leaving (or its expiry) frees it.
    assert Assignment.objects.get(pk=ahead.pk).ahead
    ahead_leases_release(project=project, annotator=alice)
    assert not _live(alice)


def test_racing_annotators_claiming_ahead_never_exceed_a_pairs_target(transactional_db):
    project = ProjectFactory(slug="ahead-race", overlap=2)

    pairs = PairFactory.create_batch(5, project=project, status="queued")
    users = [annotator(project, f"ahead{i}") for i in range(8)]

    def claim_two(user):
        queue_claim.assignment_claim(project=project, annotator=user)
        queue_claim.assignment_claim_ahead(project=project, annotator=user)

    assert _race([lambda u=user: claim_two(u) for user in users]) == []
    live = Counter(Assignment.objects.filter(status="live").values_list("pair_id", flat=True))
    # Ten slots, eight annotators asking for two each: every slot taken once, none twice.
    assert live == {pair.pk: 2 for pair in pairs}
    assert set(Pair.objects.values_list("lease_count", flat=True)) == {2}
    for user in users:
        mine = Assignment.objects.filter(annotator=user, status="live")
        assert mine.filter(ahead=True).count() <= 1
        assert mine.filter(ahead=False).count() <= 1


def test_a_pair_claimed_ahead_and_freed_never_takes_a_vote(project, alice, client_for, tmp_path):
    """Left (or expired) before it was served: the pair was never on the annotator's screen,
    so its assignment takes no vote, through the page or the API."""
    _video_pairs(project, tmp_path, 2)
    client = client_for(alice)
    client.get(reverse("annotate", args=[project.slug]))
    _shown, ahead = _live(alice)
    ahead_leases_release(project=project, annotator=alice)
    response = _vote(client, project, ahead.pk)
    assert "not on your screen yet" in response.content.decode()
    assert not Vote.objects.exists()


def test_a_lease_freed_while_the_vote_serves_it_is_not_served(transactional_db, tmp_path):
    """The leave beacon of another tab locks the lease held ahead first; the vote's claim that
    would serve it waits, finds it released, and claims another pair instead: a freed lease
    is never served (its slot may be someone else's)."""
    import threading
    import time

    from django.db import connection, transaction

    project = ProjectFactory(slug="serve-race", overlap=1)
    user = annotator(project, "racer")
    pairs = PairFactory.create_batch(3, project=project, status="queued", target_votes=1)
    shown = queue_claim.assignment_claim(project=project, annotator=user)
    ahead = queue_claim.assignment_claim_ahead(project=project, annotator=user)
    # The pair on screen answered (as a vote would leave it: its lease closed, its slot used).
    Assignment.objects.filter(pk=shown.pk).update(status=Assignment.Status.VOTED)
    Pair.objects.filter(pk=shown.pair_id).update(lease_count=0, vote_count=1)
    locked, release = threading.Event(), threading.Event()

    def leave():
        try:
            with transaction.atomic():
                Assignment.objects.select_for_update().filter(pk=ahead.pk).update(
                    status=Assignment.Status.RELEASED
                )
                Pair.objects.filter(pk=ahead.pair_id).update(lease_count=0)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=leave)
    thread.start()
    assert locked.wait(10)
    served = {}

    def claim():
        try:
            served["lease"] = queue_claim.assignment_claim(project=project, annotator=user)
        finally:
            connection.close()

    claimer = threading.Thread(target=claim)
    claimer.start()
    time.sleep(0.5)  # the claim waits on the lease the leave holds
    release.set()
    thread.join(10)
    claimer.join(10)
    lease = served["lease"]
    # A new lease (its pair may be the one freed: its slot is free again), counted.
    assert lease.pk != ahead.pk
    assert Assignment.objects.get(pk=lease.pk).status == Assignment.Status.LIVE
    assert Assignment.objects.get(pk=ahead.pk).status == Assignment.Status.RELEASED
    for pair in Pair.objects.filter(pk__in=[p.pk for p in pairs]):
        assert pair.lease_count == pair.assignments.filter(status="live").count(), pair
