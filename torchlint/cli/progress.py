"""A one-line progress bar on stderr, for terminal runs long enough to need one.

Nothing is drawn unless the stream is a terminal and the run has already taken
`delay` seconds; the line is redrawn at most `interval` times a second and erased
when the run ends, so a short run prints nothing and the report is never mixed in.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from typing import TextIO

from torchlint.results import FileResult


def wanted(stream: TextIO) -> bool:
    return stream.isatty() and os.environ.get("TERM") != "dumb"


class Progress:
    def __init__(
        self,
        total: int,
        stream: TextIO,
        delay: float = 1.0,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream
        self.delay = delay
        self.interval = interval
        self.clock = clock
        self.done = 0
        self.findings = 0
        self.start = clock()
        self.drawn_at: float | None = None

    def __call__(self, result: FileResult) -> None:
        self.done += 1
        self.findings += len(result.violations)
        now = self.clock()
        if now - self.start < self.delay:
            return
        if (
            self.drawn_at is not None
            and now - self.drawn_at < self.interval
            and self.done < self.total
        ):
            return
        self.drawn_at = now
        self.stream.write("\r" + self.line(result.path) + "\x1b[K")
        self.stream.flush()

    def line(self, path: str) -> str:
        columns = shutil.get_terminal_size((80, 24)).columns
        count = f"{self.done}/{self.total} files"
        found = f", {self.findings} found" if self.findings else ""
        width = max(10, min(30, columns // 4))
        filled = width * self.done // max(1, self.total)
        shown = "".join(c if c.isprintable() else "?" for c in path)
        text = f"[{'#' * filled}{'.' * (width - filled)}] {count}{found}  {shown}"
        return text if len(text) < columns else text[: columns - 2] + "…"

    def close(self) -> None:
        if self.drawn_at is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
