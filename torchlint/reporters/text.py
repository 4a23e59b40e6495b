"""The default output: each finding with a source excerpt and a fix hint, then a summary."""

from __future__ import annotations

from torchlint.linter import Violation
from torchlint.reporters import Context, fixable
from torchlint.reporters.style import Style
from torchlint.runner import FileResult

MAX_EXCERPT_LINES = 4


def _excerpt(lines: list[str], v: Violation, s: Style) -> list[str]:
    first = max(1, v.line - 1)
    last = min(len(lines), min(v.end_line, v.line + MAX_EXCERPT_LINES - 1) + 1)
    width = len(str(last))
    gutter = s.blue(" " * width + " |")
    out = [gutter]
    for number in range(first, last + 1):
        text = lines[number - 1].rstrip("\r\n")
        out.append(f"{s.blue(str(number).rjust(width) + ' |')} {text}")
        if number == v.line:
            end = v.end_column if v.end_line == v.line else len(text) + 1
            carets = "^" * max(1, end - v.column)
            out.append(f"{gutter} {' ' * (v.column - 1)}{s.red(carets + ' ' + v.code)}")
    out.append(gutter)
    return out


def render(results: list[FileResult], context: Context) -> str:
    s = Style(context.color)
    out: list[str] = []
    for result in results:
        lines = (result.text or "").splitlines()
        for v in result.violations:
            mark = " [*]" if fixable(v, context) else ""
            out.append(
                f"{s.bold(result.path)}{s.cyan(':')}{v.line}{s.cyan(':')}{v.column}{s.cyan(':')} "
                f"{s.red(v.code)}{mark} {v.message}"
            )
            if lines and v.line <= len(lines):
                out.extend(_excerpt(lines, v, s))
            if v.fix is not None:
                unsafe = " (unsafe fix: needs --unsafe-fixes)" if not fixable(v, context) else ""
                out.append(f"{s.blue('  = help:')} {v.fix.title}{unsafe}")
            out.append("")
    return "\n".join(out) + ("\n" if out else "")
