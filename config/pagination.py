"""The REST API's pages (docs/api.md): ``?limit=`` and ``?offset=`` as DRF reads them, held
to what a database query can take, so a 20-digit offset is an empty page, not a 500."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

# The most rows one page holds, and an offset past any table (PostgreSQL's bigint ends at
# 2**63 - 1, and offset + limit must stay below it).
MAX_PAGE_SIZE = 1000
MAX_OFFSET = 2**53


class Pagination(LimitOffsetPagination):
    """``LimitOffsetPagination`` with a largest page and a largest offset."""

    max_limit = MAX_PAGE_SIZE

    def get_offset(self, request) -> int:
        return min(super().get_offset(request), MAX_OFFSET)
