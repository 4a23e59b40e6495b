"""The `torchlint` command: parse options, load config, run, report.

Exit codes (as ruff): 0 nothing left to report, 1 findings remain, 2 usage,
configuration or I/O error (errors win over findings).
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from torchlint import __version__
from torchlint.progress import Progress
from torchlint.progress import wanted as progress_wanted
from torchlint.verify.options import VerifyOptions

# click's exceptions, wherever this typer takes click from (a copy of its own lately).
_CLICK_ERRORS = sys.modules[typer.BadParameter.__module__]


class _Command(typer.core.TyperCommand):
    """Help laid out as ruff's: options under headings, each on its own line with its
    value named (`<RULE_CODE>`) and its description below; no defaults and no `--no-x`
    twins (each description names its opposite); a required argument reads `<CODE>`.
    A mistyped option is offered only the options whose names are close to it."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        return [_required(piece) for piece in super().collect_usage_pieces(ctx)]

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except _CLICK_ERRORS.NoSuchOption as exc:
            close = _close_options(exc.option_name, self.get_params(ctx))
            raise _CLICK_ERRORS.NoSuchOption(
                exc.option_name, possibilities=close, ctx=ctx
            ) from None

    def format_options(self, ctx, formatter) -> None:
        arguments: list[tuple[str, str]] = []
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            help = getattr(param, "help", None) or ""
            if getattr(param, "hidden", False):
                continue
            if param.param_type_name == "argument":
                arguments.append((" ".join(map(_required, param.get_usage_pieces(ctx))), help))
                continue
            # A flag shows the spelling that changes its default (`fix --no-fix`).
            names = param.secondary_opts if param.default is True else param.opts
            short = [n for n in names if not n.startswith("--")]
            name = ", ".join([*short, *(n for n in names if n.startswith("--"))])
            if not short:
                name = "    " + name
            if not getattr(param, "is_flag", False):
                name += f" <{param.metavar}>"
            panel = getattr(param, "rich_help_panel", None) or "Options"
            sections.setdefault(panel, []).append((name, help))
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        for title in ("Options", *PANELS):
            if title not in sections:
                continue
            with formatter.section(title):
                for name, help in sections[title]:
                    formatter.write(" " * formatter.current_indent + name + "\n")
                    indent = " " * (formatter.current_indent + 8)
                    formatter.write(
                        textwrap.fill(
                            help, formatter.width, initial_indent=indent, subsequent_indent=indent
                        )
                        + "\n"
                    )


class _ScriptCommand(_Command):
    """`verify`: the script's own arguments follow `--`."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- ARGS]..."]


def _close_options(name: str, params) -> list[str]:
    """The visible long options spelled like `name`, compared without their dashes
    (click compares them with, which makes `--bogus` look like `--verbose`)."""
    import difflib

    names = {
        option[2:]
        for param in params
        if not getattr(param, "hidden", False)
        for option in (*param.opts, *param.secondary_opts)
        if option.startswith("--")
    }
    return ["--" + n for n in difflib.get_close_matches(name.lstrip("-"), sorted(names), n=3)]


def _required(piece: str) -> str:
    """Typer writes a required argument `{CODE}`; ruff (clap) writes `<CODE>`."""
    return f"<{piece[1:-1]}>" if piece.startswith("{") and piece.endswith("}") else piece


app = typer.Typer(
    name="torchlint",
    help="Find and fix PyTorch code that leaves the GPU idle.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
RULES, FILES, MISC, LOG = "Rule selection", "File selection", "Miscellaneous", "Log levels"
PANELS = (RULES, FILES, MISC, LOG)


_IMPORTED = time.monotonic()


def run_time() -> float:
    """Seconds since this process started, as `time` counts them (Linux: from /proc, so
    the interpreter's start and the imports count; elsewhere from this module's import)."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])  # field 22: starttime
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic() - _IMPORTED


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


def _warn(message: str) -> None:
    typer.echo(f"torchlint: warning: {message}", err=True)


def _note(message: str) -> None:
    typer.echo(f"torchlint: {message}", err=True)


def _color(stream) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def _codes_option(name: str, help: str) -> Any:
    return typer.Option(name, metavar="RULE_CODE", help=help, rich_help_panel=RULES)


