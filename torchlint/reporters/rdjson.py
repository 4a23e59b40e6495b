"""reviewdog's Diagnostic Format: `rdjson` (one object) and `rdjsonl` (one line per finding).

Columns are 1-based UTF-8 byte offsets, as reviewdog counts them; fixes become
suggestions.
"""

from __future__ import annotations

import json
from typing import Any

from torchlint.reporters import (
    TOOL_URL,
    Context,
    byte_column,
    cell_prefix,
    is_error,
    line_at,
    low_impact,
    rule_url,
    source_lines,
)
from torchlint.results import FileResult, Violation

SOURCE = {"name": "torchlint", "url": TOOL_URL}


def _position(lines: list[str], line: int, column: int) -> dict[str, int]:
    return {"line": line, "column": byte_column(line_at(lines, line), column)}


def _range(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> dict[str, Any]:
    return {"start": _position(lines, *start), "end": _position(lines, *end)}


def diagnostic(path: str, lines: list[str], v: Violation) -> dict[str, Any]:
    location: dict[str, Any] = {"path": path}
    if v.cell is None:  # notebook positions count within a cell: the whole file, no range
        location["range"] = _range(lines, (v.line, v.column), (v.end_line, v.end_column))
    item: dict[str, Any] = {
        "message": cell_prefix(v) + v.message,
        "location": location,
        "severity": "ERROR" if is_error(v) else "INFO" if low_impact(v) else "WARNING",
        "source": SOURCE,
        "code": {"value": v.code, "url": rule_url(v.code)},
    }
    if v.cell is None and v.fix is not None and v.fix.edits:
        item["suggestions"] = [
            {"range": _range(lines, e.start, e.end), "text": e.content} for e in v.fix.edits
        ]
    return item


def render(results: list[FileResult], context: Context) -> str:
    items = [
        diagnostic(r.path, lines, v)
        for r in results
        for lines in [source_lines(r)]
        for v in r.records()
    ]
    if context.format == "rdjsonl":
        return "".join(
            json.dumps(i, ensure_ascii=False, separators=(",", ":")) + "\n" for i in items
        )
    report = {"source": SOURCE, "severity": "WARNING", "diagnostics": items}
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
