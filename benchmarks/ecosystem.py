"""Ecosystem check: torchlint on real code, compared with a committed baseline.

    python benchmarks/ecosystem.py [DIRS...] [--check] [--update-baseline] [--unjudged]
    python benchmarks/ecosystem.py [DIRS...] --every-rule [--unjudged]
    python benchmarks/ecosystem.py --write-precision docs/precision.md

Runs the installed `torchlint check` (default rules, low-impact findings shown, no cache)
over directories of real
code, one repository each (default: every folder of ../shared/corpus beside the
checkout), prints the findings per rule and per repository with each rule's precision
on the judged findings, and compares them with ecosystem-baseline.json: what appeared
and disappeared, per rule, with the first few locations (the last lines of output).
`--every-rule` runs every rule, preview and off-by-default ones included, so that a rule's
findings are judged before it is promoted (nothing is compared: the baseline holds the
default rules' findings).

A finding is the triple (rule, path, line): the path starts with the repository's
folder name (`PyTorch-GAN/implementations/aae/aae.py`); in a notebook the line is
`cell N:L` (cell N counted among all cells, as the JSON output's `cell`, and line L of
that cell). Several findings of one rule on one line are one triple.

ecosystem-verdicts.tsv judges findings (TP, FP or DEB, with a reason): every finding of
the baseline has one, so a rule change asks for verdicts on its newcomers. Precision is
TP / (TP + FP) over a rule's findings. A finding of low impact (hidden by default) is
marked so in the baseline: "shown" counts the others, what a user sees.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torchlint.lint.notebook import Notebook
from torchlint.lint.registry import all_rules
from torchlint.results import ERROR_NAMES, SKIPPED

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported
from recall import BLIND  # the blind split is recall.py's to name

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = ROOT.parent / "shared" / "corpus"
BASELINE = HERE / "ecosystem-baseline.json"
VERDICTS = HERE / "ecosystem-verdicts.tsv"
VERDICT_KINDS = ("TP", "FP", "DEB")
ORIGINS = ("seed", "review", "rejudged")  # seed: ../shared/corpus/judgments.tsv of 2026-11-30
COLUMNS = ("rule", "path", "line", "verdict", "reason", "origin")
SHOWN = 5  # locations listed per side of the comparison
START, END = "<!-- precision:start -->", "<!-- precision:end -->"

Key = tuple[str, str, str]  # rule, path, line ("12" or "cell 3:12")


@dataclass(frozen=True)
class Finding:
    key: Key
    message: str
    file: Path
    cell: int | None
    row: int
    low: bool  # low impact: not shown by default


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    origin: str


def sort_key(key: Key) -> tuple[str, str, int, int]:
    rule, path, line = key
    cell, _, row = line.removeprefix("cell ").rpartition(":")
    return rule, path, int(cell or 0), int(row)


def show(key: Key) -> str:
    """A finding's location; in a repository of the blind split (recall.BLIND), its
    rule and repository only: its findings are read at the end of a round, not while
    the rules change."""
    if repository(key) in BLIND:
        return f"{key[0]} {repository(key)}/(blind split)"
    return f"{key[0]} {key[1]}:{key[2]}"


def repository(key: Key) -> str:
    return key[1].split("/", 1)[0]


# -- running torchlint ---------------------------------------------------------------------


def default_dirs() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []


def run(dirs: list[Path], every_rule: bool = False) -> list[Finding]:
    """Every finding of `torchlint check` in `dirs`, one repository each: the default rules,
    or with `every_rule` every rule, preview ones included."""
    dirs = [d.resolve() for d in dirs]
    names = [d.name for d in dirs]
    if len(set(names)) != len(names):
        raise SystemExit(f"ecosystem: two directories share a name: {names}")
    command = [sys.executable, "-m", "torchlint", "check", "--output-format", "json"]
    command += ["--show-low-impact", "--exit-zero", "--no-cache", "--quiet", *map(str, dirs)]
    if every_rule:
        command += ["--select", "ALL", "--preview"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 2):  # 2: a file that does not parse, recorded as such
        sys.stderr.write(done.stderr)
        print(f"ecosystem: torchlint exited {done.returncode} (errors above)", file=sys.stderr)
    found = []
    for item in json.loads(done.stdout or "[]"):
        if item["code"] in ERROR_NAMES or item["code"] == SKIPPED:
            continue  # a file that does not parse (Python 2) or was skipped: no finding
        file = (ROOT / item["filename"]).resolve()
        top = next(d for d in dirs if file.is_relative_to(d))
        path = file.relative_to(top.parent).as_posix()
        row, cell = item["location"]["row"], item["cell"]
        line = str(row) if cell is None else f"cell {cell}:{row}"
        key, low = (item["code"], path, line), item["impact"] == "low"
        found.append(Finding(key, item["message"], file, cell, row, low))
    return found


def low_keys(found: list[Finding]) -> set[Key]:
    """The findings of low impact (a line with a high-impact one of the rule is shown)."""
    shown = {f.key for f in found if not f.low}
    return {f.key for f in found if f.low} - shown


# -- baseline and verdicts -----------------------------------------------------------------


def _rows(path: Path) -> list[list[str]]:
    return json.loads(path.read_text(encoding="utf-8"))["findings"]


def read_baseline(path: Path = BASELINE) -> set[Key]:
    return {(row[0], row[1], row[2]) for row in _rows(path)}


def read_low(path: Path = BASELINE) -> set[Key]:
    """The baseline's findings of low impact (a fourth field, "low")."""
    return {(row[0], row[1], row[2]) for row in _rows(path) if row[3:] == ["low"]}


