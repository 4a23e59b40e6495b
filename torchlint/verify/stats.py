"""Figures of one run (inside its window only), their spread over repeats, the verdict."""

from __future__ import annotations

import itertools
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
    Metric("step_time_ms", "step time", "ms", False),
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
    rates, step_rates, step_times, samples, batches = [], [], [], 0, 0
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
    span = result.span()
    assert span is not None
    duration = span[1] - span[0]
    # Summed over ranks; samples are counted from DataLoader batches only.
    m["samples_per_s"] = sum(rates) if rates and batches else None
    m["steps_per_s"] = sum(step_rates) if step_rates else None
    m["step_time_ms"] = statistics.fmean(step_times) if step_times else None
    m["window_s"] = duration
    m["samples"] = samples
    peaks = [c.get("peak_memory") for _, c in windows.values() if c.get("peak_memory")]
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
        kb = [c.get("maxrss_kb") for _, c in windows.values() if c.get("maxrss_kb")]
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


@dataclass
class Spread:
    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def lo(self) -> float:
        return min(self.values)

    @property
    def hi(self) -> float:
        return max(self.values)

    @property
    def relative(self) -> float:
        """(max - min) / median: how far apart the repeats are."""
        return (self.hi - self.lo) / self.median if self.median else 0.0


def spread(values: Iterable[float | None]) -> Spread | None:
    vals = [float(v) for v in values if v is not None]
    return Spread(vals) if vals else None


@dataclass
class Row:
    metric: Metric
    before: Spread | None
    after: Spread | None

    @property
    def ratio(self) -> float | None:
        if self.before is None or self.after is None or not self.before.median:
            return None
        return self.after.median / self.before.median

    @property
    def overlap(self) -> bool:
        if self.before is None or self.after is None:
            return True
        return not (self.after.lo > self.before.hi or self.after.hi < self.before.lo)


@dataclass
class Comparison:
    rows: list[Row]
    verdict: str
    faster: bool | None  # True/False when the verdict is decided, None otherwise
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    per_device: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def row(self, key: str) -> Row | None:
        return next((r for r in self.rows if r.metric.key == key), None)

    def to_json(self) -> dict[str, Any]:
        def s(x: Spread | None) -> dict[str, Any] | None:
            if x is None:
                return None
            return {"median": x.median, "min": x.lo, "max": x.hi, "values": x.values}

        return {
            "verdict": self.verdict,
            "faster": self.faster,
            "warnings": self.warnings,
            "notes": self.notes,
            "per_device_gpu_util": self.per_device,
            "metrics": {
                r.metric.key: {
                    "label": r.metric.label,
                    "unit": r.metric.unit,
                    "before": s(r.before),
                    "after": s(r.after),
                    "ratio": r.ratio,
                    "ranges_overlap": r.overlap,
                }
                for r in self.rows
            },
        }


def compare(
    before: Sequence[RunResult],
    after: Sequence[RunResult],
    names: tuple[str, str] = ("original", "fixed"),
) -> Comparison:
    """Rows for every metric measured in both variants, the verdict and the warnings."""
    mb = [run_metrics(r) for r in before if r.usable]
    ma = [run_metrics(r) for r in after if r.usable]
    rows = []
    for metric in METRICS:
        row = Row(metric, spread(m[metric.key] for m in mb), spread(m[metric.key] for m in ma))
        if row.before is not None or row.after is not None:
            rows.append(row)
    comparison = Comparison(rows, "", None)
    head = comparison.row("samples_per_s")
    if head is None or head.before is None or head.after is None:
        head = comparison.row("steps_per_s")  # no DataLoader: steps are all there is
    unit = head.metric.label if head is not None else "samples/s"
    if head is None or head.before is None or head.after is None:
        comparison.verdict = "no verdict: throughput could not be measured for both variants"
    elif min(len(head.before.values), len(head.after.values)) < 2:
        comparison.verdict = "no verdict: one measured run per variant (use --repeats 2 or more)"
    elif head.overlap:
        comparison.verdict = "no measurable difference (the repeats' ranges overlap)"
    else:
        ratio = head.ratio or 1.0
        comparison.faster = ratio > 1
        word = "faster" if ratio > 1 else "slower"
        factor = ratio if ratio > 1 else 1 / ratio
        comparison.verdict = (
            f"{names[1]} is {factor:.2f}x {word} than {names[0]} in {unit} "
            f"({head.before.median:.4g} -> {head.after.median:.4g}; ranges do not overlap)"
        )
    comparison.warnings = _warnings(before, after, mb, ma, head)
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


def _warnings(
    before: Sequence[RunResult],
    after: Sequence[RunResult],
    mb: Sequence[dict[str, Any]],
    ma: Sequence[dict[str, Any]],
    head: Row | None,
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
    if head is not None and head.before is not None and head.after is not None:
        effect = abs((head.ratio or 1.0) - 1.0)
        noise = max(head.before.relative, head.after.relative)
        if len(head.before.values) > 1 and len(head.after.values) > 1 and noise > effect:
            out.append(
                f"noise larger than the effect: repeats of one variant differ by up to "
                f"{noise:.0%}, the variants by {effect:.0%}; close other programs or use "
                "more --steps/--repeats"
            )
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
            "raise --steps"
        )
    partial = [r for r in runs if r.status == "partial"]
    if partial:
        out.append(
            f"{len(partial)} run(s) ended before the window's last step: {partial[0].message}"
        )
    failed = [r for r in runs if not r.usable]
    if failed:
        out.append(f"{len(failed)} of {len(runs)} runs failed and are left out")
    return out
