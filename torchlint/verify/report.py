"""The terminal report: the table, the verdict, warnings, failures with their stderr."""

from __future__ import annotations

from collections.abc import Sequence

from torchlint.verify.harness import RunResult
from torchlint.verify.stats import Comparison, Spread

UTIL_NOTE = (
    "GPU util is NVML's: the share of time any kernel was running, not how much of the GPU it used"
)


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
    return f"{value:.4g} {unit}"


def _spread(s: Spread | None) -> str:
    if s is None:
        return "-"
    if len(s.values) < 2:
        return "n=1"
    return f"±{s.relative / 2:.1%}"


def _ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def table(comparison: Comparison, names: tuple[str, str] = ("original", "fixed")) -> str:
    header = ["metric", names[0], names[1], "ratio", f"spread {names[0]} | {names[1]}"]
    rows = [header]
    for r in comparison.rows:
        unit = r.metric.unit
        rows.append(
            [
                r.metric.label,
                fmt(r.before.median if r.before else None, unit),
                fmt(r.after.median if r.after else None, unit),
                _ratio(r.ratio),
                f"{_spread(r.before)} | {_spread(r.after)}",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def failure(result: RunResult) -> str:
    lines = [f"run {result.index} ({result.variant}) {result.status}: {result.message}"]
    if result.stderr_tail and result.status not in ("ok", "partial"):
        lines.append("  last lines of its stderr:")
        lines.extend("    " + line for line in result.stderr_tail.splitlines())
    lines.append(f"  logs: {result.stdout_log}, {result.stderr_log}")
    return "\n".join(lines)


def render(
    comparison: Comparison,
    runs: Sequence[RunResult],
    log_dir: str,
    names: tuple[str, str] = ("original", "fixed"),
) -> str:
    out = [table(comparison, names), ""]
    if comparison.row("gpu_util") is not None:
        note = UTIL_NOTE
        if comparison.row("sm_activity") is None:
            note += " (SM activity needs GPM: Hopper or newer)"
        out.append(f"note: {note}.")
    if comparison.per_device:
        out.append("GPU util per device (median over repeats):")
        for label, devices in comparison.per_device.items():
            cells = ", ".join(f"{uuid[:12]} {fmt(u, '%')}" for uuid, u in devices.items())
            out.append(f"  {label}: {cells}")
    for note in comparison.notes:
        out.append(f"note: {note}")
    for w in comparison.warnings:
        out.append(f"warning: {w}")
    for r in runs:
        if not r.usable or r.killed or r.leftovers:
            if r.usable:
                extra = f" ({r.leftovers} leftover process(es) ended)" if r.leftovers else ""
                out.append(f"note: run {r.index} ({r.variant}): {r.message}{extra}".rstrip())
            else:
                out.append(failure(r))
    out.append("")
    out.append(f"verdict: {comparison.verdict}")
    out.append(f"logs of every run: {log_dir}")
    return "\n".join(line for line in out)