def write_baseline(keys: Iterable[Key], low: set[Key], path: Path = BASELINE) -> None:
    rows = ",\n".join(
        f"    {json.dumps([*k, 'low'] if k in low else list(k))}"
        for k in sorted(keys, key=sort_key)
    )
    about = (
        "written by benchmarks/ecosystem.py --update-baseline: (rule, path, line) triples, "
        'a fourth field "low" for a finding of low impact'
    )
    path.write_text(
        f'{{\n  "about": {json.dumps(about)},\n  "findings": [\n{rows}\n  ]\n}}\n',
        encoding="utf-8",
    )


def read_verdicts(path: Path = VERDICTS) -> tuple[dict[Key, Verdict], list[str]]:
    """The verdicts by finding, and what is wrong with the file (empty when well-formed)."""
    verdicts: dict[Key, Verdict] = {}
    problems = []
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [(n, line) for n, line in enumerate(lines, 1) if line and not line.startswith("#")]
    if not rows or tuple(rows[0][1].split("\t")) != COLUMNS:
        return {}, [f"{path.name}: the first row must be the header {'<TAB>'.join(COLUMNS)}"]
    for n, line in rows[1:]:
        cells = line.split("\t")
        if len(cells) != len(COLUMNS):
            problems.append(f"{path.name}:{n}: {len(cells)} columns, expected {len(COLUMNS)}")
            continue
        rule, file, where, verdict, reason, origin = (c.strip() for c in cells)
        key = (rule, file, where)
        if not re.fullmatch(r"TL\d{3}", rule):
            problems.append(f"{path.name}:{n}: rule {rule!r} is not a rule code")
        if not re.fullmatch(r"\d+|cell \d+:\d+", where):
            problems.append(f"{path.name}:{n}: line {where!r} is neither N nor 'cell N:L'")
        if verdict not in VERDICT_KINDS:
            problems.append(f"{path.name}:{n}: verdict {verdict!r} is not one of {VERDICT_KINDS}")
        if not reason:
            problems.append(f"{path.name}:{n}: no reason")
        if origin not in ORIGINS:
            problems.append(f"{path.name}:{n}: origin {origin!r} is not one of {ORIGINS}")
        if key in verdicts:
            problems.append(f"{path.name}:{n}: a second verdict on {show(key)}")
        verdicts[key] = Verdict(verdict, reason, origin)
    return verdicts, problems


# -- reports -------------------------------------------------------------------------------


