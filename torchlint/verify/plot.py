"""--plot: throughput and utilization over each measured run's window, both variants
overlaid (every point marked, so a run with one point still shows).

HTML is a self-contained page: the report's table, verdict, notes and warnings, and
inline SVG charts (no dependency); PNG (charts and verdict) needs matplotlib, which
torchlint does not depend on.
"""

from __future__ import annotations

import html
import itertools
import math
import statistics
import textwrap
from collections.abc import Sequence
from pathlib import Path

from torchlint.verify.harness import RunResult
from torchlint.verify.nvml import normalize_uuid
from torchlint.verify.report import cells, remarks, table_note
from torchlint.verify.stats import Comparison, used_uuids

COLORS = ("#1f77b4", "#e8590c", "#2f9e44", "#9c36b5")
Series = list[tuple[float, float]]


class PlotError(Exception):
    pass


def check_target(path: Path) -> None:
    """Fail before any run if the plot cannot be written."""
    suffix = path.suffix.lower()
    if suffix not in (".png", ".html", ".htm"):
        raise PlotError(f"--plot must end in .png or .html, got {path.name!r}")
    if suffix == ".png":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise PlotError(
                "--plot .png needs matplotlib (pip install matplotlib); "
                "--plot out.html needs nothing"
            ) from None


def throughput_series(result: RunResult) -> Series:
    """(seconds since the window opened, samples/s), rank 0's rate times the ranks."""
    windows = result.windows()
    if not windows:
        return []
    rank = min(windows)
    opened, closed = windows[rank]
    t0 = opened["t"]
    points = [(opened["t"], int(opened["samples"]))]
    for e in result.events:
        if (
            e.get("event") == "progress"
            and int(e.get("rank", 0)) == rank
            and opened["t"] < e["t"] < closed["t"]
        ):
            points.append((e["t"], int(e["samples"])))
    points.append((closed["t"], int(closed["samples"])))
    min_dt = max(0.25, (closed["t"] - t0) / 40)
    out: Series = []
    last = points[0]
    for p in points[1:]:
        if p[0] - last[0] >= min_dt or p is points[-1]:
            if p[0] > last[0]:
                rate = (p[1] - last[1]) / (p[0] - last[0]) * len(windows)
                out.append(((last[0] + p[0]) / 2 - t0, rate))
            last = p
    return out


def utilization_series(result: RunResult) -> tuple[str, Series]:
    """GPU util (mean over the script's GPUs) per tick, else CPU use in cores."""
    span = result.span()
    if span is None:
        return "", []
    used = used_uuids(result)
    gpu = [s for s in result.gpu if span[0] <= s.t <= span[1] and s.util_gpu is not None]
    if used:
        gpu = [s for s in gpu if normalize_uuid(s.uuid) in used]
    if gpu:
        ticks: dict[float, list[float]] = {}
        for s in gpu:
            key = round(s.t, 2)
            ticks.setdefault(key, []).append(float(s.util_gpu or 0.0))
        return "GPU util (NVML, %)", [
            (t - span[0], sum(v) / len(v)) for t, v in sorted(ticks.items())
        ]
    cpu = [c for c in result.cpu if span[0] <= c.t <= span[1]]
    if len(cpu) < 2:  # a window shorter than the interval: the samples around it
        before = [c for c in result.cpu if c.t < span[0]][-1:]
        after = [c for c in result.cpu if c.t > span[1]][:1]
        cpu = [*before, *cpu, *after]
    duration = span[1] - span[0]
    series = [
        (
            min(max((a.t + b.t) / 2 - span[0], 0.0), duration),
            (b.cpu_s - a.cpu_s) / (b.t - a.t),
        )
        for a, b in itertools.pairwise(cpu)
        if b.t > a.t
    ]
    return "CPU use (cores)", series


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = [first]
    while ticks[-1] < hi - step * 1e-9:  # the last tick covers `hi`
        ticks.append(round(first + len(ticks) * step, 10))
    return ticks


def _label(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def _panel(
    title: str,
    runs: Sequence[tuple[str, int, Series]],
    names: Sequence[str],
    y0: int,
    width: int = 860,
    height: int = 230,
    medians: Sequence[tuple[str, float]] = (),
) -> list[str]:
    left, right, top, bottom = 70, 20, 30, 40
    pw, ph = width - left - right, height - top - bottom
    points = [p for _, _, s in runs for p in s]
    xmax = max((x for x, _ in points), default=1.0) or 1.0
    ymax = max([*(y for _, y in points), *(v for _, v in medians)], default=1.0) or 1.0
    xt, yt = nice_ticks(0, xmax), nice_ticks(0, ymax * 1.05)
    xmax, ymax = xt[-1], yt[-1]
    svg = [f'<g transform="translate(0,{y0})">']
    svg.append(f'<text x="{left}" y="18" class="title">{html.escape(title)}</text>')
    for t in yt:
        y = top + ph - t / ymax * ph
        svg.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        svg.append(f'<text x="{left - 6}" y="{y + 4:.1f}" class="ytick">{_label(t)}</text>')
    for t in xt:
        x = left + t / xmax * pw
        svg.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" class="grid"/>')
        svg.append(f'<text x="{x:.1f}" y="{top + ph + 16}" class="xtick">{_label(t)}</text>')
    svg.append(
        f'<text x="{left + pw / 2}" y="{height - 4}" class="xtick">'
        "seconds since the measurement window opened</text>"
    )
    for variant, _, series in runs:
        if not series:
            continue
        color = COLORS[names.index(variant) % len(COLORS)] if variant in names else "#555"
        coords = " ".join(
            f"{left + x / xmax * pw:.1f},{top + ph - y / ymax * ph:.1f}" for x, y in series
        )
        svg.append(f'<polyline points="{coords}" stroke="{color}" class="line"/>')
        svg.extend(
            f'<circle cx="{left + x / xmax * pw:.1f}" cy="{top + ph - y / ymax * ph:.1f}" '
            f'r="2.5" fill="{color}"/>'
            for x, y in series
        )
    for variant, value in medians:  # dashed: the median over the repeats
        color = COLORS[names.index(variant) % len(COLORS)] if variant in names else "#555"
        y = top + ph - value / ymax * ph
        svg.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" '
            'stroke-dasharray="6,4" stroke-width="1.2"/>'
        )
        svg.append(
            f'<text x="{left + pw - 4}" y="{y - 4:.1f}" class="ytick" fill="{color}">'
            f"{html.escape(variant)} median {value:,.0f}/s</text>"
        )
    svg.append("</g>")
    return svg


