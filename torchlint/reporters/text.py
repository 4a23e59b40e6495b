"""The default output: each finding with a source excerpt and a fix hint, then a summary."""

from __future__ import annotations

from torchlint.reporters import Context, fixable, source_lines
from torchlint.reporters.style import Style
from torchlint.results import FileResult, FixRecord, Violation

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


_lines = source_lines


def location(result: FileResult, v: Violation, s: Style) -> str:
    """`path:line:col:`, or `path:cell N:line:col:` in a notebook (as ruff shows them)."""
    colon = s.cyan(":")
    cell = f"cell {v.cell}{colon}" if v.cell is not None else ""
    return f"{s.bold(result.path)}{colon}{cell}{v.line}{colon}{v.column}{colon}"


def _fix_diff(result: FileResult, fix: FixRecord, s: Style) -> list[str]:
    """--show-fixes: each edit as numbered removed and added lines after one line of
    context (edits span whole lines)."""
    width = len(str(max((e.end[0] for e in fix.edits), default=1)))
    out: list[str] = []
    shown: tuple[int | None, int] = (None, 0)  # (cell, last line shown)
    for edit in fix.edits:
        lines = _lines(result, edit.cell)
        first, end = edit.start[0], edit.end[0]
        before = first - 1
        same = shown[0] == edit.cell
        if 0 < before <= len(lines) and not (same and before <= shown[1]):
            if same and shown[1] and before > shown[1] + 1:
                out.append(f"    {'.' * width}")
            out.append(f"    {before:>{width}}   {lines[before - 1]}")
        out += [
            s.red(f"    {n:>{width}} - {lines[n - 1]}")
            for n in range(first, end)
            if n <= len(lines)
        ]
        out += [s.green(f"    {'':>{width}} + {line}") for line in edit.content.splitlines()]
        shown = (edit.cell, max(end - 1, before))
    return [line.rstrip() for line in out]


def render(results: list[FileResult], context: Context) -> str:
    s = Style(context.color)
    out: list[str] = []
    for result in results:
        for v in result.violations:
            lines = _lines(result, v.cell)
            mark = " [*]" if fixable(v, context) else ""
            out.append(f"{location(result, v, s)} {s.red(v.code)}{mark} {v.message}")
            if lines and v.line <= len(lines):
                out.extend(_excerpt(lines, v, s))
            if v.fix is not None:
                unsafe = " (unsafe fix: needs --unsafe-fixes)" if not fixable(v, context) else ""
                out.append(f"{s.blue('  = help:')} {v.fix.title}{unsafe}")
                if context.show_fixes:
                    out.extend(_fix_diff(result, v.fix, s))
            out.append("")
    return "\n".join(out) + ("\n" if out else "")
