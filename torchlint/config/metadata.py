"""The oldest torch a project supports, read from its metadata, as ruff reads
`requires-python`: what `target-torch` is when the configuration does not set it.

The project is the nearest directory, from where the run starts up to the repository
root, that holds any of: pyproject.toml (`[project] dependencies`, `[build-system]
requires`, Poetry's dependencies), setup.cfg (`install_requires`), setup.py (the
literal list given to `setup(install_requires=...)`, read with `ast`, never run),
requirements*.txt, environment.yml. Every torch requirement there with a lower bound
counts (`torch>=1.8`, `torch==2.0.1`, `torch~=1.13`, conda's `pytorch=1.12`); the
oldest wins: no fix may need more. Optional extras do not count: a project that needs
torch only for an extra (a verifier, a GPU backend) does not run its own code on it.
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

METADATA = ("pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml")
# A PEP 508 requirement on torch: name, extras, then the version specifiers.
_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(?P<spec>[^;#]*)"
)
_CLAUSE = re.compile(r"(===|==|~=|>=|<=|!=|>|<|\^|~|=)\s*v?(\d+)(?:\.(\d+))?")
_CONDA = re.compile(r"^\s*-\s*(?:conda-forge::|pytorch::)?(?P<req>(?:py)?torch\b.*)$")
# `=`: conda's prefix match; `^`, `~`: Poetry's caret and tilde.
_LOWER = frozenset({"===", "==", "~=", ">=", ">", "^", "~", "="})


@dataclass(frozen=True)
class Declared:
    """A lower bound on torch a project declares, and where."""

    version: tuple[int, int]
    source: str  # `pyproject.toml ([project] dependencies): torch>=1.8`

    @property
    def text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


def lower_bound(requirement: str, names: Iterable[str] = ("torch",)) -> tuple[int, int] | None:
    """The oldest torch (major, minor) a requirement string allows, if it is on torch and
    bounded below."""
    m = _REQUIREMENT.match(requirement)
    if m is None or m.group("name").lower().replace("_", "-") not in names:
        return None
    if m.group("spec").lstrip().startswith("@"):
        return None  # a URL: its version is not a bound we read
    bounds = [
        (int(major), int(minor or 0))
        for op, major, minor in _CLAUSE.findall(m.group("spec"))
        if op in _LOWER
    ]
    return max(bounds) if bounds else None


def project_directory(start: Path) -> Path | None:
    """The nearest directory at or above `start` with project metadata, not above the
    repository root (the first directory holding `.git`)."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if any(os.path.isfile(directory / name) for name in METADATA) or any(
            directory.glob("requirements*.txt")
        ):
            return directory
        if os.path.exists(directory / ".git"):
            return None
    return None


def oldest_torch(start: Path) -> Declared | None:
    """The oldest torch the project around `start` declares, if any."""
    directory = project_directory(start)
    if directory is None:
        return None
    found = [d for d in _declarations(directory) if d is not None]
    return min(found, key=lambda d: d.version) if found else None


def _declarations(directory: Path) -> Iterator[Declared | None]:
    readers = {
        "pyproject.toml": _pyproject,
        "setup.cfg": _setup_cfg,
        "setup.py": _setup_py,
        "environment.yml": _environment,
        "environment.yaml": _environment,
    }
    files = [directory / name for name in readers] + sorted(directory.glob("requirements*.txt"))
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # absent or unreadable: it declares nothing
            continue
        reader = readers.get(path.name, _requirements_txt)
        for where, requirement, names in reader(text):
            bound = lower_bound(requirement, names)
            source = f"{path.name}{f' ({where})' if where else ''}: {requirement.strip()}"
            yield Declared(bound, source) if bound is not None else None


Found = Iterator[tuple[str, str, tuple[str, ...]]]  # (where in the file, requirement, names)
TORCH = ("torch",)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _pyproject(text: str) -> Found:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    project = data.get("project", {})
    tables = [
        ("[project] dependencies", project.get("dependencies")),
        ("[build-system] requires", data.get("build-system", {}).get("requires")),
    ]
    for where, value in tables:
        for requirement in _strings(value):
            yield where, requirement, TORCH
    poetry = data.get("tool", {}).get("poetry", {}).get("dependencies", {})
    spec = poetry.get("torch") if isinstance(poetry, dict) else None
    if isinstance(spec, dict):
        spec = spec.get("version")
    if isinstance(spec, str):
        yield "[tool.poetry] dependencies", f"torch {spec}", TORCH


def _setup_cfg(text: str) -> Found:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return
    if parser.has_option("options", "install_requires"):
        for line in parser.get("options", "install_requires").splitlines():
            yield "install_requires", line, TORCH


def _setup_py(text: str) -> Found:
    """The string literals of `setup(install_requires=...)`: a list literal, or a name the
    module binds to one."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    assigned = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _called(node.func) != "setup":
            continue
        for keyword in node.keywords:
            if keyword.arg != "install_requires":
                continue
            value = keyword.value
            if isinstance(value, ast.Name):
                value = assigned.get(value.id, value)
            for constant in ast.walk(value):
                if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                    yield keyword.arg, constant.value, TORCH


def _called(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _requirements_txt(text: str) -> Found:
    for line in text.splitlines():
        if not line.lstrip().startswith(("-", "#")):
            yield "", line, TORCH


def _environment(text: str) -> Found:
    """conda's `- pytorch=1.12` / `- pytorch>=1.8`, and pip's `- torch==2.0` under `pip:`."""
    for line in text.splitlines():
        m = _CONDA.match(line)
        if m is not None:
            yield "", m.group("req"), ("torch", "pytorch")
