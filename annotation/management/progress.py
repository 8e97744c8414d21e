"""A one-line progress bar the commands redraw in place on a terminal."""

from __future__ import annotations

BAR_WIDTH = 25


class TerminalProgress:
    def __init__(self, stream):
        self.stream = stream

    def draw(self, done: int, total: int, detail: str) -> None:
        percent = 100 * done // total if total else 100
        bar = "#" * (percent * BAR_WIDTH // 100)
        self.stream.write(f"\r[{bar:<{BAR_WIDTH}}] {percent:3d}%  {detail}", ending="")
        self.stream.flush()

    def clear(self) -> None:
        self.stream.write("\r" + " " * 72 + "\r", ending="")
        self.stream.flush()