def html_page(
    runs: Sequence[RunResult],
    comparison: Comparison | None,
    names: Sequence[str],
    title: str,
) -> str:
    measured = [r for r in runs if r.usable and not r.warmup_run]
    throughput = [(r.variant, r.index, throughput_series(r)) for r in measured]
    util_label = "utilization"
    util = []
    for r in measured:
        label, series = utilization_series(r)
        util_label = label or util_label
        util.append((r.variant, r.index, series))
    width, panel = 860, 230
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{2 * panel + 40}" '
        f'viewBox="0 0 {width} {2 * panel + 40}">',
        "<style>.title{font:bold 14px sans-serif}.xtick{font:11px sans-serif;"
        "text-anchor:middle}.ytick{font:11px sans-serif;text-anchor:end}"
        ".grid{stroke:#ddd;stroke-width:1}.line{fill:none;stroke-width:1.8;opacity:.85}"
        ".legend{font:12px sans-serif}</style>",
    ]
    medians = []
    row = comparison.row("samples_per_s") if comparison is not None else None
    if row is not None:
        medians = [
            (name, statistics.median(values))
            for name, values in zip(names, (row.before, row.after), strict=False)
            if values
        ]
    svg += _panel("Throughput (samples/s)", throughput, names, 0, width, panel, medians)
    svg += _panel(util_label, util, names, panel, width, panel)
    x = 70
    for i, name in enumerate(names):
        color = COLORS[i % len(COLORS)]
        y = 2 * panel + 25
        svg.append(f'<rect x="{x}" y="{y - 10}" width="14" height="4" fill="{color}"/>')
        svg.append(f'<text x="{x + 20}" y="{y - 4}" class="legend">{html.escape(name)}</text>')
        x += 30 + 8 * len(name)
    svg.append(
        f'<text x="{x + 10}" y="{2 * panel + 21}" class="legend">'
        "(one line per measured run; warm-up runs left out)</text>"
    )
    svg.append("</svg>")
    body = [f"<h2>{html.escape(title)}</h2>"]
    if comparison is not None:
        pair = (names[0], names[1])
        rows = cells(comparison, pair)
        body.append(f"<p><b>verdict:</b> {html.escape(comparison.verdict)}</p>")
        body.append("<table style='border-collapse:collapse'>")
        for i, cols in enumerate(rows):
            tag = "th" if i == 0 else "td"
            tds = "".join(
                f"<{tag} style='padding:2px 8px;text-align:{'left' if j == 0 else 'right'}'>"
                f"{html.escape(c)}</{tag}>"
                for j, c in enumerate(cols)
            )
            body.append(f"<tr>{tds}</tr>")
        body.append("</table>")
        body.append(f"<p style='font-size:small'>{html.escape(table_note(pair))}</p>")
        notes = remarks(comparison, runs)
        if notes:
            body.append(
                "<ul>"
                + "".join(
                    f"<li><pre style='white-space:pre-wrap;margin:0'>{html.escape(n)}</pre></li>"
                    for n in notes
                )
                + "</ul>"
            )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head>\n"
        "<body style='font-family:sans-serif;max-width:900px'>\n"
        + "\n".join(body)
        + "\n"
        + "\n".join(svg)
        + "\n</body></html>\n"
    )


def png(
    path: Path,
    runs: Sequence[RunResult],
    comparison: Comparison | None,
    names: Sequence[str],
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    util_label = "utilization"
    seen: set[str] = set()
    for r in runs:
        if not r.usable or r.warmup_run:
            continue
        color = COLORS[names.index(r.variant) % len(COLORS)] if r.variant in names else "#555"
        label = r.variant if r.variant not in seen else None
        seen.add(r.variant)
        t = throughput_series(r)
        if t:
            top.plot(*zip(*t, strict=True), color=color, label=label, lw=1.5, marker="o", ms=3)
        util_label, u = utilization_series(r)
        if u:
            bottom.plot(*zip(*u, strict=True), color=color, lw=1.5, marker="o", ms=3)
    top.set_ylabel("samples/s")
    bottom.set_ylabel(util_label or "utilization")
    bottom.set_xlabel("seconds since the measurement window opened")
    top.legend()
    verdict = textwrap.fill(comparison.verdict, 110) if comparison else ""
    top.set_title(f"{title}\n{verdict}", fontsize=9, loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(
    path: Path,
    runs: Sequence[RunResult],
    comparison: Comparison | None,
    names: Sequence[str] = ("original", "fixed"),
    title: str = "torchlint verify",
) -> None:
    if path.suffix.lower() == ".png":
        png(path, runs, comparison, names, title)
    else:
        path.write_text(html_page(runs, comparison, names, title), encoding="utf-8")
