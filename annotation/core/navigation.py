"""The project navigation: which tabs each role gets, and links to pages that may not exist.

A tab or link is shown only when its URL name resolves, so a page still being built never
shows up empty, and its tab appears by itself once the page's URL is added. Pages of the
judges app are reversed by name (``judges:runs``): annotation never imports judges."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

from annotation.core.access import ANYONE, CURATORS, STAFF_ROLES
from annotation.models import Role


@dataclass(frozen=True)
class Tab:
    """One tab: shown to ``roles`` once ``url_name`` resolves, and marked current on its own
    page and on the pages named in ``also``."""

    label: str
    url_name: str
    roles: tuple[str, ...]
    also: tuple[str, ...] = ()


# The same header on every project page, in this order (docs/curators.md, "Navigation and
# Overview").
OVERVIEW = Tab("Overview", "project-detail", ANYONE)
PROJECT_TABS = (
    OVERVIEW,
    Tab("Annotate", "annotate", (Role.ANNOTATOR,)),
    Tab("My votes", "vote-history", (Role.ANNOTATOR,)),
    Tab("Pairs", "pairs", STAFF_ROLES, also=("pair",)),
    Tab("Queue", "curator-queue", CURATORS, also=("adjudication", "adjudication-pair")),
    Tab("Import", "imports", CURATORS),
    Tab("Filter runs", "judges:runs", STAFF_ROLES, also=("judges:run",)),
    Tab("Leaderboard", "judges:leaderboard", STAFF_ROLES),
    Tab("Agreement", "agreement", STAFF_ROLES),
    Tab("Releases", "releases", STAFF_ROLES, also=("release", "release-create", "release-diff")),
    Tab("Reward models", "judges:training", STAFF_ROLES, also=("judges:training-run",)),
    Tab("Best-of-N", "judges:best-of-n", STAFF_ROLES, also=("judges:best-of-n-run",)),
    Tab("Judges", "judges:project-judges", STAFF_ROLES),
    Tab("Model leaderboard", "model-leaderboard", STAFF_ROLES),
    Tab("Webhooks", "webhooks", CURATORS, also=("webhook",)),
    Tab("Audit log", "audit", CURATORS),
    Tab("Settings", "project-settings", CURATORS),
)


def project_url(url_name: str, slug: str) -> str | None:
    """The URL of a project page, or None while no page has that name."""
    try:
        return reverse(url_name, args=[slug])
    except NoReverseMatch:
        return None


def project_tabs(
    *, slug: str, role: str, view_name: str | None, path: str | None = None
) -> list[dict]:
    """The tabs ``role`` may use in the project, with their URLs; ``current`` marks the tab
    of the page named ``view_name``, or else the tab whose URL the page's ``path`` lies under
    (an annotator's page under Agreement, a form posted under Settings), so that every page
    of a tab marks it. The Overview's URL is every page's prefix: only its own page marks it."""
    shown = [
        (tab, url, view_name is not None and view_name in (tab.url_name, *tab.also))
        for tab in PROJECT_TABS
        if role in tab.roles and (url := project_url(tab.url_name, slug)) is not None
    ]
    current = next((tab for tab, _, named in shown if named), None)
    if current is None and path is not None:
        under = [
            (tab, url) for tab, url, _ in shown if tab is not OVERVIEW and path.startswith(url)
        ]
        current = max(under, key=lambda item: len(item[1]))[0] if under else None
    return [{"label": tab.label, "url": url, "current": tab is current} for tab, url, _ in shown]
