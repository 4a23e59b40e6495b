"""GitHub Actions workflow commands: one `::warning` annotation per finding.

GitHub shows only the first 10 annotations of each level per step in the pull
request, so every finding is still printed (they stay in the log) and the CLI also
writes `summary()` to $GITHUB_STEP_SUMMARY.
"""

from __future__ import annotations

from collections import Counter

from torchlint.reporters import Context, cell_prefix, fixable, is_error, low_impact, repo_path
from torchlint.results import FileResult, Violation

MAX_SUMMARY_ROWS = 500


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, **properties: object) -> str:
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items())
    return f"::{level} {props}::{escape_data(message)}"


def render(results: list[FileResult], context: Context) -> str:
    lines = []
    for r in results:
        path = repo_path(r.path, context)
        for v in r.records():
            title = f"torchlint ({v.code})"
            level = "error" if is_error(v) else "notice" if low_impact(v) else "warning"
            if v.cell is not None:
                lines.append(command(level, cell_prefix(v) + v.message, file=path, title=title))
                continue
            lines.append(
                command(
                    level,
                    v.message,
                    file=path,
                    line=v.line,
                    endLine=v.end_line,
                    col=v.column,
                    endColumn=v.end_column,
                    title=title,
                )
            )
    return "".join(line + "\n" for line in lines)


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _line(v: Violation) -> str:
    return f"{v.line} (cell {v.cell})" if v.cell is not None else str(v.line)


def _fix_cell(v: Violation, context: Context) -> str:
    if v.fix is None:
        return ""
    return "`torchlint fix`" if fixable(v, context) else "`torchlint fix --unsafe-fixes`"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(results: list[FileResult], context: Context) -> str:
    """A Markdown report for $GITHUB_STEP_SUMMARY: counts per rule, then every finding."""
    found = [(r, v) for r in results for v in r.violations]
    errors = [r for r in results if r.error is not None]
    files = len({r.path for r, _ in found})
    if not found and not errors:
        return "### torchlint: all checks passed\n"
    out = [f"### torchlint: {_plural(len(found), 'problem')} in {_plural(files, 'file')}", ""]
    if found:
        counts = Counter(v.code for _, v in found)
        names = {v.code: v.name for _, v in found}
        fix = {v.code: _fix_cell(v, context) for _, v in found}
        out += ["| Code | Rule | Count | Fix |", "| --- | --- | ---: | --- |"]
        out += [f"| {c} | {names[c]} | {n} | {fix[c]} |" for c, n in counts.most_common()]
        out += ["", "| File | Line | Code | Message |", "| --- | ---: | --- | --- |"]
        out += [
            f"| {_cell(repo_path(r.path, context))} | {_line(v)} | {v.code} | {_cell(v.message)} |"
            for r, v in found[:MAX_SUMMARY_ROWS]
        ]
        if len(found) > MAX_SUMMARY_ROWS:
            out.append(f"\n… and {len(found) - MAX_SUMMARY_ROWS} more (see the step's log).")
    if errors:
        out += ["", "Files that could not be checked:", ""]
        out += [f"- {_cell(repo_path(r.path, context))}: {_cell(r.error or '')}" for r in errors]
    return "\n".join(out) + "\n"
