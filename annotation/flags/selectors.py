"""Reading flags: a pair's for its page, an annotator's own with the replies to them, a
project's for the curators, and the access helper every curator's view and endpoint uses."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet
from django.http import Http404

from annotation.core.access import CURATORS, get_project_for_user
from annotation.models import Flag, FlagComment, Project

# What My flags shows of a pair: the start of its prompt's text (never a model or a vote).
PROMPT_EXCERPT_CHARS = 160
FLAG_STATES = ("open", "resolved", "all")


def _with_comments(flags: QuerySet[Flag]) -> QuerySet[Flag]:
    comments = FlagComment.objects.select_related("author").order_by("created_at", "pk")
    return flags.prefetch_related(Prefetch("comments", queryset=comments))


def pair_flags(*, pair) -> list[Flag]:
    """Every flag on ``pair``, oldest first, with its author, resolver and replies."""
    flags = Flag.objects.filter(pair=pair).select_related("annotator", "resolved_by")
    return list(_with_comments(flags).order_by("created_at", "pk"))


def annotator_flags(*, project: Project, annotator) -> list[Flag]:
    """The annotator's own flags in ``project``, newest first, with the replies to them and
    their pair's prompt (for ``prompt_excerpt``)."""
    flags = Flag.objects.filter(pair__project=project, annotator=annotator).select_related(
        "pair__prompt"
    )
    return list(_with_comments(flags).order_by("-created_at", "-pk"))


def prompt_excerpt(flag: Flag) -> str:
    text = " ".join(flag.pair.prompt.text.split())
    return text if len(text) <= PROMPT_EXCERPT_CHARS else f"{text[:PROMPT_EXCERPT_CHARS]}…"


def answered_flag_count(*, project: Project, annotator) -> int:
    """How many of the annotator's flags in ``project`` have a reply."""
    return (
        Flag.objects.filter(pair__project=project, annotator=annotator, comments__isnull=False)
        .distinct()
        .count()
    )


def open_flag_count(*, project: Project) -> int:
    return Flag.objects.filter(pair__project=project, resolved_at__isnull=True).count()


def project_flags(*, project: Project, state: str = "open") -> QuerySet[Flag]:
    """A project's flags in ``state`` (``FLAG_STATES``), oldest first, for the curators."""
    flags = Flag.objects.filter(pair__project=project)
    if state == "open":
        flags = flags.filter(resolved_at__isnull=True)
    elif state == "resolved":
        flags = flags.filter(resolved_at__isnull=False)
    flags = flags.select_related("pair", "annotator", "resolved_by")
    return _with_comments(flags).order_by("created_at", "pk")


def get_flag_for_user(user, slug: str, flag_id: int, roles=CURATORS) -> tuple[Flag, Project]:
    """The flag with this id in the user's project: outsiders 404, members without one of
    ``roles`` 403 (``get_project_for_user``), a flag of another project 404."""
    project, _ = get_project_for_user(user, slug, roles=roles)
    flag = (
        Flag.objects.filter(pk=flag_id, pair__project=project)
        .select_related("pair", "annotator", "resolved_by")
        .first()
    )
    if flag is None:
        raise Http404("No such flag")
    return flag, project
