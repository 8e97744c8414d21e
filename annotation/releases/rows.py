"""The pairs a selection takes, read from the database in chunks (docs/releases.md,
"Selection"): first every candidate's id, external id and prompt in one narrow query (sorted
here, bytewise, the same on every database), then the content and votes of one chunk at a
time, so a build holds one chunk of rows, never the whole release."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q, QuerySet

from annotation.agreement import side_of_value
from annotation.models import (
    Adjudication,
    Pair,
    PairStatus,
    PriorAnnotation,
    Project,
    Side,
    Vote,
)
from annotation.releases.formats import ReleasePair, ReleaseResponse
from annotation.releases.selection import Selection

CHUNK_PAIRS = 5000


class Source:
    CONSENSUS = "consensus"
    ADJUDICATED = "adjudicated"
    ENSEMBLE = "ensemble"


@dataclass(frozen=True)
class Candidate:
    """A pair the selection's query takes, before its agreement is known."""

    pk: int
    external_id: str
    split: str


def _live_adjudication():
    return Exists(Adjudication.objects.filter(pair_id=OuterRef("pk"), superseded_at__isnull=True))


def selected_pairs(project: Project, selection: Selection) -> QuerySet:
    """The project's pairs the selection's sources and filters take (all but
    ``min_agreement``, which needs each pair's votes). Never gold pairs."""
    pairs = Pair.objects.filter(project=project, is_gold=False).annotate(
        adjudicated=_live_adjudication()
    )
    decided = Q(status=PairStatus.CONSENSUS)
    if not selection.include_ties:
        decided &= ~Q(consensus_label=Side.TIE)
    if not selection.include_adjudicated:
        decided &= Q(adjudicated=False)
    if not selection.include_consensus:
        decided &= Q(adjudicated=True)
    which = decided if (selection.include_consensus or selection.include_adjudicated) else Q()
    if selection.include_ensemble:
        easy = Q(status=PairStatus.EASY) & ~Q(ensemble_label="")
        if not selection.include_ties:
            easy &= ~Q(ensemble_label=Side.TIE)
        which = (which | easy) if which else easy
    pairs = pairs.filter(which)
    if selection.tasks:
        pairs = pairs.filter(task__in=selection.tasks)
    if selection.criteria:
        pairs = pairs.filter(criterion__in=selection.criteria)
    return pairs


def candidates(project: Project, selection: Selection) -> list[Candidate]:
    """Every pair the query takes, with its split, sorted by external id (code point order,
    which is UTF-8 byte order)."""
    rows = selected_pairs(project, selection).values_list("pk", "external_id", "prompt_id")
    found = [
        Candidate(pk=pk, external_id=external_id, split=selection.split_of(str(prompt)))
        for pk, external_id, prompt in rows.iterator(chunk_size=CHUNK_PAIRS)
    ]
    found.sort(key=lambda candidate: candidate.external_id)
    return found


_COLUMNS = (
    "pk",
    "status",
    "task",
    "criterion",
    "consensus_label",
    "ensemble_label",
    "ensemble_agreement",
    "ensemble_summary",
    "adjudicated",
    "prompt__content",
    "response_a__model_name",
    "response_a__content",
    "response_b__model_name",
    "response_b__content",
)


def _human_values(pair_ids: list[int]) -> dict[int, list[tuple[int, int]]]:
    """Each pair's human values as ``(rater, value)``: prior annotations in position order
    (rater -N for the import's "prior #N"), then votes (never an adjudication) in the order
    they were given (rater: the annotator's id)."""
    values: dict[int, list[tuple[int, int]]] = defaultdict(list)
    priors = (
        PriorAnnotation.objects.filter(pair_id__in=pair_ids, value__isnull=False)
        .order_by("pair_id", "position")
        .values_list("pair_id", "position", "value")
    )
    for pair_id, position, prior in priors:
        values[pair_id].append((-(position + 1), int(prior)))  # type: ignore[arg-type]
    votes = (
        Vote.objects.filter(pair_id__in=pair_ids, is_adjudication=False)
        .order_by("pair_id", "created_at", "pk")
        .values_list("pair_id", "annotator_id", "value")
    )
    for pair_id, annotator_id, value in votes:
        values[pair_id].append((annotator_id, value))
    return values


def agreement_of(scale: str, label: str, values: list[int]) -> float | None:
    """The share of ``values`` that lean to ``label`` (docs/releases.md, "Agreement of a
    pair"); None without values."""
    if not values:
        return None
    return sum(1 for value in values if side_of_value(scale, value) == label) / len(values)


def release_pairs(
    project: Project, selection: Selection, chunk: list[Candidate]
) -> Iterator[ReleasePair]:
    """The chunk's pairs in its order, with their content, votes and agreement; pairs
    ``min_agreement`` leaves out are skipped."""
    ids = [candidate.pk for candidate in chunk]
    rows = {
        row[0]: row
        for row in Pair.objects.filter(pk__in=ids)
        .annotate(adjudicated=_live_adjudication())
        .values_list(*_COLUMNS)
    }
    values = _human_values(ids)
    for candidate in chunk:
        row = rows.get(candidate.pk)
        if row is None:  # deleted meanwhile (with its project only)
            continue
        (
            pk,
            status,
            task,
            criterion,
            consensus_label,
            ensemble_label,
            ensemble_agreement,
            ensemble_summary,
            adjudicated,
            prompt,
            model_a,
            content_a,
            model_b,
            content_b,
        ) = row
        rated = values.get(pk, [])
        votes = [value for _, value in rated]
        if status == PairStatus.EASY:
            label, source, agreement = ensemble_label, Source.ENSEMBLE, ensemble_agreement
        else:
            label = consensus_label
            source = Source.ADJUDICATED if adjudicated else Source.CONSENSUS
            agreement = agreement_of(project.scale, label, votes)
        if selection.min_agreement is not None and (
            agreement is None or agreement < selection.min_agreement
        ):
            continue
        yield ReleasePair(
            pk=pk,
            raters=[rater for rater, _ in rated],
            external_id=candidate.external_id,
            task=task,
            criterion=criterion,
            prompt=prompt,
            response_a=ReleaseResponse(model_a, content_a),
            response_b=ReleaseResponse(model_b, content_b),
            label=label,
            votes=votes,
            agreement=agreement,
            source=source,
            ensemble_label=ensemble_label,
            ensemble_agreement=ensemble_agreement,
            ensemble_summary=ensemble_summary or {},
        )
