"""Source positions of a few nodes, without positioning the whole tree.

libcst's `PositionProvider` records a `CodeRange` for every node of the module while
generating its code (a regex split per token, a context manager per node); on a large
file that costs twice the parse, for the handful of nodes a file reports. Here the
code is generated once with a state that counts characters and records offsets only
for the nodes asked for (and the nodes their ranges are defined by); offsets become
lines and columns at the end. The ranges are libcst's `PositionProvider` ranges
(tests/test_positions.py compares them on every node of real files).

The same pass records, for those nodes, the exact text each generated (`extent`) and
what generating other code in its place needs (`context`: the indentation, and the
arguments the parent passed, such as a default comma): a fix's edits are then spliced
into the text without generating the module again.

Given the `Layout` of the module's text (where each top-level statement begins: the
editor's buffers keep one, `torchlint.lint.incremental`), only the top-level statements that
hold the nodes asked for are generated, each from its own offset.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from torchlint.text.libcst_compat import Generation, statement_offsets
from torchlint.text.walk import children

_NEWLINE = re.compile(r"\r\n?|\n")  # as libcst counts lines


@dataclass(frozen=True)
class Context:
    """Where a node's code was generated."""

    indent: tuple[str, ...]  # the indentation tokens in force
    kwargs: dict[str, Any]  # what the parent passed to its `_codegen` (default_comma...)
    block: cst.IndentedBlock | None  # the innermost block around it; None: the module


@dataclass
class Placed:
    """A node positioned before: the top-level statement holding it (which keeps the node,
    hence its id, alive), and what was recorded of it, relative to that statement."""

    holder: cst.CSTNode
    range: tuple[int, int] | None = None
    extent: tuple[int, int] | None = None
    context: Context | None = None


@dataclass(frozen=True)
class Layout:
    """Where the parts of a module lie in its text (`source`, the module's code)."""

    source: str
    starts: tuple[int, ...]  # the offset of each top-level statement (its leading lines)
    footer: int  # where the module's footer begins: the end of the last statement
    # The statements parsed for this text (the others are kept from an earlier tree), and
    # the nodes positioned so far in the statements kept, by id.
    fresh: frozenset[int] | None = field(default=None, compare=False)  # None: all
    placed: dict[int, Placed] = field(default_factory=dict, compare=False)

    def extent(self, index: int) -> tuple[int, int]:
        """The offsets of the text top-level statement `index` generated."""
        end = self.starts[index + 1] if index + 1 < len(self.starts) else self.footer
        return self.starts[index], end

    @functools.cached_property
    def line_starts(self) -> list[int]:
        return [0, *(m.end() for m in _NEWLINE.finditer(self.source))]

    def holders(self, body: Sequence[cst.CSTNode], wanted: set[int]) -> dict[int, int] | None:
        """The index of the top-level statement (in `body`) holding each `wanted` node;
        None if one is not found among their non-trivia descendants (a comma, the module).
        Statements parsed for this text are searched first, the others only for nodes
        not positioned before."""
        index = {id(stmt): i for i, stmt in enumerate(body)}
        found: dict[int, int] = {}
        missing: set[int] = set()
        for key in wanted:
            placed = self.placed.get(key)
            where = index.get(id(placed.holder)) if placed is not None else None
            if where is None:
                missing.add(key)
            else:
                found[key] = where
        fresh = set(range(len(body)) if self.fresh is None else self.fresh)
        for batch in (sorted(fresh), [i for i in range(len(body)) if i not in fresh]):
            for i in batch:
                if not missing:
                    return found
                stack = [body[i]]
                while stack:
                    node = stack.pop()
                    if id(node) in missing:
                        missing.discard(id(node))
                        self.placed[id(node)] = Placed(body[i])
                        found[id(node)] = i
                    stack.extend(children(node))
        return None if missing else found


def layout(module: cst.Module, source: str) -> Layout | None:
    """The layout of `module` in `source`, one code generation; None if its code is not
    `source` (text libcst does not give back as it read it: a lone backslash line)."""
    code, starts = statement_offsets(module)
    if code != source:
        return None
    # (a module without a last newline: its last statement's was generated, then dropped)
    return Layout(source, tuple(starts[:-1]), min(starts[-1], len(source)))


class _Record:
    """The syntactic range of one wanted node (`Generation.syntactic`)."""

    __slots__ = ("end_node", "node", "start", "start_node", "state")

    def __init__(
        self,
        state: _State,
        node: cst.CSTNode,
        start_node: cst.CSTNode | None,
        end_node: cst.CSTNode | None,
    ) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exc: object) -> None:
        ranges = self.state.ranges
        start = ranges[id(self.start_node)][0] if self.start_node is not None else self.start
        end = ranges[id(self.end_node)][1] if self.end_node is not None else self.state.offset
        ranges[id(self.node)] = (start, end)


