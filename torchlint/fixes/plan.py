"""Which fixes can share one pass: their edits' source spans must not overlap."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import libcst as cst

from torchlint.fixes.model import Edit, Fix, InsertAfter, InsertBefore, Remove

Position = tuple[int, int]  # (line, column)
Span = tuple[Position, Position]
SpanOf = Callable[[cst.CSTNode], Span]  # where a node starts and ends


class _Planned:
    """The spans of the fixes kept so far: ranges that never overlap one another, and
    insertion points. Each test and addition is a binary search, so choosing among k
    fixes costs O(k log k), not O(k^2)."""

    def __init__(self) -> None:
        self.starts: list[Position] = []  # ranges, sorted by start (hence also by end)
        self.ends: list[Position] = []
        self.points: list[Position] = []  # sorted

    def _range_conflicts(self, start: Position, end: Position) -> bool:
        before = bisect.bisect_left(self.starts, end)  # ranges starting before `end`
        if before and self.ends[before - 1] > start:
            return True
        first = bisect.bisect_right(self.points, start)
        return first < len(self.points) and self.points[first] < end

    def _point_conflicts(self, point: Position) -> bool:
        before = bisect.bisect_left(self.starts, point)
        return bool(before) and self.ends[before - 1] > point

    def conflicts(self, spans: Sequence[tuple[Position, Position, bool]]) -> bool:
        return any(
            self._point_conflicts(start) if point else self._range_conflicts(start, end)
            for start, end, point in spans
        )

    def add(self, spans: Sequence[tuple[Position, Position, bool]]) -> None:
        for start, end, point in spans:
            if point:
                bisect.insort(self.points, start)
                continue
            # Only the edits of one fix can overlap each other: merge them into one range.
            i = bisect.bisect_left(self.starts, start)
            if i and self.ends[i - 1] > start:
                i -= 1
                start = self.starts[i]
            j = i
            while j < len(self.starts) and self.starts[j] < end:
                end = max(end, self.ends[j])
                j += 1
            self.starts[i:j] = [start]
            self.ends[i:j] = [end]


def edit_spans(edit: Edit, span_of: SpanOf) -> list[tuple[Position, Position, bool]]:
    """The source region an edit touches; inserts touch a point (a statement boundary)."""
    start, end = span_of(edit.node)
    if isinstance(edit, InsertBefore):
        return [(start, start, True)]
    if isinstance(edit, InsertAfter):
        return [(end, end, True)]
    return [(start, end, False)]


def select_compatible(fixes: Sequence[Fix], span_of: SpanOf) -> list[Fix]:
    """Greedily keep fixes (in order) whose edits do not overlap those already kept. A
    statement that several fixes remove (an import each leaves unused) is shared."""
    planned = _Planned()
    chosen: list[Fix] = []
    removed: set[int] = set()
    for candidate in fixes:
        own = [e for e in candidate.edits if not (isinstance(e, Remove) and id(e.node) in removed)]
        spans = [s for edit in own for s in edit_spans(edit, span_of)]
        if planned.conflicts(spans):
            continue
        planned.add(spans)
        chosen.append(candidate)
        removed.update(id(e.node) for e in own if isinstance(e, Remove))
    return chosen
