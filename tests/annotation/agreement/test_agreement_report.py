"""The agreement report over the database: the figures on constructed votes equal the ones
worked out by hand and those of ``annotation.agreement.statistics`` on the same votes; which
votes count (sources, gold pairs, adjudications); the command and the API give the same numbers."""

from __future__ import annotations

import json
import random
from io import StringIO

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.agreement import statistics as agreement
from annotation.agreement.report import HISTORY_POINTS, agreement_report_build
from annotation.agreement.services import agreement_report_recompute
from annotation.core.errors import Conflict
from annotation.core.report_sections import REPORT_KEYS
from annotation.models import AgreementReport, PairStatus, PriorAnnotation, Vote
from tests.annotation.queue.conftest import annotator
from tests.factories import PairFactory, VoteFactory

SIDE_OF = {1: "B", 2: "tie", 3: "A"}
# Ternary canonical values of the constructed project, per pair and annotator.
VOTES = {
    "p1": {"alice": 3, "bob": 3, "gina": 3},
    "p2": {"alice": 3, "bob": 1, "gina": 3},
    "p3": {"alice": 1, "bob": 1, "gina": 2},
}
SECONDS = {"alice": 2, "bob": 10, "gina": 12}  # alice is implausibly fast
PRIORS = {"p1": [3, 1], "p2": [1]}


def add_vote(pair, user, value: int, *, seconds: float | None = None, **fields) -> Vote:
    return VoteFactory(
        pair=pair,
        annotator=user,
        side=SIDE_OF[value] if pair.project.scale != "likert6" else ("A" if value >= 4 else "B"),
        value=value,
        left_is_a=True,
        time_on_task_ms=None if seconds is None else int(seconds * 1000),
        **fields,
    )


@pytest.fixture
def constructed(project, alice, bob, carol):
    """Three pairs with three votes each (tasks t2i, t2i, edit; p1 has a criterion), prior
    annotations on p1 and p2, a gold pair alice gets right and bob wrong, and an adjudication
    by carol."""
    users = {"alice": alice, "bob": bob, "gina": annotator(project, "gina")}
    pairs = {
        "p1": PairFactory(project=project, external_id="p1", task="t2i", criterion="text"),
        "p2": PairFactory(project=project, external_id="p2", task="t2i"),
        "p3": PairFactory(project=project, external_id="p3", task="edit"),
    }
    for external_id, by_user in VOTES.items():
        for username, value in by_user.items():
            add_vote(pairs[external_id], users[username], value, seconds=SECONDS[username])
    for external_id, values in PRIORS.items():
        for position, value in enumerate(values):
            PriorAnnotation.objects.create(
                pair=pairs[external_id], position=position, value=value, label=SIDE_OF[value]
            )
    gold = PairFactory(project=project, external_id="gold", is_gold=True, gold_label="A")
    add_vote(gold, alice, 3, seconds=1)
    add_vote(gold, bob, 1, seconds=30)
    add_vote(pairs["p2"], carol, 1, is_adjudication=True)
    return pairs


def package_alpha(by_pair: dict[str, dict[str, int]], level: str) -> float:
    raters = sorted({rater for votes in by_pair.values() for rater in votes})
    matrix = [[by_pair[p].get(r, np.nan) for p in by_pair] for r in raters]
    return krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)


def test_the_report_has_exactly_the_documented_keys(constructed, project):
    report = agreement_report_build(project=project, source="votes")
    assert set(report) == REPORT_KEYS | {"per_judge"}
    assert set(report["krippendorff_alpha"]) == {"nominal", "ordinal", "interval", "side"}
    assert set(report["alpha_ci95"]) == {"nominal", "ordinal", "interval", "side"}
    json.dumps(report, allow_nan=False)  # strict JSON: no NaN anywhere


