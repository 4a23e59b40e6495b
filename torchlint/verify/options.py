"""Every setting of one `torchlint verify` invocation, and its defaults (only here).

The typer command builds one `VerifyOptions`; the harness, the report and the tuner
read it. Nothing heavy is imported: the CLI reads the defaults at start-up.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """Bad input: printed as one line, exit 2."""


@dataclass(frozen=True)
class VerifyOptions:
    script: Path
    script_args: tuple[str, ...] = ()
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    unsafe_fixes: bool = False
    preview: bool = False  # the preview rules run too (as `check --preview`)
    warmup: int = 10  # optimizer steps before the measurement window opens
    steps: int = 20  # the window holds at least this many optimizer steps...
    window: float = 5.0  # ...and lasts at least this many seconds
    # Measured runs of each variant. 4 is the fewest with which any verdict is possible at
    # 95% (stats.py), and only when every fixed run beats every original one; with 5, two
    # crossed pairs of runs out of 25 (a hiccup) still allow one, and a 1.1x effect under
    # 5% noise is found 62% of the time (46% with 4).
    repeats: int = 5
    warmup_runs: int = 1  # runs of each variant first, discarded (caches, clocks)
    timeout: float = 300.0  # seconds before a run is ended
    interval_ms: float = 100.0  # sampling interval
    json_out: Path | None = None
    plot: Path | None = None
    tune_batch_size: bool = False
    apply: bool = False
    nproc_per_node: int | None = None
    config_file: Path | None = None
    # Run the script once under torch.profiler, up to `steps` optimizer steps, and join
    # PyTorch's run-time anti-patterns with the static findings (crosscheck.py).
    profile: bool = False
    stop_grace: float = 5.0  # after the window closed, how long the script may take to exit
    kill_wait: float = 3.0  # between SIGINT, SIGTERM and SIGKILL

    @property
    def interval(self) -> float:
        """Sampling interval in seconds."""
        return self.interval_ms / 1000.0

    def check(self) -> None:
        """Raise `UsageError` for values no run could use (before anything runs)."""
        if self.steps < 1:
            raise UsageError("--steps must be at least 1")
        if self.warmup < 1:
            raise UsageError("--warmup must be at least 1 (the first steps include start-up costs)")
        if self.window < 0:
            raise UsageError("--window must be 0 (steps only) or a positive number of seconds")
        if self.repeats < 1:
            raise UsageError("--repeats must be at least 1")
        if self.warmup_runs < 0:
            raise UsageError("--warmup-runs must be 0 or more")
        if self.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if self.interval < 0.01:
            raise UsageError("--interval must be at least 10 ms")
        if self.nproc_per_node is not None and self.nproc_per_node < 1:
            raise UsageError("--nproc-per-node must be at least 1")
        if self.apply and not self.tune_batch_size:
            raise UsageError(
                "--apply only writes a tuned batch size (with --tune-batch-size); "
                "use `torchlint fix` to apply fixes"
            )
        if self.profile:
            # One run of the script as it is: nothing is fixed, compared or tuned.
            for given, flag in (
                (self.tune_batch_size, "--tune-batch-size"),
                (self.nproc_per_node is not None, "--nproc-per-node"),
            ):
                if given:
                    raise UsageError(f"--profile runs the script once, in one process: drop {flag}")
            if self.plot is not None and self.plot.suffix.lower() not in (".html", ".htm"):
                raise UsageError("--plot with --profile writes the report as HTML (.html)")
        for path, flag in ((self.json_out, "--json"), (self.plot, "--plot")):
            if path is not None and not path.absolute().parent.is_dir():
                raise UsageError(
                    f"{flag} {path}: directory {path.absolute().parent} does not exist"
                )

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: str(v) if isinstance(v := getattr(self, f.name), Path) else v
            for f in dataclasses.fields(self)
        }
