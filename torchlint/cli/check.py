"""`check` and `fix` (and `clean`, which empties what they cache): the command line made
a run plan, the files found or standard input read, linted, and reported (output.py)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from torchlint.cli import output, settings
from torchlint.cli.app import (
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    error,
    load,
    note,
    run_time,
    split,
    start,
    warn,
)
from torchlint.cli.flags import CheckOptions
from torchlint.cli.progress import Progress
from torchlint.cli.progress import wanted as progress_wanted

if TYPE_CHECKING:
    from collections.abc import Callable

    from torchlint.cli.watch import Stamps
    from torchlint.config.load import Config
    from torchlint.config.plan import PerFileIgnores, RunPlan
    from torchlint.results import FileResult
    from torchlint.run.files import Mode


def plan(options: CheckOptions) -> RunPlan:
    """The run plan: the config file with the command line on top (ConfigError if bad)."""
    from torchlint.config.load import parse_target
    from torchlint.config.plan import Overrides, resolve

    paths = options.paths or ["."]
    stdin_filename = options.stdin_filename if options.stdin else None
    config = _config(options, paths, stdin_filename)
    target = options.target_torch
    overrides = Overrides(
        select=split(options.select),
        extend_select=split(options.extend_select) or (),
        ignore=split(options.ignore) or (),
        fixable=split(options.fixable),
        extend_fixable=split(options.extend_fixable) or (),
        unfixable=split(options.unfixable) or (),
        exclude=split(options.exclude),
        extend_exclude=split(options.extend_exclude) or (),
        unsafe_fixes=options.unsafe_fixes,
        preview=options.preview,
        min_impact="low" if options.show_low_impact else None,
        target_torch=None if target is None else parse_target(target, "--target-torch"),
        target_torch_source=None if target is None else "--target-torch",
        per_file_ignores=_pairs(options.per_file_ignores, "--per-file-ignores"),
        extend_per_file_ignores=(
            _pairs(options.extend_per_file_ignores, "--extend-per-file-ignores") or ()
        ),
    )
    if not options.isolated:
        config.read_project_torch(start(paths, stdin_filename))
    return resolve(config, overrides)


def _config(options: CheckOptions, paths: list[str], stdin_filename: str | None) -> Config:
    """The config file (given, found, or none with --isolated) under the `--config KEY =
    VALUE` settings; as ruff reads --config, a value naming a file is the file."""
    from torchlint.config.load import ConfigError, load_config, override

    files = [value for value in options.config or () if os.path.isfile(value)]
    if len(files) > 1:
        raise ConfigError(f"--config: one configuration file at most, got {', '.join(files)}")
    if files and options.isolated:
        raise ConfigError(
            f"--config {files[0]} cannot be used with --isolated, which ignores every "
            "configuration file"
        )
    if options.isolated:
        config = load_config(None)
    else:
        config = load(Path(files[0]) if files else None, paths, stdin_filename)
    for setting in options.config or ():
        if setting not in files:
            override(config, setting)
    return config


def _pairs(values: list[str] | None, flag: str) -> PerFileIgnores | None:
    """`PATTERN:CODES` values as (pattern, codes) pairs; codes are comma-separated, and a
    comma may also start the next pair, as ruff reads it (`a.py:TL201,b.py:TL202`)."""
    from torchlint.config.load import ConfigError

    if values is None:
        return None
    pairs: list[tuple[str, list[str]]] = []
    for value in values:
        bad = ConfigError(
            f"{flag} {value!r}: expected PATTERN:CODES, such as 'tests/*:TL201,TL202'"
        )
        own: list[tuple[str, list[str]]] = []
        for part in filter(None, (p.strip() for p in value.split(","))):
            pattern, colon, code = part.rpartition(":")
            if colon and pattern.strip() and code.strip():
                own.append((pattern.strip(), [code.strip()]))
            elif own and not colon:
                own[-1][1].append(part)
            else:
                raise bad
        if not own:
            raise bad
        pairs += own
    return tuple((pattern, tuple(codes)) for pattern, codes in pairs)


def check(options: CheckOptions) -> int:
    """`check` and `fix`: the exit code of the run (as ruff's); with `--watch`, runs
    until Ctrl-C."""
    problem = options.conflict()
    if problem is not None:
        error(problem)
        return EXIT_ERROR
    paths = options.paths or ["."]
    if options.stdin_filename is not None and not options.quiet:
        for path in paths:
            if path not in ("-", "."):
                warn(f"ignoring {path} in favour of standard input (--stdin-filename)")
    if options.watch:
        from torchlint.cli.watch import watch

        return watch(
            lambda: _check(options, paths), lambda: _watched(options, paths), options.quiet
        )
    return _check(options, paths)


def _check(options: CheckOptions, paths: list[str]) -> int:
    """One run: the plan made (the config read again: `--watch` follows its changes),
    the files found and checked (or standard input), and reported (or, `--add-noqa`,
    their findings' lines commented)."""
    from torchlint.config.load import ConfigError
    from torchlint.run.cache import location
    from torchlint.run.files import Interrupted, run
    from torchlint.run.runner import discover

    try:
        run_plan = plan(options)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_ERROR
    if not options.quiet:
        for code in run_plan.preview_left_out:
            warn(f"{code} is a preview rule: it runs only with `--preview` (or `preview = true`)")
    force_exclude = options.force_exclude or run_plan.config.force_exclude
    if options.show_files or options.show_settings:
        return settings.show(options, run_plan, paths, force_exclude)
    try:
        out = output.open_report(options.output_file)
    except OSError as exc:
        error(f"cannot write {options.output_file}: {exc.strerror or exc}")
        return EXIT_ERROR
    started = time.monotonic()
    try:
        if options.verbose:
            settings.verbose(run_plan)
        warnings: list[str] = []
        if options.stdin:  # never with --add-noqa
            results = _stdin(options, run_plan, force_exclude)
            if results is None:
                return EXIT_CLEAN
        else:
            found = discover(paths, run_plan.config, force_exclude=force_exclude)
            on_result, progress = _progress(options, len(found.files))
            mode, edits = _mode(options)
            try:
                try:
                    cache_dir = None if options.no_cache else location(run_plan.config.root)
                    ran = run(
                        run_plan,
                        found.files,
                        mode,
                        edits=edits,
                        cache_dir=cache_dir,
                        bases=found.bases,
                        walked=found.walked,
                        on_result=on_result,
                    )
                finally:
                    if progress is not None:
                        progress.close()
            except Interrupted as exc:
                output.interrupted(exc)
                return EXIT_INTERRUPTED
            results, warnings = found.errors + ran.results, found.warnings
        if options.add_noqa:
            return _add_noqa(options, run_plan, results, warnings)
        if options.verbose:
            note(f"done in {run_time():.2f} s ({time.monotonic() - started:.2f} s checking)")
        return output.report(options, run_plan, results, warnings, out)
    finally:
        if out is not sys.stdout:
            out.close()


def _watched(options: CheckOptions, paths: list[str]) -> Stamps:
    """`--watch`: the stamps of what a run reads, the files it checks and its config file
    (only that file while it is broken: the next run says what is wrong)."""
    from torchlint.cli.watch import stamps
    from torchlint.config.load import ConfigError, find_config
    from torchlint.run.runner import discover

    given: list[Path | None] = [Path(v) for v in options.config or () if os.path.isfile(v)]
    config = [] if options.isolated else given or [find_config(start(paths))]
    try:
        run_plan = plan(options)
    except ConfigError:
        return stamps(filter(None, config))
    force_exclude = options.force_exclude or run_plan.config.force_exclude
    found = discover(paths, run_plan.config, force_exclude=force_exclude)
    return stamps([*filter(None, config), *found.files])


def _mode(options: CheckOptions) -> tuple[Mode, bool]:
    """What the run does with each file, and whether findings carry their fixes' edits."""
    from torchlint import reporters
    from torchlint.run.files import Mode

    text_like = options.output_format in ("text", "full")
    mode = Mode.DIFF if options.diff else Mode.FIX if options.fix else Mode.CHECK
    # --show-fixes without --fix shows each fix as a diff under its finding
    edits = options.output_format in reporters.WITH_EDITS or (
        options.show_fixes and not options.fix and text_like and not options.statistics
    )
    return mode, edits


def _stdin(options: CheckOptions, plan: RunPlan, force_exclude: bool) -> list[FileResult] | None:
    """Standard input linted; None where it is excluded (then passed through when fixed,
    as ruff does)."""
    from torchlint.run.files import run_stdin

    name = options.stdin_filename or "-"
    data = sys.stdin.buffer.read()
    if force_exclude and name != "-" and plan.config.excluded(Path(name)):
        if options.fix and not options.diff:
            sys.stdout.buffer.write(data)
        return None
    return [run_stdin(plan, data, name, *_mode(options))]


def _progress(
    options: CheckOptions, files: int
) -> tuple[Callable[[FileResult], None] | None, Progress | None]:
    """What is told of each result of a run over `files` files as it comes: a line with
    `--verbose` (after their count), else the progress line on a terminal (to close
    when the run ends)."""
    from torchlint.reporters.summary import plural

    if options.verbose:
        note(f"{plural(files, 'file')} to check")
        return output.verbose_line, None
    if not options.quiet and progress_wanted(sys.stderr):
        progress = Progress(files, sys.stderr)
        return progress, progress
    return None, None


def _add_noqa(
    options: CheckOptions, plan: RunPlan, results: list[FileResult], warnings: list[str]
) -> int:
    """`--add-noqa`: a `# noqa: CODE` comment on each line with findings (ruff's), the
    findings (`results`) as `check` reports them (each file with what its project tells
    it)."""
    from torchlint.reporters import hide_low_impact
    from torchlint.run.runner import add_noqa_file

    if not plan.low_impact:
        hide_low_impact(results)  # what `check` shows, and nothing it hides
    added = sum(add_noqa_file(Path(r.path), r) for r in results)
    errors = [r for r in results if r.errors]
    for r in sorted(errors, key=lambda r: r.path):
        error(f"{r.path}: {r.error}")
    if not options.quiet:
        for w in warnings:
            warn(w)
        if added:
            note(f"added {added} noqa directive{'' if added == 1 else 's'}")
    return EXIT_ERROR if errors else EXIT_CLEAN


def clean_command() -> None:
    """Remove the result cache (.torchlint_cache) of the project around the cwd."""
    from torchlint.config.load import ConfigError
    from torchlint.run.cache import clean, location

    try:
        root = load(None, []).root
    except ConfigError:
        root = Path.cwd()
    directory = location(root)
    if clean(directory):
        typer.echo(f"Removed {directory}")