def test_the_report_of_votes_equals_the_figures_worked_out_by_hand(constructed, project):
    report = agreement_report_build(project=project, source="votes")
    assert (report["votes"], report["pairs"], report["annotators"]) == (9, 3, 3)
    # Sure votes (ties left out): p1 3 of 3 agreeing pairs of votes, p2 1 of 3, p3 1 of 1.
    assert report["pairwise_agreement"] == pytest.approx(5 / 7)
    assert report["unanimous_share"] == pytest.approx(1 / 3)
    # P = (1 + 1/3 + 1/3) / 3 = 5/9; side shares 3/9 B, 1/9 tie, 5/9 A: Pe = 35/81.
    assert report["fleiss_kappa"] == pytest.approx((5 / 9 - 35 / 81) / (1 - 35 / 81))
    for level in ("nominal", "ordinal", "interval"):
        assert report["krippendorff_alpha"][level] == pytest.approx(package_alpha(VOTES, level))
    # Ternary sides are its values, so side alpha is nominal alpha.
    assert report["krippendorff_alpha"]["side"] == pytest.approx(package_alpha(VOTES, "nominal"))
    low, high = report["alpha_ci95"]["interval"]
    assert low <= report["krippendorff_alpha"]["interval"] <= high
    assert report["value_distribution"] == {"1": 3, "2": 1, "3": 5}
    assert report["pairs_by_status"] == {status: 0 for status in PairStatus.values} | {
        "imported": 4
    }
    assert (report["project"], report["scale"], report["rule"]) == ("demo", "ternary", "majority")


def test_tasks_and_criteria_get_the_same_figures_on_their_votes(constructed, project):
    report = agreement_report_build(project=project, source="votes")
    assert list(report["by_task"]) == ["t2i", "edit"]  # most votes first
    t2i = report["by_task"]["t2i"]
    assert (t2i["votes"], t2i["pairs"], t2i["annotators"]) == (6, 2, 3)
    assert t2i["pairwise_agreement"] == pytest.approx(4 / 6)
    assert t2i["krippendorff_alpha"]["nominal"] == pytest.approx(
        package_alpha({p: VOTES[p] for p in ("p1", "p2")}, "nominal")
    )
    assert report["by_task"]["edit"]["unanimous_share"] == 0
    assert report["by_task"]["edit"]["fleiss_kappa"] == pytest.approx(
        agreement.fleiss_kappa(
            agreement.Ratings.from_tuples(
                [("p3", r, v) for r, v in VOTES["p3"].items()], scale="ternary"
            )
        )
    )
    assert report["by_criterion"]["text"]["unanimous_share"] == 1
    assert report["by_criterion"][""]["votes"] == 6


def test_per_annotator_figures_and_flags(constructed, project):
    rows = {
        row["annotator"]: row
        for row in agreement_report_build(project=project, source="votes")["per_annotator"]
    }
    assert set(rows) == {"alice", "bob", "gina"}  # carol adjudicated: no annotator's vote
    alice, bob, gina = rows["alice"], rows["bob"], rows["gina"]
    # Leave-one-out: the other two must agree. alice agrees on p1 (p2, p3 have no majority of
    # the others); bob agrees on p1 and not on p2; gina on p1 and not on p3.
    assert (alice["agreement_with_others"], bob["agreement_with_others"]) == (1.0, 0.5)
    assert gina["agreement_with_others"] == 0.5
    # Gold votes are not votes in agreement: three each, and only gold accuracy counts them.
    assert (alice["votes"], alice["gold_votes"], alice["gold_accuracy"]) == (3, 1, 1.0)
    assert (bob["votes"], bob["gold_votes"], bob["gold_accuracy"]) == (3, 1, 0.0)
    assert (gina["gold_votes"], gina["gold_accuracy"]) == (0, None)
    assert alice["median_seconds"] == 2.0  # the gold vote's 1 s is not among them
    assert alice["flags"] == ["too_fast"]
    assert bob["flags"] == ["low_agreement", "low_gold_accuracy"]
    assert gina["flags"] == ["low_agreement"]
    assert all(row["source"] == "vote" and row["cohen_kappa"] == {} for row in rows.values())


