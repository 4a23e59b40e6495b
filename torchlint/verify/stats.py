"""Figures of one run (inside its window only), the comparison of two variants, the verdict.

Each metric's ratio fixed/original is estimated from the measured runs (warm-up runs
left out) by Hodges-Lehmann: the median of the ratios of every (original, fixed) pair
of runs. Its interval is the exact Mann-Whitney one: distribution-free, it assumes only
that the runs of one variant are exchangeable (the counterbalanced order keeps a drift
from favouring one variant), at `LEVEL` or the nearest level above it that the numbers
of runs allow. The verdict says "faster" or "slower" only when that interval excludes
1, so with no real effect a false verdict comes at most 1 - level of the time.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchlint.verify.harness import RunResult
from torchlint.verify.nvml import POWER, THERMAL, GpuSample, normalize_uuid


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str  # how report.py formats it: "/s", "ms", "%", "B", "W", "J", "cores", "s"
    higher_is_better: bool | None  # None: neither (context only)


METRICS = (
    Metric("samples_per_s", "samples/s", "/s", True),
    Metric("steps_per_s", "steps/s", "/s", True),
    Metric("time_per_sample_ms", "time per sample", "ms", False),
    Metric("step_time_ms", "step time", "ms", False),
    Metric("samples_per_step", "samples per step", "", None),
    Metric("gpu_util", "GPU util (NVML)", "%", True),
    Metric("sm_activity", "SM activity (GPM)", "%", True),
    Metric("tensor_activity", "tensor activity (GPM)", "%", True),
    Metric("peak_memory", "peak GPU memory", "B", None),
    Metric("power_w", "power", "W", None),
    Metric("energy_per_sample_j", "energy/sample", "J", False),
    Metric("cpu_util", "CPU util", "cores", None),
    Metric("peak_rss", "peak RSS", "B", None),
    Metric("window_s", "window wall time", "s", None),
)
# What only a GPU (NVML, GPM, CUDA's allocator) measures: what a CPU-only run lacks.
GPU_METRICS = frozenset(
    {"gpu_util", "sm_activity", "tensor_activity", "peak_memory", "power_w", "energy_per_sample_j"}
)
BY_KEY = {m.key: m for m in METRICS}


def window_samples(result: RunResult) -> list[GpuSample]:
    span = result.span()
    if span is None:
        return []
    used = used_uuids(result)
    return [
        s
        for s in result.gpu
        if span[0] <= s.t <= span[1] and (not used or normalize_uuid(s.uuid) in used)
    ]


def used_uuids(result: RunResult) -> set[str]:
    """GPUs the script's ranks reported using, when NVML knows them."""
    reported = {
        normalize_uuid(str(e["uuid"]))
        for e in result.events
        if e.get("event") == "window_open" and e.get("uuid")
    }
    known = {normalize_uuid(s.uuid) for s in result.gpu}
    return reported & known


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def run_metrics(result: RunResult) -> dict[str, Any]:
    """The figures of one usable run."""
    windows = result.windows()
    m: dict[str, Any] = {k: None for k in BY_KEY}
    if not windows:
        return m
    rates, step_rates, step_times, per_step, samples, batches = [], [], [], [], 0, 0
    for opened, closed in windows.values():
        duration = closed["t"] - opened["t"]
        n = int(closed["samples"]) - int(opened["samples"])
        steps = int(closed["steps"]) - int(opened["steps"])
        samples += n
        batches += int(closed["batches"]) - int(opened["batches"])
        if duration > 0:
            rates.append(n / duration)
            step_rates.append(steps / duration)
        if steps > 0:
            step_times.append(duration / steps * 1000.0)
            per_step.append(n / steps)
    span = result.span()
    assert span is not None
    duration = span[1] - span[0]
    # Summed over ranks; samples are those of the batches that fed optimizer steps.
    m["samples_per_s"] = sum(rates) if rates and batches else None
    m["steps_per_s"] = sum(step_rates) if step_rates else None
    m["step_time_ms"] = statistics.fmean(step_times) if step_times else None
    if m["samples_per_s"]:
        m["time_per_sample_ms"] = 1000.0 / m["samples_per_s"]
    m["samples_per_step"] = sum(per_step) if per_step and batches else None
    m["window_s"] = duration
    m["samples"] = samples
    peaks = [c["peak_memory"] for _, c in windows.values() if c.get("peak_memory")]
    m["peak_memory"] = max(peaks) if peaks else None

    gpu = window_samples(result)
    if gpu:
        m["gpu_util"] = _mean(s.util_gpu for s in gpu)
        m["sm_activity"] = _mean(s.sm_activity for s in gpu)
        m["tensor_activity"] = _mean(s.tensor_activity for s in gpu)
        m["sm_clock_mhz"] = _mean(s.sm_clock_mhz for s in gpu)
        if m["peak_memory"] is None:
            used = [s.mem_used for s in gpu if s.mem_used is not None]
            m["peak_memory"] = max(used) if used else None
        by_device: dict[str, list[GpuSample]] = {}
        for s in gpu:
            by_device.setdefault(s.uuid, []).append(s)
        m["gpu_util_by_device"] = {u: _mean(x.util_gpu for x in v) for u, v in by_device.items()}
        power = _power_series(gpu)
        if power:
            m["power_w"] = statistics.fmean(p for _, p in power)
            energy = _integrate(power, span)
            m["energy_j"] = energy
            m["energy_per_sample_j"] = energy / samples if samples else None
        m["throttle_thermal"] = sum(1 for s in gpu if s.throttle & THERMAL) / len(gpu)
        m["throttle_power"] = sum(1 for s in gpu if s.throttle & POWER) / len(gpu)

    cpu = [c for c in result.cpu if span[0] <= c.t <= span[1]]
    m["window_samples"] = max(len(cpu), len({round(s.t, 2) for s in gpu}))
    if len(cpu) >= 2 and cpu[-1].t > cpu[0].t:
        elapsed = cpu[-1].t - cpu[0].t
        m["cpu_util"] = (cpu[-1].cpu_s - cpu[0].cpu_s) / elapsed
        if cpu[0].machine_busy_s is not None and cpu[-1].machine_busy_s is not None:
            busy = (cpu[-1].machine_busy_s - cpu[0].machine_busy_s) / elapsed
            m["other_cpu"] = max(0.0, busy - m["cpu_util"])  # cores used by everyone else
    else:  # window shorter than two samples: the main process's own CPU time
        cpu_s = [c["cpu_s"] - o["cpu_s"] for o, c in windows.values() if "cpu_s" in c]
        m["cpu_util"] = sum(cpu_s) / duration if cpu_s and duration > 0 else None
    rss = [c.rss for c in result.cpu if c.t <= span[1]]
    m["peak_rss"] = max(rss) if rss else None
    if m["peak_rss"] is None:
        kb = [c["maxrss_kb"] for _, c in windows.values() if c.get("maxrss_kb")]
        m["peak_rss"] = max(kb) * 1024 if kb else None
    return m


