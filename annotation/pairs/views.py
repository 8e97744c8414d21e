"""The pairs browser and the pair page, for curators and researchers (docs/curators.md).

The browser's URL holds everything it shows (filters, sort, page cursor, page size), so a view
can be shared; htmx swaps only the results when the filters change, and every link and form
works without it. Researchers browse and read; bulk actions, and answering annotators' flags on
the pair page (docs/curators.md, "Flags"), are the curators'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.agreement.prior_ratings import ratings_by_response
from annotation.core.access import CURATORS, STAFF_ROLES, get_project_for_user
from annotation.core.actions import action_apply
from annotation.core.errors import DomainError
from annotation.core.limits import (
    MAX_EXCLUSION_REASON_CHARS,
    MAX_FLAG_REPLY_CHARS,
    MAX_PAIR_IDS,
    MAX_PRIORITY,
    MIN_PRIORITY,
)
from annotation.core.pair_sections import pair_sections
from annotation.core.scales import on_screen_vote, options_for
from annotation.core.shown import pair_page_context
from annotation.flags.selectors import get_flag_for_user, pair_flags
from annotation.flags.services import flag_reply, flag_resolve
from annotation.models import Flag, Pair, PairStatus, Project, Role, Side, Vote
from annotation.pairs import actions as pair_actions
from annotation.pairs.selectors import (
    DEFAULT_PAIR_PAGE_SIZE,
    DEFAULT_PAIR_SORT,
    FLAG_FILTERS,
    NO_LABEL,
    PAIR_PAGE_SIZES,
    PAIR_SORTS,
    PairFilters,
    PairPage,
    pair_neighbours,
    pairs_browse,
    pairs_matching,
    project_tasks,
)

PAGE = "annotation/pairs.html"
MAX_SEARCH_CHARS = 200
_ANY = [("", "any")]
_LABELS = [*_ANY, *Side.choices, (NO_LABEL, "none yet")]
_YES_NO = [*_ANY, ("yes", "yes"), ("no", "no")]
_YES_NO_VALUE = {"yes": True, "no": False}
_SORT_CHOICES = [
    (f"{sign}{name}", f"{sort.label}{' (descending)' if sign else ''}")
    for name, sort in PAIR_SORTS.items()
    for sign in ("", "-")
]


def _yes_no(label: str) -> forms.ChoiceField:
    return forms.ChoiceField(choices=_YES_NO, required=False, label=label)


class PairFilterForm(forms.Form):
    """The browser's filters, sort and page, read from the query string (or a bulk action's
    hidden copy of it)."""

    q = forms.CharField(required=False, max_length=MAX_SEARCH_CHARS, label="Search")
    status = forms.MultipleChoiceField(
        choices=PairStatus.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    task = forms.ChoiceField(required=False)
    criterion = forms.ChoiceField(
        choices=[*_ANY, ("yes", "with a criterion"), ("no", "without")], required=False
    )
    votes_min = forms.IntegerField(min_value=0, required=False, label="Votes from")
    votes_max = forms.IntegerField(min_value=0, required=False, label="to")
    ensemble = forms.ChoiceField(choices=_LABELS, required=False, label="Ensemble label")
    agreement_min = forms.FloatField(
        min_value=0, max_value=1, required=False, label="Agreement from"
    )
    agreement_max = forms.FloatField(min_value=0, max_value=1, required=False, label="to")
    consensus = forms.ChoiceField(choices=_LABELS, required=False, label="Consensus")
    gold = _yes_no("Gold")
    skipped = _yes_no("Skipped")
    flags = forms.ChoiceField(choices=[*_ANY, *FLAG_FILTERS.items()], required=False)
    sort = forms.ChoiceField(choices=_SORT_CHOICES, required=False)
    per_page = forms.TypedChoiceField(
        choices=[(n, n) for n in PAIR_PAGE_SIZES],
        coerce=int,
        required=False,
        # The stubs type empty_value as a string; the coerced value is an int like the choices.
        empty_value=DEFAULT_PAIR_PAGE_SIZE,  # type: ignore[arg-type]
        label="Per page",
    )
    after = forms.CharField(required=False, widget=forms.HiddenInput)
    before = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, project: Project, tasks: list[str] | None = None, **kwargs):
        self.project = project
        super().__init__(*args, **kwargs)
        # The task is checked against the project's tasks, so the field needs their list.
        task_field = cast(forms.ChoiceField, self.fields["task"])
        tasks = project_tasks(project=project) if tasks is None else tasks
        task_field.choices = _ANY + [(task, task) for task in tasks]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        for low, high in (("votes_min", "votes_max"), ("agreement_min", "agreement_max")):
            if data.get(low) is not None and data.get(high) is not None and data[low] > data[high]:
                self.add_error(high, f"Must not be below {low} ({data[low]}).")
        if data.get("after") and data.get("before"):
            self.add_error("before", "Give after or before, not both.")
        return data

    def filters(self) -> PairFilters:
        data = self.cleaned_data
        sort = data["sort"] or DEFAULT_PAIR_SORT
        return PairFilters(
            q=data["q"].strip(),
            statuses=tuple(data["status"]),
            task=data["task"],
            has_criterion=_YES_NO_VALUE.get(data["criterion"]),
            votes_min=data["votes_min"],
            votes_max=data["votes_max"],
            ensemble_label=data["ensemble"],
            agreement_min=data["agreement_min"],
            agreement_max=data["agreement_max"],
            consensus_label=data["consensus"],
            is_gold=_YES_NO_VALUE.get(data["gold"]),
            skipped=_YES_NO_VALUE.get(data["skipped"]),
            flags=data["flags"],
            sort=sort.removeprefix("-"),
            descending=sort.startswith("-"),
        )

    def items(self, *, cursor: bool = True) -> list[tuple[str, str]]:
        """The filter as it was sent (name, value), empty values left out; without the page
        cursor unless ``cursor``."""
        names = [n for n in PairFilterForm.base_fields if cursor or n not in ("after", "before")]
        # Bound from request.GET or request.POST (or a QueryDict of them): multi-valued.
        data = cast(QueryDict, self.data)
        return [(name, value) for name in names for value in data.getlist(name) if value]

    def query(self, *, cursor: bool = True, **changes: str) -> str:
        """The query string of this filter, with ``changes`` (an empty value drops a name)."""
        items = [(n, v) for n, v in self.items(cursor=cursor) if n not in changes]
        items += [(n, v) for n, v in changes.items() if v]
        return urlencode(items)


class PairIdsField(forms.Field):
    """Pair primary keys from the browser's checkboxes."""

    def to_python(self, value) -> list[int]:
        values = value if isinstance(value, list | tuple) else [] if value is None else [value]
        try:
            ids = list(dict.fromkeys(int(v) for v in values if v != ""))
        except ValueError:
            raise ValidationError("Pair ids are numbers.") from None
        if len(ids) > MAX_PAIR_IDS:
            raise ValidationError(f"At most {MAX_PAIR_IDS} pairs at a time (got {len(ids)}).")
        return ids


