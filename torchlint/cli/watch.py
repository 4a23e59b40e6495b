"""`check --watch`: the run again whenever a file it checks, or its config file, changes
(as ruff's watch mode), found by polling their modification times and sizes: no
dependency, and the same on every platform."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from torchlint.cli.app import EXIT_CLEAN, EXIT_INTERRUPTED, note

POLL_S = 0.5
Stamps = dict[Path, tuple[int, int] | None]  # path -> (mtime in ns, size); None: gone


def stamps(paths: Iterable[Path]) -> Stamps:
    out: Stamps = {}
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            out[path] = None
        else:
            out[path] = (stat.st_mtime_ns, stat.st_size)
    return out


def watch(run: Callable[[], int], watched: Callable[[], Stamps], quiet: bool) -> int:
    """`run` now, and again after each change of what `watched` stamps, until Ctrl-C
    (exit 0). A run's own writes (`--fix`) are a change: the next run shows what is left."""
    said = "Starting linter in watch mode..."
    try:
        while True:
            before = watched()
            _clear()
            if not quiet:
                note(said)
            if run() == EXIT_INTERRUPTED:  # Ctrl-C while fixing: the run named what it wrote
                break
            sys.stdout.flush()  # each report whole, also through a pipe
            while watched() == before:
                time.sleep(POLL_S)
            said = "File change detected..."
    except KeyboardInterrupt:
        pass
    return EXIT_CLEAN


def _clear() -> None:
    """Clear the terminal (not a pipe or a file), as ruff does before each run."""
    if not sys.stdout.isatty():
        return
    if os.name == "nt":
        os.system("cls")  # the console's own command, as click's clear() runs it
    else:
        sys.stdout.write("\x1b[H\x1b[2J\x1b[3J")  # home, clear the screen and its scrollback
        sys.stdout.flush()