def tally(
    keys: set[Key], verdicts: dict[Key, Verdict], low: set[Key] = frozenset()
) -> dict[str, Counter[str]]:
    """Per rule: findings, TP/FP/DEB/? (no verdict), those of low impact ("low") and, of
    the others (shown by default), how many and their debatable ones ("DEB shown")."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for key in keys:
        verdict = verdicts[key].verdict if key in verdicts else "?"
        counts[key[0]]["findings"] += 1
        counts[key[0]][verdict] += 1
        if key in low:
            counts[key[0]]["low"] += 1
        else:
            counts[key[0]]["shown"] += 1
            counts[key[0]]["DEB shown"] += verdict == "DEB"
    return dict(sorted(counts.items()))


def debatable(c: Counter[str]) -> str:
    """The share of debatable findings among those shown by default."""
    return f"{100 * c['DEB shown'] / c['shown']:.0f}%" if c["shown"] else "-"


def precision(c: Counter[str]) -> str:
    judged = c["TP"] + c["FP"]
    return f"{100 * c['TP'] / judged:.0f}%" if judged else "-"


def table(keys: set[Key], verdicts: dict[Key, Verdict], low: set[Key]) -> list[str]:
    """Findings per rule and repository, their verdicts and precision; how many are of
    low impact, and the debatable share of those shown."""
    repos = sorted({repository(k) for k in keys})
    counts = tally(keys, verdicts, low)
    per_repo = Counter((k[0], repository(k)) for k in keys)
    kinds = ("findings", "low", "TP", "FP", "DEB", "?")
    head = ["rule", *repos, "total", "low", "TP", "FP", "DEB", "?", "precision", "DEB shown"]
    rows = [head]
    total: Counter[str] = Counter()
    for rule, c in counts.items():
        total += c
        rows.append(
            [rule, *(str(per_repo[rule, r]) for r in repos)]
            + [str(c[k]) for k in kinds]
            + [precision(c), debatable(c)]
        )
    rows.append(
        ["all", *(str(sum(per_repo[rule, r] for rule in counts)) for r in repos)]
        + [str(total[k]) for k in kinds]
        + [precision(total), debatable(total)]
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def comparison(now: set[Key], base: set[Key], verdicts: dict[Key, Verdict]) -> list[str]:
    """What appeared and disappeared: a few locations, then the counts per rule (last)."""
    added, removed = sorted(now - base, key=sort_key), sorted(base - now, key=sort_key)
    if not added and not removed:
        return [f"no change against the baseline ({len(base)} findings)"]

    def listed(keys: list[Key], sign: str, what: str) -> list[str]:
        shown = [
            f"  {sign} {show(k)}  [{verdicts[k].verdict if k in verdicts else 'unjudged'}]"
            for k in keys[:SHOWN]
        ]
        return [f"{what} ({len(keys)}):", *shown] if keys else []

    per_rule = Counter((k[0], "+") for k in added) + Counter((k[0], "-") for k in removed)
    rules = sorted({rule for rule, _ in per_rule})
    return [
        *listed(added, "+", "added"),
        *listed(removed, "-", "removed"),
        *(f"  {rule}  +{per_rule[rule, '+']} -{per_rule[rule, '-']}" for rule in rules),
        f"differs from the baseline: +{len(added)} -{len(removed)} findings"
        f" ({len(base)} -> {len(now)}); --update-baseline accepts it",
    ]


def context(finding: Finding, lines: int) -> list[str]:
    """The flagged line with `lines` lines around it, numbered as the finding counts."""
    text = finding.file.read_text(encoding="utf-8", errors="replace")
    if finding.cell is not None:
        text = Notebook.parse(text).cells[finding.cell - 1].source
    source_lines = text.splitlines()
    first = max(finding.row - lines, 1)
    last = min(finding.row + lines, len(source_lines))
    return [
        f"  {'>' if n == finding.row else ' '}{n:5} | {source_lines[n - 1]}"
        for n in range(first, last + 1)
    ]


def unjudged(found: list[Finding], verdicts: dict[Key, Verdict], lines: int) -> list[str]:
    """Each finding without a verdict, in context, then TSV rows to fill."""
    todo: dict[Key, Finding] = {}
    for f in sorted(found, key=lambda f: sort_key(f.key)):
        if f.key not in verdicts:
            todo.setdefault(f.key, f)
    out = []
    for f in todo.values():
        out += [f"{show(f.key)}: {f.message}", *context(f, lines), ""]
    out += ["# rows for ecosystem-verdicts.tsv (verdict TP/FP/DEB and reason to fill in):"]
    out += ["\t".join((*key, "", "", "review")) for key in todo]
    return out


def precision_markdown(keys: set[Key], verdicts: dict[Key, Verdict], low: set[Key]) -> list[str]:
    rules = all_rules()
    kinds = ("findings", "low", "TP", "FP", "DEB", "?")
    out = [
        "| rule | name | findings | low impact | TP | FP | DEB | unjudged | precision "
        "| DEB shown |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    total: Counter[str] = Counter()
    for rule, c in tally(keys, verdicts, low).items():
        total += c
        name = rules[rule].name if rule in rules else "(no such rule now)"
        counts = " | ".join(str(c[k]) for k in kinds)
        shown = f"{c['DEB shown']} of {c['shown']} ({debatable(c)})"
        out.append(
            f"| [{rule}](rules/{rule}.md) | `{name}` | {counts} | {precision(c)} | {shown} |"
        )
    counts = " | ".join(str(total[k]) for k in kinds)
    shown = f"{total['DEB shown']} of {total['shown']} ({debatable(total)})"
    out.append(f"| all | | {counts} | {precision(total)} | {shown} |")
    return out


def write_precision(
    path: Path, keys: set[Key], verdicts: dict[Key, Verdict], low: set[Key]
) -> None:
    """Replace the text between the markers of `path` by the precision table."""
    text = path.read_text(encoding="utf-8")
    before, start, rest = text.partition(START)
    _, end, after = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"ecosystem: {path} lacks the markers {START} and {END}")
    body = "\n".join(precision_markdown(keys, verdicts, low))
    path.write_text(f"{before}{START}\n{body}\n{END}{after}", encoding="utf-8")


# -- command line --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path, help="repository folders (default: corpus)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the findings differ")
    parser.add_argument("--update-baseline", action="store_true", help="rewrite the baseline")
    parser.add_argument("--unjudged", action="store_true", help="show findings to judge")
    parser.add_argument("--context", type=int, default=3, help="lines around each (3)")
    parser.add_argument(
        "--every-rule",
        action="store_true",
        help="run every rule, preview and off-by-default ones included, to judge them "
        "(no comparison with the baseline, which holds the default rules' findings)",
    )
    parser.add_argument(
        "--write-precision",
        type=Path,
        metavar="MD",
        help="regenerate MD's precision table "
        "from the baseline and the verdicts (runs nothing) and exit",
    )
    args = parser.parse_args(argv)
    verdicts, problems = read_verdicts()
    for problem in problems:
        print(f"ecosystem: {problem}", file=sys.stderr)
    if args.write_precision:
        write_precision(args.write_precision, read_baseline(), verdicts, read_low())
        print(f"wrote {args.write_precision}")
        return 0
    dirs = args.dirs or default_dirs()
    if not dirs:
        print(f"ecosystem: no corpus at {CORPUS}: name directories of real code", file=sys.stderr)
        return 2
    started = time.perf_counter()
    found = run(dirs, args.every_rule)
    seconds = time.perf_counter() - started
    now = {f.key for f in found}
    low = low_keys(found)
    repos = {d.resolve().name for d in dirs}
    # Only the corpus has a baseline (another folder may share a repository's name).
    compared = {
        d.resolve().name
        for d in dirs
        if d.resolve().parent == CORPUS.resolve() and not args.every_rule
    }
    everything = read_baseline() if BASELINE.exists() else set()
    low_before = read_low() if BASELINE.exists() else set()
    base = {k for k in everything if repository(k) in compared}
    current = {k for k in now if repository(k) in compared}
    moved = sorted({k for k in current & base if (k in low) != (k in low_before)}, key=sort_key)
    if args.unjudged:
        print("\n".join(unjudged(found, verdicts, args.context)), end="\n\n")
    print(
        f"torchlint on {', '.join(sorted(repos))}: {len(found)} findings at "
        f"{len(now)} (rule, path, line) in {seconds:.1f} s\n"
    )
    print("\n".join(table(now, verdicts, low)))
    print("(?: no verdict; precision: TP/(TP+FP); DEB shown: debatable among the findings shown)")
    missing = sum(1 for k in now if k not in verdicts)
    if missing:
        print(f"{missing} findings to judge: python benchmarks/ecosystem.py --unjudged")
    if compared:
        print("\n" + "\n".join(comparison(current, base, verdicts)))
        for k in moved:
            print(f"  impact: {show(k)} now {'low' if k in low else 'high'}")
    if args.update_baseline and compared:
        write_baseline((everything - base) | current, (low_before - base) | (low & current))
        print(f"wrote {BASELINE.relative_to(ROOT)}")
    return 1 if args.check and (current != base or moved) else 0


if __name__ == "__main__":
    sys.exit(main())
