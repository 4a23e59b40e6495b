"""Which nodes an explanation positions: at a line, only what it reads.

Positioning every node of a file costs more than its lint (a code generation that
records each node). At a line, `explain` reads the nodes of the top-level statement
that holds it (the statements around the line, the expressions on it, what rules
passed over there), the nodes the rules report (each finding's line and column), and
the few things the facts at the line point at elsewhere (a function's callers, a
model's construction): given the `Layout` of the module's text (an editor's buffer
keeps one; otherwise one code generation without records makes it), only the
top-level statements holding them are generated. A node of another top-level
statement cannot span the line (a top-level statement's lines are its own), so what a
rule passed over there needs no position to be left out."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst

from torchlint.text.positions import Layout, NodePositions, layout
from torchlint.text.walk import descendants


@dataclass
class Where:
    """The positions an explanation reads, and what it may find at its line."""

    positions: NodePositions
    top: list[cst.CSTNode]  # the top-level statements that may hold the line
    near: set[int] | None  # the ids of their nodes; None: every node is positioned

    def may_span(self, node: cst.CSTNode) -> bool:
        """Can `node` span the line explained (is it in a statement of `top`)?"""
        return self.near is None or id(node) in self.near

    def want(self, nodes: Iterable[cst.CSTNode]) -> None:
        """Position `nodes` too, in one pass."""
        self.positions.want(nodes)


def whole(module: cst.Module) -> Where:
    """Every node positioned (the whole file explained, or a text without a layout)."""
    return Where(NodePositions(module, descendants(module)), list(module.body), None)


def at_line(module: cst.Module, source: str, line: int, known: Layout | None = None) -> Where:
    """The positions of the nodes of the top-level statement holding `line` (a line as
    libcst counts them) of `module`, parsed from `source`, with its layout (`known`, or
    made here); other nodes are positioned as they are asked for."""
    laid = known if known is not None else layout(module, source)
    if laid is None or not module.has_trailing_newline or not module.body:
        return whole(module)  # (as `NodePositions` would: the whole module generated)
    positions = NodePositions(module, (), laid)
    starts = laid.line_starts
    offset = starts[line - 1] if 0 < line <= len(starts) else laid.footer
    index = bisect.bisect_right(laid.starts, offset) - 1
    if index < 0 or offset >= laid.footer:
        return Where(positions, [], set())  # the module's header or footer: no statement
    top = module.body[index]
    nodes = list(descendants(top))
    positions.want(nodes, index)
    return Where(positions, [top], {id(n) for n in nodes})
