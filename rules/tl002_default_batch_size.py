"""TL002 default-batch-size: a training DataLoader yields batches of one sample.

What: a `torch.utils.data.DataLoader` that feeds a training loop in the same file
and is given neither `batch_size` nor `batch_sampler`, so it uses the default
`batch_size=1`.

Why: one sample per step is the smallest possible GPU workload: every step pays
kernel launches, Python and optimizer overhead for a single example, and batch
normalisation statistics are meaningless. The default is rarely a choice; an
explicit `batch_size=1` or `batch_size=None` (a dataset that yields whole batches)
is, and is left alone here (TL001 covers small literals).

Bad:
    loader = DataLoader(train_set, shuffle=True)
    for x, y in loader:
        ...
        loss.backward()
        optimizer.step()

Good:
    loader = DataLoader(train_set, batch_size=32, shuffle=True)
    for x, y in loader:
        ...
        loss.backward()
        optimizer.step()

Fix (unsafe): add `batch_size=<min-batch-size>` (the option TL001 reads, default
32). Unsafe because it changes the optimisation (steps per epoch, gradient noise,
memory); rescale the learning rate and check convergence.

Impact: Always high: one sample per step leaves the GPU nearly idle and pays the whole
per-step overhead (kernel launches, Python, the optimizer update) for every example; the
default is almost never chosen on purpose.

Unknown device: not read; one sample per step pays the whole per-step overhead (Python,
the optimizer update) on any device, the CPU included.

Sources: torch.utils.data docs, "Automatic batching (default)"; PyTorch Performance
Tuning Guide.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_arg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.options import MIN_BATCH_SIZE
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule

BATCH_SAMPLERS = ("torch.utils.data.BatchSampler", "torch.utils.data.sampler.BatchSampler")


class DefaultBatchSize(Rule):
    code = "TL002"
    name = "default-batch-size"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader", "auto_dataloader")  # ignite's factory too
    options = (MIN_BATCH_SIZE,)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        size = self.option(module, MIN_BATCH_SIZE)
        for loader in module.loaders.sites:
            if loader.opaque:
                continue
            if (
                loader.arg("batch_size") is not MISSING
                or loader.arg("batch_sampler") is not MISSING
            ):
                continue
            sampler = loader.arg("sampler")
            if (
                isinstance(sampler, cst.Call)
                and module.resolve(sampler.func, loader.call.scope) in BATCH_SAMPLERS
            ):
                continue  # batches come from the sampler
            if not loader.feeds_training:
                continue
            yield self.diagnostic(
                loader.call.node,
                "training DataLoader without `batch_size` trains on one sample per step; "
                f"set `batch_size` (e.g. {size}) and rescale the learning rate with it",
                fix=fix(
                    f"Add `batch_size={size}`",
                    Applicability.UNSAFE,
                    Replace(loader.call.node, call),
                )
                if (call := set_arg(loader, "batch_size", cst.Integer(str(size)))) is not None
                else None,
            )
