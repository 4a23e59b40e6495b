"""What the language server asks of the engine, as plain data (no LSP types here).

Every answer comes from the engine `torchlint check` and `fix` use, `run.runner`'s entries
for one text: findings from `lint_text` (a `.py` document, parsed again only where it
changed: `Buffers`) or `lint_notebook` (a notebook's cells), "fix all" from
the same exactly as `torchlint fix` runs them, one finding's fix from the text edits the
engine gives for that finding (those `--output-format json` shows), "ignore for this
line" from `add_noqa` (as `check --add-noqa`). An answer that changes text is the whole
new text; the server turns it into minimal edits. `env`: what the document's project
tells it (`projects.Opened.environment`), as a run tells each file of a project.
"""

from __future__ import annotations

import json
import traceback
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torchlint.config.plan import RunPlan
from torchlint.fixes import apply_line_edits
from torchlint.lint.incremental import Buffer
from torchlint.lint.linter import RuleErrorHandler
from torchlint.lint.noqa import add_noqa
from torchlint.lint.parser import LintError, check_syntax
from torchlint.reporters import Context, fixable
from torchlint.results import UNUSED_NOQA, FileError, FileResult, Violation
from torchlint.run.runner import Given, lint_notebook, lint_text
from torchlint.semantic.external import Environment


@dataclass(frozen=True)
class Cell:
    """A notebook cell as the editor holds it."""

    source: str
    python: bool  # a code cell in Python (others are carried along, never analysed)


@dataclass(frozen=True)
class Problem:
    """What to show besides findings: a syntax error, a file that could not be analysed."""

    message: str
    line: int  # 1-based
    column: int  # 1-based, in code points
    cell: int | None = None  # notebooks: 1-based index into the cells
    warning: bool = False  # analysed in part only (else an error)


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # rules that raised, with tracebacks
    checked: bool = False  # the rules read it as a file of its project (`FileResult.checked`)


def offered(v: Violation, setup: RunPlan) -> bool:
    """Whether the finding's fix is offered: safe, or unsafe with unsafe fixes on."""
    return fixable(v, Context(unsafe=setup.unsafe))


def _collect(report: Report) -> RuleErrorHandler:
    def failed(code: str, exc: Exception) -> None:
        details = "".join(traceback.format_exception(exc))
        report.failures.append(f"rule {code} failed, its findings are left out: {details}")

    return failed


def _given(
    setup: RunPlan,
    report: Report | None = None,
    buffer: Buffer | None = None,
    env: Environment | None = None,
) -> Given:
    """What an editor's text is linted with: its config's rules, those that raise told on
    `report`; its project learns the file from its saved text (`projects`), so a lint
    leaves out the file's summary."""
    handler = _collect(report) if report is not None else None
    return Given(handler, buffer, env, setup.config.rules, summary=False)


def _reported(report: Report, result: FileResult, cells: Sequence[Cell] | None = None) -> Report:
    """A lint's result on the editor: its findings, and why there are none where the text
    cannot be analysed (a notebook's, in the cell it names)."""
    report.violations = result.violations
    report.checked = result.checked
    if cells is None:
        report.problems += [Problem(e.record().message, e.line, e.column) for e in result.errors]
    else:
        report.problems += cell_problems(result.errors, cells)
    if result.warning is not None:
        first = _first_python(cells) if cells is not None else None
        report.problems.append(Problem(result.warning, 1, 1, first, True))
    return report


def internal_error(report: Report, exc: Exception, cell: int | None = None) -> None:
    """A bug in torchlint, said on the document (and its traceback logged), never a crash."""
    message = f"internal error ({type(exc).__name__}: {exc}); please report it with this file"
    report.problems.append(Problem(message, 1, 1, cell))
    report.failures.append("".join(traceback.format_exception(exc)))


# -- a .py document -----------------------------------------------------------------------