class _State(Generation):
    """Records the ranges, extents and contexts of the wanted nodes."""

    def __init__(self, module: cst.Module, wanted: set[int]) -> None:
        super().__init__(module, wanted)
        self.starts: list[int] = []
        self.ranges: dict[int, tuple[int, int]] = {}
        self.extents: dict[int, tuple[int, int]] = {}
        self.contexts: dict[int, Context] = {}

    def entered(self, node: cst.CSTNode, kwargs: dict[str, Any]) -> None:
        self.starts.append(self.offset)
        self.contexts[id(node)] = Context(
            self.indent, kwargs, self.blocks[-1] if self.blocks else None
        )

    def left(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        self.extents[id(node)] = (start, self.offset)
        self.ranges.setdefault(id(node), (start, self.offset))  # keep a syntactic range

    def syntactic(
        self, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None
    ) -> _Record:
        # The range ends (or starts) where a child's does: position that child too.
        for other in (start_node, end_node):
            if other is not None:
                self.wanted.add(id(other))
        return _Record(self, node, start_node, end_node)


class NodePositions:
    """`positions[node]` -> libcst `CodeRange`, computed for the nodes given up front; a
    node not given costs one more (cheap) code generation. With the module's `layout`,
    only the top-level statements holding those nodes are generated."""

    def __init__(
        self,
        module: cst.Module,
        nodes: Iterable[cst.CSTNode] = (),
        layout: Layout | None = None,
    ) -> None:
        self.module = module
        self.wanted: set[int] = {id(n) for n in nodes}
        # (a module without a last newline drops the last statement's: generated whole)
        self.layout = layout if module.has_trailing_newline and module.body else None
        self.state = _State(module, set())
        self.line_starts: list[int] = []
        if self.wanted:
            self._compute()

    def _compute(self) -> None:
        body = self.module.body
        owners = self.layout.holders(body, self.wanted) if self.layout is not None else None
        self.state = _State(self.module, set(self.wanted))
        if owners is None:
            self.state.generate(self.module)
            code = self.state.code
            self.line_starts = [0, *(m.end() for m in _NEWLINE.finditer(code))]
            return
        assert self.layout is not None
        self.line_starts = self.layout.line_starts
        state, starts, placed = self.state, self.layout.starts, self.layout.placed
        top = Context((), {}, None)
        for i, stmt in enumerate(body):  # known without generating them
            state.extents[id(stmt)] = self.layout.extent(i)
            state.contexts[id(stmt)] = top
        todo = set()
        for key, i in owners.items():  # what was recorded in a statement kept, is as it was
            known = placed[key]
            if known.range is None or known.extent is None or known.context is None:
                todo.add(i)
                continue
            state.ranges[key] = _shifted(known.range, starts[i])
            state.extents[key] = _shifted(known.extent, starts[i])
            state.contexts[key] = known.context
        for i in sorted(todo):
            state.offset = starts[i]
            state.generate(body[i])
        if not self.wanted <= state.ranges.keys():  # (never seen: a guard, not a path)
            self.layout = None
            self._compute()
            return
        for key, i in owners.items():
            if i in todo:
                known = placed[key]
                known.range = _shifted(state.ranges[key], -starts[i])
                known.extent = _shifted(state.extents[key], -starts[i])
                known.context = state.contexts[key]

    def want(self, nodes: Iterable[cst.CSTNode], holder: int | None = None) -> None:
        """Position `nodes` too, in one pass (each node not given up front otherwise costs
        a pass); `holder`: the index of the top-level statement that holds them all, where
        the caller knows it (with a layout, it is not searched for)."""
        new = {id(n) for n in nodes} - self.state.ranges.keys()
        if not new:
            return
        if holder is not None and self.layout is not None:
            top = self.module.body[holder]
            for key in new:
                self.layout.placed.setdefault(key, Placed(top))
        self.wanted |= new
        self._compute()

    def _lookup(self, table: str, node: cst.CSTNode) -> Any:
        found = getattr(self.state, table).get(id(node))
        if found is None:
            self.wanted.add(id(node))
            self._compute()
            found = getattr(self.state, table).get(id(node))
            if found is None:
                raise KeyError(node)
        return found

    def _position(self, offset: int) -> CodePosition:
        line = bisect.bisect_right(self.line_starts, offset)
        return CodePosition(line, offset - self.line_starts[line - 1])

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        start, end = self._lookup("ranges", node)
        return CodeRange(self._position(start), self._position(end))

    def extent(self, node: cst.CSTNode) -> tuple[int, int]:
        """The offsets of all the text `node` generated (its whitespace included), in the
        module's code followed by `popped`."""
        extent: tuple[int, int] = self._lookup("extents", node)
        return extent

    def context(self, node: cst.CSTNode) -> Context:
        context: Context = self._lookup("contexts", node)
        return context

    @property
    def popped(self) -> str:
        """The newline libcst generates last and drops again (a file without one)."""
        return self.state.popped


def _shifted(span: tuple[int, int], by: int) -> tuple[int, int]:
    return span[0] + by, span[1] + by
