"""`path:line:col: CODE [*] message` (`path:cell N:line:col: ...` in notebooks), one per finding."""

from __future__ import annotations

from torchlint.reporters import Context, fixable
from torchlint.reporters.style import Style
from torchlint.reporters.text import location
from torchlint.results import FileResult


def render(results: list[FileResult], context: Context) -> str:
    s = Style(context.color)
    lines = []
    for result in results:
        for v in result.records():
            mark = " [*]" if fixable(v, context) else ""
            lines.append(f"{location(result, v, s)} {s.red(v.code)}{mark} {v.message}")
    return "\n".join(lines) + ("\n" if lines else "")