def _patterns_option(name: str, help: str) -> Any:
    return typer.Option(name, metavar="FILE_PATTERN", help=help, rich_help_panel=FILES)


PathsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="PATHS",
        help="Files or directories to check, or `-` to read from stdin [default: .]",
        show_default=False,
    ),
]
SelectOpt = Annotated[
    list[str] | None,
    _codes_option(
        "--select",
        "Comma-separated list of rule codes or prefixes to enable (or ALL, to enable all rules)",
    ),
]
IgnoreOpt = Annotated[
    list[str] | None,
    _codes_option("--ignore", "Comma-separated list of rule codes or prefixes to disable"),
]
ExtendOpt = Annotated[
    list[str] | None,
    _codes_option(
        "--extend-select",
        "Like --select, but adds rule codes on top of those already selected",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="CONFIG_FILE",
        help="The configuration file to use (pyproject.toml, torchlint.toml); else the "
        "nearest one is found",
    ),
]


def _start(paths: list[str], stdin_filename: str | None = None) -> Path:
    """The directory a run starts from: the deepest one holding every path it checks."""
    starts = [Path(p) for p in ([stdin_filename] if stdin_filename else paths) if p != "-"]
    start = Path(os.path.commonpath([str(p.absolute()) for p in starts])) if starts else Path.cwd()
    while not os.path.isdir(start):  # a file, or a path that does not exist
        start = start.parent
    return start


def _load(config_file: Path | None, paths: list[str], stdin_filename: str | None = None):
    from torchlint.config import find_config, load_config

    if config_file is not None:
        return load_config(config_file)
    return load_config(find_config(_start(paths, stdin_filename)))


def _repo_prefix(cwd: Path) -> str:
    """The working directory relative to the enclosing repository ("" outside one)."""
    for directory in (cwd, *cwd.parents):
        if os.path.exists(directory / ".git"):  # never raises (an unreadable directory)
            rel = cwd.relative_to(directory).as_posix()
            return "" if rel == "." else rel + "/"
    return ""


@dataclass
class CheckOptions:
    """The options of `check` and `fix`, as parsed."""

    paths: list[str] | None = None
    fix: bool = False
    unsafe_fixes: bool | None = None
    show_fixes: bool = False
    diff: bool = False
    output_format: str = "text"
    output_file: Path | None = None
    target_torch: str | None = None
    statistics: bool = False
    add_noqa: bool = False
    show_files: bool = False
    show_settings: bool = False
    config: Path | None = None
    select: list[str] | None = None
    ignore: list[str] | None = None
    extend_select: list[str] | None = None
    preview: bool | None = None
    show_low_impact: bool = False
    fixable: list[str] | None = None
    unfixable: list[str] | None = None
    extend_fixable: list[str] | None = None
    exclude: list[str] | None = None
    extend_exclude: list[str] | None = None
    force_exclude: bool = False
    no_cache: bool = False
    stdin_filename: str | None = None
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    verbose: bool = False
    quiet: bool = False

    @property
    def stdin(self) -> bool:
        """Standard input is read (`-`, or any `--stdin-filename`, as ruff does)."""
        return self.paths == ["-"] or self.stdin_filename is not None

    def conflict(self) -> str | None:
        """Why these options cannot go together, if they cannot (as ruff refuses them)."""
        from torchlint import reporters
        from torchlint.reporters import statistics

        if self.output_format not in reporters.FORMATS:
            formats = ", ".join(reporters.FORMATS)
            return f"unknown output format {self.output_format!r} (choose from {formats})"
        pairs = [
            ("--quiet", self.quiet, "--verbose", self.verbose),
            ("--exit-zero", self.exit_zero, "--exit-non-zero-on-fix", self.exit_non_zero_on_fix),
            ("--statistics", self.statistics, "--diff", self.diff),
            ("--show-files", self.show_files, "--show-settings", self.show_settings),
        ]
        for special in ("--add-noqa", "--show-files", "--show-settings"):
            on = getattr(self, special[2:].replace("-", "_"))
            pairs += [(special, on, "--stdin-filename or -", self.stdin)]
            pairs += [(special, on, "--statistics", self.statistics)]
        pairs += [("--add-noqa", self.add_noqa, other, on) for other, on in self._fixing()]
        pairs += [("--add-noqa", self.add_noqa, "--show-files", self.show_files)]
        pairs += [("--add-noqa", self.add_noqa, "--show-settings", self.show_settings)]
        for first, a, second, b in pairs:
            if a and b:
                return f"{first} and {second} cannot be used together"
        if self.statistics and self.output_format not in statistics.FORMATS:
            return "--statistics supports the text, full, concise and json output formats"
        return None

    def _fixing(self) -> list[tuple[str, bool]]:
        return [("--fix", self.fix), ("--diff", self.diff)]


