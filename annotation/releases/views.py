"""The Releases tab (docs/releases.md, "Pages"): the project's releases, the form that makes
one, a release's build progress, dataset card and files, publishing, downloads and the diff
against another release. Curators and researchers only; annotators get 403, outsiders 404."""

from __future__ import annotations

import re
from functools import wraps

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import Truncator
from django.views.decorators.cache import never_cache
from django.views.decorators.http import (
    require_GET,
    require_http_methods,
    require_POST,
    require_safe,
)
from django.views.decorators.vary import vary_on_headers

from annotation.core.access import STAFF_ROLES, get_project_for_user, get_release_for_user
from annotation.core.errors import Conflict, DomainError, InvalidInput, Unavailable
from annotation.core.markdown import render_markdown
from annotation.models import RELEASE_VERSION_PART_DIGITS, Project, Release
from annotation.pairs.selectors import project_criteria, project_tasks
from annotation.releases.diff import releases_compare
from annotation.releases.downloads import (
    release_archive_response,
    release_csv_response,
    release_file_response,
)
from annotation.releases.files import (
    HAS_FILES,
    release_files,
)
from annotation.releases.selection import MAX_FILTER_VALUES, check_selection, selection_sources
from annotation.releases.services import (
    check_version,
    release_build_start,
    release_create,
    release_publish,
    release_version_next,
)
from config.errors import status_for

SELECTION_FIELDS = (
    "include_consensus",
    "include_adjudicated",
    "include_ties",
    "include_ensemble",
    "original_media",
    "tasks",
    "criteria",
    "min_agreement",
    "splits",
    "seed",
)
# The diff page lists this many pairs of each kind; the API and the counts have them all.
DIFF_SHOWN_MAX = 500
NO_CRITERION = "(no criterion)"
_FIELD_OF_ERROR = re.compile(r"^([a-z_]+)[\[.:]")
_FRONT_MATTER = re.compile(r"\A---\n(.*?\n)---\n", re.S)


