"""Overhead of `torchlint verify`'s counting hooks, per training step.

The launcher wraps DataLoader iterators' `__next__` (batches and samples) and
registers a global optimizer step hook (steps, window, progress events). This runs a
small CPU training step with and without those hooks, interleaved, and prints what
the hooks cost per step, directly (tight loops over the hooks) and end to end.

    python benchmarks/verify_overhead.py [--steps 400] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch.utils.data import DataLoader, TensorDataset

from torchlint.verify.launcher import Counter


def counter(channel: str) -> Counter:
    # A window that never opens: the hooks do their per-step work and nothing else.
    return Counter({"channel": channel, "warmup": 10**9, "steps": 1, "progress_interval": 0.1})


def training(steps: int, batch_size: int = 64, width: int = 256) -> float:
    """Seconds per step of a small MLP fed by a DataLoader."""
    data = TensorDataset(
        torch.randn(steps * batch_size, width), torch.randint(0, 10, (steps * batch_size,))
    )
    loader = DataLoader(data, batch_size=batch_size)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    start = time.perf_counter()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return (time.perf_counter() - start) / steps


def per_call(c: Counter, n: int = 200_000) -> tuple[float, float]:
    """Microseconds per `on_batch` (a (x, y) batch) and per `on_step` call."""
    batch = (torch.zeros(64, 256), torch.zeros(64))
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    iterator = object()  # stands for the DataLoader iterator that yields the batch
    start = time.perf_counter()
    for _ in range(n):
        c.on_batch(iterator, batch)
    batch_us = (time.perf_counter() - start) / n * 1e6
    start = time.perf_counter()
    for _ in range(n):
        c.on_step(optimizer, (), {})
    step_us = (time.perf_counter() - start) / n * 1e6
    return batch_us, step_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        c = counter(os.path.join(tmp, "channel"))
        batch_us, step_us = per_call(c)
        training(50)  # warm up allocator and kernels
        plain, hooked = [], []
        for _ in range(args.rounds):  # interleaved, so drifting machine load hits both
            plain.append(training(args.steps))
            c.install(torch)
            hooked.append(training(args.steps))
            c.uninstall()
    step = statistics.median(plain)
    direct = (batch_us + step_us) / 1e6
    measured = statistics.median(hooked) - step
    print(f"torch {torch.__version__}, 1 thread, {args.rounds} rounds of {args.steps} steps")
    print(f"hook cost per call: on_batch {batch_us:.2f} us, on_step {step_us:.2f} us")
    print(f"step time without hooks (median): {step * 1e3:.3f} ms")
    print(f"step time with hooks (median):    {statistics.median(hooked) * 1e3:.3f} ms")
    print(f"overhead, direct:   {direct * 1e6:.2f} us per step = {direct / step:.2%} of a step")
    print(
        f"overhead, measured: {measured * 1e6:+.2f} us per step = {measured / step:+.2%} of a step"
    )
    print(
        f"spread of plain steps over rounds: {(max(plain) - min(plain)) / step:.1%} "
        "(the end-to-end figure is within this noise)"
    )


if __name__ == "__main__":
    main()
