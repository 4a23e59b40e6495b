"""The `torchlint` command: parse options, load config, run, report.

Exit codes (as ruff): 0 nothing left to report, 1 findings remain, 2 usage,
configuration or I/O error (errors win over findings).
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from torchlint import __version__
from torchlint.progress import Progress
from torchlint.progress import wanted as progress_wanted
from torchlint.verify.options import VerifyOptions

app = typer.Typer(
    name="torchlint",
    help="Find and fix PyTorch code that leaves the GPU idle.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _version(value: bool) -> None:
    if value:
        typer.echo(f"torchlint {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Find and fix PyTorch code that leaves the GPU idle."""


def _split(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def _error(message: str) -> None:
    typer.echo(f"torchlint: error: {message}", err=True)


def _color(stream) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


PathsArg = Annotated[
    list[str] | None,
    typer.Argument(help="Files or directories to lint (default: .); `-` reads standard input."),
]
SelectOpt = Annotated[
    list[str] | None,
    typer.Option("--select", help="Rule codes or prefixes to enable (comma-separated; ALL)."),
]
IgnoreOpt = Annotated[
    list[str] | None, typer.Option("--ignore", help="Rule codes or prefixes to disable.")
]
ExtendOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--extend-select", help="Rule codes or prefixes to enable on top of the selection."
    ),
]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Use this config file (TOML).")]
FormatOpt = Annotated[
    str,
    typer.Option(
        "--output-format",
        help="text, full, concise, json, json-lines, github, sarif, gitlab, rdjson, rdjsonl "
        "or junit (see docs/output-formats.md).",
    ),
]


def _load(config_file: Path | None, paths: list[str]):
    from torchlint.config import find_config, load_config

    if config_file is not None:
        return load_config(config_file)
    starts = [Path(p) for p in paths if p != "-"]
    start = Path(os.path.commonpath([str(p.absolute()) for p in starts])) if starts else Path.cwd()
    while not os.path.isdir(start):  # a file, or a path that does not exist
        start = start.parent
    return load_config(find_config(start))


def _repo_prefix(cwd: Path) -> str:
    """The working directory relative to the enclosing repository ("" outside one)."""
    for directory in (cwd, *cwd.parents):
        if os.path.exists(directory / ".git"):  # never raises (an unreadable directory)
            rel = cwd.relative_to(directory).as_posix()
            return "" if rel == "." else rel + "/"
    return ""


