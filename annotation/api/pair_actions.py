"""The routes of a curator's action on a pair (``pairs/<id>/exclude/``, ``include/``,
``adjudicate/``). A pair's id is a path and may hold "/" (an Omni-RewardBench pair's is
"<task>/<id>"), so ``pairs/t2v/exclude/`` is also how the pair ``t2v/exclude`` is named: a
POST there is the action on the pair ``t2v``, a GET is the pair ``t2v/exclude`` itself, as
every other pair's GET is (docs/api.md, "Pairs")."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.views import APIView

from annotation.projects.api import PairDetailApi


def pair_action_view(view: type[APIView], action: str):
    """``view``'s POST at ``pairs/<id>/<action>/``; a GET of that path answers as
    ``PairDetailApi`` for the pair whose id ends in ``/<action>``."""

    class PairAction(view):  # type: ignore[valid-type, misc]
        @extend_schema(exclude=True)
        def get(self, request, slug: str, external_id: str):
            return PairDetailApi.get(self, request, slug, f"{external_id}/{action}")

    PairAction.__name__ = PairAction.__qualname__ = view.__name__
    PairAction.__doc__ = view.__doc__
    return PairAction.as_view()
