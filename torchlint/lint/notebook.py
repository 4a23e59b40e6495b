""".ipynb <-> one Python program with a cell/line map.

A notebook is linted as one program: its Python code cells, in document order,
joined with a separator line between cells, so that a DataLoader built in one cell
and trained in another is seen as it runs. Execution counts are ignored (ruff does
the same): top-to-bottom is the order a notebook is meant to be re-run in.

Cell numbers are 1-based positions among *all* cells of the notebook, markdown and
raw cells included, as ruff counts them: "cell 5" is the fifth cell from the top,
the one a user finds by scrolling. Lines and columns are relative to the cell.

IPython syntax never makes a notebook unparsable: in a cell that is not valid Python
as written, each line magic (`%matplotlib inline`), shell line (`!pip install x`,
`files = !ls`), help line (`obj?`, `?obj`) and autocall line is replaced by a
placeholder line (a comment, or `pass` with a comment where it is indented), so line
numbers are unchanged, and put back after fixing. A cell whose first line is a cell
magic is not Python, unless the magic runs its body as Python in the kernel
(`%%time`, `%%timeit`, `%%capture`, `%%prun`, `%%debug`); such cells are skipped.
A cell that still does not parse is left out of the program (opaque, as ruff treats
it) and reported as an error at its own line and column; the other cells are still
analysed, and such a notebook is not fixed.

Fixes are applied to the program, which is then split back into cells at the
separators. Separators are comments, which no fix edits; code a fix adds before a
separator belongs to the cell above it (imports and definitions go after the import
block, which is often cell 1). If a fix removed a separator or a placeholder, the
split is refused (`NotebookError`) and the caller may retry with statement
separators (`pass  # ...`), which survive the removal of their neighbours.

Writing back touches only the "source" values of the cells that changed (spliced into
the original JSON text: notebook_json.py), and the result is re-parsed and compared
with what was intended before anything is written.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from torchlint.fixes import apply_line_edits, line_edits
from torchlint.lint.notebook_json import Style, format_source, source_spans
from torchlint.lint.parser import LintError, check_syntax
from torchlint.results import INVALID_SYNTAX, FileError, FixRecord, TextEdit, Violation
from torchlint.text.source import split_lines

# Cell magics whose body is Python run in the kernel's namespace.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

_COMPILE_FLAGS = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_NEWLINE_RUN = re.compile(r"(?:\r\n|\r|\n)*\Z")
_MAGIC_START = ("%", "!", "?", "/", ",", ";")
_MAGIC_ASSIGN = re.compile(r"\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]")
_HELP_END = re.compile(r"\s*%{0,2}[A-Za-z_][\w.\[\]'\"]*\?{1,2}\s*\Z")
_FUTURE = re.compile(r"from\s+__future__\s+import\s+[\w\s,]+\Z")


class NotebookError(Exception):
    """A notebook that cannot be read, split back into cells, or written safely."""


def _strip_newline(line: str) -> str:
    return line.rstrip("\r\n")


def _newline_of(line: str) -> str:
    return line[len(_strip_newline(line)) :]


# ---------------------------------------------------------------------------------------
# The notebook


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based among all cells
    kind: str  # "code", "markdown", "raw"
    source: str
    python: bool  # a code cell the linter analyses


@dataclass
class Notebook:
    text: str  # the JSON text as read
    data: dict[str, Any]
    cells: list[Cell]
    python: bool  # the notebook's language is Python

    @classmethod
    def parse(cls, text: str) -> Notebook:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}"
            raise NotebookError(
                f"invalid notebook: not valid JSON ({exc.msg} at {where})"
            ) from None
        except RecursionError:
            raise NotebookError("invalid notebook: JSON nested too deeply") from None
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            if isinstance(data, dict) and "worksheets" in data:
                raise NotebookError(
                    "nbformat 3 notebooks are not supported; convert with "
                    "`jupyter nbconvert --to notebook --nbformat 4`"
                )
            raise NotebookError("invalid notebook: no `cells` list")
        version = data.get("nbformat", 4)
        if not isinstance(version, int) or version < 4:
            raise NotebookError(f"nbformat {version} notebooks are not supported (need nbformat 4)")
        cells = [_cell(number, raw) for number, raw in enumerate(data["cells"], 1)]
        return cls(text, data, cells, _is_python(data.get("metadata")))

    @property
    def code_cells(self) -> list[Cell]:
        return [c for c in self.cells if c.python]

    def program(self, statements: bool = False) -> Program:
        """The Python cells as one program (see the module docstring)."""
        return Program.build(self.code_cells if self.python else [], statements)

    def sources(self, changed: dict[int, str] | None = None) -> list[str]:
        """Every cell's source, by cell number - 1, with `changed` applied."""
        changed = changed or {}
        return [changed.get(c.number, c.source) for c in self.cells]

    def with_sources(self, changed: dict[int, str]) -> str:
        """The JSON text with the sources of the `changed` cells replaced, nothing else."""
        if not changed:
            return self.text
        spans = source_spans(self.text)
        style = Style.detect(self.text)
        out: list[str] = []
        pos = 0
        expected = _loads(self.text)
        for number in sorted(changed):
            span = spans.get(number)
            if span is None:
                raise NotebookError(f"cannot locate the source of cell {number}; not written")
            start, end, key_start = span
            old = self.text[start:end]
            value = format_source(changed[number], old, self.text, key_start, style)
            out += [self.text[pos:start], value]
            pos = end
            expected["cells"][number - 1]["source"] = _loads(value)
        out.append(self.text[pos:])
        new_text = "".join(out)
        try:
            check = _loads(new_text) == expected
        except (json.JSONDecodeError, RecursionError):
            check = False
        if not check:  # never write a notebook that says anything but what we meant
            raise NotebookError(
                "rewriting the cells would change more than their source; not written"
            )
        return new_text

    def diff(self, path: str, changed: dict[int, str]) -> str:
        """A unified diff per changed cell, headed `path:cell N` (as ruff shows them)."""
        out = []
        for cell in self.cells:
            if cell.number in changed:
                name = f"{path}:cell {cell.number}"
                before = split_lines(cell.source)
                after = split_lines(changed[cell.number])
                for lines in (before, after):
                    if lines and not lines[-1].endswith(("\n", "\r")):
                        lines[-1] += "\n"
                out.append("".join(difflib.unified_diff(before, after, fromfile=name, tofile=name)))
        return "".join(out)


