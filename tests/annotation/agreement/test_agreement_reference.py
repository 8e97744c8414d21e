"""The agreement report compares the project's consensus with the imported reference labels:
share agreeing, Cohen's kappa and the confusion matrix, overall and by task, worked out by hand
(docs/agreement.md, "Against the reference labels")."""

from __future__ import annotations

import json
import re
from html import unescape
from io import StringIO

import pytest
from django.core.management import call_command

from annotation.agreement.report import reference_comparison
from annotation.models import PairStatus
from tests.factories import PairFactory

pytestmark = pytest.mark.django_db

# (task, consensus, reference) of the pairs with both.
DECIDED = [
    ("t2i", "A", "A"),
    ("t2i", "B", "A"),
    ("t2i", "A", "A"),
    ("t2i", "tie", "B"),
    ("edit", "B", "B"),
    ("edit", "A", "B"),
]


@pytest.fixture
def study(project):
    for index, (task, consensus, reference) in enumerate(DECIDED):
        PairFactory(
            project=project,
            external_id=f"p{index}",
            task=task,
            status=PairStatus.CONSENSUS,
            consensus_label=consensus,
            prior_label=reference,
        )
    # A reference label without a consensus yet, and a gold pair: neither is compared.
    PairFactory(project=project, task="t2i", prior_label="A")
    PairFactory(
        project=project,
        task="t2i",
        status=PairStatus.CONSENSUS,
        consensus_label="B",
        prior_label="A",
        is_gold=True,
        gold_label="B",
    )
    return project


def test_share_kappa_and_confusion_worked_out_by_hand(study):
    report = reference_comparison(study)
    assert (report["with_reference"], report["pairs"], report["agreeing"]) == (7, 6, 3)
    assert report["agreement"] == pytest.approx(0.5)
    # Observed 3/6; chance: consensus A 3, tie 1, B 2 against reference A 3, tie 0, B 3:
    # (9 + 0 + 6) / 36; kappa (1/2 - 15/36) / (1 - 15/36) = 1/7.
    assert report["cohen_kappa"] == pytest.approx(1 / 7)
    assert report["confusion"] == {
        "A": {"A": 2, "tie": 0, "B": 1},
        "tie": {"A": 0, "tie": 0, "B": 1},
        "B": {"A": 1, "tie": 0, "B": 1},
    }
    t2i, edit = report["by_task"]["t2i"], report["by_task"]["edit"]
    # t2i: observed 1/2, chance (2*3 + 1*1 + 1*0) / 16 = 7/16: kappa 1/9.
    assert (t2i["pairs"], t2i["agreement"]) == (4, 0.5)
    assert t2i["cohen_kappa"] == pytest.approx(1 / 9)
    # edit: observed 1/2 and chance 1/2: kappa 0.
    assert (edit["pairs"], edit["agreement"], edit["cohen_kappa"]) == (2, 0.5, 0.0)


def test_the_report_the_command_and_the_page_show_it(study, client_for, dave):
    out = StringIO()
    call_command("agreement", "demo", "--json", stdout=out)
    printed = json.loads(out.getvalue())["reference_labels"]
    assert printed["agreement"] == 0.5
    assert printed["cohen_kappa"] == pytest.approx(1 / 7)
    page = client_for(dave).get("/p/demo/agreement/")
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", page.content.decode())).split())
    assert "Against the reference labels 6" in text
    assert "Share agreeing 0.500 Cohen's kappa 0.143 Agreeing 3 of 6" in text
    assert "t2i 4 0.500 0.111" in text


def test_a_project_without_reference_labels_says_nothing_about_them(project, client_for, dave):
    PairFactory(project=project, status=PairStatus.CONSENSUS, consensus_label="A")
    assert reference_comparison(project)["with_reference"] == 0
    page = client_for(dave).get("/p/demo/agreement/")
    assert "Against the reference labels" not in page.content.decode()
