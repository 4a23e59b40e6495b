"""What a run of `check` or `fix` writes: the report in its format (or the diff, or the
fixed standard input), the messages on stderr, the summary, and the exit code."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from torchlint.cli.app import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, error, note, warn
from torchlint.cli.flags import CheckOptions
from torchlint.results import RULE_ERROR

if TYPE_CHECKING:
    from torchlint.config.plan import RunPlan
    from torchlint.reporters import Context
    from torchlint.results import FileResult
    from torchlint.run.files import Interrupted


def open_report(path: Path | None) -> TextIO:
    """Where the report goes: standard output, or `--output-file` (its folders made)."""
    if path is None:
        return sys.stdout
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", encoding="utf-8")  # closed by the caller


def report(
    options: CheckOptions,
    plan: RunPlan,
    results: list[FileResult],
    warnings: list[str],
    out: TextIO,
) -> int:
    """Write the report of a run's results to `out` (and stderr); its exit code."""
    from torchlint import reporters

    results.sort(key=lambda r: r.path)  # as ruff: by path, whatever order they came in
    hidden = {} if plan.low_impact else reporters.hide_low_impact(results)
    errors = [r for r in results if r.errors]
    human = options.output_format in reporters.HUMAN
    to_file = out is not sys.stdout
    # Errors are records of every report (TL000 invalid-syntax...); a report read on the
    # terminal shows them already, one read by a program (or none: --fix-only) gets them
    # on stderr too.
    for r in errors:  # a rule that raised: said on stderr whatever the report
        if options.fix_only or not human or to_file or any(e.code == RULE_ERROR for e in r.errors):
            error(f"{r.path}: {r.error}")
    warnings = [*warnings, *(f"{r.path}: {r.warning}" for r in results if r.warning is not None)]
    if not options.quiet:
        for w in warnings:
            warn(w)
    context = reporters.Context(
        color=_color(out),
        unsafe=plan.unsafe,
        unsafe_hint=options.unsafe_fixes is not False,
        show_fixes=options.show_fixes,
        prefix=_repo_prefix(Path.cwd()),
        format=options.output_format,
        hidden=hidden,
    )
    stream = _write(options, results, context, out)
    if human:
        _summary(options, results, context, stream, bool(errors), to_file)
    stream.flush()
    return exit_code(options, results)


def _write(
    options: CheckOptions, results: list[FileResult], context: Context, out: TextIO
) -> TextIO:
    """The report, or the diff; the stream the report went to (fixing standard input
    prints the fixed code, and the report then goes to stderr)."""
    from torchlint import reporters
    from torchlint.reporters import statistics

    stdin_fix = options.stdin and options.fix and not options.diff
    stream = sys.stderr if stdin_fix and out is sys.stdout else out
    if options.diff:
        sys.stdout.write("".join(r.diff for r in results if r.diff))
    else:
        if stdin_fix and results[0].fixed_text is not None:
            sys.stdout.write(results[0].fixed_text)
        if options.fix_only:
            return stream  # no report of the findings left
        if options.statistics:
            stream.write(statistics.render(results, context))
        else:
            stream.write(reporters.render(options.output_format, results, context))
    if options.output_format == "github" and os.environ.get("GITHUB_STEP_SUMMARY"):
        _step_summary(os.environ["GITHUB_STEP_SUMMARY"], results, context)
    return stream


def _summary(
    options: CheckOptions,
    results: list[FileResult],
    context: Context,
    stream: TextIO,
    errors: bool,
    to_file: bool,
) -> None:
    """The fixes applied (`--show-fixes`) and the closing line of a report read by people."""
    from torchlint.reporters import summary

    if options.show_fixes and options.fix:
        stream.write(summary.fixes_applied(results, context))
    said = summary.summary(results, context, options.diff, options.fix_only)
    violations = any(r.violations for r in results)
    quiet_now = options.quiet or (options.statistics and not violations)
    if said and not quiet_now and not (errors and said == "All checks passed!\n"):
        (sys.stderr if options.diff and not to_file else stream).write(said)


def exit_code(options: CheckOptions, results: list[FileResult]) -> int:
    """As ruff's: errors win over findings; `--exit-non-zero-on-fix` counts files fixed,
    `--diff` the diffs; `--exit-zero` and `--fix-only` leave findings out."""
    if any(r.errors for r in results):
        return EXIT_ERROR
    if options.exit_non_zero_on_fix and any(r.fixed for r in results):
        return EXIT_FINDINGS
    if options.diff:
        return EXIT_FINDINGS if any(r.diff for r in results) and not options.exit_zero else 0
    violations = any(r.violations for r in results) and not options.fix_only
    return EXIT_FINDINGS if violations and not options.exit_zero else EXIT_CLEAN


def interrupted(exc: Interrupted) -> None:
    """Ctrl-C: which files were rewritten before the run stopped."""
    written = sorted(r.path for r in exc.results if r.fixed and not r.errors)
    maybe = "" if exc.exact else " (a file in progress when it stopped may have been too)"
    if not written:
        note(f"interrupted: no file was rewritten{maybe}")
        return
    from torchlint.reporters.summary import plural

    listing = "".join(f"\n  {path}" for path in written)
    files = plural(len(written), "file")
    note(f"interrupted: {files} rewritten before the run stopped{maybe}:{listing}")


def verbose_line(result: FileResult) -> None:
    """`--verbose`: each file as it is checked."""
    from torchlint.reporters.summary import plural

    found = "error" if result.errors else plural(len(result.violations), "finding")
    fixed = f", {len(result.fixed)} fixed" if result.fixed else ""
    note(f"checked {result.path}: {found}{fixed}")


def _color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def _repo_prefix(cwd: Path) -> str:
    """The working directory relative to the enclosing repository ("" outside one)."""
    for directory in (cwd, *cwd.parents):
        if os.path.exists(directory / ".git"):  # never raises (an unreadable directory)
            rel = cwd.relative_to(directory).as_posix()
            return "" if rel == "." else rel + "/"
    return ""


def _step_summary(path: str, results: list[FileResult], context: Context) -> None:
    from torchlint.reporters.github import summary

    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(summary(results, context))
    except OSError as exc:
        error(f"cannot write the step summary to {path}: {exc.strerror}")
