"""My flags: an annotator's own flags in a project and the curators' replies to them. Only
her own: never another annotator's flags, nor any vote."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from annotation.core.access import get_project_for_user
from annotation.flags.selectors import annotator_flags, prompt_excerpt
from annotation.models import Role


@require_GET
@never_cache
@login_required
def my_flags(request, slug: str):
    project, _ = get_project_for_user(request.user, slug, roles=(Role.ANNOTATOR,))
    flags = annotator_flags(project=project, annotator=request.user)
    rows = [{"flag": flag, "prompt": prompt_excerpt(flag)} for flag in flags]
    return render(request, "annotation/my_flags.html", {"project": project, "rows": rows})