def _check(
    paths: list[str] | None,
    fix: bool,
    unsafe_fixes: bool | None,
    diff: bool,
    show_fixes: bool,
    select: list[str] | None,
    ignore: list[str] | None,
    extend_select: list[str] | None,
    output_format: str,
    exit_zero: bool,
    statistics: bool,
    config_file: Path | None,
    target_torch: str | None,
    force_exclude: bool,
    stdin_filename: str | None,
    quiet: bool,
    verbose: bool = False,
    no_cache: bool = False,
) -> int:
    from torchlint import reporters
    from torchlint.config import ConfigError, parse_target
    from torchlint.parallel import run_files
    from torchlint.results import Job
    from torchlint.runner import discover, run_stdin

    paths = paths or ["."]
    if output_format not in reporters.FORMATS:
        _error(
            f"unknown output format {output_format!r} (choose from {', '.join(reporters.FORMATS)})"
        )
        return EXIT_ERROR
    if quiet and verbose:
        _error("--quiet and --verbose cannot be used together")
        return EXIT_ERROR
    started = time.monotonic()
    try:
        config = _load(config_file, paths)
        if select is not None:
            config.select = _split(select)
        config.extend_select += _split(extend_select) or []
        config.ignore += _split(ignore) or []
        if target_torch is not None:
            config.target_torch = parse_target(target_torch, "--target-torch")
        codes = tuple(config.selected_codes())
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_ERROR
    unsafe = config.unsafe_fixes if unsafe_fixes is None else unsafe_fixes
    human = output_format in reporters.HUMAN
    job = Job(
        codes=codes,
        settings=config.settings(),
        fix=fix or diff,
        unsafe=unsafe,
        diff=diff,
        # --show-fixes without --fix shows each fix as a diff under its finding
        with_edits=output_format in reporters.WITH_EDITS
        or (show_fixes and not fix and output_format in ("text", "full")),
    )
    if verbose:
        _note(f"config: {config.source or 'defaults (no config file found)'}")
        _note(f"rules: {', '.join(codes) or 'none'}")
    warnings: list[str] = []
    if paths == ["-"]:
        results = [run_stdin(sys.stdin.buffer.read(), stdin_filename or "-", job, config)]
    else:
        found = discover(paths, config, force_exclude=force_exclude or config.force_exclude)
        warnings = found.warnings
        if verbose:
            _note(f"{_plural(len(found.files), 'file')} to check")
        on_result = None
        progress = None
        if verbose:
            on_result = _verbose_line
        elif not quiet and progress_wanted(sys.stderr):
            on_result = progress = Progress(len(found.files), sys.stderr)
        try:
            from torchlint.cache import location

            cache_dir = None if no_cache else location(config.root)
            results = found.errors + run_files(found.files, job, config, on_result, cache_dir)
        finally:
            if progress is not None:
                progress.close()
    if verbose:
        _note(f"done in {time.monotonic() - started:.2f} s")

    errors = [r for r in results if r.error is not None]
    for r in errors:
        _error(f"{r.path}: {r.error}")
    warnings += [f"{r.path}: {r.warning}" for r in results if r.warning is not None]
    if not quiet:
        for w in warnings:
            typer.echo(f"torchlint: warning: {w}", err=True)

    out = sys.stdout
    context = reporters.Context(
        color=_color(out),
        fix_mode=fix,
        unsafe=unsafe,
        show_fixes=show_fixes,
        prefix=_repo_prefix(Path.cwd()),
        format=output_format,
    )
    report_stream = sys.stderr if paths == ["-"] and fix and not diff else out
    if diff:
        out.write("".join(r.diff for r in results if r.diff))
    else:
        if paths == ["-"] and fix and results[0].fixed_text is not None:
            out.write(results[0].fixed_text)
        report_stream.write(reporters.render(output_format, results, context))
    if output_format == "github" and os.environ.get("GITHUB_STEP_SUMMARY"):
        _step_summary(os.environ["GITHUB_STEP_SUMMARY"], results, context)
    violations = [v for r in results for v in r.violations]
    if human:
        if statistics:
            report_stream.write(_statistics(violations, context))
        if show_fixes and fix:
            report_stream.write(_fixes_applied(results))
        summary = _summary(results, context, diff)
        if summary and not quiet and not (errors and summary == "All checks passed!"):
            (sys.stderr if diff else report_stream).write(summary + "\n")
    report_stream.flush()
    if errors:
        return EXIT_ERROR
    if diff:
        return EXIT_FINDINGS if any(r.diff for r in results) and not exit_zero else EXIT_CLEAN
    return EXIT_FINDINGS if violations and not exit_zero else EXIT_CLEAN


def _note(message: str) -> None:
    typer.echo(f"torchlint: {message}", err=True)


def _verbose_line(result) -> None:
    found = f"{_plural(len(result.violations), 'finding')}" if result.error is None else "error"
    fixed = f", {len(result.fixed)} fixed" if result.fixed else ""
    _note(f"checked {result.path}: {found}{fixed}")


def _step_summary(path: str, results, context) -> None:
    from torchlint.reporters.github import summary

    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(summary(results, context))
    except OSError as exc:
        _error(f"cannot write the step summary to {path}: {exc.strerror}")


def _statistics(violations, context) -> str:
    from torchlint.reporters import fixable

    counts = Counter(v.code for v in violations)
    names = {v.code: v.name for v in violations}
    can_fix = {v.code for v in violations if fixable(v, context)}
    width = len(str(max(counts.values()))) if counts else 1
    lines = [
        f"{n:>{width}}\t{code}\t{'[*]' if code in can_fix else '[ ]'} {names[code]}"
        for code, n in counts.most_common()
    ]
    return "\n".join(lines) + ("\n" if lines else "")


def _fixes_applied(results) -> str:
    from torchlint.registry import all_rules

    rules = all_rules()
    lines = []
    for r in results:
        if r.fixed:
            lines.append(f"{r.path}:")
            lines.extend(
                f"  {n} x {code} ({rules[code].name if code in rules else '?'})"
                for code, n in sorted(Counter(r.fixed).items())
            )
    return ("Fixes applied:\n" + "\n".join(lines) + "\n") if lines else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _summary(results, context, diff: bool) -> str:
    from torchlint.reporters import fixable

    violations = [v for r in results for v in r.violations]
    fixed = sum(len(r.fixed) for r in results)
    fixed_files = sum(1 for r in results if r.fixed)
    hidden = sum(1 for v in violations if v.fix is not None and not fixable(v, context))
    if diff:
        more = f"; {hidden} more with --unsafe-fixes" if hidden else ""
        if fixed:
            return f"Would fix {_plural(fixed, 'problem')} in {_plural(fixed_files, 'file')}{more}."
        return "No fixes available." if not violations else ""
    if context.fix_mode:
        if not violations and not fixed:
            return "All checks passed!"
        parts = [
            f"Fixed {_plural(fixed, 'problem')} in {_plural(fixed_files, 'file')}"
            if fixed
            else "No fixes applied"
        ]
        if hidden:
            parts.append(f"{hidden} {'more' if fixed else 'fixable'} with --unsafe-fixes")
        if len(violations) > hidden:
            left = len(violations) - hidden
            parts.append(f"{_plural(left, 'problem')} left to fix by hand")
        return "; ".join(parts) + "."
    if not violations:
        return "All checks passed!"
    can = sum(1 for v in violations if fixable(v, context))
    more = f"; {hidden} more with --unsafe-fixes" if hidden else ""
    return f"Found {_plural(len(violations), 'problem')} ({can} fixable with --fix{more})."


