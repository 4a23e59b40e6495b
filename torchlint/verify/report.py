"""The terminal report: the table, the verdict, warnings, failures with their stderr."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from torchlint.verify.harness import RunResult
from torchlint.verify.stats import LEVEL, Comparison, Row

UTIL_NOTE = (
    "GPU util is NVML's: the share of time any kernel was running, not how much of the GPU it used"
)
BETTER = {True: "higher", False: "lower", None: "-"}


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "B":
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.2f} {name}"
        return f"{value:.0f} B"
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "J":
        return f"{value * 1000:.3g} mJ" if abs(value) < 1 else f"{value:.3g} J"
    if unit == "/s":
        return f"{value:,.1f}" if value >= 100 else f"{value:.3g}"
    if unit == "cores":
        return f"{value:.2f} cores"
    return f"{value:.4g} {unit}".rstrip()


def _interval(row: Row) -> str:
    e = row.estimate
    if e is None or e.lo is None or e.hi is None:
        return "-"
    return f"{e.lo:.2f}x-{e.hi:.2f}x" + (" *" if e.decided else "")


def cells(
    comparison: Comparison, names: tuple[str, str] = ("original", "fixed")
) -> list[list[str]]:
    """The table's header and rows, as text cells (the terminal and the HTML page)."""
    header = [
        "metric",
        names[0],
        names[1],
        f"{names[1]}/{names[0]}",
        f"{LEVEL:.0%} interval",
        "better",
    ]
    rows = [header]
    for r in comparison.rows:
        unit = r.metric.unit
        e = r.estimate
        rows.append(
            [
                r.metric.label,
                fmt(Row.median(r.before), unit),
                fmt(Row.median(r.after), unit),
                "-" if e is None else f"{e.ratio:.2f}x",
                _interval(r),
                BETTER[r.metric.higher_is_better],
            ]
        )
    return rows


def table_note(names: tuple[str, str] = ("original", "fixed")) -> str:
    return (
        f"{names[1]}/{names[0]}: the median of the ratios over every pair of runs "
        f"(Hodges-Lehmann); interval: exact Mann-Whitney, {LEVEL:.0%} or just above "
        "(* it excludes 1x); better: which way a ratio is an improvement"
    )


def table(comparison: Comparison, names: tuple[str, str] = ("original", "fixed")) -> str:
    rows = cells(comparison, names)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for i, row in enumerate(rows):
        out = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(out).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(table_note(names))
    return "\n".join(lines)


def failure(result: RunResult) -> str:
    lines = [f"run {result.index} ({result.variant}) {result.status}: {result.message}"]
    if result.stderr_tail and result.status not in ("ok", "partial"):
        lines.append("  last lines of its stderr:")
        lines.extend("    " + line for line in result.stderr_tail.splitlines())
    lines.append(f"  logs: {result.stdout_log}, {result.stderr_log}")
    return "\n".join(lines)


def remarks(comparison: Comparison, runs: Sequence[RunResult]) -> list[str]:
    """What the table needs said: notes, warnings, runs that failed or had to be ended."""
    out = []
    if comparison.row("gpu_util") is not None:
        note = UTIL_NOTE
        if comparison.row("sm_activity") is None:
            note += " (SM activity needs GPM: Hopper or newer)"
        out.append(f"note: {note}.")
    for label, devices in comparison.per_device.items():
        utils = ", ".join(f"{uuid[:12]} {fmt(u, '%')}" for uuid, u in devices.items())
        out.append(f"note: GPU util per device, median over the runs of {label}: {utils}")
    out.extend(f"note: {note}" for note in comparison.notes)
    out.extend(f"warning: {w}" for w in comparison.warnings)
    for r in runs:
        if r.usable and (r.killed or r.leftovers):
            extra = f" ({r.leftovers} leftover process(es) ended)" if r.leftovers else ""
            out.append(f"note: run {r.index} ({r.variant}): {r.message}{extra}".rstrip())
        elif not r.usable:
            out.append(failure(r))
    return out


def render(
    comparison: Comparison,
    runs: Sequence[RunResult],
    log_dir: str,
    names: tuple[str, str] = ("original", "fixed"),
) -> str:
    out = [table(comparison, names), "", *remarks(comparison, runs), ""]
    out.append(f"verdict: {comparison.verdict}")
    return "\n".join([*out, *where(runs, log_dir)])


def where(runs: Sequence[RunResult], log_dir: str, logs: str = "logs of every run") -> list[str]:
    """Where the logs are and what the runs wrote: each ran in a copy of the script's
    folder (scratch.py), kept under runs/ with what it wrote; and, loudly, any file of
    the user's that a run changed through a link (a file too large to copy)."""
    wrote = [r for r in runs if r.workdir]
    kept = f"{len(wrote)} of {len(runs)} wrote files, kept there" if wrote else "none wrote a file"
    out = [
        f"{logs}: {log_dir}",
        f"run outputs: {Path(log_dir) / 'runs'} (each run worked in a copy of the script's "
        f"folder; {kept})",
    ]
    out += [
        f"warning: run {r.index} ({r.variant}) changed {path} in your folder (too large to "
        "copy, it was linked)"
        for r in runs
        for path in r.touched
    ]
    return out
