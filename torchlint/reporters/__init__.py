"""Reporters: pure functions from results to text, one module per output format.

Each module defines `render(results, context) -> str`; none touches a CST.
Formats and their schemas are described in docs/output-formats.md.
"""

from __future__ import annotations

import hashlib
import importlib
import posixpath
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from torchlint.results import ERROR_NAMES, SKIPPED, FileResult, Violation

_MODULES = {
    "text": "text",
    "full": "text",
    "concise": "concise",
    "json": "json_format",
    "json-lines": "json_lines",
    "github": "github",
    "sarif": "sarif",
    "gitlab": "gitlab",
    "rdjson": "rdjson",
    "rdjsonl": "rdjson",
    "junit": "junit",
}
FORMATS = tuple(_MODULES)
HUMAN = frozenset({"text", "full", "concise"})  # followed by a summary line
# Formats that show the text edits of each fix (spliced from the edited nodes' positions).
WITH_EDITS = frozenset({"json", "json-lines", "sarif", "rdjson", "rdjsonl"})

TOOL_URL = "https://github.com/torchlint/torchlint"
DOCS_URL = TOOL_URL + "/blob/main/docs/rules/{code}.md"
EXTENDING_URL = TOOL_URL + "/blob/main/docs/extending.md"
ERRORS_URL = TOOL_URL + "/blob/main/docs/output-formats.md#files-that-could-not-be-checked"


@dataclass(frozen=True)
class Context:
    color: bool = False
    unsafe: bool = False  # --unsafe-fixes: unsafe fixes count as fixable
    unsafe_hint: bool = True  # say what --unsafe-fixes would fix (not after --no-unsafe-fixes)
    show_fixes: bool = False
    # The working directory relative to the repository root ("" at the root, else
    # "sub/dir/"): CI formats name files relative to the repository root.
    prefix: str = ""
    format: str = "text"  # the format asked for (one module serves rdjson and rdjsonl)
    # Low-impact findings left out of the report (`hide_low_impact`), by code.
    hidden: dict[str, int] = field(default_factory=dict)


def render(fmt: str, results: list[FileResult], context: Context) -> str:
    module = importlib.import_module(f"torchlint.reporters.{_MODULES[fmt]}")
    text: str = module.render(results, replace(context, format=fmt))
    return text


def rule_url(code: str) -> str:
    """A built-in rule's page; for a local or installed rule, how such rules are written
    (`torchlint rule CODE` prints its own documentation)."""
    if code in ERROR_NAMES or code == SKIPPED:
        return ERRORS_URL
    return DOCS_URL.format(code=code) if code.startswith("TL") else EXTENDING_URL


def is_error(v: Violation) -> bool:
    """A record of a file (or cell) that could not be checked, not a rule's finding."""
    return v.code in ERROR_NAMES


def low_impact(v: Violation) -> bool:
    """A low-impact finding (shown with `--show-low-impact`): a note, not a warning."""
    return v.impact != "high"


def hide_low_impact(results: list[FileResult]) -> dict[str, int]:
    """Leave the low-impact findings out of `results` (the default: shown only with
    `--show-low-impact`); how many of each code were left out."""
    hidden: Counter[str] = Counter()
    for r in results:
        shown = [v for v in r.violations if not low_impact(v)]
        if len(shown) != len(r.violations):
            hidden.update(v.code for v in r.violations if low_impact(v))
            r.violations = shown
    return dict(hidden)


def fixable(v: Violation, context: Context) -> bool:
    return v.fix is not None and (v.fix.applicability == "safe" or context.unsafe)


def repo_path(path: str, context: Context) -> str:
    """`path` (relative to the working directory) as a POSIX path from the repository root."""
    posix = path.replace("\\", "/")
    if posixpath.isabs(posix) or (len(posix) > 1 and posix[1] == ":"):
        return posix
    return posixpath.normpath(posixpath.join(context.prefix, posix))


def byte_column(line: str, column: int) -> int:
    """The 1-based UTF-8 byte column of the 1-based code-point `column` in `line`."""
    return len(line[: column - 1].encode("utf-8", "surrogatepass")) + 1


def source_lines(result: FileResult, cell: int | None = None) -> list[str]:
    """The lines a position points into: the file's, or (notebooks) its cell's."""
    if cell is not None and result.cells is not None and 0 < cell <= len(result.cells):
        return result.cells[cell - 1].splitlines()
    return (result.text or "").splitlines()


def cell_prefix(v: Violation) -> str:
    """Notebook positions count within a cell, which line-based CI formats cannot point
    into: they report such findings on the whole file and say where in the message."""
    return f"cell {v.cell}, line {v.line}, column {v.column}: " if v.cell is not None else ""


def line_at(lines: list[str], number: int) -> str:
    return lines[number - 1] if 0 < number <= len(lines) else ""


def fingerprints(result: FileResult, context: Context) -> Iterator[tuple[Violation, str]]:
    """Each finding with a fingerprint that survives edits elsewhere in the file.

    It hashes the file's repository path, the code, the flagged line's text (stripped)
    and how many identical (code, text) pairs came before in the file: no line numbers.
    """
    path = repo_path(result.path, context)
    seen: Counter[tuple[str, str]] = Counter()
    for v in result.records():
        key = (v.code, line_at(source_lines(result, v.cell), v.line).strip())
        data = "\0".join((path, *key, str(seen[key])))
        seen[key] += 1
        yield v, hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:32]