def _loads(text: str) -> Any:
    """Parsed JSON that compares equal to itself (NaN, which Python's json writes, does not)."""
    return json.loads(text, parse_constant=lambda name: f"\0{name}")


def _cell(number: int, raw: Any) -> Cell:
    if not isinstance(raw, dict):
        raise NotebookError(f"invalid notebook: cell {number} is not an object")
    kind = raw.get("cell_type")
    source = raw.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        source = "".join(source)
    elif not isinstance(source, str):
        raise NotebookError(f"invalid notebook: cell {number} has a malformed `source`")
    python = kind == "code" and _python_cell_magic(source)
    metadata = raw.get("metadata")
    if python and isinstance(metadata, dict):
        vscode = metadata.get("vscode")
        language = vscode.get("languageId") if isinstance(vscode, dict) else None
        python = language in (None, "python")
    return Cell(number, str(kind), source, python)


def _python_cell_magic(source: str) -> bool:
    """False for a cell run by a cell magic other than those that run Python (`%%bash`)."""
    first = source.lstrip()
    if not first.startswith("%%"):
        return True
    words = first[2:].split(None, 1)
    return bool(words) and words[0] in PYTHON_CELL_MAGICS


def _is_python(metadata: Any) -> bool:
    if not isinstance(metadata, dict):
        return True
    for key, field_name in (("language_info", "name"), ("kernelspec", "language")):
        info = metadata.get(key)
        if isinstance(info, dict) and isinstance(info.get(field_name), str):
            return info[field_name].lower() in ("python", "python3", "ipython", "ipython3")
    return True


# ---------------------------------------------------------------------------------------
# The program: cells joined, IPython syntax replaced


@dataclass(frozen=True)
class Chunk:
    """One cell's part of a program text."""

    cell: int  # the cell number
    start: int  # the program line of the cell's first line (1-based)
    code: str  # as in the program (placeholders in)
    source: str  # as in the notebook (placeholders restored)