def _configure(options: CheckOptions):
    """The configuration with the command line's settings on top (ConfigError if bad)."""
    from torchlint.config import parse_target

    stdin_filename = options.stdin_filename if options.stdin else None
    config = _load(options.config, options.paths or ["."], stdin_filename)
    config = config.selecting(
        _split(options.select), _split(options.extend_select) or (), _split(options.ignore) or ()
    )
    if options.fixable is not None:
        config.fixable = _split(options.fixable)
    config.extend_fixable += _split(options.extend_fixable) or []
    config.unfixable += _split(options.unfixable) or []
    if options.exclude is not None:
        config.exclude = _split(options.exclude) or []
    config.extend_exclude += _split(options.extend_exclude) or []
    if options.target_torch is not None:
        config.target_torch = parse_target(options.target_torch, "--target-torch")
        config.target_torch_source = "--target-torch"
    config.read_project_torch(_start(options.paths or ["."], stdin_filename))
    if options.unsafe_fixes is not None:
        config.unsafe_fixes = options.unsafe_fixes
    if options.preview is not None:
        config.preview = options.preview
    if options.show_low_impact:
        config.min_impact = "low"
    return config


def _check(options: CheckOptions) -> int:
    from torchlint.config import ConfigError

    problem = options.conflict()
    if problem is not None:
        _error(problem)
        return EXIT_ERROR
    paths = options.paths or ["."]
    if options.stdin_filename is not None and not options.quiet:
        for path in paths:
            if path not in ("-", "."):
                _warn(f"ignoring {path} in favour of standard input (--stdin-filename)")
    try:
        config = _configure(options)
        codes = tuple(config.selected_codes())
        unfixable = config.unfixable_codes()
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_ERROR
    if not options.quiet:
        for code in config.preview_left_out():
            _warn(f"{code} is a preview rule: it runs only with `--preview` (or `preview = true`)")
    force_exclude = options.force_exclude or config.force_exclude
    if options.show_files or options.show_settings:
        return _show(options, config, codes, paths, force_exclude)
    try:
        out = _output(options.output_file)
    except OSError as exc:
        _error(f"cannot write {options.output_file}: {exc.strerror or exc}")
        return EXIT_ERROR
    try:
        return _run(options, config, codes, unfixable, paths, force_exclude, out)
    finally:
        if out is not sys.stdout:
            out.close()


def _output(path: Path | None) -> TextIO:
    """Where the report goes: standard output, or `--output-file` (its folders made)."""
    if path is None:
        return sys.stdout
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", encoding="utf-8")  # closed by the caller


