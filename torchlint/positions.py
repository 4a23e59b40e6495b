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
"""

from __future__ import annotations

import bisect
import contextlib
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")  # as libcst counts lines
_NULL = contextlib.nullcontext()


@dataclass(frozen=True)
class Context:
    """Where a node's code was generated."""

    indent: tuple[str, ...]  # the indentation tokens in force
    kwargs: dict[str, Any]  # what the parent passed to its `_codegen` (default_comma...)
    block: cst.IndentedBlock | None  # the innermost block around it; None: the module


class _Record:
    """`record_syntactic_position` for one wanted node."""

    __slots__ = ("end_node", "node", "start", "start_node", "state")

    def __init__(self, state: _State, node: cst.CSTNode, start_node, end_node) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exc: object) -> None:
        ranges = self.state.ranges
        start = ranges[id(self.start_node)][0] if self.start_node is not None else self.start
        end = ranges[id(self.end_node)][1] if self.end_node is not None else self.state.offset
        ranges[id(self.node)] = (start, end)


class _State(CodegenState):
    def __init__(self, module: cst.Module, wanted: set[int]) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        self.offset = 0
        self.wanted = wanted
        self.starts: list[int] = []
        self.ranges: dict[int, tuple[int, int]] = {}
        self.extents: dict[int, tuple[int, int]] = {}
        self.contexts: dict[int, Context] = {}
        self.blocks: list[cst.IndentedBlock] = []
        self.popped = ""  # the last newline, when the module has none

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.popped = self.tokens.pop()

    def before_codegen(self, node: cst.CSTNode) -> None:
        if type(node) is cst.IndentedBlock:
            self.blocks.append(node)
        if id(node) in self.wanted:
            self.starts.append(self.offset)
            caller = sys._getframe(1).f_locals  # CSTNode._codegen(self, state, **kwargs)
            self.contexts[id(node)] = Context(
                tuple(self.indent_tokens),
                dict(caller.get("kwargs", {})),
                self.blocks[-1] if self.blocks else None,
            )

    def after_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            start = self.starts.pop()
            self.extents[id(node)] = (start, self.offset)
            self.ranges.setdefault(id(node), (start, self.offset))  # keep a syntactic range
        if type(node) is cst.IndentedBlock:
            self.blocks.pop()

    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> Any:
        if id(node) not in self.wanted:
            return _NULL
        # The range ends (or starts) where a child's does: position that child too.
        for other in (start_node, end_node):
            if other is not None:
                self.wanted.add(id(other))
        return _Record(self, node, start_node, end_node)


class NodePositions:
    """`positions[node]` -> libcst `CodeRange`, computed for the nodes given up front; a
    node not given costs one more (cheap) code generation."""

    def __init__(self, module: cst.Module, nodes: Iterable[cst.CSTNode] = ()) -> None:
        self.module = module
        self.wanted: set[int] = {id(n) for n in nodes}
        self.state = _State(module, set())
        self.line_starts: list[int] = []
        if self.wanted:
            self._compute()

    def _compute(self) -> None:
        self.state = _State(self.module, set(self.wanted))
        self.module._codegen(self.state)
        code = "".join(self.state.tokens)
        self.line_starts = [0, *(m.end() for m in _NEWLINE.finditer(code))]

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
        return self._lookup("extents", node)

    def context(self, node: cst.CSTNode) -> Context:
        return self._lookup("contexts", node)

    @property
    def popped(self) -> str:
        """The newline libcst generates last and drops again (a file without one)."""
        return self.state.popped