class ReleaseForm(forms.Form):
    """What goes in a release (docs/releases.md, "Selection"); the service's own check
    (``check_selection``) decides, and its errors land on the field they name."""

    version = forms.CharField(
        max_length=32,
        help_text=f"X.Y.Z: three whole numbers of at most {RELEASE_VERSION_PART_DIGITS} digits, "
        "as 1.2.0.",
    )
    include_consensus = forms.BooleanField(
        required=False, initial=True, label="Consensus pairs", help_text="Decided by the rule."
    )
    include_adjudicated = forms.BooleanField(
        required=False, initial=True, label="Adjudicated pairs", help_text="Decided by a curator."
    )
    include_ties = forms.BooleanField(
        required=False, label="Ties", help_text="Keep pairs labelled tie, as label=tie."
    )
    include_ensemble = forms.BooleanField(
        required=False,
        label="Ensemble-easy pairs",
        help_text="Also the pairs the judge ensemble filtered as easy, marked source=ensemble.",
    )
    original_media = forms.BooleanField(
        required=False,
        label="Original media files",
        help_text="The images, videos, audio clips and 3D models as they were imported, "
        "metadata and all; unticked, the copies annotators saw, stripped of it.",
    )
    tasks = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="None ticked: every task."
    )
    criteria = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every criterion.",
    )
    min_agreement = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Minimum agreement",
        help_text="Only pairs whose share of votes on their label is at least this (0 to 1).",
    )
    splits = forms.CharField(
        initial="test=1",
        max_length=400,
        help_text="name=ratio, separated by commas, adding up to 1 (train=0.8,test=0.2). "
        "Pairs are split by prompt: no prompt is in two splits.",
    )
    seed = forms.IntegerField(
        min_value=0, initial=0, help_text="The same seed keeps each prompt in its split."
    )

    def __init__(self, *args, tasks: list[str], criteria: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Declared as MultipleChoiceFields above; ``fields`` is typed by the base class.
        task_field = self.fields["tasks"]
        criteria_field = self.fields["criteria"]
        assert isinstance(task_field, forms.MultipleChoiceField)
        assert isinstance(criteria_field, forms.MultipleChoiceField)
        task_field.choices = [(task, task) for task in tasks]
        criteria_field.choices = [
            (text, Truncator(text).chars(80) if text else NO_CRITERION) for text in criteria
        ]

    def add_domain_error(self, exc: DomainError) -> None:
        """A service's refusal ("splits[0].ratio: ...") on the field it names."""
        message = str(exc)
        match = _FIELD_OF_ERROR.match(message)
        field = match.group(1) if match else None
        if field not in self.fields:
            self.add_error(None, message)
            return
        where, _, reason = message.partition(": ")
        # "splits[1].ratio: ..." keeps saying which split; "version: ..." needs no prefix.
        self.add_error(field, reason if where == field else message)

    def clean(self):
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        try:
            cleaned["version"] = check_version(cleaned["version"])
            cleaned["selection"] = check_selection(
                {name: cleaned[name] for name in SELECTION_FIELDS}
            )
        except DomainError as exc:
            self.add_domain_error(exc)
        return cleaned


class PublishForm(forms.Form):
    confirm = forms.BooleanField(
        label="I understand that a published release never changes: a change is a new version."
    )


def _release_form(project: Project, data=None) -> ReleaseForm:
    return ReleaseForm(
        data,
        initial={"version": release_version_next(project=project)},
        tasks=project_tasks(project=project),
        criteria=project_criteria(project=project, limit=MAX_FILTER_VALUES),
    )


def _start_build(request, release: Release) -> None:
    try:
        release_build_start(release=release)
    except Unavailable as exc:
        messages.error(
            request,
            f"Release {release.version} is saved as a draft, but its build could not be "
            f"queued: {exc} Build it from this page when the queue is back.",
        )
    except (Conflict, InvalidInput) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Release {release.version} is being built.")


@require_GET
@never_cache
@login_required
def releases(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    rows = Release.objects.filter(project=project).select_related("created_by")
    return render(
        request,
        "annotation/releases.html",
        {"project": project, "role": role, "releases": rows},
    )


@require_http_methods(["GET", "POST"])
@never_cache
@login_required
def release_create_page(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    form = _release_form(project, request.POST if request.method == "POST" else None)
    status = 200
    if form.is_bound:
        if form.is_valid():
            try:
                release = release_create(
                    project=project,
                    version=form.cleaned_data["version"],
                    selection=form.cleaned_data["selection"],
                    user=request.user,
                )
            except DomainError as exc:
                form.add_domain_error(exc)
            else:
                _start_build(request, release)
                return redirect("release", slug=project.slug, version=release.version)
        status = 400
    return render(
        request,
        "annotation/release_create.html",
        {"project": project, "role": role, "form": form},
        status=status,
    )


def split_front_matter(card: str) -> tuple[str, str]:
    """A dataset card's YAML front matter (shown as it is) and its Markdown body."""
    match = _FRONT_MATTER.match(card)
    if match is None:
        return "", card
    return match.group(1), card[match.end() :]


def _release_context(release: Release, role: str) -> dict:
    front_matter, body = split_front_matter(release.card)
    selection = check_selection(release.selection)
    sources = selection_sources(selection)
    has_files = release.status in HAS_FILES
    others = (
        Release.objects.filter(project=release.project, status__in=HAS_FILES)
        .exclude(pk=release.pk)
        .values_list("version", flat=True)
    )
    return {
        "project": release.project,
        "role": role,
        "release": release,
        "selection": selection,
        "sources": sources,
        "files": release_files(release) if has_files else [],
        "card_front_matter": front_matter,
        "card_html": render_markdown(body) if body else "",
        "publish_form": PublishForm(),
        "others": list(others) if has_files else [],
        "can_build": release.status
        in (Release.Status.DRAFT, Release.Status.BUILT, Release.Status.FAILED),
    }


@require_GET
@never_cache
@vary_on_headers("HX-Request")
@login_required
def release_detail(request, slug: str, version: str):
    """The release page; its build section alone when htmx polls it."""
    release, role = get_release_for_user(request.user, slug, version)
    template = "annotation/release_detail.html"
    if request.htmx:
        template += "#release_build"
    return render(request, template, _release_context(release, role))


@require_POST
@login_required
def release_build(request, slug: str, version: str):
    release, _ = get_release_for_user(request.user, slug, version)
    _start_build(request, release)
    return redirect("release", slug=slug, version=release.version)


@require_POST
@login_required
def release_publish_page(request, slug: str, version: str):
    release, role = get_release_for_user(request.user, slug, version)
    form = PublishForm(request.POST)
    status = 400
    if form.is_valid():
        try:
            release_publish(release=release, user=request.user)
        except DomainError as exc:
            messages.error(request, str(exc))
            status = status_for(exc)
        else:
            messages.success(request, f"Release {release.version} is published.")
            return redirect("release", slug=slug, version=release.version)
    context = _release_context(release, role) | {"publish_form": form}
    return render(request, "annotation/release_detail.html", context, status=status)


def _refusals_as_text(view):
    """A download view whose refusal (not published yet, no such file) is its reason in
    plain text with the status ``config.errors`` gives it."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except DomainError as exc:
            return HttpResponse(
                str(exc), status=status_for(exc), content_type="text/plain; charset=utf-8"
            )

    return wrapper


@require_safe
@login_required
@_refusals_as_text
def release_download(request, slug: str, version: str):
    """The release's .tar.gz, streamed, with range requests."""
    release, _ = get_release_for_user(request.user, slug, version)
    return release_archive_response(request, release)


@require_safe
@login_required
@_refusals_as_text
def release_file_download(request, slug: str, version: str, name: str):
    """One file of the release folder, by the name its manifest lists."""
    release, _ = get_release_for_user(request.user, slug, version)
    return release_file_response(request, release, name)


@require_GET
@login_required
@_refusals_as_text
def release_csv(request, slug: str, version: str):
    release, _ = get_release_for_user(request.user, slug, version)
    return release_csv_response(release)


@require_GET
@never_cache
@login_required
def release_diff_page(request, slug: str, version: str):
    """This release against ``?against=X.Y.Z``, another release of the project."""
    release, role = get_release_for_user(request.user, slug, version)
    against_version = request.GET.get("against", "")
    against = Release.objects.filter(project=release.project, version=against_version).first()
    context = {"project": release.project, "role": role, "release": release, "against": against}
    if against is None:
        context["error"] = (
            f"against: {release.project.slug} has no release {against_version!r}."
            if against_version
            else "against: choose the release to compare with."
        )
        return render(request, "annotation/release_diff.html", context, status=404)
    try:
        diff = releases_compare(release=release, against=against)
    except DomainError as exc:
        context["error"] = str(exc)
        return render(request, "annotation/release_diff.html", context, status=status_for(exc))
    context |= {
        "diff": diff,
        "added": diff.added[:DIFF_SHOWN_MAX],
        "removed": diff.removed[:DIFF_SHOWN_MAX],
        "relabelled": diff.relabelled[:DIFF_SHOWN_MAX],
        "shown_max": DIFF_SHOWN_MAX,
    }
    return render(request, "annotation/release_diff.html", context)