def _run(
    options: CheckOptions,
    config,
    codes: tuple[str, ...],
    unfixable: frozenset[str],
    paths: list[str],
    force_exclude: bool,
    out: TextIO,
) -> int:
    from torchlint import reporters
    from torchlint.parallel import Interrupted, run_files
    from torchlint.reporters import statistics, summary
    from torchlint.results import Job
    from torchlint.runner import discover, run_stdin

    started = time.monotonic()
    human = options.output_format in reporters.HUMAN
    text_like = options.output_format in ("text", "full")
    fix = options.fix and not options.add_noqa
    job = Job(
        codes=codes,
        settings=config.settings(),
        fix=fix or options.diff,
        unsafe=config.unsafe_fixes,
        diff=options.diff,
        # --show-fixes without --fix shows each fix as a diff under its finding
        with_edits=options.output_format in reporters.WITH_EDITS
        or (options.show_fixes and not fix and text_like and not options.statistics),
        unfixable=unfixable,
        low_impact=config.low_impact,
    )
    if options.verbose:
        _note(f"config: {config.source or 'defaults (no config file found)'}")
        _note(f"rules: {', '.join(codes) or 'none'}")
        _note(f"target-torch: {_target(config)}")
        _note(f"unsafe-fixes: {'on' if config.unsafe_fixes else 'off'}")
        _note(f"preview: {'on' if config.preview else 'off'}; min-impact: {config.min_impact}")
        if unfixable & set(codes):
            _note(f"unfixable: {', '.join(sorted(unfixable & set(codes)))}")
    if options.add_noqa:
        return _add_noqa(options, config, job, paths, force_exclude)
    warnings: list[str] = []
    if options.stdin:
        name = options.stdin_filename or "-"
        data = sys.stdin.buffer.read()
        if force_exclude and name != "-" and config.excluded(Path(name)):
            if fix and not options.diff:  # excluded: passed through, as ruff does
                sys.stdout.buffer.write(data)
            return EXIT_CLEAN
        results = [run_stdin(data, name, job, config)]
    else:
        found = discover(paths, config, force_exclude=force_exclude)
        warnings = found.warnings
        if options.verbose:
            _note(f"{summary.plural(len(found.files), 'file')} to check")
        on_result = None
        progress = None
        if options.verbose:
            on_result = _verbose_line
        elif not options.quiet and progress_wanted(sys.stderr):
            on_result = progress = Progress(len(found.files), sys.stderr)
        try:
            from torchlint.cache import location

            cache_dir = None if options.no_cache else location(config.root)
            results = found.errors + run_files(
                found.files, job, config, on_result, cache_dir, found.bases, found.walked
            )
        except Interrupted as exc:
            _interrupted(exc)
            return EXIT_INTERRUPTED
        finally:
            if progress is not None:
                progress.close()
    if options.verbose:
        _note(f"done in {run_time():.2f} s ({time.monotonic() - started:.2f} s checking)")
    results.sort(key=lambda r: r.path)  # as ruff: by path, whatever order they came in
    hidden = {} if config.low_impact else reporters.hide_low_impact(results)

    errors = [r for r in results if r.errors]
    to_file = out is not sys.stdout
    # Errors are records of every report (TL000 invalid-syntax...); a report read on the
    # terminal shows them already, one read by a program gets them on stderr too.
    if not human or to_file:
        for r in errors:
            _error(f"{r.path}: {r.error}")
    warnings += [f"{r.path}: {r.warning}" for r in results if r.warning is not None]
    if not options.quiet:
        for w in warnings:
            _warn(w)

    context = reporters.Context(
        color=_color(out),
        unsafe=config.unsafe_fixes,
        unsafe_hint=options.unsafe_fixes is not False,
        show_fixes=options.show_fixes,
        prefix=_repo_prefix(Path.cwd()),
        format=options.output_format,
        hidden=hidden,
    )
    # Fixing standard input prints the fixed code; the report then goes to stderr.
    stdin_fix = options.stdin and fix and not options.diff
    report = sys.stderr if stdin_fix and not to_file else out
    if options.diff:
        sys.stdout.write("".join(r.diff for r in results if r.diff))
    else:
        if stdin_fix and results[0].fixed_text is not None:
            sys.stdout.write(results[0].fixed_text)
        if options.statistics:
            report.write(statistics.render(results, context))
        else:
            report.write(reporters.render(options.output_format, results, context))
    if options.output_format == "github" and os.environ.get("GITHUB_STEP_SUMMARY"):
        _step_summary(os.environ["GITHUB_STEP_SUMMARY"], results, context)
    violations = [v for r in results for v in r.violations]
    if human:
        if options.show_fixes and fix:
            report.write(summary.fixes_applied(results, context))
        said = summary.summary(results, context, options.diff)
        quiet_now = options.quiet or (options.statistics and not violations)
        if said and not quiet_now and not (errors and said == "All checks passed!\n"):
            (sys.stderr if options.diff and not to_file else report).write(said)
    report.flush()
    if errors:
        return EXIT_ERROR
    if options.exit_non_zero_on_fix and any(r.fixed for r in results):
        return EXIT_FINDINGS
    if options.diff:
        return EXIT_FINDINGS if any(r.diff for r in results) and not options.exit_zero else 0
    return EXIT_FINDINGS if violations and not options.exit_zero else EXIT_CLEAN


