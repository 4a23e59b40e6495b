"""CPU time of `torchlint check` per output format, on one directory.

    python benchmarks/output_formats.py DIRECTORY [--rounds 5] [--formats text json sarif]

Runs `torchlint check --no-cache --output-format F DIRECTORY` for each format, round by
round (the order rotated each round), and prints the median CPU time of each (user +
system of the process and its workers) and its ratio to the first format's. The formats
that show fix edits (json, sarif, rdjson...) compute every fix's text edits; the target
(issue 12) is json within 1.2x of text on the PyTorch-GAN corpus.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path


def cpu_seconds(command: list[str], cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--formats", nargs="+", default=["text", "json"])
    args = parser.parse_args()
    if not args.directory.is_dir():
        parser.error(f"not a directory: {args.directory}")
    times: dict[str, list[float]] = {f: [] for f in args.formats}
    env_workers = os.environ.get("TORCHLINT_WORKERS", "all cores")
    for round_ in range(args.rounds):
        order = (
            args.formats[round_ % len(args.formats) :] + args.formats[: round_ % len(args.formats)]
        )
        for fmt in order:
            command = [sys.executable, "-m", "torchlint", "check", "--no-cache"]
            times[fmt].append(cpu_seconds([*command, "--output-format", fmt, "."], args.directory))
    base = statistics.median(times[args.formats[0]])
    print(f"{args.directory} ({args.rounds} rounds, workers: {env_workers})")
    print("| format | CPU s (median) | ratio |")
    print("|---|---|---|")
    for fmt, values in times.items():
        median = statistics.median(values)
        print(f"| {fmt} | {median:.2f} | {median / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
