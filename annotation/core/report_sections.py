"""Sections other apps add to the agreement report (docs/agreement.md, "The report").

The report is built here, in ``annotation``, which never imports ``judges``; the judges app
registers what it knows (how its judges agree with people) from its ``AppConfig.ready()``, and
the report calls each registered section with the project.
"""

from __future__ import annotations

from collections.abc import Callable

from annotation.models import Project

# A section: called with the project, returns what the report holds under its name (JSON).
ReportSection = Callable[..., object]

# The keys the report builds itself (annotation/agreement/report.py).
REPORT_KEYS = frozenset(
    {
        "project",
        "source",
        "computed_at",
        "scale",
        "rule",
        "votes",
        "pairs",
        "annotators",
        "krippendorff_alpha",
        "alpha_ci95",
        "pairwise_agreement",
        "unanimous_share",
        "fleiss_kappa",
        "value_distribution",
        "pairs_by_status",
        "by_task",
        "by_criterion",
        "per_annotator",
        "history",
        "reference_labels",
    }
)

_SECTIONS: dict[str, ReportSection] = {}


def register_report_section(name: str, section: ReportSection) -> None:
    """Adds ``section`` to every report under ``name``, which must not be one of the report's
    own keys. Registering a name again replaces its section."""
    if name in REPORT_KEYS:
        raise ValueError(f"name: {name!r} is one of the report's own keys")
    _SECTIONS[name] = section


def report_sections(*, project: Project) -> dict[str, object]:
    """What every registered section says about ``project``, by name."""
    return {name: section(project=project) for name, section in _SECTIONS.items()}