def _interrupted(exc) -> None:
    written = sorted(r.path for r in exc.results if r.fixed and not r.errors)
    maybe = "" if exc.exact else " (a file in progress when it stopped may have been too)"
    if not written:
        _note(f"interrupted: no file was rewritten{maybe}")
        return
    from torchlint.reporters.summary import plural

    listing = "".join(f"\n  {path}" for path in written)
    files = plural(len(written), "file")
    _note(f"interrupted: {files} rewritten before the run stopped{maybe}:{listing}")


def _add_noqa(options: CheckOptions, config, job, paths: list[str], force_exclude: bool) -> int:
    """`--add-noqa`: a `# noqa: CODE` comment on each line with findings (ruff's)."""
    from torchlint.runner import add_noqa_file, discover

    found = discover(paths, config, force_exclude=force_exclude)
    errors = list(found.errors)
    added = 0
    for path in sorted(found.files, key=str):
        result, n = add_noqa_file(path, job, config.rules_for(path, job.codes))
        added += n
        if result.errors:
            errors.append(result)
    for r in sorted(errors, key=lambda r: r.path):
        _error(f"{r.path}: {r.error}")
    if not options.quiet:
        for w in found.warnings:
            _warn(w)
        if added:
            _note(f"added {added} noqa directive{'' if added == 1 else 's'}")
    return EXIT_ERROR if errors else EXIT_CLEAN


def _show(options: CheckOptions, config, codes, paths: list[str], force_exclude: bool) -> int:
    """`--show-files` (every file a run would check) or `--show-settings` (the settings
    for the first of them)."""
    from torchlint.runner import discover, display

    found = discover(paths, config, force_exclude=force_exclude)
    for r in found.errors:
        _error(f"{r.path}: {r.error}")
    files = sorted(found.files, key=lambda p: display(p))
    if options.show_files:
        sys.stdout.write("".join(display(p) + "\n" for p in files))
        return EXIT_ERROR if found.errors else EXIT_CLEAN
    if not files:
        _error("no Python files found under the given paths")
        return EXIT_ERROR
    sys.stdout.write(_settings_text(config, files[0], codes))
    return EXIT_ERROR if found.errors else EXIT_CLEAN


def _settings_text(config, path: Path, codes) -> str:
    """The resolved settings for `path`, as TOML keys."""
    from torchlint.options import toml_value
    from torchlint.runner import display

    rows: dict[str, Any] = {
        "rules": config.rules_for(path, codes),
        "unsafe-fixes": config.unsafe_fixes,
        "preview": config.preview,
        "min-impact": config.min_impact,
        "unfixable": sorted(config.unfixable_codes() & set(codes)),
        "target-torch": ".".join(map(str, config.target_torch or ())) or "not set",
        "per-file-ignores": config.per_file_ignores,
        "exclude": config.exclude,
        "extend-exclude": config.extend_exclude,
        "force-exclude": config.force_exclude,
        "respect-gitignore": config.respect_gitignore,
        **dict(sorted(config.options.items())),
    }
    source = {"target-torch": config.target_torch_source} if config.target_torch else {}
    lines = [
        f"Resolved settings for: {display(path)}",
        f"Settings path: {config.source or 'none (defaults)'}",
        "",
        *(
            f"{key} = {toml_value(value)}" + (f"  # from {source[key]}" if source.get(key) else "")
            for key, value in rows.items()
        ),
    ]
    return "\n".join(lines) + "\n"


def _target(config) -> str:
    """`target-torch` and where it comes from (a setting, or the project's metadata)."""
    if config.target_torch is None:
        return "not set"
    target = ".".join(map(str, config.target_torch))
    return f"{target} (from {config.target_torch_source})" if config.target_torch_source else target


