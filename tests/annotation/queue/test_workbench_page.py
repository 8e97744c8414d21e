"""The comparison page: what an annotator sees (and never sees), voting, skipping and undoing
through it, with and without htmx, CSRF on its posts, and who may reach it."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from annotation.core.media_keys import media_path
from annotation.models import Assignment, Pair, PairStatus, Skip, Vote
from tests.annotation.queue.conftest import (
    SECRET_EXTERNAL,
    SECRET_JUDGE,
    SECRET_MODEL_A,
    SECRET_MODEL_B,
    annotator,
    secret_pair,
)
from tests.factories import ProjectFactory

HTMX = {"HTTP_HX_REQUEST": "true"}
# Anything that would tell an annotator which model answered, which side is A, what the
# judges thought or what another annotator said.
FORBIDDEN = (
    SECRET_MODEL_A,
    SECRET_MODEL_B,
    SECRET_JUDGE,
    SECRET_EXTERNAL,
    "response_a",
    "response_b",
    "Response A",
    "Response B",
    "left_is_a",
    "model_name",
    "ensemble",
    "0.97",
    "prior_label",
    "BOB-SAYS-THE-FIRST-ONE",
)


def assert_blind(html: str) -> None:
    leaks = [secret for secret in FORBIDDEN if secret.lower() in html.lower()]
    assert not leaks, f"annotator-facing HTML reveals {leaks}"


def assert_csp_clean(html: str) -> None:
    """The page needs no inline script or style, so the CSP can forbid both."""
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html)
    assert not re.search(r"\sstyle=", html)
    assert not re.search(r"\s(hx-on|on[a-z]+)=", html)


def vote_url(project, assignment_id: int) -> str:
    return reverse("annotate-vote", args=[project.slug, assignment_id])


def skip_url(project, assignment_id: int) -> str:
    return reverse("annotate-skip", args=[project.slug, assignment_id])


def shown_assignment(html: str) -> int | None:
    match = re.search(r"/annotate/(\d+)/vote/", html)
    return int(match.group(1)) if match else None


@pytest.fixture
def pairs(project):
    return [secret_pair(project, n, with_images=True) for n in range(4)]


@pytest.fixture
def page(client_for, alice, pairs, project):
    client = client_for(alice)
    return client, client.get(reverse("annotate", args=[project.slug]))


def test_page_shows_the_claimed_pair_side_by_side(page, alice, project):
    client, response = page
    html = response.content.decode()
    assert response.status_code == 200
    assignment = Assignment.objects.get(annotator=alice, status=Assignment.Status.LIVE)
    assert shown_assignment(html) == assignment.pk
    pair = assignment.pair
    left, right = (
        (pair.response_a, pair.response_b)
        if assignment.left_is_a
        else (pair.response_b, pair.response_a)
    )
    # Prompt on top, then the left response before the right one, each with its image.
    prompt_at = html.index(pair.prompt.text)
    left_at, right_at = html.index(left.text), html.index(right.text)
    assert prompt_at < left_at < right_at
    for sha256 in [*pair.prompt.media_hashes, *left.media_hashes, *right.media_hashes]:
        assert f'href="http://testserver{media_path(slug=project.slug, sha256=sha256)}"' in html
    assert "Judge only the lighthouse" in html
    for key, label in (("1", "Left is better"), ("2", "About the same"), ("3", "Right is better")):
        assert re.search(rf'data-key="{key}"[^>]*>\s*<kbd>{key}</kbd> {label}', html)
    assert 'data-arrow="ArrowDown"' in html
    assert "0</strong> done today" in html
    assert "4</strong> left for you" in html
    assert_csp_clean(html)
    # A reload shows the same pair: it does not take a second slot.
    again = client.get(reverse("annotate", args=[project.slug])).content.decode()
    assert shown_assignment(again) == assignment.pk
    assert "4</strong> left for you" in again
    assert Assignment.objects.filter(annotator=alice).count() == 1


def test_page_prefetches_the_next_pairs_images_only(page, alice, pairs, project):
    client, response = page
    html = response.content.decode()
    prefetch = re.search(r'data-prefetch="([^"]*)"', html).group(1).split()
    # The guess is the pair the next claim serves.
    after = client.post(vote_url(project, shown_assignment(html)), {"choice": "left"}, **HTMX)
    upcoming = Assignment.objects.get(pk=shown_assignment(after.content.decode())).pair
    expected = {
        *upcoming.prompt.media_hashes,
        *upcoming.response_a.media_hashes,
        *upcoming.response_b.media_hashes,
    }
    assert prefetch == sorted(media_path(slug=project.slug, sha256=sha256) for sha256 in expected)


@pytest.mark.parametrize("left_is_a", [True, False])
@pytest.mark.parametrize(
    ("choice", "side_if_left_is_a", "side_if_left_is_b"),
    [("left", "A", "B"), ("right", "B", "A"), ("tie", "tie", "tie")],
)
def test_vote_through_the_page_is_stored_in_canonical_terms(
    page, alice, project, left_is_a, choice, side_if_left_is_a, side_if_left_is_b
):
    client, _ = page
    assignment = Assignment.objects.get(annotator=alice)
    Assignment.objects.filter(pk=assignment.pk).update(left_is_a=left_is_a)
    response = client.post(
        vote_url(project, assignment.pk), {"choice": choice, "time_on_task_ms": "4321"}, **HTMX
    )
    html = response.content.decode()
    vote = Vote.objects.get(annotator=alice)
    assert vote.pair_id == assignment.pair_id
    assert vote.side == (side_if_left_is_a if left_is_a else side_if_left_is_b)
    assert (vote.left_is_a, vote.time_on_task_ms) == (left_is_a, 4321)
    # The answer is the next pair's card alone, ready to swap in.
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="workbench"')
    assert "<html" not in html
    assert "Saved" in html
    assert "1</strong> done today" in html
    nxt = shown_assignment(html)
    assert nxt not in (None, assignment.pk)
    assert Assignment.objects.get(pk=nxt).pair_id != assignment.pair_id
    assert_blind(html)


@pytest.mark.parametrize(("left_is_a", "pressed", "stored"), [(True, 1, 6), (False, 1, 1)])
def test_likert_vote_keeps_on_screen_order_out_of_storage(
    db, client_for, left_is_a, pressed, stored
):
    project = ProjectFactory(slug="likert", scale="likert6")
    ann = annotator(project, "lena")
    secret_pair(project, 0)
    client = client_for(ann)
    html = client.get(reverse("annotate", args=[project.slug])).content.decode()
    assert re.search(r'name="value" value="1" data-key="1"[^>]*>\s*<kbd>1</kbd> Left much', html)
    assert "data-arrow" not in html  # on likert6 arrows move between options
    assignment = Assignment.objects.get(annotator=ann)
    Assignment.objects.filter(pk=assignment.pk).update(left_is_a=left_is_a)
    client.post(vote_url(project, assignment.pk), {"value": pressed}, **HTMX)
    vote = Vote.objects.get(annotator=ann)
    assert (vote.value, vote.side) == (stored, "A" if stored >= 4 else "B")


def test_vote_without_htmx_redirects_to_the_next_pair(page, alice, project):
    client, _ = page
    assignment = Assignment.objects.get(annotator=alice)
    response = client.post(vote_url(project, assignment.pk), {"choice": "left"}, follow=True)
    assert response.redirect_chain == [(reverse("annotate", args=[project.slug]), 302)]
    html = response.content.decode()
    assert "<html" in html
    assert "Saved" in html
    assert shown_assignment(html) not in (None, assignment.pk)
    assert Vote.objects.filter(annotator=alice).count() == 1


def test_the_same_vote_with_another_reason_says_how_to_change_the_reason(page, alice, project):
    client, _ = page
    assignment = Assignment.objects.get(annotator=alice)
    url = vote_url(project, assignment.pk)
    client.post(url, {"choice": "left", "rationale": "sharper"}, **HTMX)
    again = client.post(url, {"choice": "left", "rationale": "centred"}, **HTMX)
    html = unescape(again.content.decode())
    assert "Your choice on this pair is already recorded" in html
    assert "To change the reason, undo the vote" in html
    assert Vote.objects.get(annotator=alice).rationale == "sharper"


def test_bad_vote_shows_the_same_pair_with_an_error_naming_the_field(page, alice, project):
    client, _ = page
    assignment = Assignment.objects.get(annotator=alice)
    html = client.post(vote_url(project, assignment.pk), {"value": "4"}, **HTMX).content.decode()
    assert 'value: this project uses choices; send "choice"' in unescape(html)
    assert shown_assignment(html) == assignment.pk
    html = client.post(vote_url(project, assignment.pk), {"choice": "best"}, **HTMX)
    assert "choice: Select a valid choice" in html.content.decode()
    html = client.post(vote_url(project, assignment.pk), {}, **HTMX).content.decode()
    assert "Pick one of the options" in html
    assert not Vote.objects.exists()


def test_rationale_required_by_the_project(db, client_for):
    project = ProjectFactory(slug="why", require_rationale=True)
    ann = annotator(project, "wes")
    secret_pair(project, 0)
    client = client_for(ann)
    html = client.get(reverse("annotate", args=[project.slug])).content.decode()
    assert re.search(r'<textarea id="rationale" name="rationale"[^>]*required', html)
    assignment = Assignment.objects.get(annotator=ann)
    html = client.post(vote_url(project, assignment.pk), {"choice": "left"}, **HTMX)
    assert "rationale: this project asks for a reason" in html.content.decode()
    client.post(
        vote_url(project, assignment.pk), {"choice": "left", "rationale": "crisper"}, **HTMX
    )
    assert Vote.objects.get(annotator=ann).rationale == "crisper"


def test_skip_through_the_page_flags_the_pair_and_moves_on(page, alice, project):
    client, _ = page
    assignment = Assignment.objects.get(annotator=alice)
    response = client.post(
        skip_url(project, assignment.pk), {"reason": "broken", "note": "image is black"}, **HTMX
    )
    html = response.content.decode()
    skip = Skip.objects.get(annotator=alice)
    assert (skip.pair_id, skip.reason, skip.note) == (
        assignment.pair_id,
        "broken",
        "image is black",
    )
    assert "Skipped" in html
    assert shown_assignment(html) not in (None, assignment.pk)
    bad = client.post(skip_url(project, assignment.pk), {"reason": "bored"}, **HTMX)
    assert "reason: Select a valid choice" in bad.content.decode()


def test_undo_brings_the_pair_back_with_the_earlier_choice(page, alice, project):
    client, _ = page
    assignment = Assignment.objects.get(annotator=alice)
    saved = client.post(
        vote_url(project, assignment.pk), {"choice": "right", "rationale": "crisper sign"}, **HTMX
    ).content.decode()
    assert "Saved: right is better." in saved
    assert Vote.objects.filter(annotator=alice).count() == 1
    html = client.post(reverse("annotate-undo", args=[project.slug]), **HTMX).content.decode()
    assert not Vote.objects.filter(annotator=alice).exists()
    assert "Your last vote was undone (you had chosen: right is better)" in html
    assert "0</strong> done today" in html
    assert shown_assignment(html) == assignment.pk
    # The earlier choice is marked and focused, the reason is back in its box.
    assert re.search(r'value="right"[^>]*wb-chosen"[^>]*aria-pressed="true"[^>]*autofocus', html)
    assert ">crisper sign</textarea>" in html
    # The undone pair is live again and can take a new answer.
    assert Assignment.objects.get(pk=assignment.pk).status == Assignment.Status.LIVE
    client.post(vote_url(project, assignment.pk), {"choice": "left"}, **HTMX)
    assert Vote.objects.get(annotator=alice).pair_id == assignment.pair_id


def test_undo_of_a_skip_brings_the_pair_back_with_its_reason(page, alice, project):
    client, _ = page
    assignment = Assignment.objects.get(annotator=alice)
    client.post(skip_url(project, assignment.pk), {"reason": "broken", "note": "grey"}, **HTMX)
    html = client.post(reverse("annotate-undo", args=[project.slug]), **HTMX).content.decode()
    assert "Your last skip was undone (you had chosen: Broken content)" in html
    assert shown_assignment(html) == assignment.pk
    assert re.search(r'value="broken"[^>]*class="wb-chosen"', html)
    assert ">grey</textarea>" in html
    assert not Skip.objects.exists()


def test_a_vote_faster_than_the_projects_minimum_is_refused_on_the_page(page, alice, project):
    client, _ = page
    project.min_seconds_per_vote = 30
    project.save(update_fields=["min_seconds_per_vote"])
    assignment = Assignment.objects.get(annotator=alice)
    html = client.post(
        vote_url(project, assignment.pk), {"choice": "left", "time_on_task_ms": "45000"}, **HTMX
    ).content.decode()
    assert "at least 30 s before voting; wait" in html
    assert shown_assignment(html) == assignment.pk
    assert not Vote.objects.exists()


def test_an_edit_pair_is_laid_out_beside_its_input(client_for, alice, project):
    secret_pair(project, 0, with_images=True)
    html = client_for(alice).get(reverse("annotate", args=[project.slug])).content.decode()
    assert 'class="pair-card wb-beside-input"' in html
    assert "Prompt and input" in html


def test_undo_with_nothing_to_undo_says_so(page, project):
    client, _ = page
    html = client.post(reverse("annotate-undo", args=[project.slug]), **HTMX).content.decode()
    assert "Nothing to undo" in html


def test_no_annotator_facing_html_reveals_models_sides_judges_or_other_votes(
    client_for, alice, bob, project, pairs
):
    # Bob voted on every pair first, with a telling rationale.
    bob_client = Client()
    bob_client.force_login(bob)
    from annotation.queue.services.claim import assignment_claim
    from annotation.queue.services.votes import vote_submit

    for _ in pairs:
        bob_assignment = assignment_claim(project=project, annotator=bob)
        vote_submit(
            assignment=bob_assignment,
            annotator=bob,
            choice="left",
            rationale="BOB-SAYS-THE-FIRST-ONE",
        )
    client = client_for(alice)
    url = reverse("annotate", args=[project.slug])
    seen = [client.get(url).content.decode(), client.get(url, **HTMX).content.decode()]
    for step in range(3):
        assignment = Assignment.objects.get(annotator=alice, status=Assignment.Status.LIVE)
        if step == 0:
            response = client.post(vote_url(project, assignment.pk), {"choice": "tie"}, **HTMX)
        elif step == 1:
            response = client.post(skip_url(project, assignment.pk), {"reason": "unsafe"}, **HTMX)
        else:
            response = client.post(
                vote_url(project, assignment.pk), {"choice": "right"}, follow=True
            )
        seen.append(response.content.decode())
    seen.append(client.post(reverse("annotate-undo", args=[project.slug]), **HTMX).content.decode())
    seen.append(client.get(reverse("project-detail", args=[project.slug])).content.decode())
    assert len({shown_assignment(html) for html in seen if shown_assignment(html)}) >= 3
    for html in seen:
        assert_blind(html)
        assert_csp_clean(html)


def test_empty_queue_and_paused_project_states(client_for, alice, project):
    client = client_for(alice)
    url = reverse("annotate", args=[project.slug])
    html = client.get(url).content.decode()
    assert "You are all caught up" in html
    assert shown_assignment(html) is None
    secret_pair(project, 0)
    project.paused = True
    project.save(update_fields=["paused"])
    html = client.get(url).content.decode()
    assert "This project is paused" in html
    assert shown_assignment(html) is None
    assert not Assignment.objects.exists()


def test_last_vote_leads_to_the_empty_state(client_for, alice, project):
    secret_pair(project, 0)
    client = client_for(alice)
    client.get(reverse("annotate", args=[project.slug]))
    assignment = Assignment.objects.get(annotator=alice)
    html = client.post(vote_url(project, assignment.pk), {"choice": "left"}, **HTMX).content
    assert "You are all caught up" in html.decode()
    assert "you did 1 today" in html.decode()


def test_htmx_posts_need_the_csrf_token(alice, project, pairs):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get(reverse("annotate", args=[project.slug]))
    token = client.cookies["csrftoken"].value
    assignment = Assignment.objects.get(annotator=alice)
    urls_and_data = [
        (vote_url(project, assignment.pk), {"choice": "left"}),
        (reverse("annotate-undo", args=[project.slug]), {}),
    ]
    for url, data in urls_and_data:
        assert client.post(url, data, **HTMX).status_code == 403
    assert not Vote.objects.exists()
    for url, data in urls_and_data:
        response = client.post(url, data, HTTP_X_CSRFTOKEN=token, **HTMX)
        assert response.status_code == 200
    assert not Vote.objects.exists()  # voted, then undone
    shown = shown_assignment(response.content.decode())
    assert client.post(skip_url(project, shown), {"reason": "broken"}, **HTMX).status_code == 403
    response = client.post(
        skip_url(project, shown), {"reason": "broken"}, HTTP_X_CSRFTOKEN=token, **HTMX
    )
    assert response.status_code == 200
    assert Skip.objects.filter(annotator=alice).count() == 1


def test_body_carries_the_csrf_token_for_htmx(page):
    _, response = page
    html = response.content.decode()
    assert re.search(r'<body hx-headers=\'\{"X-CSRFToken": "[^"]+"\}\'', html)


def test_who_may_reach_the_page(client_for, alice, bob, carol, dave, eve, project, other_project):
    secret_pair(project, 0)
    other = secret_pair(other_project, 1)
    url = reverse("annotate", args=[project.slug])
    assert client_for(eve).get(url).status_code == 404
    assert client_for(carol).get(url).status_code == 403
    assert client_for(dave).get(url).status_code == 403
    # Alice annotates the demo project only.
    client = client_for(alice)
    assert client.get(reverse("annotate", args=[other_project.slug])).status_code == 404
    assert client.get(url).status_code == 200
    # Bob's assignment is not hers to vote on or skip; other projects' assignments neither.
    bob_client = Client()
    bob_client.force_login(bob)
    bob_client.get(url)
    bob_assignment = Assignment.objects.get(annotator=bob)
    assert client.post(vote_url(project, bob_assignment.pk), {"choice": "left"}).status_code == 404
    assert (
        client.post(skip_url(project, bob_assignment.pk), {"reason": "broken"}).status_code == 404
    )
    stranger = annotator(other_project, "oscar")
    from annotation.queue.services.claim import assignment_claim

    foreign = assignment_claim(project=other_project, annotator=stranger)
    assert foreign.pair_id == other.pk
    assert client.post(vote_url(other_project, foreign.pk), {"choice": "left"}).status_code == 404
    assert client.post(vote_url(project, foreign.pk), {"choice": "left"}).status_code == 404
    assert not Vote.objects.exists()


def test_anonymous_visitors_are_sent_to_log_in(client, project):
    response = client.get(reverse("annotate", args=[project.slug]))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_project_page_links_annotators_to_the_workbench(client_for, alice, carol, project):
    html = client_for(alice).get(reverse("project-detail", args=[project.slug])).content.decode()
    assert f'href="{reverse("annotate", args=[project.slug])}"' in html
    assert reverse("curator-queue", args=[project.slug]) not in html


def test_voting_takes_a_small_fixed_number_of_queries(
    page, alice, project, django_assert_max_num_queries
):
    client, _ = page
    for _ in range(2):
        assignment = Assignment.objects.get(annotator=alice, status=Assignment.Status.LIVE)
        with django_assert_max_num_queries(17):  # 14 once its statements are prepared
            client.post(vote_url(project, assignment.pk), {"choice": "left"}, **HTMX)
    assert Pair.objects.filter(status=PairStatus.ANNOTATING).count() >= 2


def test_vote_and_skip_answer_outsiders_roles_and_odd_ids_as_the_page_does(
    client_for, alice, carol, eve, project, pairs
):
    """The vote and the skip read the assignment, its project and the voter's role in one
    statement; whoever may not act on it gets the page's answer: outsiders 404, curators
    403, an id no assignment has (one beyond any bigint included) 404."""
    client = client_for(alice)
    client.get(reverse("annotate", args=[project.slug]))
    held = Assignment.objects.get(annotator=alice)
    for user, code in ((eve, 404), (carol, 403)):
        other = client_for(user)
        assert other.post(vote_url(project, held.pk), {"choice": "left"}).status_code == code
        assert other.post(skip_url(project, held.pk), {"reason": "broken"}).status_code == code
    client = client_for(alice)  # the one test client, logged in as each in turn
    for missing in (held.pk + 1000, 10**30):
        assert client.post(vote_url(project, missing), {"choice": "left"}).status_code == 404
        assert client.post(skip_url(project, missing), {"reason": "broken"}).status_code == 404
    elsewhere = reverse("annotate-vote", args=["no-such-project", held.pk])
    assert client.post(elsewhere, {"choice": "left"}).status_code == 404
    assert not Vote.objects.exists()
    assert not Skip.objects.exists()
    assert client.post(vote_url(project, held.pk), {"choice": "left"}).status_code == 302
    assert Vote.objects.filter(annotator=alice, assignment=held).count() == 1