class PairSelectionForm(PairFilterForm):
    """The pairs a bulk action works on: the checked ones, or every pair matching the filter
    (``all_matching``). ``cleaned_data["pks"]`` holds their ids."""

    pair = PairIdsField(required=False, widget=forms.MultipleHiddenInput)
    all_matching = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        if data["all_matching"]:
            pks = list(
                pairs_matching(project=self.project, filters=self.filters())
                .order_by("pk")
                .values_list("pk", flat=True)[: MAX_PAIR_IDS + 1]
            )
            if len(pks) > MAX_PAIR_IDS:
                raise ValidationError(
                    f"all_matching: more than {MAX_PAIR_IDS} pairs match; a bulk action takes "
                    f"at most {MAX_PAIR_IDS} at a time, so narrow the filter."
                )
        else:
            ids = data["pair"]
            pks = list(
                Pair.objects.filter(project=self.project, pk__in=ids).values_list("pk", flat=True)
            )
            if unknown := sorted(set(ids) - set(pks)):
                shown = ", ".join(str(pk) for pk in unknown[:10])
                raise ValidationError(f"pair: no pair {shown} in this project.")
        if not pks:
            raise ValidationError("pair: choose at least one pair, or all pairs matching.")
        data["pks"] = pks
        return data


class PriorityForm(PairSelectionForm):
    priority = forms.IntegerField(min_value=MIN_PRIORITY, max_value=MAX_PRIORITY)


class RestrictForm(PairSelectionForm):
    annotators = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.none(), required=False
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        field = cast(forms.ModelMultipleChoiceField, self.fields["annotators"])
        field.queryset = project_annotators(self.project)