def _verbose_line(result) -> None:
    from torchlint.reporters.summary import plural

    found = "error" if result.errors else plural(len(result.violations), "finding")
    fixed = f", {len(result.fixed)} fixed" if result.fixed else ""
    _note(f"checked {result.path}: {found}{fixed}")


def _step_summary(path: str, results, context) -> None:
    from torchlint.reporters.github import summary

    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(summary(results, context))
    except OSError as exc:
        _error(f"cannot write the step summary to {path}: {exc.strerror}")


def _check_options(fix_default: bool):
    """The shared signature of `check` and `fix` (they differ only in the --fix default)."""
    fix_help = (
        "Report only; apply no fixes (as `check`)"
        if fix_default
        else "Apply fixes to resolve findings. Use `--no-fix` to disable or `--unsafe-fixes` "
        "to include unsafe fixes"
    )

    def command(
        paths: PathsArg = None,
        fix: bool = typer.Option(fix_default, "--fix/--no-fix", help=fix_help),
        unsafe_fixes: Annotated[
            bool | None,
            typer.Option(
                "--unsafe-fixes/--no-unsafe-fixes",
                help="Include fixes that may change results (count them as fixable too). "
                "Use `--no-unsafe-fixes` to disable",
            ),
        ] = None,
        show_fixes: Annotated[
            bool,
            typer.Option(
                "--show-fixes",
                help="With --fix, list the fixes applied per file; else show each fix as a "
                "diff under its finding",
            ),
        ] = False,
        diff: Annotated[
            bool,
            typer.Option(
                "--diff",
                help="Write nothing; print the fixes as a unified diff instead (exit 1 if "
                "there is one)",
            ),
        ] = False,
        output_format: Annotated[
            str,
            typer.Option(
                "--output-format",
                metavar="OUTPUT_FORMAT",
                help="text (the default), concise, json, json-lines, github, sarif, gitlab, "
                "rdjson, rdjsonl or junit (docs/output-formats.md)",
            ),
        ] = "text",
        output_file: Annotated[
            Path | None,
            typer.Option(
                "--output-file",
                "-o",
                metavar="OUTPUT_FILE",
                help="Write the report to this file (default: stdout)",
            ),
        ] = None,
        target_torch: Annotated[
            str | None,
            typer.Option(
                "--target-torch",
                metavar="VERSION",
                help="The oldest PyTorch the code must support, e.g. 2.4 (default: the "
                "oldest the project's metadata declares)",
            ),
        ] = None,
        statistics: Annotated[
            bool,
            typer.Option(
                "--statistics", help="Show counts for every rule with at least one finding"
            ),
        ] = False,
        add_noqa: bool = typer.Option(
            False,
            "--add-noqa",
            help="Add `# noqa: CODE` comments that suppress every finding",
            hidden=fix_default,  # `fix` applies fixes: the two cannot go together
        ),
        show_files: Annotated[
            bool,
            typer.Option("--show-files", help="See the files torchlint would check"),
        ] = False,
        show_settings: Annotated[
            bool,
            typer.Option(
                "--show-settings", help="See the settings torchlint uses for the first file"
            ),
        ] = False,
        config: ConfigOpt = None,
        select: SelectOpt = None,
        ignore: IgnoreOpt = None,
        extend_select: ExtendOpt = None,
        preview: Annotated[
            bool | None,
            typer.Option(
                "--preview/--no-preview",
                help="Also run the preview rules, not yet measured on real code "
                "(docs/precision.md). Use `--no-preview` to disable",
                rich_help_panel=RULES,
            ),
        ] = None,
        show_low_impact: Annotated[
            bool,
            typer.Option(
                "--show-low-impact",
                help="Also show (and fix) low-impact findings: real, with a negligible gain "
                'where they are (as `min-impact = "low"`)',
                rich_help_panel=RULES,
            ),
        ] = False,
        fixable: Annotated[
            list[str] | None,
            _codes_option(
                "--fixable",
                "Rule codes whose fixes may be applied (default: ALL). Only applicable when "
                "fix itself is enabled",
            ),
        ] = None,
        unfixable: Annotated[
            list[str] | None,
            _codes_option("--unfixable", "Rule codes whose fixes are never applied nor offered"),
        ] = None,
        extend_fixable: Annotated[
            list[str] | None,
            _codes_option(
                "--extend-fixable", "Like --fixable, but adds rule codes on top of those fixable"
            ),
        ] = None,
        exclude: Annotated[
            list[str] | None,
            _patterns_option(
                "--exclude",
                "Comma-separated list of paths (globs) to omit from analysis; replaces the "
                "configured and default excludes",
            ),
        ] = None,
        extend_exclude: Annotated[
            list[str] | None,
            _patterns_option(
                "--extend-exclude",
                "Like --exclude, but adds paths on top of those already excluded",
            ),
        ] = None,
        force_exclude: Annotated[
            bool,
            typer.Option(
                "--force-exclude",
                help="Enforce exclusions, even for paths passed on the command line",
                rich_help_panel=FILES,
            ),
        ] = False,
        no_cache: Annotated[
            bool,
            typer.Option(
                "--no-cache",
                "-n",
                help="Neither read nor write the result cache",
                rich_help_panel=MISC,
            ),
        ] = False,
        stdin_filename: Annotated[
            str | None,
            typer.Option(
                "--stdin-filename",
                metavar="STDIN_FILENAME",
                help="Read standard input, as the file of this name (for its settings and output)",
                rich_help_panel=MISC,
            ),
        ] = None,
        exit_zero: Annotated[
            bool,
            typer.Option(
                "--exit-zero",
                "-e",
                help='Exit with status code "0", even when findings remain',
                rich_help_panel=MISC,
            ),
        ] = False,
        exit_non_zero_on_fix: Annotated[
            bool,
            typer.Option(
                "--exit-non-zero-on-fix",
                help="Exit with a non-zero status code if any files were modified via fix, "
                "even if no findings remain",
                rich_help_panel=MISC,
            ),
        ] = False,
        verbose: Annotated[
            bool,
            typer.Option(
                "--verbose",
                "-v",
                help="Also print the settings, each file checked and the time taken",
                rich_help_panel=LOG,
            ),
        ] = False,
        quiet: Annotated[
            bool,
            typer.Option(
                "--quiet",
                "-q",
                help="Print findings, but nothing else (no summary, warnings or progress)",
                rich_help_panel=LOG,
            ),
        ] = False,
    ) -> None:
        options = CheckOptions(**{k: v for k, v in locals().items() if k != "fix_help"})
        raise typer.Exit(_check(options))

    return command