@dataclass
class Program:
    source: str  # the Python program the linter sees
    cells: list[int]  # numbers of the cells in it, in order
    originals: dict[int, str]  # the cells' sources, as read
    separators: list[str] = field(default_factory=list)  # line before cells[1:], no newline
    placeholders: dict[str, tuple[int, str]] = field(
        default_factory=dict
    )  # line -> (cell, original)
    # Cells left out because they do not parse (as ruff does: the others are still
    # analysed), by cell number: the error in cell positions.
    broken: dict[int, FileError] = field(default_factory=dict)

    @classmethod
    def build(cls, cells: Sequence[Cell], statements: bool = False) -> Program:
        base = "torchlint"
        while any(f"<{base} " in c.source for c in cells):
            base += "_"
        program = cls("", [], {})
        parts: list[str] = []
        for cell in cells:
            try:
                lines = program._python_lines(cell, base, not program.cells, statements)
            except LintError as exc:
                program.broken[cell.number] = exc.file_error(cell.number)
                continue
            if program.cells:
                marker = f"# <{base} cell {cell.number}>"
                separator = f"pass  {marker}" if statements else marker
                program.separators.append(separator)
                parts.append(separator + "\n")
            program.cells.append(cell.number)
            program.originals[cell.number] = cell.source
            if lines and not lines[-1].endswith(("\n", "\r")):
                lines[-1] += "\n"
            parts.extend(lines)
        program.source = "".join(parts)
        return program

    def _python_lines(self, cell: Cell, base: str, first: bool, statements: bool) -> list[str]:
        """The cell's lines, IPython syntax replaced; LintError if they still do not parse."""
        lines = split_lines(cell.source)
        valid = _compiles(cell.source)
        magic = _magic_lines(lines, valid, future=not first)
        placeholders: dict[str, tuple[int, str]] = {}
        for i in sorted(magic):
            text = _strip_newline(lines[i])
            marker = f"# <{base} ipython {len(self.placeholders) + len(placeholders)}>"
            indent = text[: len(text) - len(text.lstrip())]
            if magic[i] and (indent or statements):
                placeholder = f"{indent}pass  {marker}"
            else:
                placeholder = marker
            placeholders[placeholder] = (cell.number, text)
            lines[i] = placeholder + _newline_of(lines[i])
        if not valid:
            check_syntax("".join(lines), f"<cell {cell.number}>")
        self.placeholders.update(placeholders)
        return lines

    def split(self, text: str) -> list[Chunk]:
        """Cut a (fixed) program back into cells; NotebookError if a separator or magic moved."""
        if not self.cells:
            if text:
                raise NotebookError("a fix added code to a notebook without Python cells")
            return []
        lines = split_lines(text)
        boundaries = [
            i for i, line in enumerate(lines) if _strip_newline(line) in self._separator_set
        ]
        found = [_strip_newline(lines[i]) for i in boundaries]
        if found != self.separators:
            raise NotebookError("a fix moved code across notebook cells; notebook left unchanged")
        starts = [0] + [i + 1 for i in boundaries]
        ends = [*boundaries, len(lines)]
        chunks = []
        seen: set[str] = set()
        for cell, start, end in zip(self.cells, starts, ends, strict=True):
            code_lines = lines[start:end]
            restored = []
            for line in code_lines:
                key = _strip_newline(line)
                owner = self.placeholders.get(key)
                if owner is not None:
                    if owner[0] != cell or key in seen:
                        raise NotebookError(
                            "a fix moved IPython magic lines; notebook left unchanged"
                        )
                    seen.add(key)
                    line = owner[1] + _newline_of(line)
                restored.append(line)
            source = _with_tail("".join(restored), self.originals[cell])
            chunks.append(Chunk(cell, start + 1, "".join(code_lines), source))
        if len(seen) != len(self.placeholders):
            raise NotebookError("a fix removed IPython magic lines; notebook left unchanged")
        return chunks

    @property
    def _separator_set(self) -> frozenset[str]:
        return frozenset(self.separators)

    # -- positions ---------------------------------------------------------------------

    def locate(self, chunks: Sequence[Chunk], line: int) -> tuple[Chunk, int]:
        """The chunk holding program `line`, and the line within its cell."""
        chunk = chunks[0]
        for candidate in chunks:
            if candidate.start > line:
                break
            chunk = candidate
        return chunk, line - chunk.start + 1

    def explain(self, error: FileError) -> FileError:
        """A linter error about the program, restated in cell positions (a syntax error
        only libcst finds: every cell CPython refuses is checked and left out already)."""
        if error.code != INVALID_SYNTAX or not self.cells:
            return error
        chunk, line = self.locate(self.split(self.source), error.line)
        return replace(error, line=line, cell=chunk.cell)

    def violations(
        self, violations: Iterable[Violation], text: str, chunks: Sequence[Chunk]
    ) -> list[Violation]:
        """Violations found in program `text` (split as `chunks`), in cell positions."""
        out = []
        for v in violations:
            chunk, line = self.locate(chunks, v.line)
            end_chunk, end_line = self.locate(chunks, v.end_line)
            end_column = v.end_column
            if end_chunk is not chunk:  # cannot happen for a node; keep the span in its cell
                end_line, end_column = line, v.column + 1
            fix = v.fix
            if fix is not None and fix.edits:
                fix = replace(fix, edits=self._cell_edits(fix, text, chunks))
            out.append(
                replace(
                    v, line=line, end_line=end_line, end_column=end_column, cell=chunk.cell, fix=fix
                )
            )
        out.sort(key=lambda v: (v.cell or 0, v.line, v.column, v.code))
        return out

    def _cell_edits(
        self, fix: FixRecord, text: str, chunks: Sequence[Chunk]
    ) -> tuple[TextEdit, ...]:
        """A fix's line edits on the program, restated as edits of the cells it changes."""
        try:
            after = self.split(apply_line_edits(text, fix.edits))
        except NotebookError:
            return ()
        edits: list[TextEdit] = []
        for old, new in zip(chunks, after, strict=True):
            if old.source != new.source:
                edits += [replace(e, cell=old.cell) for e in line_edits(old.source, new.source)]
        return tuple(edits)


