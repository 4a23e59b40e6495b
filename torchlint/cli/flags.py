"""The options of `check` and `fix`: their command-line spelling and help, and what they
are once parsed (`CheckOptions`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from torchlint.cli.app import IgnoreOpt, SelectOpt, codes_option, patterns_option
from torchlint.cli.help import FILES, LOG, MISC, RULES

PathsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="PATHS",
        help="Files or directories to check, or `-` to read from stdin [default: .]",
        show_default=False,
    ),
]
ExtendOpt = Annotated[
    list[str] | None,
    codes_option(
        "--extend-select",
        "Like --select, but adds rule codes on top of those already selected",
    ),
]
ConfigArgsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        metavar="CONFIG_OPTION",
        help="The configuration file to use (pyproject.toml, torchlint.toml; else the "
        "nearest one is found), or a TOML `<KEY> = <VALUE>` pair overriding one of its "
        "settings (`min-batch-size = 64`); options such as --select take precedence",
    ),
]
IsolatedOpt = Annotated[
    bool,
    typer.Option(
        "--isolated",
        help="Ignore all configuration files (and the torch version the project's "
        "metadata declares): the defaults and the command line only",
    ),
]
PerFileIgnoresOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--per-file-ignores",
        metavar="PATTERN:CODES",
        help="Rule codes or prefixes to ignore in the files a glob matches, such as "
        "`tests/*:TL201,TL202`; replaces the configured per-file-ignores",
        rich_help_panel=RULES,
    ),
]
ExtendPerFileIgnoresOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--extend-per-file-ignores",
        metavar="PATTERN:CODES",
        help="Like --per-file-ignores, but adds to the configured per-file-ignores",
        rich_help_panel=RULES,
    ),
]
UnsafeFixesOpt = Annotated[
    bool | None,
    typer.Option(
        "--unsafe-fixes/--no-unsafe-fixes",
        help="Include fixes that may change results (count them as fixable too). "
        "Use `--no-unsafe-fixes` to disable",
    ),
]
ShowFixesOpt = Annotated[
    bool,
    typer.Option(
        "--show-fixes",
        help="With --fix, list the fixes applied per file; else show each fix as a "
        "diff under its finding",
    ),
]
DiffOpt = Annotated[
    bool,
    typer.Option(
        "--diff",
        help="Write nothing; print the fixes as a unified diff instead (exit 1 if there is one)",
    ),
]
FixOnlyOpt = Annotated[
    bool,
    typer.Option(
        "--fix-only/--no-fix-only",
        help="Apply fixes to resolve findings, but report none of those left nor exit "
        "non-zero for them. Implies --fix. Use `--no-fix-only` to disable or "
        "`--unsafe-fixes` to include unsafe fixes",
    ),
]
WatchOpt = Annotated[
    bool,
    typer.Option(
        "--watch",
        "-w",
        help="Run in watch mode by re-running whenever the files checked or the "
        "configuration change (Ctrl-C stops)",
    ),
]
OutputFormatOpt = Annotated[
    str,
    typer.Option(
        "--output-format",
        metavar="OUTPUT_FORMAT",
        help="text (the default), concise, json, json-lines, github, sarif, gitlab, "
        "rdjson, rdjsonl or junit (docs/output-formats.md)",
    ),
]
OutputFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--output-file",
        "-o",
        metavar="OUTPUT_FILE",
        help="Write the report to this file (default: stdout)",
    ),
]
TargetTorchOpt = Annotated[
    str | None,
    typer.Option(
        "--target-torch",
        metavar="VERSION",
        help="The oldest PyTorch the code must support, e.g. 2.4 (default: the "
        "oldest the project's metadata declares)",
    ),
]
StatisticsOpt = Annotated[
    bool,
    typer.Option("--statistics", help="Show counts for every rule with at least one finding"),
]
ShowFilesOpt = Annotated[
    bool,
    typer.Option("--show-files", help="See the files torchlint would check"),
]
ShowSettingsOpt = Annotated[
    bool,
    typer.Option("--show-settings", help="See the settings torchlint uses for the first file"),
]
PreviewOpt = Annotated[
    bool | None,
    typer.Option(
        "--preview/--no-preview",
        help="Also run the preview rules, found wrong on real code in a shape they cannot "
        "yet tell apart (docs/precision.md). Use `--no-preview` to disable",
        rich_help_panel=RULES,
    ),
]
ShowLowImpactOpt = Annotated[
    bool,
    typer.Option(
        "--show-low-impact",
        help="Also show (and fix) low-impact findings: real, with a negligible gain "
        'where they are (as `min-impact = "low"`)',
        rich_help_panel=RULES,
    ),
]
FixableOpt = Annotated[
    list[str] | None,
    codes_option(
        "--fixable",
        "Rule codes whose fixes may be applied (default: ALL). Only applicable when "
        "fix itself is enabled",
    ),
]
UnfixableOpt = Annotated[
    list[str] | None,
    codes_option("--unfixable", "Rule codes whose fixes are never applied nor offered"),
]
ExtendFixableOpt = Annotated[
    list[str] | None,
    codes_option("--extend-fixable", "Like --fixable, but adds rule codes on top of those fixable"),
]
ExcludeOpt = Annotated[
    list[str] | None,
    patterns_option(
        "--exclude",
        "Comma-separated list of paths (globs) to omit from analysis; replaces the "
        "configured and default excludes",
    ),
]
ExtendExcludeOpt = Annotated[
    list[str] | None,
    patterns_option(
        "--extend-exclude",
        "Like --exclude, but adds paths on top of those already excluded",
    ),
]
ForceExcludeOpt = Annotated[
    bool,
    typer.Option(
        "--force-exclude",
        help="Enforce exclusions, even for paths passed on the command line",
        rich_help_panel=FILES,
    ),
]
NoCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        "-n",
        help="Neither read nor write the result cache",
        rich_help_panel=MISC,
    ),
]
StdinFilenameOpt = Annotated[
    str | None,
    typer.Option(
        "--stdin-filename",
        metavar="STDIN_FILENAME",
        help="Read standard input, as the file of this name (for its settings and output)",
        rich_help_panel=MISC,
    ),
]
ExitZeroOpt = Annotated[
    bool,
    typer.Option(
        "--exit-zero",
        "-e",
        help='Exit with status code "0", even when findings remain',
        rich_help_panel=MISC,
    ),
]
ExitNonZeroOnFixOpt = Annotated[
    bool,
    typer.Option(
        "--exit-non-zero-on-fix",
        help="Exit with a non-zero status code if any files were modified via fix, "
        "even if no findings remain",
        rich_help_panel=MISC,
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Also print the settings, each file checked and the time taken",
        rich_help_panel=LOG,
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Print findings, but nothing else (no summary, warnings or progress)",
        rich_help_panel=LOG,
    ),
]


@dataclass
class CheckOptions:
    """The options of `check` and `fix`, as parsed."""

    paths: list[str] | None = None
    fix: bool = False
    unsafe_fixes: bool | None = None
    show_fixes: bool = False
    diff: bool = False
    fix_only: bool = False
    watch: bool = False
    output_format: str = "text"
    output_file: Path | None = None
    target_torch: str | None = None
    statistics: bool = False
    add_noqa: bool = False
    show_files: bool = False
    show_settings: bool = False
    config: list[str] | None = None
    isolated: bool = False
    select: list[str] | None = None
    ignore: list[str] | None = None
    extend_select: list[str] | None = None
    per_file_ignores: list[str] | None = None
    extend_per_file_ignores: list[str] | None = None
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

    def __post_init__(self) -> None:
        self.fix = self.fix or self.fix_only  # --fix-only implies --fix (over --no-fix)

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
            ("--statistics", self.statistics, "--fix-only", self.fix_only),
            ("--show-files", self.show_files, "--show-settings", self.show_settings),
        ]
        for special in ("--add-noqa", "--show-files", "--show-settings"):
            on = getattr(self, special[2:].replace("-", "_"))
            pairs += [(special, on, "--stdin-filename or -", self.stdin)]
            pairs += [(special, on, "--statistics", self.statistics)]
            pairs += [("--watch", self.watch, special, on)]
        pairs += [("--watch", self.watch, "--stdin-filename or -", self.stdin)]
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
        return [("--fix-only", self.fix_only), ("--fix", self.fix), ("--diff", self.diff)]


def command(fix_default: bool, run: Callable[[CheckOptions], int]) -> Callable[..., None]:
    """The shared signature of `check` and `fix` (they differ only in the --fix default):
    a command that parses the options and exits with what `run` returns."""
    fix_help = (
        "Report only; apply no fixes (as `check`)"
        if fix_default
        else "Apply fixes to resolve findings. Use `--no-fix` to disable or `--unsafe-fixes` "
        "to include unsafe fixes"
    )

    def command(
        paths: PathsArg = None,
        fix: bool = typer.Option(fix_default, "--fix/--no-fix", help=fix_help),
        unsafe_fixes: UnsafeFixesOpt = None,
        show_fixes: ShowFixesOpt = False,
        diff: DiffOpt = False,
        fix_only: FixOnlyOpt = False,
        watch: WatchOpt = False,
        output_format: OutputFormatOpt = "text",
        output_file: OutputFileOpt = None,
        target_torch: TargetTorchOpt = None,
        statistics: StatisticsOpt = False,
        add_noqa: bool = typer.Option(
            False,
            "--add-noqa",
            help="Add `# noqa: CODE` comments that suppress every finding",
            hidden=fix_default,  # `fix` applies fixes: the two cannot go together
        ),
        show_files: ShowFilesOpt = False,
        show_settings: ShowSettingsOpt = False,
        config: ConfigArgsOpt = None,
        isolated: IsolatedOpt = False,
        select: SelectOpt = None,
        ignore: IgnoreOpt = None,
        extend_select: ExtendOpt = None,
        per_file_ignores: PerFileIgnoresOpt = None,
        extend_per_file_ignores: ExtendPerFileIgnoresOpt = None,
        preview: PreviewOpt = None,
        show_low_impact: ShowLowImpactOpt = False,
        fixable: FixableOpt = None,
        unfixable: UnfixableOpt = None,
        extend_fixable: ExtendFixableOpt = None,
        exclude: ExcludeOpt = None,
        extend_exclude: ExtendExcludeOpt = None,
        force_exclude: ForceExcludeOpt = False,
        no_cache: NoCacheOpt = False,
        stdin_filename: StdinFilenameOpt = None,
        exit_zero: ExitZeroOpt = False,
        exit_non_zero_on_fix: ExitNonZeroOnFixOpt = False,
        verbose: VerboseOpt = False,
        quiet: QuietOpt = False,
    ) -> None:
        options = CheckOptions(**{k: v for k, v in locals().items() if k != "run"})
        raise typer.Exit(run(options))

    return command
