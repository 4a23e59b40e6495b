"""How often `torchlint verify`'s verdict is wrong, and how often it finds a real effect.

Simulates comparisons whose truth is known: each run's throughput is the true value
times log-normal run-to-run noise; a verdict is given when the exact Mann-Whitney
interval of the ratio excludes 1 (torchlint.verify.stats). Prints, per number of runs
of each variant, the interval's exact level, the share of false verdicts with no effect,
and the share of effects found (docs/verify.md, "Why 5 repeats").

    python benchmarks/verify_power.py [--noise 0.05] [--sims 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torchlint.verify.stats import estimate

EFFECTS = (1.0, 1.05, 1.1, 1.3)


def found(runs: int, effect: float, noise: float, sims: int, rng: random.Random) -> float:
    hits = 0
    for _ in range(sims):
        before = [math.exp(rng.gauss(0.0, noise)) for _ in range(runs)]
        after = [effect * math.exp(rng.gauss(0.0, noise)) for _ in range(runs)]
        e = estimate(before, after)
        hits += e is not None and e.decided
    return hits / sims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noise", type=float, default=0.05, help="run-to-run sd of log samples/s")
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    heads = " | ".join(f"{e:g}x" if e != 1 else "no effect" for e in EFFECTS)
    print(f"{args.noise:.0%} noise, {args.sims} simulations per cell: share with a verdict")
    print(f"| runs of each | exact level | {heads} |")
    print("|---" * (2 + len(EFFECTS)) + "|")
    for runs in (3, 4, 5, 6, 8, 10):
        level = estimate([1.0] * runs, [2.0] * runs)
        cells = " | ".join(f"{found(runs, e, args.noise, args.sims, rng):.1%}" for e in EFFECTS)
        exact = f"{level.level:.1%}" if level and level.level else "none"
        print(f"| {runs} | {exact} | {cells} |")


if __name__ == "__main__":
    main()