def _with_tail(text: str, original: str) -> str:
    """`text` ending in the same run of newlines as `original` (a last line often has none)."""
    tail = _NEWLINE_RUN.search(original)
    body = text[: _NEWLINE_RUN.search(text).start()]  # type: ignore[union-attr]
    return body + (tail.group() if tail else "")


# ---------------------------------------------------------------------------------------
# IPython syntax


def _compiles(source: str) -> bool:
    try:
        compile(source, "<cell>", "exec", _COMPILE_FLAGS, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _magic_lines(lines: list[str], valid: bool, future: bool) -> dict[int, bool]:
    """Indices of the lines to replace -> whether the line starts a statement."""
    found: dict[int, bool] = {}
    if valid and not (future and any("__future__" in line for line in lines)):
        return found
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    start = 0
    if not valid and first is not None and lines[first].lstrip().startswith("%%"):
        found[first] = True  # `%%time` and the like: the body is Python (see _python_cell_magic)
        start = first + 1
    scanner = _Scanner()
    continued_magic = False
    for i in range(start, len(lines)):
        line = _strip_newline(lines[i])
        if continued_magic:
            found[i] = False
            continued_magic = line.endswith("\\")
            continue
        if scanner.at_statement_start:
            stripped = line.lstrip()
            if (not valid and _is_magic(stripped)) or (
                future and _FUTURE.match(stripped) and not line[:1].isspace()
            ):
                found[i] = True
                continued_magic = line.endswith("\\")
                continue
        scanner.feed(line)
    return found


def _is_magic(stripped: str) -> bool:
    if not stripped or stripped.startswith("#"):
        return False
    return (
        stripped.startswith(_MAGIC_START)
        or _MAGIC_ASSIGN.match(stripped) is not None
        or _HELP_END.match(stripped) is not None
    )


class _Scanner:
    """Just enough of Python's tokenizer to know where statements start."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        comment = False
        while i < n:
            c = line[i]
            if self.quote is not None:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                    continue
                i += 1
                continue
            if c == "#":
                comment = True
                break
            if c in "\"'":
                self.quote = c * 3 if line.startswith(c * 3, i) else c
                i += len(self.quote)
                continue
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            i += 1
        escaped_end = line.endswith("\\") and not comment
        if self.quote is not None and len(self.quote) == 1 and not escaped_end:
            self.quote = None  # an unterminated string: Python stops at the line's end
        self.continued = escaped_end and self.quote is None


# ---------------------------------------------------------------------------------------
# JSON splicing
