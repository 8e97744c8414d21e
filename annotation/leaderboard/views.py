"""The Model leaderboard tab (docs/leaderboard.md, "Where it shows"): the response models
ranked by Bradley-Terry strength, for curators and researchers. It names models, so annotators
get 403 and outsiders 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.leaderboard.page import model_board_context


@require_GET
@login_required
def model_leaderboard_page(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    context = {"project": project, "role": role, **model_board_context(project, request.GET)}
    return render(request, "annotation/model_leaderboard.html", context)
