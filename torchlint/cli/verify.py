"""`torchlint verify`: run a script as it is and as fixed, and compare (verify/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from torchlint.cli.app import ConfigOpt, IgnoreOpt, SelectOpt, split
from torchlint.verify.options import VerifyOptions

UnsafeFixesOpt = Annotated[
    bool, typer.Option("--unsafe-fixes", help="Also apply fixes that may change results.")
]
PreviewOpt = Annotated[
    bool, typer.Option("--preview", help="Also apply the fixes of the preview rules.")
]
WarmupOpt = Annotated[
    int,
    typer.Option(
        metavar="STEPS",
        help="Optimizer steps before the measurement window opens "
        f"(default: {VerifyOptions.warmup}).",
    ),
]
StepsOpt = Annotated[
    int,
    typer.Option(
        metavar="STEPS",
        help="The window holds at least this many optimizer steps "
        f"(default: {VerifyOptions.steps})...",
    ),
]
WindowOpt = Annotated[
    float,
    typer.Option(
        metavar="SECONDS",
        help="...and lasts at least this many seconds (0: steps only; "
        f"default: {VerifyOptions.window:g}).",
    ),
]
RepeatsOpt = Annotated[
    int,
    typer.Option(
        metavar="RUNS",
        help="Measured runs of each variant, in the order A B B A A B ... "
        f"(default: {VerifyOptions.repeats}).",
    ),
]
WarmupRunsOpt = Annotated[
    int,
    typer.Option(
        metavar="RUNS",
        help="Runs of each variant first, discarded (caches, clocks; "
        f"default: {VerifyOptions.warmup_runs}).",
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        metavar="SECONDS",
        help=f"Seconds before a run is ended (default: {VerifyOptions.timeout:g}).",
    ),
]
IntervalOpt = Annotated[
    float,
    typer.Option(
        metavar="MS",
        help=f"Sampling interval in milliseconds (default: {VerifyOptions.interval_ms:g}).",
    ),
]
JsonOutOpt = Annotated[
    Path | None,
    typer.Option("--json", metavar="PATH", help="Write raw samples and summaries here."),
]
PlotOpt = Annotated[
    Path | None,
    typer.Option("--plot", metavar="PATH", help="Draw the runs: .html, or .png (matplotlib)."),
]
TuneBatchSizeOpt = Annotated[
    bool, typer.Option("--tune-batch-size", help="Find the largest batch size that runs.")
]
ApplyOpt = Annotated[
    bool, typer.Option("--apply", help="With --tune-batch-size: write the best batch size.")
]
NprocPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--nproc-per-node",
        metavar="PROCESSES",
        help="Run each variant under torchrun, with this many processes.",
    ),
]
ProfileOpt = Annotated[
    bool,
    typer.Option(
        "--profile",
        help="Run SCRIPT once under torch.profiler (up to --steps optimizer steps) and "
        "check the findings against PyTorch's run-time anti-patterns.",
    ),
]


def verify_command(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(metavar="SCRIPT", help="The training script to run.")],
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    unsafe_fixes: UnsafeFixesOpt = VerifyOptions.unsafe_fixes,
    preview: PreviewOpt = VerifyOptions.preview,
    warmup: WarmupOpt = VerifyOptions.warmup,
    steps: StepsOpt = VerifyOptions.steps,
    window: WindowOpt = VerifyOptions.window,
    repeats: RepeatsOpt = VerifyOptions.repeats,
    warmup_runs: WarmupRunsOpt = VerifyOptions.warmup_runs,
    timeout: TimeoutOpt = VerifyOptions.timeout,
    interval: IntervalOpt = VerifyOptions.interval_ms,
    json_out: JsonOutOpt = None,
    plot: PlotOpt = None,
    tune_batch_size: TuneBatchSizeOpt = VerifyOptions.tune_batch_size,
    apply: ApplyOpt = VerifyOptions.apply,
    nproc_per_node: NprocPerNodeOpt = None,
    profile: ProfileOpt = VerifyOptions.profile,
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
        select=split(select),
        ignore=split(ignore),
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
