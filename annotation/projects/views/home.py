from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from annotation.core.access import get_project_for_user, may_create_projects
from annotation.flags.selectors import open_flag_count
from annotation.models import ConsensusRule, Membership, Project, Role, Scale
from annotation.projects.selectors import overview_next_steps, project_overview, projects_for_user
from annotation.projects.services import MAX_GUIDELINES_CHARS, SETTING_RANGES, project_create
from annotation.queue.selectors import annotator_progress, disputes_waiting


@login_required
def home(request):
    context = {
        "rows": projects_for_user(request.user),
        "may_create": may_create_projects(request.user),
    }
    return render(request, "annotation/home.html", context)


def _count(field: str, help_text: str, **kwargs) -> forms.IntegerField:
    low, high = SETTING_RANGES[field]
    return forms.IntegerField(
        min_value=int(low), max_value=int(high), help_text=help_text, **kwargs
    )


class ProjectCreateForm(forms.Form):
    """What ``create_project`` asks on the command line; the bounds are the settings page's
    (``SETTING_RANGES``) and ``project_create`` checks them again with the rest."""

    name = forms.CharField(max_length=Project._meta.get_field("name").max_length)
    slug = forms.SlugField(
        max_length=Project._meta.get_field("slug").max_length,
        help_text="The project's address: /p/<slug>/. Letters, digits, - and _.",
    )
    scale = forms.ChoiceField(choices=Scale.choices, initial=Scale.TERNARY)
    overlap = _count("overlap", "Independent votes each pair gets.", initial=3)
    consensus_rule = forms.ChoiceField(
        choices=ConsensusRule.choices,
        initial=ConsensusRule.MAJORITY,
        help_text="mmrb2 reads MMRB2's 1-6 scale (likert6).",
    )
    min_agree = _count(
        "min_agree",
        "Votes on one side for a majority consensus; blank: more than half the overlap.",
        required=False,
    )
    guidelines = forms.CharField(
        required=False,
        max_length=MAX_GUIDELINES_CHARS,
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text="Markdown; annotators see it on the comparison page.",
    )


@never_cache
@require_http_methods(["GET", "POST"])
@login_required
def project_new(request):
    """Creates a project from the home page; its creator is its first curator. Who may:
    ``may_create_projects`` (ARBITER_PROJECT_CREATORS)."""
    if not may_create_projects(request.user):
        raise PermissionDenied("Ask a curator or an operator to create the project.")
    form = ProjectCreateForm(request.POST or None)
    if form.is_valid():
        try:
            project = project_create(curator=request.user, **form.cleaned_data)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Created the project {project.name}.")
            return redirect("project-settings", slug=project.slug)
    status = 400 if form.is_bound else 200
    return render(request, "annotation/project_create.html", {"form": form}, status=status)


@login_required
def project_detail(request, slug: str):
    """The Overview: an annotator's own progress, or the project's for curators and
    researchers, with what to do next."""
    project, role = get_project_for_user(request.user, slug)
    context: dict = {"project": project, "role": role}
    if role == Role.ANNOTATOR:
        context["progress"] = annotator_progress(project=project, annotator=request.user)
        context["annotator_paused"] = Membership.objects.filter(
            project=project, user=request.user, paused=True
        ).exists()
    else:
        overview = project_overview(project=project)
        context["overview"] = overview
        context["open_flags"] = open_flag_count(project=project)
        waiting = overview["disputes_waiting"]
        rows = disputes_waiting(project=project) if waiting else []
        context["steps"] = overview_next_steps(
            project=project,
            role=role,
            by_status=overview["by_status"],
            disputes_waiting=waiting,
            waiting_for=[name for row in rows for name in row["annotators"]],
        )
    return render(request, "annotation/project_detail.html", context)


@require_GET
def favicon(request):
    """Browsers ask for /favicon.ico whatever the page links; the icon is an SVG."""
    return redirect(static("favicon.svg"), permanent=True)
