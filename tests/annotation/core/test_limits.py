"""One limit per field, the same in the page's form, the API's serializer and the service
(annotation/core/limits.py): what one refuses, the others refuse."""

from __future__ import annotations

import pytest

from annotation.core.errors import InvalidInput
from annotation.core.limits import (
    MAX_LEASE_AGE_MINUTES,
    MAX_PRIORITY,
    MAX_RATIONALE_CHARS,
    MAX_TIME_ON_TASK_MS,
    MIN_PRIORITY,
)
from annotation.models import Vote
from annotation.pairs import services as pair_services
from annotation.queue.services import claim as queue_claim
from annotation.queue.services import levers
from annotation.queue.services import votes as queue_votes


@pytest.fixture
def lease(project, alice, queued_pairs):
    return queue_claim.assignment_claim(project=project, annotator=alice)


def test_the_service_refuses_a_rationale_over_the_limit(lease, alice):
    with pytest.raises(InvalidInput, match=f"rationale: at most {MAX_RATIONALE_CHARS}"):
        queue_votes.vote_submit(
            assignment=lease,
            annotator=alice,
            choice="left",
            rationale="x" * (MAX_RATIONALE_CHARS + 1),
        )
    assert not Vote.objects.exists()


def test_the_service_refuses_a_time_on_task_over_a_day(lease, alice):
    with pytest.raises(InvalidInput, match="time_on_task_ms"):
        queue_votes.vote_submit(
            assignment=lease,
            annotator=alice,
            choice="left",
            time_on_task_ms=MAX_TIME_ON_TASK_MS + 1,
        )
    vote, _ = queue_votes.vote_submit(
        assignment=lease, annotator=alice, choice="left", time_on_task_ms=MAX_TIME_ON_TASK_MS
    )
    assert vote.time_on_task_ms == MAX_TIME_ON_TASK_MS


@pytest.mark.parametrize("priority", [MIN_PRIORITY - 1, MAX_PRIORITY + 1, 32767])
def test_the_service_refuses_a_priority_the_form_refuses(project, queued_pairs, priority):
    with pytest.raises(InvalidInput, match=f"from {MIN_PRIORITY} to {MAX_PRIORITY}"):
        pair_services.pairs_set_priority(
            project=project, pair_ids=[queued_pairs[0].pk], priority=priority
        )


def test_the_service_refuses_a_lease_age_the_form_refuses(project):
    with pytest.raises(InvalidInput, match="older_than_minutes"):
        levers.leases_release(project=project, older_than_minutes=MAX_LEASE_AGE_MINUTES + 1)


def test_the_page_and_the_api_refuse_the_same_rationale(client_for, api_for, alice, lease):
    too_long = "x" * (MAX_RATIONALE_CHARS + 1)
    api = api_for(alice).post(
        f"/api/v1/assignments/{lease.pk}/vote/",
        {"choice": "left", "rationale": too_long},
        format="json",
    )
    assert api.status_code == 400
    page = client_for(alice).post(
        f"/p/demo/annotate/{lease.pk}/vote/",
        {"choice": "left", "rationale": too_long},
        HTTP_HX_REQUEST="true",
    )
    assert "rationale" in page.content.decode()
    assert not Vote.objects.exists()
