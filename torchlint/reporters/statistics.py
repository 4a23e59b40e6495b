"""`--statistics`: one row per rule with findings, most frequent first, instead of the
findings (ruff's layout: count, code, `[*]` when every finding of the rule is fixable,
`[-]` when some are, name; JSON: the same fields, `fixable` meaning all, as ruff's).
Both impacts are counted: a rule's low-impact findings hidden from the report too."""

from __future__ import annotations

import json
from collections import Counter

from torchlint.lint.registry import known
from torchlint.reporters import Context, fixable, low_impact
from torchlint.reporters.style import Style
from torchlint.results import FileResult

FORMATS = ("text", "full", "concise", "json")


def rows(results: list[FileResult], context: Context) -> list[dict[str, object]]:
    """One row per rule: its findings shown (`count`), how many of them are low impact,
    and its low-impact findings left out of the report (`hidden`)."""
    violations = [v for r in results for v in r.records()]
    counts = Counter(v.code for v in violations)
    can_fix = Counter(v.code for v in violations if fixable(v, context))
    low = Counter(v.code for v in violations if low_impact(v))
    names = {v.code: v.name for v in violations}
    for code in context.hidden:
        rule = known(code)
        names.setdefault(code, rule.name if rule else "")
    total = {code: counts[code] + context.hidden.get(code, 0) for code in names}
    ordered = sorted(names, key=lambda code: (-counts[code], -total[code], code))
    return [
        {
            "code": code,
            "name": names[code],
            "count": counts[code],
            "fixable": can_fix[code] == counts[code],
            "fixable_count": can_fix[code],
            "low_impact_count": low[code],
            "hidden_count": context.hidden.get(code, 0),
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
        low = _low(row)
        lines.append(f"{s.bold(count)}\t{s.red(code)}\t{mark}{row['name']}{low}")
    return "\n".join(lines) + "\n"


def _low(row: dict[str, object]) -> str:
    """What a row says of its low-impact findings, shown or hidden."""
    if row["hidden_count"]:
        return f"  (+{row['hidden_count']} low impact, hidden)"
    if row["low_impact_count"]:
        return f"  ({row['low_impact_count']} low impact)"
    return ""