def _power_series(samples: Sequence[GpuSample]) -> list[tuple[float, float]]:
    """Total power over the devices at each sampling tick."""
    ticks: dict[float, float] = {}
    for s in samples:
        if s.power_w is not None:
            ticks[s.t] = ticks.get(s.t, 0.0) + s.power_w
    # Devices are read one after another within a tick: group readings 10 ms apart.
    out: list[tuple[float, float]] = []
    for t in sorted(ticks):
        if out and t - out[-1][0] < 0.01:
            out[-1] = (out[-1][0], out[-1][1] + ticks[t])
        else:
            out.append((t, ticks[t]))
    return out


def _integrate(series: Sequence[tuple[float, float]], span: tuple[float, float]) -> float:
    """Joules over the window: trapezoids between samples, flat at the edges."""
    if len(series) == 1:
        return series[0][1] * (span[1] - span[0])
    total = 0.0
    total += series[0][1] * max(0.0, series[0][0] - span[0])
    total += series[-1][1] * max(0.0, span[1] - series[-1][0])
    for (t0, p0), (t1, p1) in itertools.pairwise(series):
        total += (p0 + p1) / 2 * (t1 - t0)
    return total


LEVEL = 0.95  # every interval and verdict is at this confidence level, or just above it


@dataclass(frozen=True)
class Estimate:
    """Ratio fixed/original of one metric: the Hodges-Lehmann estimate, and its exact
    Mann-Whitney interval [lo, hi] with coverage `level` (None: too few runs for one)."""

    ratio: float
    lo: float | None
    hi: float | None
    level: float | None

    @property
    def decided(self) -> bool:
        """The interval excludes 1: a difference at the stated level."""
        return self.lo is not None and self.hi is not None and (self.lo > 1 or self.hi < 1)


