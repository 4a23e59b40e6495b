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
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git", "torchlint.toml", ".torchlint.toml")
# Import statements, read without parsing (to order the files before any is parsed).
IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)"
    r"(?:from[ \t]+(?P<base>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n#;]+)"
    r"|import[ \t]+(?P<modules>[\w. \t,]+))",
    re.M,
)
COMMENT = re.compile(r"#[^\n]*")
Target = tuple[str, tuple[str, ...]]  # a file's key, and the attributes read off its module


def find_root(file: Path, fallback: Path) -> Path:
    """The project root of a file: the nearest folder above it with a marker, else
    `fallback`."""
    for folder in file.parents:
        if any(os.path.lexists(folder / m) for m in MARKERS):
            return folder
    return fallback


def alone(root: Path) -> bool:
    """A root no marker names that no project is rooted at (the home folder, the
    temporary folder, a filesystem root): a file checked there is read without the other
    files of the folder (`torchlint check ~/train.py` does not read all of $HOME)."""
    root = root.absolute()
    if any(os.path.lexists(root / m) for m in MARKERS):
        return False
    home = Path(os.path.expanduser("~")).absolute()
    return root == root.parent or root in (home, Path(tempfile.gettempdir()).absolute())


class Layout:
    """The Python files of one project, by key, and the resolution of imports."""

    def __init__(self, root: Path, files: Iterable[Path]) -> None:
        self.root = root.absolute()
        self.paths: dict[str, Path] = {}
        for path in files:
            key = self.key(path)
            # A notebook is a script of the project (it imports the project's modules),
            # never a module: no import resolves to it.
            if key is not None and key.endswith((".py", ".ipynb")):
                self.paths[key] = path
        self.folders = {k.rsplit("/", n)[0] for k in self.paths for n in range(1, k.count("/") + 1)}
        self._resolved: dict[tuple[str, str], Target | None] = {}
        self.added: dict[str, list[str]] = {}  # importer -> folders its `sys.path` gains
        self._inits: dict[str, dict[str, Target]] = {}
        self._exists: dict[tuple[str, str], bool] = {}

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
        """The folders (key prefixes) an absolute import in `importer` searches: its own,
        those its `sys.path` additions name, the one above its packages, the root, `src/`."""
        folder = importer.rpartition("/")[0]
        roots = [f"{folder}/" if folder else ""]
        top = folder  # above the packages the importer sits in
        while top and f"{top}/__init__.py" in self.paths:
            top = top.rpartition("/")[0]
        for extra in (*self.added.get(importer, ()), f"{top}/" if top else "", "", "src/"):
            if extra not in roots:
                roots.append(extra)
        return roots

    def add_paths(self, importer: str, folders: Iterable[str]) -> None:
        """Folders a file adds to `sys.path` (`sys.path.insert(0, "..")`: a notebook of
        a subfolder importing the project's helpers), relative to its own folder."""
        prefixes = []
        for folder in folders:
            parts = [p for p in importer.split("/")[:-1]]
            for part in folder.replace("\\", "/").split("/"):
                if part == "..":
                    if not parts:
                        break  # above the root: outside the project
                    parts.pop()
                elif part not in ("", "."):
                    parts.append(part)
            else:
                prefixes.append("".join(f"{p}/" for p in parts))
        if prefixes:
            self.added[importer] = prefixes
            self._resolved = {k: v for k, v in self._resolved.items() if k[0] != importer}
            self._exists.clear()

    def resolve(self, importer: str, qualname: str) -> Target | None:
        """The file a name imported in `importer` refers to, and the attributes after the
        module (`("pkg/models.py", ("Net",))` for "pkg.models.Net"); None outside the
        project. A relative name keeps its leading dots (".models.Net")."""
        key = (importer, qualname)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(importer, qualname)
        return self._resolved[key]

    def _resolve(self, importer: str, qualname: str) -> Target | None:
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
        elif not parts or not self.module_exists(importer, parts[0]):
            return None  # `torch.nn`: no module of the project is named so
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
        # The roots depend on the folder only, but for a file adding to `sys.path`.
        key = (importer if importer in self.added else importer.rpartition("/")[0], head)
        if key not in self._exists:
            self._exists[key] = any(
                self._module(root, [head]) is not None or root + head in self.folders
                for root in self._roots(importer)
            )
        return self._exists[key]

    def imports(self, importer: str, names: Iterable[str]) -> set[str]:
        """The files of the project the names `importer` imports lead to (`imported`):
        for a name a package's `__init__.py` re-exports, the file that defines it. The
        `__init__.py` of a package the importer is part of does not count otherwise:
        importing its own package, a module gets what is already there."""
        found: set[str] = set()
        for name in names:
            target = self.resolve(importer, name)
            if target is None:
                continue
            key, attributes = target
            init = attributes and key.endswith("__init__.py")
            source = self.reexports(key).get(attributes[0]) if init else None
            if source is not None:  # a name the package re-exports: the file defining it
                key = source[0]
            if not self._enclosing(importer, key):
                found.add(key)
        found.discard(importer)
        return found

    def reexports(self, init: str) -> dict[str, Target]:
        """The names a package's `__init__.py` imports from files of the project, each
        with where it comes from: the file, and the name there ("prepare" for
        `from .megatron import prepare as megatron_prepare`; none for a module)."""
        if init not in self._inits:
            self._inits[init] = {}  # while reading (a package importing itself)
            found: dict[str, Target] = {}
            try:
                text = self.paths[init].read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            for item in imported(text):
                target = self.resolve(init, item.name)
                if target is not None and target[1] and target[0].endswith("__init__.py"):
                    further = self.reexports(target[0]).get(target[1][0])  # a package's own
                    target = (further[0], further[1] + target[1][1:]) if further else None
                if target is not None and not target[0].endswith("__init__.py"):
                    found.setdefault(item.bound, target)
            self._inits[init] = found
        return self._inits[init]

    def _enclosing(self, importer: str, target: str) -> bool:
        """`target` is the `__init__.py` of a package `importer` sits in."""
        folder = target.removesuffix("__init__.py")
        return target.endswith("__init__.py") and importer.startswith(folder)


