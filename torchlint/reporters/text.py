"""The default output: each finding with a source excerpt and a fix hint, then a summary."""

from __future__ import annotations

from torchlint.reporters import Context, fixable, source_lines
from torchlint.reporters.style import Style
from torchlint.results import FileResult, FixRecord, Violation

# A finding over more lines than this shows its first and last lines around a "...".
MAX_RANGE_LINES = 8
KEEP_HEAD, KEEP_TAIL = 4, 2
TAB_WIDTH = 4  # code frames show tabs as spaces to this stop, so carets line up (as ruff)


def _shown(line: str, column: int) -> int:
    """The 1-based column where the character at `column` of `line` is shown."""
    return len(line[: column - 1].expandtabs(TAB_WIDTH)) + 1


def _excerpt(lines: list[str], v: Violation, s: Style) -> list[str]:
    """The flagged code with one line of context each side, tabs expanded. A range on
    one line is underlined with carets; a range over several lines is drawn as ruff (and
    rustc) draw it: a bar in the margin from its first character to its last."""
    raw = {n: lines[n - 1].rstrip("\r\n") for n in range(1, len(lines) + 1)}
    texts = {n: text.expandtabs(TAB_WIDTH) for n, text in raw.items()}
    end_line, end_column = v.end_line, v.end_column
    if end_line > v.line and end_column <= 1:  # ends where a line starts: on the line above
        end_line -= 1
        end_column = len(raw.get(end_line, "")) + 1
    end_line = min(max(end_line, v.line), len(lines))
    column = _shown(raw.get(v.line, ""), v.column)
    end_column = _shown(raw.get(end_line, ""), end_column)
    first, last = max(1, v.line - 1), min(len(lines), end_line + 1)
    shown = list(range(first, last + 1))
    if end_line - v.line + 1 > MAX_RANGE_LINES:
        shown = [n for n in shown if n < v.line + KEEP_HEAD or n > end_line - KEEP_TAIL]
    width = len(str(last))
    gutter = s.blue(" " * width + " |")
    out = [gutter]
    label = s.red(f" {v.code}")
    if end_line == v.line:
        for n in shown:
            out.append(f"{s.blue(str(n).rjust(width) + ' |')} {texts[n]}")
            if n == v.line:
                carets = "^" * max(1, end_column - column)
                out.append(f"{gutter} {' ' * (column - 1)}{s.red(carets)}{label}")
        out.append(gutter)
        return out
    # Several lines: a two-column margin holds the bar ("/" when the range starts the
    # line, else a "_" line leading to its first character).
    starts_line = not texts[v.line][: column - 1].strip()
    previous = None
    for n in shown:
        if previous is not None and n != previous + 1:
            out.append(s.blue("...") + " " * width + s.red("|"))  # under the bar
        previous = n
        if n == v.line:
            margin = s.red("/ ") if starts_line else "  "
        elif v.line < n <= end_line:
            margin = s.red("| ")
        else:
            margin = "  "
        out.append(f"{s.blue(str(n).rjust(width) + ' |')} {margin}{texts[n]}".rstrip())
        if n == v.line and not starts_line:
            out.append(f"{gutter}  {s.red('_' * column + '^')}")
        if n == end_line:
            last_column = max(1, end_column - 1)
            out.append(f"{gutter} {s.red('|' + '_' * last_column + '^')}{label}")
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
        for v in result.records():
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
