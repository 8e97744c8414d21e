from __future__ import annotations

import json

from django.core.management.base import CommandError

from annotation.agreement.selectors import agreement_report_cached
from annotation.agreement.services import agreement_report_recompute
from annotation.agreement.statistics import AlphaLevel
from annotation.core.errors import DomainError
from annotation.management.projects import ProjectCommand
from annotation.models import ReportSource


def _figure(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _interval(ci: list[float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"


class Command(ProjectCommand):
    help = (
        "The agreement report of a project (docs/agreement.md, 'The report'): computed now "
        "and cached (what the API and the Agreement page serve), or the cached one."
    )

    def add_project_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument(
            "--source",
            choices=ReportSource.values,
            default=ReportSource.ALL,
            help="the project's votes, its prior annotations (external raters) or all "
            "(default all)",
        )
        parser.add_argument(
            "--cached", action="store_true", help="print the cached report instead of computing"
        )

    def handle_project(self, project, **options):
        source = options["source"]
        if options["cached"]:
            report = agreement_report_cached(project=project, source=source)
            if report is None:
                raise CommandError(
                    f"{project.slug} has no cached report over {source}; run without --cached"
                )
        else:
            try:
                report = agreement_report_recompute(project=project, source=source)
            except DomainError as exc:
                raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(report.data, indent=2))
        else:
            self._summary(report.data)

    def _summary(self, data: dict) -> None:
        write = self.stdout.write
        write(
            f"Agreement in {data['project']} ({data['source']}, {data['scale']}, computed "
            f"{data['computed_at']}): {data['votes']} votes on {data['pairs']} pairs by "
            f"{data['annotators']} annotators"
        )
        for level in AlphaLevel:
            write(
                f"  alpha {level.value:<9}{_figure(data['krippendorff_alpha'][level])}"
                f"{_interval(data['alpha_ci95'][level])}"
            )
        write(f"  pairwise agreement {_figure(data['pairwise_agreement'])}")
        write(f"  unanimous share    {_figure(data['unanimous_share'])}")
        write(f"  Fleiss' kappa      {_figure(data['fleiss_kappa'])}")
        for title, groups in (("Task", data["by_task"]), ("Criterion", data["by_criterion"])):
            for name, group in groups.items():
                write(
                    f"{title} {name or '(none)'}: {group['votes']} votes, alpha (side) "
                    f"{_figure(group['krippendorff_alpha']['side'])}, pairwise agreement "
                    f"{_figure(group['pairwise_agreement'])}"
                )
        for row in data["per_annotator"]:
            flags = f"  [{', '.join(row['flags'])}]" if row["flags"] else ""
            write(
                f"Annotator {row['annotator']}: {row['votes']} votes, agreement with others "
                f"{_figure(row['agreement_with_others'])}, median "
                f"{_figure(row['median_seconds'], 1)} s, gold {_figure(row['gold_accuracy'])} "
                f"of {row['gold_votes']}{flags}"
            )
        for row in data.get("per_judge", []):
            write(
                f"Judge {row['judge']}: agrees with people on {_figure(row['agreement'])} of "
                f"{row['pairs']} pairs (AB {_figure(row['by_order']['AB'])}, "
                f"BA {_figure(row['by_order']['BA'])})"
            )
