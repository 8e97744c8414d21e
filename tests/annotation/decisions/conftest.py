"""Voting through the REST API in canonical terms, for the consensus and adjudication tests:
the annotator is shown left and right, the test knows which one is A."""

from __future__ import annotations

from annotation.models import Assignment, Scale


def on_screen(assignment: Assignment, *, scale: str, canonical) -> dict:
    """The vote body that records ``canonical`` (a side A/B/tie, or a likert6 value 1..6)
    through ``assignment``, in the on-screen terms it was shown in."""
    if scale == Scale.LIKERT6:
        return {"value": 7 - canonical if assignment.left_is_a else canonical}
    if canonical == "tie":
        return {"choice": "tie"}
    return {"choice": "left" if (canonical == "A") == assignment.left_is_a else "right"}


def vote_via_api(api, project, canonical) -> Assignment:
    """Claims the next pair for the API client's annotator and votes ``canonical`` on it."""
    claim = api.post(f"/api/v1/projects/{project.slug}/claim/")
    assert claim.status_code == 200, claim.content
    assignment = Assignment.objects.get(pk=claim.json()["id"])
    body = on_screen(assignment, scale=project.scale, canonical=canonical)
    response = api.post(f"/api/v1/assignments/{assignment.pk}/vote/", body, format="json")
    assert response.status_code == 201, response.content
    return assignment