class Buffers:
    """The parse buffers of the documents edited last (a tree is about 5 MB per 1,000
    lines: a few are kept, not one per open document). Used by one thread."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.held: OrderedDict[str, Buffer] = OrderedDict()

    def get(self, key: str) -> Buffer:
        buffer = self.held.pop(key, None) or Buffer()
        self.held[key] = buffer
        while len(self.held) > self.size:
            self.held.popitem(last=False)
        return buffer

    def drop(self, key: str) -> None:
        self.held.pop(key, None)


def lint_python(
    text: str,
    path: str,
    setup: RunPlan,
    buffer: Buffer | None = None,
    env: Environment | None = None,
) -> Report:
    """The findings in `text`, or why there are none (a syntax error at its position)."""
    report = Report()
    try:
        given = _given(setup, report, buffer, env)
        result, _ = lint_text(text, path, setup.job(), setup.codes, given)
    except Exception as exc:
        internal_error(report, exc)
        return report
    return _reported(report, result)


def fix_all_python(
    text: str, path: str, setup: RunPlan, env: Environment | None = None
) -> str | None:
    """What `torchlint fix` (with the document's safety) makes of `text`, a rule that
    raises left out as in the diagnostics; None if it would change nothing for an error."""
    try:
        given = _given(setup, Report(), env=env)
        result, _ = lint_text(text, path, setup.job(fix=True), setup.codes, given)
    except Exception:  # a bug: as `torchlint fix`, change nothing
        return None
    return None if result.errors or result.warning is not None else result.text


def fix_python(
    text: str,
    path: str,
    setup: RunPlan,
    key: tuple[str, int, int],
    buffer: Buffer | None = None,
    env: Environment | None = None,
) -> str | None:
    """`text` with the fix of the finding `key` (code, line, column) applied alone."""
    code = key[0]
    if code not in setup.codes:
        return None
    codes = _resolving(code, setup)
    job = setup.job(codes=codes, with_edits=True)
    try:
        result, _ = lint_text(text, path, job, codes, _given(setup, buffer=buffer, env=env))
    except Exception:
        return None
    for v in result.violations:
        if (v.code, v.line, v.column) == key and v.fix is not None and v.fix.edits:
            if not offered(v, setup):
                return None
            new = apply_line_edits(text, v.fix.edits)
            try:
                check_syntax(new, path)  # as `torchlint fix`: never a file that does not parse
            except LintError:
                return None
            return new
    return None


def _resolving(code: str, setup: RunPlan) -> tuple[str, ...]:
    """The rules that find `code`'s finding again, to fix it alone: that rule; for TL904,
    which judges the noqa comments of the rules selected, every rule selected."""
    return setup.codes if code == UNUSED_NOQA else (code,)


def ignore(text: str, line: int, code: str) -> str | None:
    """`text` with `# noqa: CODE` for the finding on `line`, None if already there."""
    new, changed = add_noqa(text, {line: {code}})
    return new if changed else None


# -- a notebook ---------------------------------------------------------------------------


def notebook_json(cells: Sequence[Cell]) -> str:
    """The cells as an nbformat 4 notebook: what `lint_notebook` reads."""
    out: list[dict[str, Any]] = []
    for cell in cells:
        if cell.python:
            out.append(
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": cell.source,
                }
            )
        else:
            out.append({"cell_type": "markdown", "metadata": {}, "source": cell.source})
    notebook = {
        "cells": out,
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(notebook)


def _first_python(cells: Sequence[Cell]) -> int | None:
    return next((i for i, cell in enumerate(cells, 1) if cell.python), None)


# How `lint_notebook` states a broken cell (notebook.py: `_in_cell`), several joined by "; ".
def cell_problems(errors: Sequence[FileError], cells: Sequence[Cell]) -> list[Problem]:
    """`lint_notebook`'s errors, each in the cell it names (else the first Python cell)."""
    return [
        Problem(
            e.record().message, e.line, e.column, _first_python(cells) if e.cell is None else e.cell
        )
        for e in errors
    ]


def lint_cells(
    cells: Sequence[Cell],
    path: str,
    setup: RunPlan,
    buffer: Buffer | None = None,
    env: Environment | None = None,
) -> Report:
    """The findings in a notebook's cells (positions in their cells), as for a file."""
    report = Report()
    try:
        text, given = notebook_json(cells), _given(setup, report, buffer, env)
        result, _ = lint_notebook(text, path, setup.job(), setup.codes, given)
    except Exception as exc:
        internal_error(report, exc, _first_python(cells))
        return report
    return _reported(report, result, cells)


def fix_all_cells(
    cells: Sequence[Cell], path: str, setup: RunPlan, env: Environment | None = None
) -> list[str] | None:
    """Every cell's source after `torchlint fix` of the notebook (a rule that raises left
    out); None if it would not fix."""
    job, given = setup.job(fix=True), _given(setup, Report(), env=env)
    try:
        result, _ = lint_notebook(notebook_json(cells), path, job, setup.codes, given)
    except Exception:
        return None
    return result.cells if result.error is None else None


def fix_cells(
    cells: Sequence[Cell],
    path: str,
    setup: RunPlan,
    key: tuple[str, int, int, int],
    buffer: Buffer | None = None,
    env: Environment | None = None,
) -> list[str] | None:
    """Every cell's source with the fix of the finding `key` (code, cell, line, column)
    applied alone; None if there is no such fix (or a cell does not parse)."""
    code = key[0]
    if code not in setup.codes:
        return None
    codes = _resolving(code, setup)
    job = setup.job(codes=codes, with_edits=True)
    try:
        given = _given(setup, buffer=buffer, env=env)
        result, _ = lint_notebook(notebook_json(cells), path, job, codes, given)
    except Exception:
        return None
    if result.error is not None:
        return None
    for v in result.violations:
        if (v.code, v.cell, v.line, v.column) == key and v.fix is not None and v.fix.edits:
            if not offered(v, setup):
                return None
            sources = [cell.source for cell in cells]
            for number in {e.cell for e in v.fix.edits if e.cell is not None}:
                edits = [e for e in v.fix.edits if e.cell == number]
                sources[number - 1] = apply_line_edits(sources[number - 1], edits)
            return sources
    return None
