"""Progress of a job as a bar: tqdm's when it is installed, else a line on stderr."""

from __future__ import annotations

import sys
from typing import Any, Protocol


class Bar(Protocol):
    def update_to(self, percent: int, status: str) -> None: ...

    def close(self) -> None: ...


class _TqdmBar:
    def __init__(self, label: str, tqdm: Any):
        self._bar = tqdm(total=100, desc=label, unit="%")

    def update_to(self, percent: int, status: str) -> None:
        self._bar.n = percent
        self._bar.set_postfix_str(status, refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()


class _PlainBar:
    WIDTH = 30

    def __init__(self, label: str, stream: Any = None):
        self.label = label
        self.stream = stream or sys.stderr

    def update_to(self, percent: int, status: str) -> None:
        filled = self.WIDTH * max(0, min(percent, 100)) // 100
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {percent:3d}% {status:<10}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


class _NoBar:
    def update_to(self, percent: int, status: str) -> None:
        pass

    def close(self) -> None:
        pass


def make_bar(label: str, enabled: bool) -> Bar:
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _PlainBar(label)
    return _TqdmBar(label, tqdm)