app.command("check", cls=_Command, help="Report problems (exit 1 if any remain).")(
    _check_options(False)
)
app.command("fix", cls=_Command, help="Apply fixes (same as `check --fix`).")(_check_options(True))


@app.command("rules", cls=_Command)
def rules_command(
    output_format: Annotated[
        str,
        typer.Option(
            "--output-format", metavar="OUTPUT_FORMAT", help="text (the default) or json."
        ),
    ] = "text",
) -> None:
    """List every rule: code, name, family, fix safety, default on/off, preview."""
    import json

    from torchlint.registry import all_rules, family

    rows = [
        {
            "code": code,
            "name": rule.name,
            "family": family(code),
            "fix": rule.fix_safety.value,
            "default": "on" if rule.default_enabled else "off",
            "preview": "yes" if rule.preview else "no",
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
        "preview": "Preview",
    }
    widths = {k: max(len(h), *(len(r[k]) for r in rows)) for k, h in headers.items()}
    typer.echo("  ".join(h.ljust(widths[k]) for k, h in headers.items()).rstrip())
    for row in rows:
        typer.echo("  ".join(row[k].ljust(widths[k]) for k in headers).rstrip())


@app.command("rule", cls=_Command)
def rule_command(
    code: Annotated[str, typer.Argument(metavar="RULE", help="A rule code or name, e.g. TL201.")],
) -> None:
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
    preview = " Preview: runs only with `--preview`." if rule.preview else ""
    typer.echo(f"\nFix safety: {rule.fix_safety.value}. Default: {default}.{preview}")


@app.command(
    "verify",
    cls=_ScriptCommand,
    # The script's own arguments go after `--`; a mistyped option before it is an error.
    context_settings={"allow_extra_args": True},
)
def verify_command(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(metavar="SCRIPT", help="The training script to run.")],
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    unsafe_fixes: Annotated[
        bool, typer.Option("--unsafe-fixes", help="Also apply fixes that may change results.")
    ] = VerifyOptions.unsafe_fixes,
    preview: Annotated[
        bool, typer.Option("--preview", help="Also apply the fixes of the preview rules.")
    ] = VerifyOptions.preview,
    warmup: Annotated[
        int,
        typer.Option(
            metavar="STEPS",
            help="Optimizer steps before the measurement window opens "
            f"(default: {VerifyOptions.warmup}).",
        ),
    ] = VerifyOptions.warmup,
    steps: Annotated[
        int,
        typer.Option(
            metavar="STEPS",
            help="The window holds at least this many optimizer steps "
            f"(default: {VerifyOptions.steps})...",
        ),
    ] = VerifyOptions.steps,
    window: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="...and lasts at least this many seconds (0: steps only; "
            f"default: {VerifyOptions.window:g}).",
        ),
    ] = VerifyOptions.window,
    repeats: Annotated[
        int,
        typer.Option(
            metavar="RUNS",
            help="Measured runs of each variant, in the order A B B A A B ... "
            f"(default: {VerifyOptions.repeats}).",
        ),
    ] = VerifyOptions.repeats,
    warmup_runs: Annotated[
        int,
        typer.Option(
            metavar="RUNS",
            help="Runs of each variant first, discarded (caches, clocks; "
            f"default: {VerifyOptions.warmup_runs}).",
        ),
    ] = VerifyOptions.warmup_runs,
    timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help=f"Seconds before a run is ended (default: {VerifyOptions.timeout:g}).",
        ),
    ] = VerifyOptions.timeout,
    interval: Annotated[
        float,
        typer.Option(
            metavar="MS",
            help=f"Sampling interval in milliseconds (default: {VerifyOptions.interval_ms:g}).",
        ),
    ] = VerifyOptions.interval_ms,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="PATH", help="Write raw samples and summaries here."),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", metavar="PATH", help="Draw the runs: .html, or .png (matplotlib)."),
    ] = None,
    tune_batch_size: Annotated[
        bool, typer.Option("--tune-batch-size", help="Find the largest batch size that runs.")
    ] = VerifyOptions.tune_batch_size,
    apply: Annotated[
        bool, typer.Option("--apply", help="With --tune-batch-size: write the best batch size.")
    ] = VerifyOptions.apply,
    nproc_per_node: Annotated[
        int | None,
        typer.Option(
            "--nproc-per-node",
            metavar="PROCESSES",
            help="Run each variant under torchrun, with this many processes.",
        ),
    ] = None,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile",
            help="Run SCRIPT once under torch.profiler (up to --steps optimizer steps) and "
            "check the findings against PyTorch's run-time anti-patterns.",
        ),
    ] = VerifyOptions.profile,
    config: ConfigOpt = None,
) -> None:
    """Run SCRIPT as it is and as fixed; compare throughput and GPU use (args after --).

    With --profile: run it once under torch.profiler and say which findings PyTorch's
    run-time anti-pattern matcher confirms.

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
        preview=preview,
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
        profile=profile,
    )
    raise typer.Exit(verify(options))


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


@app.command("server", cls=_Command)
def server_command(
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio", help="Talk over stdin/stdout: the only transport (clients often pass it)."
        ),
    ] = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            "-n",
            help="Neither read nor write the projects' summary caches (.torchlint_cache)",
        ),
    ] = False,
) -> None:
    """Run the language server (LSP) an editor starts: diagnostics and quick fixes.

    Needs the server extra: pip install 'torchlint[server]'. Setup for VS Code, Neovim,
    Helix and Emacs: docs/editors.md.
    """
    from torchlint.server import serve

    raise typer.Exit(serve(cache=not no_cache))


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
        app(prog_name="torchlint")  # also as `python -m torchlint`
    except KeyboardInterrupt:
        sys.exit(130)
    except RuntimeError as exc:
        from torchlint.registry import RulesMissing  # not at start-up: it imports libcst

        if not isinstance(exc, RulesMissing):
            raise
        _error(str(exc))
        sys.exit(EXIT_ERROR)
