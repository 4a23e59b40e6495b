"""What the server holds of a document and what it sends: snapshots of its text, their
analyses, and the LSP shapes of findings (diagnostics) and of fixes (workspace edits)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from torchlint.config.plan import RunPlan
from torchlint.reporters import low_impact, rule_url
from torchlint.results import Answers, Violation
from torchlint.server.analysis import Cell, Problem, Report
from torchlint.server.projects import Opened
from torchlint.server.text import Lines, minimal_edits

NAME = "torchlint"


@dataclass(frozen=True)
class Snapshot:
    """A document's text at one generation: one text (a .py document) or its cells."""

    key: str  # the document's URI, or the notebook's
    generation: int
    path: Path | None  # None: not a file (an unsaved buffer)
    root: Path  # the workspace folder holding it (else the file's folder)
    folder: Path | None  # the workspace folder holding it, if any
    uris: tuple[str, ...]  # the text document, or each cell's
    versions: tuple[int | None, ...]
    texts: tuple[str, ...]
    cells: tuple[Cell, ...] | None  # None: a .py document

    @property
    def name(self) -> str:
        if self.path is not None:
            return str(self.path)
        return "untitled.ipynb" if self.cells is not None else "untitled.py"


@dataclass(frozen=True)
class Told:
    """What a lint was told by the document's project: when it no longer holds, the
    document is linted again."""

    opened: Opened
    path: Path
    answers: Answers
    checked: bool  # the file was analysed (else the project may reach into it later)


@dataclass
class Analysis:
    snapshot: Snapshot
    setup: RunPlan | None  # None: the config excludes the document (or is invalid)
    report: Report
    # By URI (each of the snapshot's): the diagnostics, and the findings behind them.
    diagnostics: dict[str, list[types.Diagnostic]]
    findings: dict[str, list[tuple[Violation, types.Diagnostic]]]
    told: Told | None = None  # None: analysed alone


def _range(lines: Lines, line: int, column: int, end_line: int, end_column: int) -> types.Range:
    """An LSP range from 1-based line and code-point column positions."""
    start = lines.position(line - 1, column - 1)
    end = lines.position(end_line - 1, end_column - 1)
    return types.Range(types.Position(*start), types.Position(*end))


def _diagnostic(v: Violation, lines: Lines) -> types.Diagnostic:
    return types.Diagnostic(
        range=_range(lines, v.line, v.column, v.end_line, v.end_column),
        message=v.message,
        # A low-impact finding (shown with `min-impact = "low"`) is information.
        severity=types.DiagnosticSeverity.Information
        if low_impact(v)
        else types.DiagnosticSeverity.Warning,
        code=v.code,
        code_description=types.CodeDescription(href=rule_url(v.code)),
        source=NAME,
        data={
            "name": v.name,
            "impact": v.impact,
            "fix": None
            if v.fix is None
            else {"title": v.fix.title, "applicability": v.fix.applicability},
        },
    )


def _problem(p: Problem, lines: Lines) -> types.Diagnostic:
    return types.Diagnostic(
        range=_range(lines, p.line, p.column, p.line, p.column + 1),
        message=p.message,
        severity=types.DiagnosticSeverity.Warning if p.warning else types.DiagnosticSeverity.Error,
        source=NAME,
    )


def analysed(snapshot: Snapshot, chosen: RunPlan | None, report: Report, encoding: str) -> Analysis:
    """Diagnostics for each of the snapshot's documents that holds Python (a notebook's
    other cells get none), findings and problems placed in their cells."""
    cells = snapshot.cells
    ours = [i for i in range(len(snapshot.uris)) if cells is None or cells[i].python]
    lines = {i: Lines(snapshot.texts[i], encoding) for i in ours}
    diagnostics: dict[str, list[types.Diagnostic]] = {snapshot.uris[i]: [] for i in ours}
    findings: dict[str, list[tuple[Violation, types.Diagnostic]]] = {
        snapshot.uris[i]: [] for i in ours
    }

    def index(cell: int | None) -> int | None:
        if cell is not None and cell - 1 in lines:
            return cell - 1
        return ours[0] if ours else None

    shown_low = chosen is not None and chosen.low_impact
    for v in report.violations:
        if low_impact(v) and not shown_low:
            continue  # low impact: found, not shown (`min-impact`)
        if (i := index(v.cell)) is not None:
            diagnostic = _diagnostic(v, lines[i])
            diagnostics[snapshot.uris[i]].append(diagnostic)
            findings[snapshot.uris[i]].append((v, diagnostic))
    for p in report.problems:
        if (i := index(p.cell)) is not None:
            diagnostics[snapshot.uris[i]].append(_problem(p, lines[i]))
    return Analysis(snapshot, chosen, report, diagnostics, findings)


def workspace_edit(
    snapshot: Snapshot, new: dict[int, str | None], encoding: str, versioned: bool
) -> types.WorkspaceEdit | None:
    """Minimal text edits that turn each of the snapshot's texts into its new text."""
    changes: list[tuple[str, int | None, list[types.TextEdit]]] = []
    for i, text in sorted(new.items()):
        if text is None or i >= len(snapshot.texts) or text == snapshot.texts[i]:
            continue
        lines = Lines(snapshot.texts[i], encoding)
        edits = [
            types.TextEdit(
                range=types.Range(
                    types.Position(*lines.at_offset(r.start)),
                    types.Position(*lines.at_offset(r.end)),
                ),
                new_text=r.text,
            )
            for r in minimal_edits(snapshot.texts[i], text)
        ]
        changes.append((snapshot.uris[i], snapshot.versions[i], edits))
    if not changes:
        return None
    if versioned:
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=version
                    ),
                    edits=list(edits),
                )
                for uri, version, edits in changes
            ]
        )
    return types.WorkspaceEdit(changes={uri: edits for uri, _, edits in changes})