def _check_options(fix_default: bool):
    """The shared signature of `check` and `fix` (they differ only in the --fix default)."""

    def command(
        paths: PathsArg = None,
        fix: Annotated[bool, typer.Option("--fix/--no-fix", help="Apply fixes.")] = fix_default,
        unsafe_fixes: Annotated[
            bool | None,
            typer.Option(
                "--unsafe-fixes/--no-unsafe-fixes",
                help="Also apply (and count as fixable) fixes that may change results.",
            ),
        ] = None,
        diff: Annotated[
            bool, typer.Option("--diff", help="Print the fixes as a unified diff; write nothing.")
        ] = False,
        show_fixes: Annotated[
            bool,
            typer.Option(
                "--show-fixes",
                help="With --fix, list the fixes applied per file; else show each fix as a diff.",
            ),
        ] = False,
        select: SelectOpt = None,
        ignore: IgnoreOpt = None,
        extend_select: ExtendOpt = None,
        output_format: FormatOpt = "text",
        exit_zero: Annotated[
            bool, typer.Option("--exit-zero", help="Exit 0 even when findings remain.")
        ] = False,
        statistics: Annotated[
            bool, typer.Option("--statistics", help="Count findings per rule.")
        ] = False,
        config: ConfigOpt = None,
        target_torch: Annotated[
            str | None,
            typer.Option(
                "--target-torch", help="Oldest PyTorch version the code supports, e.g. 2.4."
            ),
        ] = None,
        force_exclude: Annotated[
            bool,
            typer.Option(
                "--force-exclude", help="Apply excludes to files named on the command line."
            ),
        ] = False,
        stdin_filename: Annotated[
            str | None,
            typer.Option("--stdin-filename", help="The name of the file read from stdin."),
        ] = None,
        quiet: Annotated[
            bool,
            typer.Option(
                "--quiet", "-q", help="Print findings only: no summary, warnings or progress."
            ),
        ] = False,
        verbose: Annotated[
            bool,
            typer.Option(
                "--verbose", "-v", help="Also print the config, rules and each file checked."
            ),
        ] = False,
        no_cache: Annotated[
            bool, typer.Option("--no-cache", help="Neither read nor write the result cache.")
        ] = False,
    ) -> None:
        code = _check(
            paths,
            fix,
            unsafe_fixes,
            diff,
            show_fixes,
            select,
            ignore,
            extend_select,
            output_format,
            exit_zero,
            statistics,
            config,
            target_torch,
            force_exclude,
            stdin_filename,
            quiet,
            verbose,
            no_cache,
        )
        raise typer.Exit(code)

    return command


app.command("check", help="Report problems (exit 1 if any remain).")(_check_options(False))
app.command("fix", help="Apply fixes (same as `check --fix`).")(_check_options(True))


@app.command("rules")
def rules_command(
    output_format: Annotated[str, typer.Option("--output-format", help="text or json.")] = "text",
) -> None:
    """List every rule: code, name, family, fix safety, default on/off."""
    import json

    from torchlint.registry import all_rules, family

    rows = [
        {
            "code": code,
            "name": rule.name,
            "family": family(code),
            "fix": rule.fix_safety.value,
            "default": "on" if rule.default_enabled else "off",
            "summary": rule.summary(),
        }
        for code, rule in all_rules().items()
    ]
    if output_format == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    if output_format != "text":
        _error(f"unknown output format {output_format!r} (choose text or json)")
        raise typer.Exit(EXIT_ERROR)
    headers = {
        "code": "Code",
        "name": "Name",
        "family": "Family",
        "fix": "Fix",
        "default": "Default",
    }
    widths = {k: max(len(h), *(len(r[k]) for r in rows)) for k, h in headers.items()}
    typer.echo("  ".join(h.ljust(widths[k]) for k, h in headers.items()).rstrip())
    for row in rows:
        typer.echo("  ".join(row[k].ljust(widths[k]) for k in headers).rstrip())


