"""What an import reports when it refuses a file: issues that name the line and the field."""

from __future__ import annotations

import threading
from dataclasses import dataclass

MAX_REPORTED_ISSUES = 100


@dataclass(frozen=True)
class ImportIssue:
    """One problem with the input. ``line`` is None for problems with the file as a whole."""

    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field {self.field}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def as_dict(self) -> dict:
        return {"line": self.line, "field": self.field, "message": self.message}


class ImportFailed(Exception):
    """The import was refused and nothing was written. ``issues`` holds at most
    ``MAX_REPORTED_ISSUES``; ``more`` counts the ones left out."""

    def __init__(self, issues: list[ImportIssue], more: int = 0):
        self.issues = issues
        self.more = more
        super().__init__(self.describe())

    @property
    def total(self) -> int:
        return len(self.issues) + self.more

    def lines(self) -> list[str]:
        out = [str(issue) for issue in self.issues]
        if self.more:
            out.append(f"... and {self.more} more errors")
        return out

    def describe(self) -> str:
        noun = "error" if self.total == 1 else "errors"
        return f"Nothing was imported: {self.total} {noun}.\n" + "\n".join(self.lines())

    def as_list(self) -> list[dict]:
        out = [issue.as_dict() for issue in self.issues]
        if self.more:
            out.append({"line": None, "field": None, "message": f"... and {self.more} more errors"})
        return out


class IssueCollector:
    """Keeps the first ``MAX_REPORTED_ISSUES`` issues and counts the rest."""

    def __init__(self, limit: int = MAX_REPORTED_ISSUES):
        self.limit = limit
        self.issues: list[ImportIssue] = []
        self.more = 0
        self._lock = threading.Lock()  # the reader thread and the writer both report

    def __bool__(self) -> bool:
        return bool(self.issues)

    def add(self, issue: ImportIssue) -> None:
        with self._lock:
            if len(self.issues) < self.limit:
                self.issues.append(issue)
            else:
                self.more += 1

    def extend(self, issues) -> None:
        for issue in issues:
            self.add(issue)

    def failure(self) -> ImportFailed:
        """The issues in file order (file-wide ones first)."""
        ordered = sorted(self.issues, key=lambda issue: issue.line or 0)
        return ImportFailed(ordered, self.more)
