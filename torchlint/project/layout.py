"""Where a project is and how its imports resolve to its files.

The root is the nearest folder above a file holding a `pyproject.toml`, `setup.py`,
`setup.cfg`, `.git`, `torchlint.toml` or `.torchlint.toml`, else the folder the run
started from. A file of the project has a key: its path from the root, in POSIX form
("pkg/engine.py"). An import resolves as Python would find it when the project runs: in
the importing script's own folder first (what `python train.py` puts on `sys.path`),
then above the packages the importer sits in, then at the root and in `root/src`; a
relative import from the importer's package. Namespace packages (folders without
`__init__.py`) resolve the same way. Modules outside the project stay opaque.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git", "torchlint.toml", ".torchlint.toml")


def find_root(file: Path, fallback: Path) -> Path:
    """The project root of a file: the nearest folder above it with a marker, else
    `fallback`."""
    for folder in file.parents:
        if any(os.path.lexists(folder / m) for m in MARKERS):
            return folder
    return fallback


class Layout:
    """The Python files of one project, by key, and the resolution of imports."""

    def __init__(self, root: Path, files: Iterable[Path]) -> None:
        self.root = root.absolute()
        self.paths: dict[str, Path] = {}
        for path in files:
            key = self.key(path)
            if key is not None and key.endswith(".py"):
                self.paths[key] = path
        self.folders = {k.rsplit("/", n)[0] for k in self.paths for n in range(1, k.count("/") + 1)}
        self._resolved: dict[tuple[str, str], tuple[str, tuple[str, ...]] | None] = {}

    def key(self, path: Path) -> str | None:
        """The key of a file under the root, else None."""
        try:
            return path.absolute().relative_to(self.root).as_posix()
        except ValueError:
            return None

    def _module(self, folder: str, parts: list[str]) -> str | None:
        """The file of module `parts` under `folder` (a key prefix: "" or "src/")."""
        stem = folder + "/".join(parts)
        for key in (f"{stem}.py", f"{stem}/__init__.py"):
            if key in self.paths:
                return key
        return None

    def _roots(self, importer: str) -> list[str]:
        """The folders (key prefixes) an absolute import in `importer` searches."""
        folder = importer.rpartition("/")[0]
        roots = [f"{folder}/" if folder else ""]
        top = folder  # above the packages the importer sits in
        while top and f"{top}/__init__.py" in self.paths:
            top = top.rpartition("/")[0]
        for extra in (f"{top}/" if top else "", "", "src/"):
            if extra not in roots:
                roots.append(extra)
        return roots

    def resolve(self, importer: str, qualname: str) -> tuple[str, tuple[str, ...]] | None:
        """The file a name imported in `importer` refers to, and the attributes after the
        module (`("pkg/models.py", ("Net",))` for "pkg.models.Net"); None outside the
        project. A relative name keeps its leading dots (".models.Net")."""
        key = (importer, qualname)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(importer, qualname)
        return self._resolved[key]

    def _resolve(self, importer: str, qualname: str) -> tuple[str, tuple[str, ...]] | None:
        dots = len(qualname) - len(qualname.lstrip("."))
        parts = [p for p in qualname[dots:].split(".") if p]
        if dots:
            folder = importer.rpartition("/")[0]
            for _ in range(dots - 1):
                folder = folder.rpartition("/")[0]
            roots = [f"{folder}/" if folder else ""]
            if not parts:  # `from . import x` binds ".x": the package itself
                init = f"{roots[0]}__init__.py"
                return (init, ()) if init in self.paths else None
        else:
            roots = self._roots(importer)
        for root in roots:
            for end in range(len(parts), 0, -1):
                found = self._module(root, parts[:end])
                if found is not None and found != importer:
                    return found, tuple(parts[end:])
                if found == importer:
                    break  # the importer itself: not a module of another file
        if dots and parts:
            init = f"{roots[0]}__init__.py"
            if init in self.paths:
                return init, tuple(parts)
        return None

    def module_exists(self, importer: str, head: str) -> bool:
        """An absolute import of `head` (a top-level name) finds a module of the project."""
        return any(
            self._module(root, [head]) is not None or root + head in self.folders
            for root in self._roots(importer)
        )
