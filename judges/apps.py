from __future__ import annotations

from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"

    def ready(self) -> None:
        # The agreement report lives in annotation, which never imports judges: the judges
        # add their section to it from here.
        from annotation.core.report_sections import register_report_section
        from judges.runs.reports import judge_agreement_section

        register_report_section("per_judge", judge_agreement_section)

        from annotation.core.pair_sections import register_pair_section
        from judges.runs.selectors import pair_verdicts

        register_pair_section("judges", "judges/pair_verdicts.html", pair_verdicts)