class GoldForm(PairSelectionForm):
    label = forms.ChoiceField(choices=())

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        field = cast(forms.ChoiceField, self.fields["label"])
        field.choices = pair_actions.gold_label_choices(self.project)


class ExcludeForm(PairSelectionForm):
    reason = forms.CharField(max_length=MAX_EXCLUSION_REASON_CHARS, strip=True)


def project_annotators(project: Project):
    return (
        get_user_model()
        .objects.filter(memberships__project=project, memberships__role=Role.ANNOTATOR)
        .order_by("username")
    )


def _apply_enqueue(project: Project, data: dict, actor) -> str:
    return pair_actions.enqueue(project=project, pair_ids=data["pks"])


def _apply_priority(project: Project, data: dict, actor) -> str:
    return pair_actions.set_priority(
        actor=actor, project=project, pair_ids=data["pks"], priority=data["priority"]
    )


def _apply_restrict(project: Project, data: dict, actor) -> str:
    return pair_actions.restrict(
        actor=actor, project=project, pair_ids=data["pks"], annotators=data["annotators"]
    )


def _apply_gold(project: Project, data: dict, actor) -> str:
    return pair_actions.set_gold(
        actor=actor, project=project, pair_ids=data["pks"], label=data["label"]
    )


def _apply_exclude(project: Project, data: dict, actor) -> str:
    return pair_actions.exclude(
        actor=actor, project=project, pair_ids=data["pks"], reason=data["reason"]
    )


def _apply_include(project: Project, data: dict, actor) -> str:
    return pair_actions.include(actor=actor, project=project, pair_ids=data["pks"])


BULK_ACTIONS: dict[str, tuple[type[PairSelectionForm], Callable[[Project, dict, Any], str]]] = {
    "enqueue": (PairSelectionForm, _apply_enqueue),
    "priority": (PriorityForm, _apply_priority),
    "restrict": (RestrictForm, _apply_restrict),
    "gold": (GoldForm, _apply_gold),
    "exclude": (ExcludeForm, _apply_exclude),
    "include": (PairSelectionForm, _apply_include),
}


def form_error_text(form: forms.Form) -> str:
    """Every error of a form, each naming its field."""
    return " ".join(
        " ".join(map(str, errors))
        if field == "__all__"
        else f"{field}: {' '.join(map(str, errors))}"
        for field, errors in form.errors.items()
    )


def _browser_page(
    request, project: Project, role: str, data, *, status: int = 200, error: str = ""
) -> HttpResponse:
    tasks = project_tasks(project=project)
    form = PairFilterForm(data, project=project, tasks=tasks)
    page = None
    if form.is_valid():
        cleaned = form.cleaned_data
        try:
            page = pairs_browse(
                project=project,
                filters=form.filters(),
                after=cleaned["after"] or None,
                before=cleaned["before"] or None,
                limit=cleaned["per_page"],
            )
        except ValueError:
            form.add_error("after" if cleaned["after"] else "before", "Not a page of this list.")
    if not form.is_valid():
        status = 400
    is_curator = role == Role.CURATOR
    context = {
        "project": project,
        "role": role,
        "form": form,
        "page": page,
        "error": error,
        "is_curator": is_curator,
        "annotators": project_annotators(project) if is_curator and page else [],
        "min_priority": MIN_PRIORITY,
        "gold_labels": pair_actions.gold_label_choices(project),
        "max_priority": MAX_PRIORITY,
        "max_exclusion_chars": MAX_EXCLUSION_REASON_CHARS,
        **(_links(project, form, page) if page else {}),
    }
    template = f"{PAGE}#pairs_results" if request.htmx else PAGE
    return render(request, template, context, status=status)


def _links(project: Project, form: PairFilterForm, page: PairPage) -> dict:
    """Every link of the results, each a URL holding the whole filter."""
    base = reverse("pairs", args=[project.slug])
    filters = form.filters()
    current = f"{'-' if filters.descending else ''}{filters.sort}"

    def url(**changes: str) -> str:
        query = form.query(cursor=False, **changes)
        return f"{base}?{query}" if query else base

    def sort_url(name: str) -> str:
        return url(sort="" if current == f"-{name}" else (f"-{name}" if current == name else name))

    chosen = set(filters.statuses)
    return {
        "sort_links": {
            name: {
                "url": sort_url(name),
                "label": sort.label,
                "current": current.lstrip("-") == name,
                "descending": filters.descending,
            }
            for name, sort in PAIR_SORTS.items()
        },
        "status_links": [
            {
                "value": value,
                "label": label,
                "count": page.counts[value],
                "url": url(status=value),
                "active": value in chosen,
            }
            for value, label in PairStatus.choices
        ],
        "all_statuses_url": url(status=""),
        "first_url": url() if page.prev_cursor else None,
        "prev_url": url(before=page.prev_cursor) if page.prev_cursor else None,
        "next_url": url(after=page.next_cursor) if page.next_cursor else None,
        "row_query": form.query(),
        "filter_items": form.items(cursor=False),
    }


