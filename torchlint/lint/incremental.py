"""An editor's buffer: each new version of its text is parsed again only where it changed.

A language server lints the same document again after every pause in typing, and the
parse of the whole text is most of a lint (a quarter of a second for 2,000 lines). An
edit changes a few top-level statements; the others are the same nodes as before. So
the text between the statements that hold the change (from the first changed character
to the last) is parsed alone, as a module, and its statements take the place of the old
ones, between the unchanged statements kept from the last tree.

The result is the tree a parse of the whole text gives (the tests compare them on random
edits), because a top-level statement starts at the beginning of a line outside any
bracket, string or block, and is parsed the same whatever came before it. Where that
may not hold, the whole text is parsed:

- the change reaches the module's header (the comments and blank lines before the first
  statement), or the piece read alone may not have the encoding, newline or indentation
  the whole new text is read with (that of its first indented block);
- the piece parsed alone does not parse (a bracket opened by the edit and closed in the
  unchanged text, an indented line that continues the statement before...): the whole
  text is parsed, which gives the syntax error where a full parse gives it; or its tree
  does not give its text back (libcst drops a blank line before comments that end a
  module);
- comment lines may change owner: those after an indented block, down to the last one
  indented deeper than the next statement, belong to the block. So a change among the
  lines before a statement takes the statement before it in too, and an unchanged
  statement after the change whose leading lines are indented is parsed again.
"""

from __future__ import annotations

import bisect

import libcst as cst

from torchlint.lint.parser import LintError, parse
from torchlint.text.positions import Layout, layout
from torchlint.text.source import common_prefix, common_suffix


class Buffer:
    """The last text parsed for one document, its tree, and the tree's layout."""

    def __init__(self) -> None:
        self.source: str | None = None
        self.module: cst.Module | None = None
        self._layout: Layout | None = None
        self._laid_out = False  # (None: a tree whose code is not its text)

    @property
    def layout(self) -> Layout | None:
        """Where the top-level statements of the last tree lie in its text; None for a
        tree that does not give its text back (then it is parsed whole, every time)."""
        assert self.module is not None and self.source is not None
        if not self._laid_out:
            self._layout, self._laid_out = layout(self.module, self.source), True
        return self._layout

    def parse(self, source: str, path: str = "<string>") -> cst.Module:
        """The tree of `source`, as `torchlint.lint.parser.parse` gives it (and its errors)."""
        if self.module is not None and source == self.source:
            return self.module
        reparsed = self._reparse(source, path) if self.module is not None else None
        if reparsed is None:
            module, new_layout = parse(source, path), None
        else:
            module, new_layout = reparsed
        self.source, self.module = source, module
        self._layout, self._laid_out = new_layout, new_layout is not None
        return module

    def layout_of(self, module: cst.Module) -> Layout | None:
        """The layout of `module` if it is this buffer's last tree."""
        return self.layout if module is self.module else None

    def _reparse(self, new: str, path: str) -> tuple[cst.Module, Layout] | None:
        module, old = self.module, self.layout
        assert module is not None
        body = module.body
        if old is None or len(body) < 2 or not module.has_trailing_newline:
            return None
        text = old.source
        p = common_prefix(text, new)
        c = len(text) - common_suffix(text, new, min(len(text), len(new)) - p)
        # [p, c) of the old text became [p, c + len(new) - len(text)) of the new one.
        # From the statement holding the last unchanged character before the change...
        first = bisect.bisect_right(old.starts, p - 1) - 1
        if first >= 0 and p - 1 < old.starts[first] + _leading(module, body[first]):
            first -= 1  # the change is among the lines before it: they may change owner
        if first < 0:
            return None  # the header changed (or the first statement's first character)
        # ... to the one before the first unchanged statement whose preceding newline is
        # unchanged too, and whose leading lines no indented block before it may own.
        after = max(bisect.bisect_left(old.starts, c + 1), first + 1)
        while after < len(body) and any(
            line.whitespace.value for line in body[after].leading_lines
        ):
            after += 1
        delta = len(new) - len(text)
        start = old.starts[first]
        end = old.starts[after] + delta if after < len(body) else len(new)
        chunk = new[start:end]
        try:
            piece = parse(chunk, path)
        except LintError:
            return None
        if (
            not piece.body
            or (piece.header and first == 0)  # (the module's header holds them all)
            or (piece.default_newline, piece.encoding) != (module.default_newline, module.encoding)
            or not _same_indent(module, piece, first, after)
        ):
            return None
        own = layout(piece, chunk)
        if own is None:  # libcst drops a blank line before comments that end a module
            return None
        stmts = list(piece.body)
        if piece.header:  # the lines before a statement are its own, in a whole module
            leading = [*piece.header, *stmts[0].leading_lines]
            stmts[0] = stmts[0].with_changes(leading_lines=leading)
        starts = [*old.starts[:first], start, *(start + s for s in own.starts[1:])]
        fresh = set(range(first, first + len(stmts)))
        tail = list(body[after:])
        if tail:
            if piece.footer:
                leading = [*piece.footer, *tail[0].leading_lines]
                tail[0] = tail[0].with_changes(leading_lines=leading)
                fresh.add(first + len(stmts))
            starts += [start + own.footer, *(s + delta for s in old.starts[after + 1 :])]
            spliced = module.with_changes(body=[*body[:first], *stmts, *tail])
            footer = old.footer + delta
        else:
            spliced = module.with_changes(
                body=[*body[:first], *stmts],
                footer=piece.footer,
                has_trailing_newline=piece.has_trailing_newline,
            )
            footer = start + own.footer
        # What was positioned in the statements kept is where it was, in them.
        alive = {id(stmt) for stmt in spliced.body}
        placed = {k: v for k, v in old.placed.items() if id(v.holder) in alive}
        return spliced, Layout(new, tuple(starts), footer, frozenset(fresh), placed)


def _indents(stmt: cst.SimpleStatementLine | cst.BaseCompoundStatement) -> bool:
    """Does this top-level statement hold an indented block (the first one in a file sets
    the indentation the whole file is read with)? Only clauses can: `if x: y` does not,
    its `else:` on the next lines may."""
    if isinstance(stmt, cst.Match):
        return True
    clauses: list[cst.CSTNode] = [stmt]
    while clauses:
        clause = clauses.pop()
        if isinstance(getattr(clause, "body", None), cst.IndentedBlock):
            return True
        clauses += [getattr(clause, a) for a in ("orelse", "finalbody") if getattr(clause, a, None)]
        clauses += getattr(clause, "handlers", ())
    return False


def _same_indent(module: cst.Module, piece: cst.Module, first: int, after: int) -> bool:
    """Is the new text read with the module's indentation, the piece's blocks included?
    A piece with blocks must have been read with it; one without leaves the first block
    where it was: before the piece, or after it (unless the old piece held it)."""
    if any(_indents(stmt) for stmt in piece.body):
        return piece.default_indent == module.default_indent
    return any(_indents(stmt) for stmt in module.body[:first]) or not any(
        _indents(stmt) for stmt in module.body[first:after]
    )


def _leading(module: cst.Module, stmt: cst.SimpleStatementLine | cst.BaseCompoundStatement) -> int:
    """The length of the text of the lines before `stmt` (its comments, blank lines)."""
    return sum(len(module.code_for_node(line)) for line in stmt.leading_lines)
