"""GitLab Code Quality report (a JSON array; `artifacts:reports:codequality`).

Paths are relative to the repository root; the fingerprint holds no line numbers, so
a finding keeps its identity when code above it moves.
"""

from __future__ import annotations

import json
from typing import Any

from torchlint.reporters import Context, cell_prefix, fingerprints, is_error, low_impact, repo_path
from torchlint.results import FileResult, Violation


def _location(path: str, v: Violation) -> dict[str, Any]:
    if v.cell is not None:  # notebook positions count within a cell: the file's first line
        return {"path": path, "lines": {"begin": 1}}
    return {
        "path": path,
        "positions": {
            "begin": {"line": v.line, "column": v.column},
            "end": {"line": v.end_line, "column": v.end_column},
        },
    }


def render(results: list[FileResult], context: Context) -> str:
    items: list[dict[str, Any]] = []
    for r in results:
        path = repo_path(r.path, context)
        for v, fingerprint in fingerprints(r, context):
            items.append(
                {
                    "description": f"{v.code} {cell_prefix(v)}{v.message}",
                    "check_name": v.code,
                    "fingerprint": fingerprint,
                    "severity": _severity(v),
                    "categories": ["Bug Risk" if is_error(v) else "Performance"],
                    "location": _location(path, v),
                }
            )
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def _severity(v: Violation) -> str:
    return "critical" if is_error(v) else "minor" if low_impact(v) else "major"
