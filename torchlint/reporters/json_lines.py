"""JSON Lines: one finding per line, each an object of the `json` format's schema."""

from __future__ import annotations

import json

from torchlint.reporters import Context
from torchlint.reporters.json_format import violation_dict
from torchlint.results import FileResult


def render(results: list[FileResult], context: Context) -> str:
    return "".join(
        json.dumps(violation_dict(r.path, v), ensure_ascii=False, separators=(",", ":")) + "\n"
        for r in results
        for v in r.records()
    )
