"""Time to check and fix one file of N and 2N training functions: linear, or not.

    python benchmarks/scaling.py [--n 100] [--rounds 3]

Each function builds a DataLoader with a small batch and no workers, moves a model with
`.cuda()`, and empties the CUDA cache every step: six findings and five fixes per
function, with fixes that edit the same call (one per pass), and a loader built from a
`**options` dict (read through the file's changes to the dict). Prints the CPU time of
`torchlint check` and `torchlint fix --unsafe-fixes` (the process and its children, the
best of the rounds) for N and 2N, and the ratio: 2.0 is linear; the target is at most 2.5.
tests/test_scaling.py holds the same property with counted work instead of time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HEADER = "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
FUNCTION = """

def train_{i}(dataset, epochs):
    model = nn.Linear(8, 2)
    model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=8)
    options = {{"shuffle": False}}
    options["drop_last"] = True
    held_out = DataLoader(dataset, **options)
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.cuda.empty_cache()
"""


def training_functions(n: int) -> str:
    """A file of `n` training functions."""
    return HEADER + "".join(FUNCTION.format(i=i) for i in range(n))


def cpu_seconds(*args: str, cwd: Path) -> float:
    """User + system CPU time of one `torchlint` run (and its worker processes)."""
    before = os.times()
    subprocess.run(
        [sys.executable, "-m", "torchlint", *args, "--no-cache", "-q"],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def measure(n: int, rounds: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="torchlint-scaling-"))
    try:
        source = training_functions(n)
        (work / "train.py").write_text(source, encoding="utf-8")
        check = min(cpu_seconds("check", "train.py", cwd=work) for _ in range(rounds))
        fixes = []
        for _ in range(rounds):
            (work / "train.py").write_text(source, encoding="utf-8")
            fixes.append(cpu_seconds("fix", "--unsafe-fixes", "train.py", cwd=work))
        return {"check": check, "fix": min(fixes)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    small, large = measure(args.n, args.rounds), measure(2 * args.n, args.rounds)
    print(f"| command | N={args.n} CPU s | N={2 * args.n} CPU s | ratio (target <= 2.5) |")
    print("|---|---|---|---|")
    for name, label in (("check", "check"), ("fix", "fix --unsafe-fixes")):
        ratio = large[name] / small[name]
        verdict = "ok" if ratio <= 2.5 else "SUPERLINEAR"
        print(f"| {label} | {small[name]:.2f} | {large[name]:.2f} | {ratio:.2f} {verdict} |")


if __name__ == "__main__":
    main()
