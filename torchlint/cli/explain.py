"""`torchlint explain PATH[:LINE]`: what the analysis knows at a line (or in a whole
file), as `check` sees the file with its project; the facts and their text are
torchlint/explain/'s (`render`), this module prints them (text, or JSON for tools)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from torchlint.cli.app import EXIT_ERROR, IgnoreOpt, SelectOpt, error
from torchlint.cli.flags import (
    CheckOptions,
    ConfigArgsOpt,
    ExtendOpt,
    IsolatedOpt,
    NoCacheOpt,
    PreviewOpt,
    ShowLowImpactOpt,
    TargetTorchOpt,
)

PlaceArg = Annotated[
    str,
    typer.Argument(
        metavar="PATH[:LINE]",
        help="A file and a line (`train.py:42`; a notebook's `run.ipynb:cell 3:7`), or a "
        "file alone for all of it",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    str,
    typer.Option("--output-format", metavar="OUTPUT_FORMAT", help="text (the default) or json"),
]


def explain_command(
    where: PlaceArg,
    output_format: FormatOpt = "text",
    config: ConfigArgsOpt = None,
    isolated: IsolatedOpt = False,
    select: SelectOpt = None,
    extend_select: ExtendOpt = None,
    ignore: IgnoreOpt = None,
    preview: PreviewOpt = None,
    show_low_impact: ShowLowImpactOpt = False,
    target_torch: TargetTorchOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Why a line is flagged, or not: what torchlint knows there.

    The findings at the line (and why any is hidden), the loops and the function around
    it, what its names hold, where the file puts its work, and which selected rules read
    the file; the file checked as `check` checks it, with its project. A file alone:
    all of it."""
    from torchlint.cli.check import plan
    from torchlint.config.load import ConfigError
    from torchlint.explain import ExplainError, explain, place
    from torchlint.explain.render import render
    from torchlint.run.cache import location

    if output_format not in ("text", "json"):
        error(f"unknown output format {output_format!r} (choose text or json)")
        raise typer.Exit(EXIT_ERROR)
    try:
        at = place(where)
        options = CheckOptions(
            paths=[str(at.path)],
            config=config,
            isolated=isolated,
            select=select,
            extend_select=extend_select,
            ignore=ignore,
            preview=preview,
            show_low_impact=show_low_impact,
            target_torch=target_torch,
        )
        run_plan = plan(options)
        cache_dir = None if no_cache else location(run_plan.config.root)
        found = explain(at, run_plan, cache_dir)
    except (ExplainError, ConfigError) as exc:
        error(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
    if output_format == "json":
        typer.echo(json.dumps(found.to_json(), indent=2))
    else:
        typer.echo("\n".join(render(found)))
