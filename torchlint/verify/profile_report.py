"""The report of `torchlint verify --profile` (crosscheck.py's join): in the terminal,
and as a self-contained HTML page."""

from __future__ import annotations

import html
import os

from torchlint.verify.crosscheck import CONFIRMED, NOT_SEEN, CrossCheck


def fmt_ns(ns: int) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e3:.0f} µs"


def _time(check: CrossCheck, ns: int) -> str:
    if not ns:
        return "-"
    share = check.share(ns)
    if share is None:
        return fmt_ns(ns)
    return fmt_ns(ns) + (f" ({share:.1%})" if share >= 0.001 else " (<0.1%)")


def headline(check: CrossCheck) -> str:
    where = "CUDA" if check.cuda else "CPU only"
    steps = f"{check.steps} optimizer step(s)" if check.steps else "no optimizer step, the run"
    return (
        f"{os.path.basename(check.script)}: {steps} profiled "
        f"({fmt_ns(check.span_ns)}), torch {check.torch}, {where}"
    )


def finding_cells(check: CrossCheck) -> list[list[str]]:
    rows = [["finding", "rule", "at run time", "seen", "time", "detail"]]
    for f in check.findings:
        detail = f.detail if f.entity is None else f"{f.entity}: {f.detail}"
        seen = str(f.count) if f.status == CONFIRMED else "-"
        where = f"{f.line}:{f.column}"
        rows.append([where, f"{f.code} {f.name}", f.status, seen, _time(check, f.ns), detail])
    return rows


def runtime_cells(check: CrossCheck) -> list[list[str]]:
    rows = [["where", "pattern", "seen", "time", "in", "no finding because"]]
    for r in check.runtime_only:
        rows.append([r.where, r.label, str(r.count), _time(check, r.ns), r.entity or "-", r.why])
    return rows


def _aligned(rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, except the last (free text)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    numeric = {3, 4} if rows[0][2] == "at run time" else {2, 3}
    lines = []
    for i, row in enumerate(rows):
        cells = [
            c.rjust(w) if j in numeric else c.ljust(w)
            for j, (c, w) in enumerate(zip(row, widths, strict=False))
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in [*widths, len(row[-1])]))
    return lines


def render(check: CrossCheck) -> str:
    out = [f"torchlint verify --profile: {headline(check)}", ""]
    if check.findings:
        out.append("Static findings, checked against PyTorch's run-time anti-pattern matcher:")
        out.extend(_aligned(finding_cells(check)))
    else:
        out.append("No static findings.")
    out.append("")
    if check.runtime_only:
        out.append("Seen at run time only (no static finding for it):")
        out.extend(_aligned(runtime_cells(check)))
    else:
        out.append("Seen at run time only: nothing.")
    counts = {s: sum(f.status == s for f in check.findings) for s in (CONFIRMED, NOT_SEEN)}
    checkable = sum(f.pattern is not None for f in check.findings)
    out.append("")
    out.append(
        f"summary: {counts[CONFIRMED]} of {checkable} checkable finding(s) confirmed, "
        f"{counts[NOT_SEEN]} not seen; {len(check.runtime_only)} run-time pattern(s) "
        "without a finding"
    )
    out.extend(f"note: {n}" for n in check.notes)
    return "\n".join(out)


def _html_table(rows: list[list[str]]) -> str:
    out = ["<table style='border-collapse:collapse'>"]
    for i, cols in enumerate(rows):
        tag = "th" if i == 0 else "td"
        out.append(
            "<tr>"
            + "".join(
                f"<{tag} style='padding:2px 8px;text-align:left;vertical-align:top'>"
                f"{html.escape(c)}</{tag}>"
                for c in cols
            )
            + "</tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def html_page(check: CrossCheck) -> str:
    """The same report as a self-contained HTML page."""
    title = f"torchlint verify --profile {os.path.basename(check.script)}"
    body = [f"<h2>{html.escape(title)}</h2>", f"<p>{html.escape(headline(check))}</p>"]
    body.append("<h3>Static findings and what the run showed</h3>")
    body.append(_html_table(finding_cells(check)) if check.findings else "<p>None.</p>")
    body.append("<h3>Seen at run time only</h3>")
    body.append(_html_table(runtime_cells(check)) if check.runtime_only else "<p>Nothing.</p>")
    if check.notes:
        body.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in check.notes) + "</ul>")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head>\n"
        "<body style='font-family:sans-serif;max-width:1200px'>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