def test_prior_annotations_are_external_raters_by_position(constructed, project):
    prior = agreement_report_build(project=project, source="prior")
    assert (prior["votes"], prior["pairs"], prior["annotators"]) == (3, 2, 2)
    rows = {row["annotator"]: row for row in prior["per_annotator"]}
    assert {name: row["votes"] for name, row in rows.items()} == {"prior #1": 2, "prior #2": 1}
    assert all(row["source"] == "prior" and row["median_seconds"] is None for row in rows.values())
    by_pair = {p: {f"prior #{i + 1}": v for i, v in enumerate(vs)} for p, vs in PRIORS.items()}
    assert prior["krippendorff_alpha"]["interval"] == pytest.approx(
        package_alpha(by_pair, "interval")
    )

    both = agreement_report_build(project=project, source="all")
    assert (both["votes"], both["pairs"], both["annotators"]) == (12, 3, 5)
    assert both["krippendorff_alpha"]["nominal"] == pytest.approx(
        package_alpha({p: VOTES[p] | by_pair.get(p, {}) for p in VOTES}, "nominal")
    )


def test_history_is_cumulative_in_vote_order(constructed, project):
    report = agreement_report_build(project=project, source="all")
    history = report["history"]
    assert len(history) <= HISTORY_POINTS
    assert [point["votes"] for point in history] == list(range(1, 13))
    # Prior annotations come first (imported with their pairs), then votes as they came.
    first_vote = Vote.objects.filter(is_adjudication=False, pair__is_gold=False).order_by("pk")[0]
    assert history[3]["at"] == first_vote.created_at.isoformat()
    assert history[-1]["alpha_side"] == report["krippendorff_alpha"]["side"]
    assert history[-1]["alpha_side_ci95"] == report["alpha_ci95"]["side"]
    assert history[0]["alpha_side"] is None  # one vote pairs with nothing


def test_an_empty_project_has_a_report_of_nothing(project):
    report = agreement_report_build(project=project)
    assert (report["votes"], report["pairs"], report["annotators"]) == (0, 0, 0)
    assert report["krippendorff_alpha"] == dict.fromkeys(("nominal", "ordinal", "interval", "side"))
    assert report["per_annotator"] == []
    assert report["history"] == []
    assert report["by_task"] == {}
    json.dumps(report, allow_nan=False)


def test_a_larger_project_matches_the_agreement_functions(project):
    """Likert6, 120 pairs x 3 of 5 annotators on two tasks: every figure equals what
    ``annotation.agreement.statistics`` gives on the same votes, Cohen's kappa included."""
    project.scale = "likert6"
    project.save(update_fields=["scale"])
    rng = random.Random(7)
    users = [annotator(project, f"rater{i}") for i in range(5)]
    rows = []
    for n in range(120):
        pair = PairFactory(project=project, task="edit" if n % 3 else "t2i")
        for user in rng.sample(users, 3):
            value = rng.randint(1, 6)
            add_vote(pair, user, value, seconds=rng.randint(1, 40))
            rows.append((pair.pk, user.username, value, pair.task))
    report = agreement_report_build(project=project, source="votes")
    for task, figures in [("", report), ("edit", report["by_task"]["edit"])]:
        ratings = agreement.Ratings.from_tuples(
            [(p, u, v) for p, u, v, t in rows if task in ("", t)], scale="likert6"
        )
        for level in agreement.AlphaLevel:
            assert figures["krippendorff_alpha"][level] == pytest.approx(
                agreement.krippendorff_alpha(ratings, level)
            )
            assert figures["alpha_ci95"][level] == pytest.approx(
                list(agreement.bootstrap_alpha_ci(ratings, level))
            )
        assert figures["pairwise_agreement"] == pytest.approx(agreement.pairwise_agreement(ratings))
        assert figures["fleiss_kappa"] == pytest.approx(agreement.fleiss_kappa(ratings))
    ratings = agreement.Ratings.from_tuples([(p, u, v) for p, u, v, _ in rows], scale="likert6")
    expected = {row.rater: row for row in agreement.per_annotator(ratings)}
    for row in report["per_annotator"]:
        assert row["agreement_with_others"] == pytest.approx(
            expected[row["annotator"]].consensus_agreement
        )
        assert row["cohen_kappa"] == pytest.approx(expected[row["annotator"]].kappa)
        assert len(row["cohen_kappa"]) == 4  # 120 pairs x 3 of 5: every two share >= 20