@functools.cache
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many of the C(n+m, n) orderings of n + m distinct values give each
    Mann-Whitney U = 0 .. n*m (U: pairs whose second-sample value is the smaller)."""
    if n == 0 or m == 0:
        return (1,)
    counts = [0] * (n * m + 1)
    for u, c in enumerate(_u_counts(n - 1, m)):  # the largest value is a first-sample one
        counts[u + m] += c
    for u, c in enumerate(_u_counts(n, m - 1)):  # ... or a second-sample one
        counts[u] += c
    return tuple(counts)


def _order_statistic(n: int, m: int, level: float) -> tuple[int, float] | None:
    """The largest k with P(U <= k - 1) <= (1 - level) / 2, and the exact coverage of
    the interval between the k-th smallest and the k-th largest pairwise difference;
    None when no k reaches `level` with these numbers of runs."""
    counts, total = _u_counts(n, m), math.comb(n + m, n)
    tail = (1 - level) / 2 * total
    below, k = 0, 0
    while below + counts[k] <= tail:
        below += counts[k]
        k += 1
    return (k, 1 - 2 * below / total) if k else None


def estimate(
    before: Sequence[float], after: Sequence[float], level: float = LEVEL
) -> Estimate | None:
    """The ratio after/before with its interval; None unless both variants have runs
    and every value is positive (a ratio of logs)."""
    if not before or not after or min(*before, *after) <= 0:
        return None
    diffs = sorted(math.log(a) - math.log(b) for b in before for a in after)
    ratio = math.exp(statistics.median(diffs))
    found = _order_statistic(len(before), len(after), level)
    if found is None:
        return Estimate(ratio, None, None, None)
    k, coverage = found
    return Estimate(ratio, math.exp(diffs[k - 1]), math.exp(diffs[-k]), coverage)


def min_repeats(level: float = LEVEL) -> int:
    """The fewest runs per variant with which an interval at `level` exists."""
    n = 1
    while _order_statistic(n, n, level) is None:
        n += 1
    return n


def repeats_needed(
    before: Sequence[float], after: Sequence[float], ratio: float, power: float = 0.8
) -> int | None:
    """Runs per variant with which the test would detect `ratio` with probability
    `power` at the noise the runs show (normal approximation, with 3/pi the efficiency
    of Mann-Whitney against the t-test); None without a noise or effect estimate."""
    if len(before) < 2 or len(after) < 2 or ratio == 1:
        return None
    logs = [[math.log(v) for v in values] for values in (before, after)]
    squares = sum((x - statistics.fmean(xs)) ** 2 for xs in logs for x in xs)
    variance = squares / (len(before) + len(after) - 2)
    z = statistics.NormalDist().inv_cdf
    n = 2 * (z(1 - (1 - LEVEL) / 2) + z(power)) ** 2 * variance / math.log(ratio) ** 2
    return max(math.ceil(n * math.pi / 3), min_repeats())


@dataclass
class Row:
    metric: Metric
    before: list[float]  # one value per measured run
    after: list[float]
    estimate: Estimate | None = field(init=False)

    def __post_init__(self) -> None:
        self.estimate = estimate(self.before, self.after)

    @staticmethod
    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    def to_json(self) -> dict[str, Any]:
        def side(values: list[float]) -> dict[str, Any] | None:
            if not values:
                return None
            return {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
                "values": values,
            }

        e = self.estimate
        return {
            "label": self.metric.label,
            "unit": self.metric.unit,
            "higher_is_better": self.metric.higher_is_better,
            "before": side(self.before),
            "after": side(self.after),
            "ratio": e.ratio if e else None,
            "interval": [e.lo, e.hi] if e and e.lo is not None else None,
            "interval_level": e.level if e else None,
            "decided": e.decided if e else False,
        }


@dataclass
class Comparison:
    rows: list[Row]
    verdict: str = ""
    faster: bool | None = None  # True/False when the verdict is decided, None otherwise
    head: Row | None = None  # the throughput row the verdict rests on
    repeats_needed: int | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    per_device: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def row(self, key: str) -> Row | None:
        return next((r for r in self.rows if r.metric.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "faster": self.faster,
            "level": LEVEL,
            "headline": self.head.metric.key if self.head else None,
            "repeats_needed": self.repeats_needed,
            "warnings": self.warnings,
            "notes": self.notes,
            "per_device_gpu_util": self.per_device,
            "metrics": {r.metric.key: r.to_json() for r in self.rows},
        }


def compare(
    before: Sequence[RunResult],
    after: Sequence[RunResult],
    names: tuple[str, str] = ("original", "fixed"),
) -> Comparison:
    """Rows for every metric measured in either variant (warm-up runs left out), the
    verdict and the warnings."""
    before = [r for r in before if not r.warmup_run]
    after = [r for r in after if not r.warmup_run]
    mb = [run_metrics(r) for r in before if r.usable]
    ma = [run_metrics(r) for r in after if r.usable]

    def values(metrics: list[dict[str, Any]], key: str) -> list[float]:
        return [float(m[key]) for m in metrics if m[key] is not None]

    rows = [Row(metric, values(mb, metric.key), values(ma, metric.key)) for metric in METRICS]
    comparison = Comparison([r for r in rows if r.before or r.after])
    head = comparison.row("samples_per_s")
    if head is None or not head.before or not head.after:
        head = comparison.row("steps_per_s")  # no DataLoader: steps are all there is
    comparison.head = head
    _verdict(comparison, names)
    comparison.warnings = _warnings(before, after, mb, ma)
    for label, runs in ((names[0], mb), (names[1], ma)):
        by_device: dict[str, list[float]] = {}
        for m in runs:
            for uuid, util in (m.get("gpu_util_by_device") or {}).items():
                if util is not None:
                    by_device.setdefault(uuid, []).append(util)
        if by_device:
            comparison.per_device[label] = {
                u: statistics.median(v) for u, v in sorted(by_device.items())
            }
    return comparison


def _verdict(c: Comparison, names: tuple[str, str]) -> None:
    head = c.head
    e = head.estimate if head is not None else None
    if head is None or e is None:
        c.verdict = "no verdict: throughput could not be measured for both variants"
        return
    unit = head.metric.label
    n, m = len(head.before), len(head.after)
    runs = f"{n} and {m} measured runs" if n != m else f"{n} measured run{'s' * (n > 1)} of each"
    if e.lo is None or e.hi is None or e.level is None:
        need = min_repeats()
        c.verdict = (
            f"no verdict: with {runs} no interval reaches {LEVEL:.0%} ({need} runs of each "
            f"are needed: --repeats {need} or more); {unit} ratio {e.ratio:.2f}x"
        )
    else:
        ratio = f"{names[1]}/{names[0]} {e.ratio:.2f}x, "
        interval = (
            f"{LEVEL:.0%} interval {e.lo:.2f}x-{e.hi:.2f}x; exact level {e.level:.1%}, {runs}"
        )
        if e.decided:
            c.faster = e.ratio > 1
            factor, word = (e.ratio, "faster") if c.faster else (1 / e.ratio, "slower")
            c.verdict = (
                f"{names[1]} is {factor:.2f}x {word} than {names[0]} in {unit} "
                f"({'' if c.faster else ratio}{interval})"
            )
        else:
            c.repeats_needed = repeats_needed(head.before, head.after, e.ratio)
            c.verdict = f"no difference detected at this noise level in {unit} ({ratio}{interval})"
            if c.repeats_needed is not None and c.repeats_needed > n:
                c.verdict += (
                    f": about {c.repeats_needed - n} more runs of each (--repeats "
                    f"{c.repeats_needed}) would be needed to tell a {e.ratio:.2f}x change "
                    "from this noise"
                )
    per_step = c.row("samples_per_step")
    time_row = c.row("time_per_sample_ms")
    if per_step is not None and per_step.before and per_step.after:
        b, a = statistics.median(per_step.before), statistics.median(per_step.after)
        if abs(a - b) > 0.05 * b:
            c.verdict += (
                f". The fix changed the batch size ({b:.4g} -> {a:.4g} samples per step): "
                "steps are not like for like, compare samples/s or time per sample"
            )
            if time_row is not None and time_row.before and time_row.after:
                tb, ta = statistics.median(time_row.before), statistics.median(time_row.after)
                c.verdict += f" ({tb:.3g} -> {ta:.3g} ms)"


def _warnings(
    before: Sequence[RunResult],
    after: Sequence[RunResult],
    mb: Sequence[dict[str, Any]],
    ma: Sequence[dict[str, Any]],
) -> list[str]:
    out: list[str] = []
    runs = [*before, *after]
    if any(r.foreign_pids for r in runs):
        pids = sorted({p for r in runs for p in r.foreign_pids})
        out.append(
            "shared GPU: other processes had the GPU before our runs started "
            f"(pids {', '.join(map(str, pids[:6]))}); figures include their load"
        )
    else:
        busy = [s.util_gpu for r in runs for s in r.baseline_gpu if s.util_gpu]
        if busy and max(busy) > 5:
            out.append(
                f"shared GPU: it was {max(busy):.0f}% busy before a run started; "
                "figures include someone else's load"
            )
    metrics = [*mb, *ma]
    thermal = max((m.get("throttle_thermal") or 0.0 for m in metrics), default=0.0)
    power = max((m.get("throttle_power") or 0.0 for m in metrics), default=0.0)
    if thermal > 0:
        out.append(f"thermal throttling in up to {thermal:.0%} of a run's GPU samples")
    if power > 0:
        out.append(f"power-cap throttling in up to {power:.0%} of a run's GPU samples")
    others = [m["other_cpu"] for m in metrics if m.get("other_cpu") is not None]
    cores = os.cpu_count() or 1
    if others and max(others) > max(0.25 * cores, 0.5):
        out.append(
            f"other processes kept up to {max(others):.1f} of the machine's {cores} CPU cores "
            "busy during the measurements: the figures are noisy"
        )
    few = [m for m in metrics if (m.get("window_samples") or 0) < 3]
    if few:
        shortest = min(m["window_s"] for m in few)
        out.append(
            f"the measurement window lasted only {shortest * 1000:.0f} ms, under three "
            "sampling intervals: utilization, CPU and power figures rest on too few samples; "
            "raise --window"
        )
    partial = [r for r in runs if r.status == "partial"]
    if partial:
        out.append(f"{len(partial)} run(s) ended inside the window: {partial[0].message}")
    failed = [r for r in runs if not r.usable]
    if failed:
        out.append(f"{len(failed)} of {len(runs)} measured runs failed and are left out")
    return out
