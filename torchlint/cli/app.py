"""The typer app: its `--version`, exit codes, messages, the options several commands
share, and `main`. The commands register themselves on `app` (see `torchlint.cli`)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from torchlint import __version__
from torchlint.cli.help import FILES, RULES

if TYPE_CHECKING:
    from torchlint.config.load import Config

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


def split(values: list[str] | None) -> tuple[str, ...] | None:
    """Comma-separated values of an option given once or more (`--select A,B --select C`)."""
    if values is None:
        return None
    return tuple(part.strip() for v in values for part in v.split(",") if part.strip())


def error(message: str) -> None:
    typer.echo(f"torchlint: error: {message}", err=True)


def warn(message: str) -> None:
    typer.echo(f"torchlint: warning: {message}", err=True)


def note(message: str) -> None:
    typer.echo(f"torchlint: {message}", err=True)


def codes_option(name: str, help: str) -> Any:
    return typer.Option(name, metavar="RULE_CODE", help=help, rich_help_panel=RULES)


def patterns_option(name: str, help: str) -> Any:
    return typer.Option(name, metavar="FILE_PATTERN", help=help, rich_help_panel=FILES)


SelectOpt = Annotated[
    list[str] | None,
    codes_option(
        "--select",
        "Comma-separated list of rule codes or prefixes to enable (or ALL, to enable all rules)",
    ),
]
IgnoreOpt = Annotated[
    list[str] | None,
    codes_option("--ignore", "Comma-separated list of rule codes or prefixes to disable"),
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


def start(paths: list[str], stdin_filename: str | None = None) -> Path:
    """The directory a run starts from: the deepest one holding every path it checks."""
    starts = [Path(p) for p in ([stdin_filename] if stdin_filename else paths) if p != "-"]
    start = Path(os.path.commonpath([str(p.absolute()) for p in starts])) if starts else Path.cwd()
    while not os.path.isdir(start):  # a file, or a path that does not exist
        start = start.parent
    return start


def load(config_file: Path | None, paths: list[str], stdin_filename: str | None = None) -> Config:
    """The config file given, else the one nearest the paths (ConfigError if bad)."""
    from torchlint.config.load import find_config, load_config

    if config_file is not None:
        return load_config(config_file)
    return load_config(find_config(start(paths, stdin_filename)))


def main() -> None:
    try:
        app(prog_name="torchlint")  # also as `python -m torchlint`
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except RuntimeError as exc:
        # not at start-up: it imports libcst
        from torchlint.lint.registry import RuleLoadError, RulesMissing

        if not isinstance(exc, (RulesMissing, RuleLoadError)):
            raise
        error(str(exc))
        sys.exit(EXIT_ERROR)