def test_votes_off_the_scale_are_refused_naming_the_value(project, alice):
    # Likert6 votes left behind when the project's scale was changed to ternary.
    VoteFactory(
        pair=PairFactory(project=project), annotator=alice, side="A", value=6, left_is_a=True
    )
    with pytest.raises(Conflict, match=r"do not fit its ternary scale: value: 6"):
        agreement_report_build(project=project)


# ---- The cache, the command and the API ----


def run_command(*args: str) -> str:
    out = StringIO()
    call_command("agreement", *args, stdout=out)
    return out.getvalue()


def agreement_url(slug: str = "demo", source: str | None = None) -> str:
    query = f"?source={source}" if source else ""
    return f"/api/v1/projects/{slug}/agreement/{query}"


def test_the_command_and_the_api_give_the_same_numbers(constructed, project, api_for, dave):
    printed = json.loads(run_command("demo", "--json", "--source", "votes"))
    served = api_for(dave).get(agreement_url(source="votes"))
    assert served.status_code == 200
    assert served.json() == printed
    assert printed["votes"] == 9
    assert printed["per_judge"] == []
    assert json.loads(run_command("demo", "--json", "--source", "votes", "--cached")) == printed


def test_the_api_computes_the_first_report_and_then_serves_the_cache(
    constructed, project, api_for, carol
):
    api = api_for(carol)
    first = api.get(agreement_url()).json()
    assert first["source"] == "all"
    assert first["votes"] == 12
    add_vote(PairFactory(project=project), carol, 3)
    assert api.get(agreement_url()).json() == first  # the cache, until it is refreshed
    cached = AgreementReport.objects.get(project=project, source="all")
    assert cached.votes_seen == 12
    assert cached.data["computed_at"] == cached.computed_at.isoformat()
    assert json.loads(run_command("demo", "--json"))["votes"] == 13
    assert api.get(agreement_url()).json()["votes"] == 13


def test_the_readable_summary(constructed, project):
    out = run_command("demo", "--source", "votes")
    assert "Agreement in demo (votes, ternary" in out
    assert "9 votes on 3 pairs by 3 annotators" in out
    assert "pairwise agreement 0.714" in out
    assert "Task t2i: 6 votes" in out
    assert "Annotator alice: 3 votes, agreement with others 1.000, median 2.0 s" in out
    assert "Annotator bob: 3 votes" in out
    assert "[low_agreement, low_gold_accuracy]" in out


def test_the_command_refuses_unknown_projects_and_missing_caches(project):
    with pytest.raises(CommandError, match="No project with slug 'nope'"):
        run_command("nope")
    with pytest.raises(CommandError, match="no cached report over prior; run without --cached"):
        run_command("demo", "--cached", "--source", "prior")


def test_only_curators_and_researchers_see_agreement(
    constructed, project, api_for, alice, carol, dave, eve
):
    assert api_for(carol).get(agreement_url()).status_code == 200
    assert api_for(dave).get(agreement_url()).status_code == 200
    assert api_for(alice).get(agreement_url()).status_code == 403
    assert api_for(alice).post(agreement_url()).status_code == 403
    assert api_for(eve).get(agreement_url()).status_code == 404
    assert api_for(eve).post(agreement_url()).status_code == 404
    assert not AgreementReport.objects.filter(source="votes").exists()


def test_an_unknown_source_is_refused_naming_the_field(project, api_for, dave):
    response = api_for(dave).get(agreement_url(source="everything"))
    assert response.status_code == 400
    assert "source" in response.json()


def test_a_newer_report_is_never_replaced_by_an_older_one(constructed, project):
    newer = agreement_report_recompute(project=project, source="votes")
    AgreementReport.objects.filter(pk=newer.pk).update(
        computed_at=newer.computed_at.replace(year=2999)
    )
    kept = agreement_report_recompute(project=project, source="votes")
    assert kept.computed_at.year == 2999