@require_GET
@login_required
@vary_on_headers("HX-Request")
def pairs_browser(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    return _browser_page(request, project, role, request.GET)


@require_POST
@login_required
def pairs_bulk(request, slug: str, action: str):
    """One bulk action on the chosen pairs: validate, call its service, back to the same view."""
    project, role = get_project_for_user(request.user, slug, roles=CURATORS)
    form, applied = action_apply(
        request, project, BULK_ACTIONS, action, unknown="No such bulk action"
    )
    if applied:
        return redirect(f"{reverse('pairs', args=[project.slug])}?{form.query()}")
    return _browser_page(
        request, project, role, QueryDict(form.query()), status=400, error=form_error_text(form)
    )


# ---- The pair page ----


def _vote_rows(project: Project, votes: list[Vote]) -> list[dict]:
    """Each vote as its annotator saw it on screen, and in canonical A/B terms."""
    labels = {str(option["value"]): option["label"] for option in options_for(project.scale)}
    rows = []
    for vote in votes:
        shown = on_screen_vote(
            scale=project.scale, left_is_a=vote.left_is_a, side=vote.side, value=vote.value
        )
        choice = shown["choice"] or str(shown["value"])
        rows.append(
            {
                "vote": vote,
                "on_screen": labels[choice] if shown["choice"] else f"{choice}: {labels[choice]}",
                "left": "A" if vote.left_is_a else "B",
                "seconds": None
                if vote.time_on_task_ms is None
                else round(vote.time_on_task_ms / 1000, 1),
            }
        )
    return rows


def _pair_page(
    request, project: Project, role: str, pair_id: int, *, refused: dict | None = None
) -> HttpResponse:
    """The pair page; ``refused``: a curator's reply the page could not take (``flag_id``,
    ``text``, ``error``), shown again under its flag with the error, or an exclusion it
    refused (``exclusion_error``, ``exclusion_reason``), as a 400."""
    pair = (
        Pair.objects.select_related("prompt", "response_a", "response_b")
        .filter(project=project, pk=pair_id)
        .first()
    )
    if pair is None:
        raise Http404("No such pair")
    form = PairFilterForm(request.GET, project=project)
    previous_id = next_id = None
    if form.is_valid():
        previous_id, next_id = pair_neighbours(project=project, filters=form.filters(), pair=pair)
    votes = list(pair.votes.select_related("annotator").order_by("created_at", "pk"))
    priors = list(pair.prior_annotations.all())
    refused = refused or {}
    context = {
        **pair_page_context(project, role, pair),
        "votes": _vote_rows(project, votes),
        "priors": [prior for prior in priors if not prior.rating],
        "prior_ratings": ratings_by_response((p.response, p.rating) for p in priors),
        "skips": list(pair.skips.select_related("annotator").order_by("created_at", "pk")),
        "flags": [
            {"flag": flag, **(refused if refused.get("flag_id") == flag.pk else {})}
            for flag in pair_flags(pair=pair)
        ],
        "exclusion_error": refused.get("exclusion_error", ""),
        "exclusion_reason": refused.get("exclusion_reason", ""),
        "max_exclusion_chars": MAX_EXCLUSION_REASON_CHARS,
        "is_curator": role == Role.CURATOR,
        "max_reply_chars": MAX_FLAG_REPLY_CHARS,
        "restricted_to": list(
            project_annotators(project).filter(pk__in=pair.restrictions.values("annotator_id"))
        )
        if pair.restricted
        else [],
        "sections": pair_sections(pair),
        "query": form.query(cursor=True) if form.is_valid() else "",
        "previous_id": previous_id,
        "next_id": next_id,
    }
    status = 400 if refused else 200
    return render(request, "annotation/pair_detail.html", context, status=status)


@require_GET
@login_required
def pair_detail(request, slug: str, pair_id: int):
    """One pair with everything known about it; prev/next follow the browser's filter."""
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    return _pair_page(request, project, role, pair_id)


class FlagReplyForm(forms.Form):
    text = forms.CharField(max_length=MAX_FLAG_REPLY_CHARS, strip=True)
    resolve = forms.BooleanField(required=False)


def _pair_flag(request, slug: str, pair_id: int, flag_id: int) -> tuple[Flag, Project]:
    """A flag on this pair, for a curator of its project (outsiders 404, other roles 403)."""
    flag, project = get_flag_for_user(request.user, slug, flag_id, roles=CURATORS)
    if flag.pair_id != pair_id:
        raise Http404("No such flag")
    return flag, project


def _back_to_pair(request, project: Project, pair_id: int) -> HttpResponse:
    url = reverse("pair", args=[project.slug, pair_id])
    query = request.GET.urlencode()
    return redirect(f"{url}?{query}#flags" if query else f"{url}#flags")


@require_POST
@login_required
def flag_reply_page(request, slug: str, pair_id: int, flag_id: int):
    """A curator's reply to a flag (and, with "resolve", the flag resolved), from the pair page."""
    flag, project = _pair_flag(request, slug, pair_id, flag_id)
    form = FlagReplyForm(request.POST)
    error = "" if form.is_valid() else form_error_text(form)
    if not error:
        try:
            flag_reply(
                flag=flag,
                author=request.user,
                text=form.cleaned_data["text"],
                resolve=form.cleaned_data["resolve"],
            )
        except DomainError as exc:
            error = str(exc)
    if error:
        refused = {"flag_id": flag.pk, "text": request.POST.get("text", ""), "error": error}
        return _pair_page(request, project, Role.CURATOR, pair_id, refused=refused)
    messages.success(request, "Reply sent; the annotator sees it in My flags.")
    return _back_to_pair(request, project, pair_id)


@require_POST
@login_required
def flag_resolve_page(request, slug: str, pair_id: int, flag_id: int):
    flag, project = _pair_flag(request, slug, pair_id, flag_id)
    if flag_resolve(flag=flag, by=request.user):
        messages.success(request, "Flag resolved.")
    else:
        messages.info(request, "That flag was resolved already.")
    return _back_to_pair(request, project, pair_id)


class PairExcludeForm(forms.Form):
    reason = forms.CharField(max_length=MAX_EXCLUSION_REASON_CHARS, strip=True)


@require_POST
@login_required
def pair_exclusion_page(request, slug: str, pair_id: int, action: str):
    """A curator excludes this pair (with a reason) or includes it again, from the pair page;
    a refusal is shown on the page, as a 400."""
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    if not Pair.objects.filter(project=project, pk=pair_id).exists():
        raise Http404("No such pair")
    if action not in ("exclude", "include"):
        raise Http404("No such action")
    error = ""
    if action == "exclude":
        form = PairExcludeForm(request.POST)
        error = "" if form.is_valid() else form_error_text(form)
    if not error:
        try:
            if action == "exclude":
                message = pair_actions.exclude(
                    project=project,
                    pair_ids=[pair_id],
                    reason=form.cleaned_data["reason"],
                    actor=request.user,
                )
            else:
                message = pair_actions.include(
                    project=project, pair_ids=[pair_id], actor=request.user
                )
        except DomainError as exc:
            error = str(exc)
    if error:
        refused = {"exclusion_error": error, "exclusion_reason": request.POST.get("reason", "")}
        return _pair_page(request, project, Role.CURATOR, pair_id, refused=refused)
    messages.success(request, message)
    url = reverse("pair", args=[project.slug, pair_id])
    query = request.GET.urlencode()
    return redirect(f"{url}?{query}#exclusion" if query else f"{url}#exclusion")


@require_GET
@login_required
def pair_by_external_id(request, slug: str, external_id: str):
    """A pair by its import id (a link to share): redirects to its page."""
    project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    pk = (
        Pair.objects.filter(project=project, external_id=external_id)
        .values_list("pk", flat=True)
        .first()
    )
    if pk is None:
        raise Http404("No such pair")
    url = reverse("pair", args=[project.slug, pk])
    query = request.GET.urlencode()
    return redirect(f"{url}?{query}" if query else url)
