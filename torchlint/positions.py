"""Source positions of a few nodes, without positioning the whole tree.

libcst's `PositionProvider` records a `CodeRange` for every node of the module while
generating its code (a regex split per token, a context manager per node); on a large
file that costs twice the parse, for the handful of nodes a file reports. Here the
code is generated once with a state that counts characters and records offsets only
for the nodes asked for (and the nodes their ranges are defined by); offsets become
lines and columns at the end. The ranges are libcst's `PositionProvider` ranges
(tests/test_positions.py compares them on every node of real files).
"""

from __future__ import annotations

import bisect
import contextlib
import re
from collections.abc import Iterable
from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")  # as libcst counts lines
_NULL = contextlib.nullcontext()


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

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self.starts.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            start = self.starts.pop()
            self.ranges.setdefault(id(node), (start, self.offset))  # keep a syntactic range

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
        self.ranges: dict[int, tuple[int, int]] = {}
        self.line_starts: list[int] = []
        if self.wanted:
            self._compute()

    def _compute(self) -> None:
        state = _State(self.module, set(self.wanted))
        self.module._codegen(state)
        self.ranges = state.ranges
        code = "".join(state.tokens)
        self.line_starts = [0, *(m.end() for m in _NEWLINE.finditer(code))]

    def _position(self, offset: int) -> CodePosition:
        line = bisect.bisect_right(self.line_starts, offset)
        return CodePosition(line, offset - self.line_starts[line - 1])

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self.ranges.get(id(node))
        if found is None:
            self.wanted.add(id(node))
            self._compute()
            found = self.ranges.get(id(node))
            if found is None:
                raise KeyError(node)
        return CodeRange(self._position(found[0]), self._position(found[1]))
