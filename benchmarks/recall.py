"""Recall on problems listed before the run: how many of them torchlint reports.

    python benchmarks/recall.py [--split dev|blind|all] [--every-rule] [--misses]

benchmarks/recall/<folder>.tsv lists, per repository of ../shared/corpus, the GPU-performance
problems an expert found by reading the code *before* torchlint ran there (the protocol of
the corpus README): folder, location, category, strength (clear / debatable), why,
listed-at. A location is `path:line` or, in a notebook, `path:cell N:L`; alternatives are
separated by ` | `.

An item is found when a finding of a rule that answers its category (CATEGORIES) is in
the same file (and cell) within NEAR lines of one of its locations; for a setting of the
whole program (WHOLE_FILE: mixed precision, TF32, cuDNN's autotuner, compiling, channels
last), anywhere in the same file or notebook: where the expert and the rule put it (the
model, the loop, the forward pass) differs, the fix is one per program. The default run is
what a user sees: the default rules, low-impact findings hidden; `--every-rule` adds
`--select ALL --preview --show-low-impact`. Items of a category no rule answers count as
misses with the cause "no rule".

benchmarks/recall/misses.tsv says why each miss of the default run is missed (folder,
location, category, cause, note; causes in CAUSES); `--misses` lists the misses with
their cause: the one written there, else the one the findings tell ("no rule"; "low
impact" or "preview" where the run of every rule finds it), or "?".

BLIND names the repositories kept out of the development loop: scored only at the end.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = ROOT.parent / "shared" / "corpus"
LISTS = HERE / "recall"
MISSES = LISTS / "misses.tsv"
NEAR = 3  # lines between a listed location and a finding that answers it
COLUMNS = ("folder", "location", "category", "strength", "why", "listed-at")
MISS_COLUMNS = ("folder", "location", "category", "cause", "note")
CAUSES = (
    "no rule",  # no rule answers the category
    "helper",  # the problem sits in a function or method the step calls
    "other file",  # the facts the rule needs are in another file
    "parameter",  # the device, loader or model arrives as an unresolved parameter
    "framework",  # a framework idiom the analysis does not read
    "too narrow",  # the rule's pattern is narrower than how the code writes it
    "preview",  # a rule that answers it is in preview or off by default
    "low impact",  # reported, but hidden as of low impact
    "judged away",  # the rule's conditions deliberately leave it (documented near miss)
)
WHOLE_FILE = frozenset({"mixed-precision", "tf32", "cudnn-benchmark", "compile", "channels-last"})
# The repositories kept out of the development loop (beginner, notebooks, DataParallel,
# DDP, framework): their findings and misses are read only at the end of a round.
BLIND = (
    "PyTorchZeroToAll",
    "pytorch-image-classification",
    "pytorch-classification",
    "simsiam",
    "ignite-examples",
)
# Which rules answer each category of the lists (the protocol's vocabulary).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "batch-size": ("TL001", "TL002", "TL704", "TL705"),
    "input-not-on-device": ("TL101",),
    "model-not-on-device": ("TL102",),
    "cpu-tensor-per-step": ("TL104",),
    "map-location": ("TL106",),
    "blocking-copy": ("TL105",),
    "workers": ("TL201", "TL206", "TL701"),
    # TL201 asks for `pin_memory` with the workers (its message says so, its fix sets both).
    "pin-memory": ("TL202", "TL702", "TL201"),
    "persistent-workers": ("TL203",),
    "loader-misuse": ("TL204", "TL205"),
    "multi-gpu": ("TL301", "TL302", "TL303", "TL304", "TL305", "TL306", "TL722", "TL723"),
    "host-sync": ("TL401",),
    "graph-kept": ("TL403",),
    "empty-cache": ("TL402",),
    "eval-no-grad": ("TL404",),
    "zero-grad": ("TL405",),
    "debug-mode": ("TL406", "TL407", "TL408", "TL409"),
    "mixed-precision": ("TL501", "TL502", "TL703", "TL721"),
    "tf32": ("TL503",),
    "cudnn-benchmark": ("TL601", "TL602"),
    "bias-before-norm": ("TL603",),
    "channels-last": ("TL604",),
    "fused-optimizer": ("TL605",),
    "compile": ("TL606",),
    "foreach": ("TL411",),
    "frozen-module": ("TL414", "TL415", "TL501", "TL504"),
    "attention": ("TL608",),
    "padding": ("TL706",),
    "generation-cache": ("TL609",),
    "busy-wait": ("TL413",),
    "train-set-reevaluated": ("TL410",),
    "gan-detach": ("TL412",),
    "other": (),
}


@dataclass(frozen=True)
class Place:
    path: str  # relative to the repository's folder
    cell: int | None
    line: int


@dataclass(frozen=True)
class Item:
    folder: str
    location: str  # as listed
    places: tuple[Place, ...]
    category: str
    strength: str
    why: str


def place(text: str) -> Place:
    """`path:12` or `path:cell 3:12` (a notebook's cell, 1-based among all cells)."""
    found = re.fullmatch(r"(.+?):(?:cell (\d+):)?(\d+)", text.strip())
    if not found:
        raise ValueError(f"not a location: {text!r}")
    path, cell, line = found.groups()
    return Place(path, int(cell) if cell else None, int(line))


def read_items(folder: Path = LISTS) -> tuple[list[Item], list[str]]:
    """Every listed item, and what is wrong with the files (empty when well-formed)."""
    items: list[Item] = []
    problems: list[str] = []
    for path in sorted(folder.glob("*.tsv")):
        if path == folder / MISSES.name:
            continue
        rows = _rows(path, COLUMNS, problems)
        for n, (repo, location, category, strength, why, _when) in rows:
            if repo != path.stem:
                problems.append(f"{path.name}:{n}: folder {repo!r} in the list of {path.stem}")
            if category not in CATEGORIES:
                problems.append(f"{path.name}:{n}: unknown category {category!r}")
            if strength not in ("clear", "debatable"):
                problems.append(f"{path.name}:{n}: strength {strength!r}")
            try:
                places = tuple(place(p) for p in location.split(" | "))
            except ValueError as error:
                problems.append(f"{path.name}:{n}: {error}")
                continue
            items.append(Item(repo, location, places, category, strength, why))
    return items, problems


def read_causes(path: Path = MISSES) -> tuple[dict[tuple[str, str, str], str], list[str]]:
    """Why each miss is missed, by (folder, location, category)."""
    problems: list[str] = []
    causes = {}
    if path.exists():
        for n, (repo, location, category, cause, _note) in _rows(path, MISS_COLUMNS, problems):
            if cause not in CAUSES:
                problems.append(f"{path.name}:{n}: cause {cause!r} is not one of {CAUSES}")
            causes[repo, location, category] = cause
    return causes, problems


def _rows(path: Path, columns: tuple[str, ...], problems: list[str]) -> list[tuple[int, list[str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [(n, line) for n, line in enumerate(lines, 1) if line.strip() and line[0] != "#"]
    if not rows or tuple(rows[0][1].split("\t")) != columns:
        problems.append(f"{path.name}: the first row must be {'<TAB>'.join(columns)}")
        return []
    out = []
    for n, line in rows[1:]:
        cells = [c.strip() for c in line.split("\t")]
        if len(cells) != len(columns):
            problems.append(f"{path.name}:{n}: {len(cells)} columns, expected {len(columns)}")
            continue
        out.append((n, cells))
    return out


# -- findings --------------------------------------------------------------------------------

Findings = dict[tuple[str, str, int | None], list[tuple[int, str]]]  # (repo, path, cell) -> rows


def run(repos: Iterable[str], every_rule: bool, corpus: Path = CORPUS) -> Findings:
    """Torchlint's findings in the repositories, by file (and cell): (line, rule)."""
    dirs = [corpus / r for r in repos]
    command = [sys.executable, "-m", "torchlint", "check", "--output-format", "json"]
    command += ["--exit-zero", "--no-cache", "--quiet", *map(str, dirs)]
    if every_rule:
        command += ["--select", "ALL", "--preview", "--show-low-impact"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 2) or not done.stdout:  # 2: a file that does not parse
        sys.stderr.write(done.stderr)
        raise SystemExit(f"recall: torchlint exited {done.returncode}")
    found: Findings = defaultdict(list)
    for item in json.loads(done.stdout or "[]"):
        file = (ROOT / item["filename"]).resolve()
        top = next(d for d in dirs if file.is_relative_to(d.resolve()))
        path = file.relative_to(top.resolve()).as_posix()
        found[top.name, path, item["cell"]].append((item["location"]["row"], item["code"]))
    return found


def answered(item: Item, found: Findings, near: int = NEAR) -> bool:
    return bool(answering(item, found, near))


def answering(item: Item, found: Findings, near: int = NEAR) -> set[str]:
    """The rules of the item's category with a finding that answers it."""
    rules = CATEGORIES[item.category]
    if item.category in WHOLE_FILE:
        paths = {p.path for p in item.places}
        return {
            code
            for (repo, path, _), rows in found.items()
            if repo == item.folder and path in paths
            for _, code in rows
            if code in rules
        }
    return {
        code
        for p in item.places
        for row, code in found.get((item.folder, p.path, p.cell), ())
        if code in rules and abs(row - p.line) <= near
    }


# -- report ----------------------------------------------------------------------------------


def recall(items: list[Item], found: Findings) -> Counter[str]:
    counts: Counter[str] = Counter()
    for item in items:
        hit = answered(item, found)
        for key in ("all", item.strength):
            counts[f"{key} listed"] += 1
            counts[f"{key} found"] += hit
    return counts


def ratio(found: int, listed: int) -> str:
    return f"{found / listed:.2f} ({found}/{listed})" if listed else "-"


def report(items: list[Item], found: Findings) -> list[str]:
    """Recall per repository and per category, then for the whole set."""
    lines = ["| repository | recall | clear only |", "| --- | ---: | ---: |"]
    by_repo: dict[str, list[Item]] = defaultdict(list)
    by_category: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        by_repo[item.folder].append(item)
        by_category[item.category].append(item)
    for name, group in [*sorted(by_repo.items()), ("all", items)]:
        c = recall(group, found)
        lines.append(
            f"| {name} | {ratio(c['all found'], c['all listed'])} "
            f"| {ratio(c['clear found'], c['clear listed'])} |"
        )
    lines += ["", "| category | recall | rules |", "| --- | ---: | --- |"]
    for name, group in sorted(by_category.items(), key=lambda kv: -len(kv[1])):
        c = recall(group, found)
        rules = ", ".join(CATEGORIES[name]) or "(none)"
        lines.append(f"| {name} | {ratio(c['all found'], c['all listed'])} | {rules} |")
    return lines


def misses(
    items: list[Item],
    found: Findings,
    causes: dict[tuple[str, str, str], str],
    every: Findings | None = None,
) -> list[str]:
    """The misses of the default run (`found`), each with its cause: written in
    misses.tsv, else read off the findings where they tell it ("no rule": a category no
    rule answers; with `every`, the run of every rule with low impact shown: "low impact"
    where a default rule found it, "preview" where only a rule off by default did), else
    "?"."""
    out = []
    for item in items:
        if not answered(item, found):
            cause = causes.get((item.folder, item.location, item.category))
            if cause is None and not CATEGORIES[item.category]:
                cause = "no rule"
            if cause is None and every is not None and (codes := answering(item, every)):
                cause = "low impact" if codes & _on_by_default() else "preview"
            out.append(
                f"{item.folder}\t{item.location}\t{item.category}\t{cause or '?'}\t{item.why}"
            )
    return out


def _on_by_default() -> set[str]:
    from torchlint.lint.catalog import CATALOG

    return {code for code, _, default, preview, *_ in CATALOG if default and not preview}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "blind", "all"), default="dev")
    parser.add_argument("--every-rule", action="store_true", help="every rule, low impact shown")
    parser.add_argument("--misses", action="store_true", help="list the misses with their cause")
    args = parser.parse_args(argv)
    items, problems = read_items()
    causes, more = read_causes()
    for problem in problems + more:
        print(f"recall: {problem}", file=sys.stderr)
    if problems or more:
        return 2
    if args.split != "all":
        items = [i for i in items if (i.folder in BLIND) == (args.split == "blind")]
    if not items:
        print("recall: no listed items in this split", file=sys.stderr)
        return 2
    if not CORPUS.is_dir():
        print(f"recall: no corpus at {CORPUS}", file=sys.stderr)
        return 2
    found = run(sorted({i.folder for i in items}), args.every_rule)
    mode = "every rule, low impact shown" if args.every_rule else "default rules"
    print(f"recall on the {args.split} split ({mode})\n")
    print("\n".join(report(items, found)))
    if args.misses:
        every = None if args.every_rule else run(sorted({i.folder for i in items}), True)
        print("\nmisses (folder, location, category, cause, why):")
        print("\n".join(misses(items, found, causes, every)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
