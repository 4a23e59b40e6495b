"""--tune-batch-size: the largest batch size that runs, by doubling then binary search.

As Lightning's BatchSizeFinder does, but every trial is a fresh subprocess (a failed
CUDA allocation can leave a process's allocator fragmented) and the batch size is
set from outside: the launcher overrides `batch_size` of every DataLoader that uses
automatic batching. A trial fails for memory when the script raises
torch.cuda.OutOfMemoryError or one of the known out-of-memory messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchlint.verify.harness import RunResult
from torchlint.verify.stats import run_metrics


@dataclass
class Trial:
    batch_size: int
    result: RunResult
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.result.usable

    @property
    def oom(self) -> bool:
        return not self.ok and self.result.oom

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "status": "ok" if self.ok else ("oom" if self.oom else self.result.status),
            "message": self.result.message,
            "samples_per_s": self.metrics.get("samples_per_s"),
            "step_time_ms": self.metrics.get("step_time_ms"),
            "peak_memory": self.metrics.get("peak_memory"),
            "index": self.result.index,
        }


@dataclass
class Tuning:
    start: int | None  # the script's own batch size
    trials: list[Trial] = field(default_factory=list)
    largest: int | None = None  # the largest batch size that ran
    best: int | None = None  # the one with the highest samples/s
    stopped: str = ""  # why the search ended
    dataset_len: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "largest": self.largest,
            "best": self.best,
            "stopped": self.stopped,
            "dataset_len": self.dataset_len,
            "trials": [t.to_json() for t in self.trials],
        }


def search(
    trial: Callable[[int | None], RunResult],
    max_batch_size: int = 1 << 16,
    max_trials: int = 16,
) -> Tuning:
    """`trial(None)` runs the script as written; `trial(n)` with batch size n."""
    first = trial(None)
    start = first.original_batch_size
    tuning = Tuning(start)
    tuning.dataset_len = _dataset_len(first)
    if start is None:
        tuning.trials.append(Trial(0, first, {}))
        tuning.stopped = (
            first.message
            if not first.usable
            else "the script builds no DataLoader with a batch size to tune"
        )
        return tuning
    cap = max_batch_size
    if tuning.dataset_len:
        cap = min(cap, tuning.dataset_len)

    def record(size: int, result: RunResult) -> Trial:
        t = Trial(size, result, run_metrics(result) if result.usable else {})
        tuning.trials.append(t)
        return t

    t = record(start, first)
    lo: int | None = start if t.ok else None  # largest size that ran
    hi: int | None = None if t.ok else start  # smallest size that did not
    if not t.ok and not t.oom:
        tuning.stopped = f"the script fails at its own batch size {start}: {first.message}"
        return tuning

    def probe(size: int) -> None:
        """One trial: narrow [lo, hi), or stop on a failure that is not memory."""
        nonlocal lo, hi
        t = record(size, trial(size))
        if t.ok:
            lo = size
        elif t.oom:
            hi = size
        else:
            tuning.stopped = (
                f"batch size {size} failed for a reason other than memory: {t.result.message}"
            )

    # Doubling up from the script's size, or halving down when that does not fit.
    while len(tuning.trials) < max_trials:
        if lo is not None and hi is None:
            size = min(lo * 2, cap)
            if size <= lo:
                tuning.stopped = f"reached the limit of {cap}" + (
                    " (the dataset's length)" if cap == tuning.dataset_len else ""
                )
                break
        elif lo is None and hi is not None:
            size = hi // 2
            if size < 1:
                tuning.stopped = "even batch size 1 does not fit"
                break
        else:
            break
        probe(size)
        if tuning.stopped:
            break
    # Binary search between the largest that ran and the smallest that did not.
    while lo is not None and hi is not None and hi - lo > 1 and not tuning.stopped:
        if len(tuning.trials) >= max_trials:
            tuning.stopped = f"stopped after {max_trials} trials"
            break
        probe((lo + hi) // 2)
    return _concluded(tuning, lo, hi, max_trials)


def _dataset_len(result: RunResult) -> int | None:
    """The length of the dataset the script's loader reads, as the run reported it."""
    for e in result.events:
        if e.get("event") == "batch_size" and e.get("dataset_len"):
            return int(e["dataset_len"])
    return None


def _concluded(tuning: Tuning, lo: int | None, hi: int | None, max_trials: int) -> Tuning:
    """The search's outcome: why it stopped, the largest size that ran, the fastest."""
    if not tuning.stopped:
        tuning.stopped = (
            f"batch size {hi} runs out of memory"
            if hi is not None
            else f"stopped after {max_trials} trials"
        )
    tuning.largest = lo
    ran = [t for t in tuning.trials if t.ok and t.metrics.get("samples_per_s")]
    if ran:
        tuning.best = max(ran, key=lambda t: t.metrics["samples_per_s"]).batch_size
    return tuning


def render(tuning: Tuning) -> str:
    from torchlint.verify.report import fmt

    rows = [("batch size", "result", "samples/s", "step time", "peak GPU memory")]
    for t in sorted(tuning.trials, key=lambda t: t.batch_size):
        m = t.metrics
        status = "ok" if t.ok else ("out of memory" if t.oom else t.result.status)
        rows.append(
            (
                str(t.batch_size),
                status,
                fmt(m.get("samples_per_s"), "/s"),
                fmt(m.get("step_time_ms"), "ms"),
                fmt(m.get("peak_memory"), "B"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for i, r in enumerate(rows):
        lines.append(
            "  ".join(
                c.rjust(w) if j != 1 else c.ljust(w)
                for j, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(f"search ended: {tuning.stopped}")
    if tuning.largest is not None:
        lines.append(
            f"largest batch size that runs: {tuning.largest} (the script uses {tuning.start})"
        )
    if tuning.best is not None:
        lines.append(f"highest throughput: batch size {tuning.best}")
    return "\n".join(lines)
