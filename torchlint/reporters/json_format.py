"""JSON: a list of findings with a stable schema (documented in docs/output-formats.md)."""

from __future__ import annotations

import json
from typing import Any

from torchlint.reporters import Context, rule_url
from torchlint.results import FileResult, Violation


def violation_dict(path: str, v: Violation) -> dict[str, Any]:
    fix = None
    if v.fix is not None:
        fix = {
            "applicability": v.fix.applicability,
            "message": v.fix.title,
            "edits": [
                {
                    "content": e.content,
                    "location": {"row": e.start[0], "column": e.start[1]},
                    "end_location": {"row": e.end[0], "column": e.end[1]},
                    "cell": e.cell,
                }
                for e in v.fix.edits
            ],
        }
    return {
        "code": v.code,
        "name": v.name,
        "message": v.message,
        "filename": path,
        "cell": v.cell,  # notebooks: the 1-based cell that row and column are relative to
        "location": {"row": v.line, "column": v.column},
        "end_location": {"row": v.end_line, "column": v.end_column},
        "fix": fix,
        "impact": v.impact,  # "high", or "low" (shown with --show-low-impact)
        "url": rule_url(v.code),
    }


def render(results: list[FileResult], context: Context) -> str:
    items = [violation_dict(r.path, v) for r in results for v in r.records()]
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"
