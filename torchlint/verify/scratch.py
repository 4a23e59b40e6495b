"""Each run's working directory: a mirror of the script's folder, so that what a run
writes (a checkpoint, logs, plots) never lands in the user's tree, and a run of fixed
code never overwrites the user's files.

The mirror has real folders and a copy of each regular file up to COPY_BYTES (code,
configs, small checkpoints: what a run may overwrite), up to COPY_TOTAL bytes and
MAX_ENTRIES entries in all; it links to the rest (datasets, big checkpoints, folders
beyond the budget or never worth copying: `.git`, virtual environments), so paths to
data still resolve. A run that writes through a link writes the user's file: `tidy`
says which linked files a run changed. After the run, `tidy` removes what the mirror
brought and the run left as it was, so the folder keeps what the run wrote.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

COPY_BYTES = 16 * 1024 * 1024  # a file above this is linked, not copied
COPY_TOTAL = 64 * 1024 * 1024  # copied per mirror, at most (the copies go after the run)
MAX_ENTRIES = 2_000  # files and folders mirrored; beyond, whole folders are linked
# Folders a training script does not write into, and that can be huge: always linked.
LINKED = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", "env", "node_modules", "__pycache__", ".tox"}
    | {".mypy_cache", ".pytest_cache", ".ruff_cache", ".torchlint_cache", "site-packages"}
)

_Stamp = tuple[int, int]  # size, mtime in ns


def _stamp(path: Path) -> _Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@dataclass
class Mirror:
    source: Path  # the script's folder
    root: Path  # the run's working directory, mirroring `source`
    copied: dict[Path, _Stamp | None] = field(default_factory=dict)  # as copied
    made: list[Path] = field(default_factory=list)  # folders created, parents first
    links: dict[Path, Path] = field(default_factory=dict)  # link -> what it points to
    watched: dict[Path, _Stamp | None] = field(default_factory=dict)  # linked user files

    def linked_files(self) -> list[Path]:
        """The user's files a run reaches through a link (too large to copy)."""
        return sorted(self.watched)


def mirror(source: Path, root: Path) -> Mirror:
    """Mirror the folder `source` at `root` (which must not exist yet)."""
    made = Mirror(source, root)
    root.mkdir(parents=True)
    budget = [MAX_ENTRIES, COPY_TOTAL]
    todo = deque([(source, root)])
    while todo:  # breadth first: the budget goes to what is near the script
        folder, target = todo.popleft()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            _place(made, Path(entry.path), target / entry.name, entry, budget, todo)
    return made


def _place(
    made: Mirror,
    path: Path,
    target: Path,
    entry: os.DirEntry[str],
    budget: list[int],
    todo: deque[tuple[Path, Path]],
) -> None:
    budget[0] -= 1
    try:
        if entry.is_symlink():
            pass
        elif entry.is_dir():
            inside = made.root.is_relative_to(path)  # the logs may live in the script's folder
            if budget[0] > 0 and entry.name not in LINKED and not inside:
                target.mkdir()
                made.made.append(target)
                todo.append((path, target))
                return
        elif entry.is_file():
            size = entry.stat().st_size
            if budget[0] > 0 and size <= COPY_BYTES and size <= budget[1]:
                budget[1] -= size
                shutil.copy2(path, target)
                made.copied[target] = _stamp(target)
                return
    except OSError:
        pass  # unreadable: a link, and the run sees what it would have seen
    real = Path(os.path.realpath(path))  # a relative link would point elsewhere from here
    target.symlink_to(real, target_is_directory=real.is_dir())
    made.links[target] = real
    if real.is_file():
        made.watched[real] = _stamp(real)


def overlay(made: Mirror, relative: str, data: bytes) -> bool:
    """Put `data` at `relative` in the mirror in place of its copy (a fixed file of the
    script's folder); False where the file lies in a linked folder, where writing it
    would write the user's file."""
    target = made.root / relative
    for folder in target.parents:
        if folder == made.root:
            break
        if folder.is_symlink() or not folder.is_dir():
            return False
    if target.is_symlink():  # a large file linked: the fixed copy replaces the link
        real = made.links.pop(target, None)
        if real is not None:
            made.watched.pop(real, None)
        target.unlink()
    target.write_bytes(data)
    made.copied[target] = _stamp(target)
    return True


def tidy(made: Mirror) -> list[Path]:
    """After a run: remove the links and the copies the run left unchanged, and the
    folders left empty, so `root` holds what the run wrote. The user's linked files the
    run changed are returned."""
    changed = [p for p, stamp in made.watched.items() if _stamp(p) != stamp]
    for link, real in made.links.items():
        if os.path.islink(link) and os.readlink(link) == str(real):
            os.unlink(link)
    for copy, stamp in made.copied.items():
        if stamp is not None and _stamp(copy) == stamp and not os.path.islink(copy):
            os.unlink(copy)
    for folder in [*reversed(made.made), made.root]:
        with contextlib.suppress(OSError):  # only an empty folder goes
            folder.rmdir()
    return changed
