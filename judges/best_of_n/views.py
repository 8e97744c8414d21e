"""Best-of-N on its page (docs/judges-evaluation.md, "Best-of-N"): a project's curators and
researchers upload candidates, pick a judge and a method, and see the bracket or the scores,
downloadable as JSON or CSV. The run is ``best_of_n``'s, as the API makes it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.core.shown import shown_contents
from annotation.core.spreadsheets import csv_response
from judges.best_of_n.forms import BestOfNForm
from judges.best_of_n.services import MAX_API_CALLS, best_of_n_run, parse_jsonl
from judges.core.forms import add_service_errors
from judges.models import BestOfNRun

# Runs listed on the page, newest first.
RECENT_RUNS = 20


def _items(form: BestOfNForm, project):
    upload = form.cleaned_data["candidates"]
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError({"candidates": "The file is not UTF-8 text."}) from None
    try:
        return parse_jsonl(text.splitlines(), project=project)
    except ValidationError as exc:
        raise ValidationError({"candidates": exc.messages}) from None


@require_http_methods(["GET", "POST"])
@login_required
def best_of_n_page(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    form = BestOfNForm(request.POST or None, request.FILES or None, project=project)
    if form.is_bound and form.is_valid():
        try:
            run = best_of_n_run(
                project=project,
                judge=form.cleaned_data["judge"],
                items=_items(form, project),
                method=form.cleaned_data["method"],
                created_by=request.user,
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            missing = sum(1 for result in run.outcome["results"] if result["best"] is None)
            messages.success(
                request,
                f"Best-of-N run {run.pk}: {run.outcome['calls']} calls."
                + (f" {missing} of {run.prompts} prompts have no winner." if missing else ""),
            )
            return redirect("judges:best-of-n-run", slug=project.slug, run_id=run.pk)
    runs = BestOfNRun.objects.filter(project=project).select_related("judge", "created_by")
    context = {
        "project": project,
        "role": role,
        "form": form,
        "runs": runs[:RECENT_RUNS],
        "max_calls": MAX_API_CALLS,
    }
    return render(request, "judges/best_of_n.html", context, status=400 if form.is_bound else 200)


def _run(user, slug: str, run_id: int) -> tuple[BestOfNRun, str]:
    project, role = get_project_for_user(user, slug, roles=STAFF_ROLES)
    run = BestOfNRun.objects.filter(project=project, pk=run_id).select_related("judge").first()
    if run is None:
        raise Http404("No such best-of-N run")
    return run, role


def _said(match: dict, order: str) -> str:
    """What the judge answered in one order of a match: the candidate it preferred, "tie", or
    why there was no vote ("abstain", "error", ...)."""
    answer = match["answers"][order]
    return {"A": match["first"], "B": match["second"]}.get(answer, answer)


def _contents(run: BestOfNRun) -> dict[str, dict]:
    """What each prompt's run judged, by prompt id, as pages show content (text, and media
    with the comparison page's players): its prompt and its candidates in input order."""
    items = run.contents or []
    contents = [item["prompt"] for item in items] + [
        candidate["content"] for item in items for candidate in item["candidates"]
    ]
    parts = iter(shown_contents(contents, project=run.project))
    prompts = [next(parts) for _ in items]
    return {
        item["id"]: {
            "prompt": prompt,
            "candidates": [
                {"id": candidate["id"], "parts": next(parts)} for candidate in item["candidates"]
            ],
        }
        for item, prompt in zip(items, prompts, strict=True)
    }


def _shown(run: BestOfNRun) -> list[dict]:
    """Each prompt's result with its scores ranked, best first (scores), or its rounds with
    each order's answer named by candidate (knockout), and what was judged."""
    contents = _contents(run)
    shown = []
    for result in run.outcome["results"]:
        ranked = sorted(
            (result.get("scores") or {}).items(),
            key=lambda entry: (entry[1] is None, -(entry[1] or 0)),
        )
        rounds = [
            [{**m, "said_ab": _said(m, "AB"), "said_ba": _said(m, "BA")} for m in matches]
            for matches in result.get("rounds", [])
        ]
        shown.append(
            {**result, "ranked": ranked, "rounds": rounds, "judged": contents.get(result["id"])}
        )
    return shown


@require_GET
@login_required
def best_of_n_run_page(request, slug: str, run_id: int):
    run, role = _run(request.user, slug, run_id)
    context = {"project": run.project, "role": role, "run": run, "results": _shown(run)}
    return render(request, "judges/best_of_n_run.html", context)


@require_GET
@login_required
def best_of_n_download(request, slug: str, run_id: int, fmt: str):
    """The run's results as JSON (what the API answers) or CSV (one row per candidate by
    scores, one per match in a knockout), a prompt without a winner saying why in each."""
    run, _ = _run(request.user, slug, run_id)
    name = f"{run.project.slug}-best-of-n-{run.pk}"
    if fmt == "json":
        response = JsonResponse(run.outcome, json_dumps_params={"indent": 2})
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
        return response
    if fmt != "csv":
        raise Http404("Download as json or csv")
    results = run.outcome["results"]
    # ``no_winner``: why a prompt has none (runs from before it was kept have no key).
    if run.method == "scores":
        header = ["prompt_id", "candidate_id", "score", "best", "no_winner"]
        rows = [
            [r["id"], candidate, score, candidate == r["best"], r.get("no_winner") or ""]
            for r in results
            for candidate, score in r["scores"].items()
        ]
    else:
        header = [
            "prompt_id",
            "round",
            "first",
            "second",
            "answer_AB",
            "answer_BA",
            "winner",
            "no_winner",
        ]
        rows = [
            [
                r["id"],
                number,
                m["first"],
                m["second"],
                m["answers"]["AB"],
                m["answers"]["BA"],
                m["winner"] or "",
                r.get("no_winner") or "",
            ]
            for r in results
            for number, matches in enumerate(r["rounds"], start=1)
            for m in matches
        ]
    return csv_response(f"{name}.csv", header, rows)
