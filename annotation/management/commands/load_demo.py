"""Load the demo: generated pairs in a "demo" project, its users, and its judges.

Beside them, video, audio and 3D pairs (``annotation.media.demo``), generated
too, imported after the filter run and queued for the annotators directly.

The judges are a heuristic sanity check and the two offline judges whose verdicts come with the
generated pairs; a filter run over the new pairs (run here, in this process) marks the pairs
they agree on easy and queues the rest for the annotators, so the curator's filter-run page has
a finished run to show.

Idempotent: running it again adds nothing and prints the logins again. ``--reset`` deletes the
demo project (pairs, votes, imports) first. Refuses to run in production, because the demo
passwords are published in the README.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path

from celery import current_app
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import Count

from annotation.decisions.lifecycle import pairs_enqueue
from annotation.media.demo import demo_media_write
from annotation.models import Pair, PairStatus, Project, Release, Role
from annotation.projects.services import member_add, project_create
from fixtures.make_demo import OFFLINE_JUDGES, generate_demo

DEMO_SLUG = "demo"
DEMO_NAME = "Demo: shapes, edits, how-tos and puzzles"
DEMO_JUDGE = "heuristic-sanity"
# (username, role, password): published in the README, which is why production refuses them.
DEMO_USERS = (
    ("curator", Role.CURATOR, "arbiter-curator"),
    ("researcher", Role.RESEARCHER, "arbiter-researcher"),
    ("annotator1", Role.ANNOTATOR, "arbiter-annotator1"),
    ("annotator2", Role.ANNOTATOR, "arbiter-annotator2"),
    ("annotator3", Role.ANNOTATOR, "arbiter-annotator3"),
)

GUIDELINES = """\
## How to judge

You see a **prompt** and two **responses**, left and right, from two anonymous models.
Pick the response that does better what the prompt asks. Which model wrote which response,
and what other people voted, is hidden on purpose: judge only what you see.

1. **Read the prompt first**, including any input image.
2. **If a criterion is shown** (for example *"judge only the text rendering"*), judge only
   that aspect and ignore everything else, even an obvious flaw elsewhere.
3. **Correctness before polish.** A sharp picture of the wrong thing loses to a slightly soft
   picture of the right thing.

### What "correct" means per task

- **Text to image**: the right objects, colours, counts and layout ("above", "to the left of");
  then sharpness. A blank image is always worse.
- **Image editing**: the instruction is applied to the right object, and nothing else changes.
- **Interleaved how-tos**: every step is right, and each picture matches the sentence before it.
- **Text questions**: the final answer and the reasoning are right; then clarity.

### Tie or not

Choose **tie** only when you truly cannot prefer one response: both equally right or equally
wrong. Small differences count (a slightly off shade, a small slip in a calculation).

### Keys