class Imported(NamedTuple):
    """A name an import statement imports."""

    name: str  # qualified: "pkg.models.Net", ".engine.train", "torch"
    bound: str  # the name it binds, for a re-export: "Net", or its alias
    nested: bool  # indented: in a function (often to break an import cycle) or a block


# `sys.path.insert(0, "..")`, `sys.path.append("../utils")`: a folder given as a literal.
SYS_PATH = re.compile(r"""sys\.path\.(?:insert\(\s*\d+\s*,|append\()\s*["']([^"'\n]+)["']\s*\)""")


# A module-level call (`main()`, `train(model, loader, DEVICE)`, `loaders = get_loaders(8)`):
# the file does work when it runs.
TOP_LEVEL_CALL = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*)?[A-Za-z_][\w.]*\(", re.M
)


def is_script(key: str, text: str) -> bool:
    """A file run as a program (read without parsing): a notebook, one with a `__main__`
    guard or argparse, or one that calls something at module level (`python run.py`
    with `train(model, loader)` at its top)."""
    return (
        key.endswith(".ipynb")
        or "__main__" in text
        or "parse_args" in text
        or TOP_LEVEL_CALL.search(text) is not None
    )


def sys_paths(text: str) -> list[str]:
    """The relative folders `text` adds to `sys.path` as string literals."""
    return [m.group(1) for m in SYS_PATH.finditer(text) if not m.group(1).startswith("/")]


def imported(text: str) -> list[Imported]:
    """The names the import statements of `text` import, read without parsing."""
    found: list[Imported] = []
    for m in IMPORT.finditer(text):
        nested = bool(m.group("indent"))
        if m.group("modules") is not None:
            prefix, items = "", m.group("modules").split(",")
        else:
            base = m.group("base")
            prefix = base if base.endswith(".") else f"{base}."
            items = COMMENT.sub("", m.group("names")).strip("()").split(",")
        for item in items:
            name, _, alias = (w.strip(" \t\n\\") for w in item.partition(" as "))
            if name and name != "*":
                found.append(Imported(prefix + name, alias or name.rpartition(".")[2], nested))
    return [i for i in found if i.name.strip(".")]


def levels(
    graph: Mapping[str, set[str]], nested: Mapping[str, set[str]] | None = None
) -> dict[str, int]:
    """Each file's level in the import graph: 0 for files that import no file of the
    project, else one more than the highest level of what they import. The imports
    `nested` in a function or a block count but inside an import cycle (where one of
    them most often breaks the cycle when the program runs). Inside a cycle of top-level
    imports, the edge that closes it (met again by a depth-first walk in sorted order) is
    left out: the files of a cycle come one after another, so that all but one of its
    imports are known when the importer is analysed. Files of one level can be analysed
    side by side once the levels below are done; the order depends on the graph only."""
    if nested:
        full = {n: graph[n] | nested.get(n, set()) for n in graph}
        part = _components(full)
        graph = {
            n: graph[n] | {d for d in nested.get(n, ()) if d in part and part[d] != part[n]}
            for n in graph
        }
    found: dict[str, int] = {}

    def deps(node: str) -> Iterator[str]:
        return iter(sorted(d for d in graph[node] if d in graph))

    for start in sorted(graph):
        if start in found:
            continue
        walking = {start}
        stack = [(start, deps(start))]
        while stack:
            node, todo = stack[-1]
            dep = next((d for d in todo if d not in found and d not in walking), None)
            if dep is not None:
                walking.add(dep)
                stack.append((dep, deps(dep)))
                continue
            stack.pop()
            walking.discard(node)
            # what is still being walked closes a cycle: left out
            found[node] = 1 + max((found[d] for d in graph[node] if d in found), default=-1)
    return found


def _components(graph: Mapping[str, set[str]]) -> dict[str, str]:
    """Each node's strongly connected component, named by one of its nodes (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    component: dict[str, str] = {}
    stack: list[str] = []
    for start in graph:
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        work = [(start, iter(graph[start]))]
        while work:
            node, edges = work[-1]
            for dep in edges:
                if dep not in graph:
                    continue
                if dep not in index:
                    index[dep] = low[dep] = len(index)
                    stack.append(dep)
                    work.append((dep, iter(graph[dep])))
                    break
                if dep not in component:  # on the stack: in this node's component
                    low[node] = min(low[node], index[dep])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    while True:
                        member = stack.pop()
                        component[member] = node
                        if member == node:
                            break
    return component
