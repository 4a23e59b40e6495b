"""A fix's edits as text (JSON, SARIF, an editor's code actions), without generating the
module again where the edits can be spliced into its text."""

from __future__ import annotations

import bisect
import difflib
import itertools
from collections.abc import Iterable, Sequence

import libcst as cst

from torchlint.fixes.apply import Applier, apply_fixes, blank_lines_above, in_style
from torchlint.fixes.imports import plan_module_level
from torchlint.fixes.model import Fix, InsertAfter, InsertBefore, Remove, Replace
from torchlint.results import TextEdit
from torchlint.text.libcst_compat import code_at
from torchlint.text.positions import NodePositions
from torchlint.text.source import split_lines


def line_edits(before: str, after: str, first_line: int = 1) -> list[TextEdit]:
    """Whole-line edits that turn `before` (starting at line `first_line`) into `after`."""
    a, b = split_lines(before), split_lines(after)
    return [
        TextEdit((i1 + first_line, 1), (i2 + first_line, 1), "".join(b[j1:j2]))
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if tag != "equal"
    ]


def apply_line_edits(text: str, edits: Iterable[TextEdit]) -> str:
    """`text` with disjoint whole-line edits (`line_edits`, a fix's edits) applied."""
    lines = split_lines(text)
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        lines[edit.start[0] - 1 : edit.end[0] - 1] = [edit.content]
    return "".join(lines)


# (start, end, order among insertions at one offset, new text), in offsets of the code
# libcst generated (the module's text and `NodePositions.popped`).
Splice = tuple[int, int, int, str]
_AFTER, _MODULE_LEVEL, _BEFORE, _IN_PLACE = range(4)
_PASS = cst.SimpleStatementLine([cst.Pass()])


def text_edits(
    module: cst.Module, source: str, positions: NodePositions, fix: Fix
) -> tuple[TextEdit, ...]:
    """The whole-line edits that applying `fix` alone makes to `source` (`module`'s code).

    Each edit is spliced in at the extent of the node it edits (`positions` must hold
    those nodes and the module's statements), with the code generated for what takes
    its place in that node's context; a fix that adds imports or definitions while it
    also reshapes the top level (where they go depends on it), or whose edits overlap,
    is applied to the module instead (the same text, at the cost of generating it)."""
    fix = in_style(module, fix)
    splices = _splices(module, positions, fix)
    if splices is None:
        return tuple(line_edits(source, apply_fixes(module, [fix])))
    return _spliced(source + positions.popped, positions.popped, splices)


def _splices(module: cst.Module, positions: NodePositions, fix: Fix) -> list[Splice] | None:
    adds = bool(fix.imports or fix.definitions)
    top = {id(stmt) for stmt in module.body}
    if adds and (not module.body or any(id(e.node) in top for e in fix.edits)):
        return None
    removed = {id(e.node) for e in fix.edits if isinstance(e, Remove)}
    if any(blank_lines_above(e.node) for e in fix.edits if isinstance(e, Remove)):
        return None  # the blank lines may move to the next statement (`Applier._body`)
    anchors = {id(e.node) for e in fix.edits if isinstance(e, (InsertBefore, InsertAfter))}
    out: list[Splice] = []
    for edit in fix.edits:
        start, end = positions.extent(edit.node)
        where = positions.context(edit.node)
        if isinstance(edit, Replace):
            out.append(
                (start, end, _IN_PLACE, code_at(module, [edit.new], where.indent, where.kwargs))
            )
        elif isinstance(edit, InsertAfter):
            out.append((end, end, _AFTER, code_at(module, edit.statements, where.indent)))
        elif isinstance(edit, InsertBefore):
            out.append((start, start, _BEFORE, code_at(module, edit.statements, where.indent)))
        else:
            body = module.body if where.block is None else where.block.body
            if any(id(stmt) not in removed or id(stmt) in anchors for stmt in body):
                out.append((start, end, _IN_PLACE, ""))
            elif edit.node is body[0]:  # the whole block goes: `pass` takes its place
                last = positions.extent(body[-1])[1]
                out.append((start, last, _IN_PLACE, code_at(module, [_PASS], where.indent)))
    if adds:
        out += _module_level(module, positions, fix)
    out.sort(key=lambda splice: splice[:3])
    if any(b[0] < a[1] for a, b in itertools.pairwise(out)):
        return None
    return out


