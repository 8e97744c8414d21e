"""Reads of agreement: the disputed pairs a curator adjudicates, the cached report, one
annotator's votes."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import (
    Count,
    F,
    Prefetch,
    QuerySet,
)
from django.http import Http404

from annotation.models import (
    Adjudication,
    AgreementReport,
    Membership,
    Pair,
    PairStatus,
    PriorAnnotation,
    Project,
    ReportSource,
    Vote,
)

ADJUDICATION_PAGE_SIZE = 100


def disputed_pairs(*, project: Project) -> QuerySet[Pair]:
    """The adjudication queue: the project's disputed pairs, longest waiting first."""
    return (
        Pair.objects.filter(project=project, status=PairStatus.DISPUTED)
        .annotate(votes_total=Count("votes", distinct=True))
        .order_by(F("decided_at").asc(nulls_first=True), "id")
    )


def pair_for_adjudication(*, project: Project, pair_id: int) -> Pair:
    """One pair of the project with its content, every vote (with its annotator), its prior
    annotations and its adjudications, newest first; 404 for a pair of another project."""
    pair = (
        Pair.objects.select_related("project", "prompt", "response_a", "response_b")
        .prefetch_related(
            Prefetch("votes", queryset=Vote.objects.select_related("annotator").order_by("pk")),
            "prior_annotations",
            Prefetch(
                "adjudications",
                queryset=Adjudication.objects.select_related("curator").order_by(
                    "-created_at", "-pk"
                ),
            ),
        )
        .filter(project=project, pk=pair_id)
        .first()
    )
    if pair is None:
        raise Http404("No such pair")
    return pair


def agreement_report_cached(*, project: Project, source: str) -> AgreementReport | None:
    """The project's cached agreement report over ``source``, or None before the first one
    (``AgreementReport.computed_at`` says how fresh it is)."""
    return AgreementReport.objects.filter(project=project, source=source).first()


ANNOTATOR_VOTES_PAGE_SIZE = 50


def annotator_in_project(*, project: Project, username: str):
    """The user with this username, if they are a member of the project or have voted in it
    (a removed annotator's votes stay); 404 otherwise, so no one learns of other users."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None or not (
        Membership.objects.filter(project=project, user=user).exists()
        or Vote.objects.filter(pair__project=project, annotator=user).exists()
    ):
        raise Http404("No such annotator in this project")
    return user


def annotator_votes(*, project: Project, annotator, before: int | None = None) -> list[Vote]:
    """One page of the annotator's votes in the project, newest first, with their pairs:
    ANNOTATOR_VOTES_PAGE_SIZE of them and one more when an older page follows (keyset on
    the vote id: ``before`` is the last id of the previous page)."""
    votes = Vote.objects.filter(
        pair__project=project, annotator=annotator, is_adjudication=False
    ).select_related("pair")
    if before is not None:
        votes = votes.filter(pk__lt=before)
    return list(votes.order_by("-pk")[: ANNOTATOR_VOTES_PAGE_SIZE + 1])


def report_votes_exceed(*, project: Project, source: str, limit: int) -> bool:
    """Whether an agreement report over ``source`` counts more than ``limit`` votes and prior
    annotations: counted up to the limit only, so the answer stays cheap on a big project."""
    total = 0
    if source != ReportSource.PRIOR:
        votes = Vote.objects.filter(pair__project=project, is_adjudication=False)
        total += votes.values("pk")[: limit + 1].count()
    if source != ReportSource.VOTES:
        priors = PriorAnnotation.objects.filter(pair__project=project, value__isnull=False)
        total += priors.values("pk")[: limit + 1].count()
    return total > limit
