from __future__ import annotations

from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"

    def ready(self) -> None:
        from annotation.pair_sections import register_pair_section
        from judges.selectors import pair_verdicts

        register_pair_section("judges", "judges/pair_verdicts.html", pair_verdicts)
