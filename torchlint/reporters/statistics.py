"""`--statistics`: one row per rule with findings, most frequent first, instead of the
findings (ruff's layout: count, code, `[*]` when every finding of the rule is fixable,
`[-]` when some are, name; JSON: the same fields, `fixable` meaning all, as ruff's)."""

from __future__ import annotations

import json
from collections import Counter

from torchlint.reporters import Context, fixable
from torchlint.reporters.style import Style
from torchlint.results import FileResult

FORMATS = ("text", "full", "concise", "json")


def rows(results: list[FileResult], context: Context) -> list[dict[str, object]]:
    violations = [v for r in results for v in r.records()]
    counts = Counter(v.code for v in violations)
    can_fix = Counter(v.code for v in violations if fixable(v, context))
    names = {v.code: v.name for v in violations}
    ordered = sorted(counts, key=lambda code: (-counts[code], code))
    return [
        {
            "code": code,
            "name": names[code],
            "count": counts[code],
            "fixable": can_fix[code] == counts[code],
            "fixable_count": can_fix[code],
        }
        for code in ordered
    ]


def render(results: list[FileResult], context: Context) -> str:
    table = rows(results, context)
    if context.format == "json":
        return json.dumps(table, indent=2) + "\n"
    if not table:
        return ""
    s = Style(context.color)
    width = max(len(str(row["count"])) for row in table)
    code_width = max(len(str(row["code"])) for row in table)
    any_fixable = any(row["fixable_count"] for row in table)
    lines = []
    for row in table:
        mark = ""
        if any_fixable:
            star = "*" if row["fixable"] else "-" if row["fixable_count"] else " "
            mark = f"[{s.cyan(star) if star != ' ' else star}] "
        count, code = str(row["count"]).rjust(width), str(row["code"]).ljust(code_width)
        lines.append(f"{s.bold(count)}\t{s.red(code)}\t{mark}{row['name']}")
    return "\n".join(lines) + "\n"
