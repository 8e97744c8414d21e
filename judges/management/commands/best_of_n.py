from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from judges.best_of_n.services import METHODS, best_of_n, calls_needed, parse_jsonl
from judges.models import Judge


class Command(BaseCommand):
    help = (
        "Pick the best of N candidate responses per prompt with a judge, by scores (every "
        "candidate against every other) or by a knockout tournament, each comparison judged "
        "in both orders. FILE: JSONL, one prompt per line with its candidates "
        "(docs/judges-evaluation.md, 'Best-of-N'). Prints one JSON line per prompt."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="the judge's name")
        parser.add_argument("file", help="JSONL of prompts and their candidates")
        parser.add_argument("--method", choices=METHODS, default="knockout")

    def handle(self, *args, **options):
        judge = Judge.objects.filter(name=options["name"]).first()
        if judge is None:
            raise CommandError(f"No judge {options['name']!r}")
        path = Path(options["file"])
        try:
            with path.open(encoding="utf-8") as lines:
                items = parse_jsonl(lines)
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise CommandError(f"{path}: not UTF-8 text") from None
        except ValidationError as exc:
            raise CommandError("\n".join(exc.messages)) from None
        self.stderr.write(
            f"{len(items)} prompts, {calls_needed(items, options['method'])} judge calls "
            f"by {options['method']}"
        )
        try:
            outcome = best_of_n(judge=judge, items=items, method=options["method"])
        except ValidationError as exc:  # a disabled judge, for one
            raise CommandError("\n".join(exc.messages)) from None
        for result in outcome["results"]:
            self.stdout.write(json.dumps(result))
        self.stderr.write(f"{outcome['calls']} calls made")