def _module_level(module: cst.Module, positions: NodePositions, fix: Fix) -> list[Splice]:
    """The fix's imports and definitions, where `add_module_level` puts them. The top
    level keeps its shape (see `_splices`); a top-level statement the fix edits inside
    is transformed (alone) only where that can change what it binds or imports."""
    body = list(module.body)
    starts = [positions.extent(stmt)[0] for stmt in body]
    applier = Applier([fix])
    for i in {bisect.bisect_right(starts, positions.extent(e.node)[0]) - 1 for e in fix.edits}:
        if isinstance(body[i], cst.SimpleStatementLine) or any(
            e.node is getattr(body[i], "name", None) for e in fix.edits
        ):
            rebuilt = applier.rebuild(body[i])
            assert isinstance(rebuilt, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            body[i] = rebuilt
    plan = plan_module_level(body, fix.imports, fix.definitions, module.default_indent)
    if plan is None:
        return []
    out: list[Splice] = []
    for i, stmt in plan.merged.items():
        start, end = positions.extent(module.body[i])
        out.append((start, end, _IN_PLACE, code_at(module, [stmt], ())))
    for ins in plan.insertions:
        if ins.index < len(body):
            kept = code_at(module, body[ins.index].leading_lines[: ins.keep], ())
            at = starts[ins.index] + len(kept)
        else:
            at = positions.extent(module.body[-1])[1]
        text = code_at(module, [*ins.statements, *[cst.EmptyLine()] * ins.blank_after], ())
        out.append((at, at, _MODULE_LEVEL, text))
    return out


def _spliced(text: str, popped: str, splices: Sequence[Splice]) -> tuple[TextEdit, ...]:
    """Whole-line edits for sorted, disjoint splices of `text`: each run of lines they
    touch, diffed line by line (the edits a diff of the whole file would give)."""
    lines = split_lines(text)
    starts = list(itertools.accumulate(map(len, lines), initial=0))

    def line_at(offset: int) -> int:  # 0-based index of the line holding `offset`
        return bisect.bisect_right(starts, offset) - 1

    regions: list[tuple[int, int, list[Splice]]] = []
    for splice in splices:
        first, end = starts[line_at(splice[0])], splice[1]
        last = end if starts[line_at(end)] == end else starts[line_at(end) + 1]
        if regions and first <= regions[-1][1]:
            regions[-1] = (regions[-1][0], max(last, regions[-1][1]), [*regions[-1][2], splice])
        else:
            regions.append((first, last, [splice]))
    edits: list[TextEdit] = []
    for first, last, group in regions:
        pieces, at = [], first
        for start, end, _, new in group:
            pieces += [text[at:start], new]
            at = end
        pieces.append(text[at:last])
        edits += line_edits(text[first:last], "".join(pieces), line_at(first) + 1)
    if popped and edits and edits[-1].end[0] == len(lines) + 1:
        edits[-1] = _without_last_newline(edits[-1], lines)
    return tuple(edits)


def _without_last_newline(edit: TextEdit, lines: Sequence[str]) -> TextEdit:
    """An edit that reaches the end of a text whose last newline libcst dropped (and
    drops again): on the text as it is, the new end has no newline either."""
    start, content = edit.start, edit.content
    if (start[0] > len(lines) or not content) and start[0] > 1:  # keep a line to end on
        start, content = (start[0] - 1, 1), lines[start[0] - 2] + content
    for newline in ("\r\n", "\n", "\r"):
        if content.endswith(newline):
            content = content[: -len(newline)]
            break
    return TextEdit(start, edit.end, content, edit.cell)