`1` left · `2` tie · `3` right, or the arrow keys: `←` left, `→` right, `↓` tie.
`u` undoes your last vote for a minute, `g` shows these guidelines, `?` all shortcuts.
Press `s` to skip a pair you cannot judge or whose content is broken; someone else will take it.
"""


class Command(BaseCommand):
    help = "Load the demo project with generated pairs and create demo users (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--pairs", type=int, default=200, help="pairs to generate (>= 4)")
        parser.add_argument(
            "--reset", action="store_true", help="delete the demo project and load it afresh"
        )
        parser.add_argument(
            "--out",
            type=Path,
            default=Path(settings.BASE_DIR) / "fixtures" / "demo",
            help="folder for the generated file and images (default: fixtures/demo)",
        )

    def handle(self, *args, **options):
        if settings.PRODUCTION:
            raise CommandError(
                "load_demo creates users with published passwords: not in production"
            )
        if options["pairs"] < 4:
            raise CommandError("--pairs must be at least 4 (one pair per task)")
        if options["reset"]:
            self._delete_project()

        jsonl = generate_demo(options["out"], pairs=options["pairs"])
        self.stdout.write(f"Generated {options['pairs']} pairs in {jsonl}")
        project = Project.objects.filter(slug=DEMO_SLUG).first() or project_create(
            slug=DEMO_SLUG, name=DEMO_NAME, scale="ternary", overlap=3, guidelines=GUIDELINES
        )
        self._import(jsonl, media_root=options["out"])
        for username, role, password in DEMO_USERS:
            member_add(project=project, username=username, role=role, password=password)
        if self._register_judges():
            self._filter(project)
        # After the filter run: the demo's judges read text and images only.
        media_pairs = demo_media_write(options["out"])
        self.stdout.write(f"Generated video, audio and 3D pairs in {media_pairs}")
        self._import(media_pairs, media_root=options["out"])
        queued = pairs_enqueue(project=project)
        if queued:
            self.stdout.write(f"Queued {queued} pairs for annotators")
        self._print_summary(project)

    def _import(self, path: Path, *, media_root: Path | str) -> None:
        """Imports a generated pairs file into the demo project with ``import_pairs`` (its
        media below ``media_root``), printing what that prints."""
        call_command(
            "import_pairs", DEMO_SLUG, str(path), media_root=str(media_root), stdout=self.stdout
        )

    @transaction.atomic
    def _delete_project(self) -> None:
        project = Project.objects.filter(slug=DEMO_SLUG).first()
        if project is None:
            return
        # Releases and pairs first: the project protects its releases (a published one
        # refuses, and the reset stops), and pairs protect their prompts and responses.
        Release.objects.filter(project=project).delete()
        Pair.objects.filter(project=project).delete()
        project.delete()
        self.stdout.write(f"Deleted the {DEMO_SLUG!r} project")

    def _register_judges(self) -> bool:
        """Adds the demo's judges that are missing; False when the judges app is not installed.
        Through the app registry and the commands, not an import: annotation never imports
        judges, and the demo still loads without that app."""
        if not apps.is_installed("judges"):
            return False
        known = set(apps.get_model("judges", "Judge").objects.values_list("name", flat=True))
        for name, kind in ((DEMO_JUDGE, "heuristic"), *((n, "scores") for n in OFFLINE_JUDGES)):
            if name not in known:
                call_command("add_judge", name, kind=kind, stdout=self.stdout)
        return True

    def _filter(self, project: Project) -> None:
        """A filter run over the pairs not judged yet, its Celery tasks run right here (the
        demo's worker starts only after this command)."""
        if not project.pairs.filter(status=PairStatus.IMPORTED).exists():
            return
        judges = ",".join((DEMO_JUDGE, *OFFLINE_JUDGES))
        with _tasks_inline():
            call_command("run_filter", project.slug, judges=judges, wait=True, stdout=self.stdout)

    def _print_summary(self, project: Project) -> None:
        statuses = dict(
            Pair.objects.filter(project=project)
            .values_list("status")
            .annotate(n=Count("id"))
            .order_by("status")
        )
        counts = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
        self.stdout.write(
            self.style.SUCCESS(
                f"\nDemo project {project.slug!r} is ready: {sum(statuses.values())} pairs"
                f" ({counts})."
            )
        )
        rows = [("role", "username", "password"), *((r, u, p) for u, r, p in DEMO_USERS)]
        widths = [max(len(str(row[i])) for row in rows) for i in range(3)]
        rule = "  ".join("-" * w for w in widths)
        self.stdout.write("\nLog in at /login/ with one of these demo accounts:\n")
        for index, row in enumerate(rows):
            cells = (str(value).ljust(width) for value, width in zip(row, widths, strict=True))
            self.stdout.write(("  " + "  ".join(cells)).rstrip())
            if index == 0:
                self.stdout.write("  " + rule)
        self.stdout.write(
            "\nAnnotators open the demo project and press Annotate; the curator finds the queue,"
            " imports, filter runs and the project's settings there too.\n"
        )


@contextmanager
def _tasks_inline():
    """Celery tasks run in this process while inside, without a line logged for each."""
    previous = current_app.conf.task_always_eager
    # Each task's success, and kombu's note that the file-system broker has no host name.
    quieted = {name: logging.getLogger(name) for name in ("celery.app.trace", "kombu.connection")}
    levels = {name: log.level for name, log in quieted.items()}
    current_app.conf.task_always_eager = True
    for log in quieted.values():
        log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        current_app.conf.task_always_eager = previous
        for name, log in quieted.items():
            log.setLevel(levels[name])