@app.command("rule")
def rule_command(code: Annotated[str, typer.Argument(help="A rule code, e.g. TL201.")]) -> None:
    """Print a rule's documentation."""
    from torchlint.registry import all_rules

    rule = all_rules().get(code.upper()) or next(
        (r for r in all_rules().values() if r.name == code), None
    )
    if rule is None:
        _error(f"unknown rule {code!r} (see `torchlint rules`)")
        raise typer.Exit(EXIT_ERROR)
    typer.echo(rule.doc())
    default = "on" if rule.default_enabled else "off"
    typer.echo(f"\nFix safety: {rule.fix_safety.value}. Default: {default}.")


@app.command(
    "verify",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def verify_command(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(help="The training script to run.")],
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    unsafe_fixes: Annotated[
        bool, typer.Option("--unsafe-fixes", help="Also apply fixes that may change results.")
    ] = VerifyOptions.unsafe_fixes,
    warmup: Annotated[
        int, typer.Option(help="Optimizer steps before the measurement window opens.")
    ] = VerifyOptions.warmup,
    steps: Annotated[
        int, typer.Option(help="The window holds at least this many optimizer steps...")
    ] = VerifyOptions.steps,
    window: Annotated[
        float, typer.Option(help="...and lasts at least this many seconds (0: steps only).")
    ] = VerifyOptions.window,
    repeats: Annotated[
        int, typer.Option(help="Measured runs of each variant, in the order A B B A A B ...")
    ] = VerifyOptions.repeats,
    warmup_runs: Annotated[
        int, typer.Option(help="Runs of each variant first, discarded (caches, clocks).")
    ] = VerifyOptions.warmup_runs,
    timeout: Annotated[
        float, typer.Option(help="Seconds before a run is ended.")
    ] = VerifyOptions.timeout,
    interval: Annotated[
        float, typer.Option(help="Sampling interval in milliseconds.")
    ] = VerifyOptions.interval_ms,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write raw samples and summaries here.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Draw the runs: .html, or .png (matplotlib).")
    ] = None,
    tune_batch_size: Annotated[
        bool, typer.Option("--tune-batch-size", help="Find the largest batch size that runs.")
    ] = VerifyOptions.tune_batch_size,
    apply: Annotated[
        bool, typer.Option("--apply", help="With --tune-batch-size: write the best batch size.")
    ] = VerifyOptions.apply,
    nproc_per_node: Annotated[
        int | None, typer.Option("--nproc-per-node", help="Run each variant under torchrun.")
    ] = None,
    config: ConfigOpt = None,
) -> None:
    """Run SCRIPT as it is and as fixed; compare throughput and GPU use (args after --).

    Exit codes: 0 measured, 1 the script could not be measured, 2 bad input,
    3 nothing to compare (no fix applies).
    """
    from torchlint.verify.command import verify

    options = VerifyOptions(
        script,
        tuple(ctx.args),
        select=_tuple(_split(select)),
        ignore=_tuple(_split(ignore)),
        unsafe_fixes=unsafe_fixes,
        warmup=warmup,
        steps=steps,
        window=window,
        repeats=repeats,
        warmup_runs=warmup_runs,
        timeout=timeout,
        interval_ms=interval,
        json_out=json_out,
        plot=plot,
        tune_batch_size=tune_batch_size,
        apply=apply,
        nproc_per_node=nproc_per_node,
        config_file=config,
    )
    raise typer.Exit(verify(options))


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


@app.command("server")
def server_command(
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio", help="Talk over stdin/stdout: the only transport (clients often pass it)."
        ),
    ] = False,
) -> None:
    """Run the language server (LSP) an editor starts: diagnostics and quick fixes.

    Needs the server extra: pip install 'torchlint[server]'. Setup for VS Code, Neovim,
    Helix, Zed and Emacs: docs/editors.md.
    """
    from torchlint.server import serve

    raise typer.Exit(serve())


@app.command("clean")
def clean_command() -> None:
    """Remove the result cache (.torchlint_cache) of the project around the cwd."""
    from torchlint.cache import clean, location
    from torchlint.config import ConfigError

    try:
        root = _load(None, []).root
    except ConfigError:
        root = Path.cwd()
    directory = location(root)
    if clean(directory):
        typer.echo(f"Removed {directory}")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
