"""TL001 small-batch-size: a training DataLoader uses a batch size too small to fill the GPU.

What: a `torch.utils.data.DataLoader` whose `batch_size` is an int literal, or a
module-level constant bound once to one, below the `min-batch-size` option (default
32), and whose batches feed a training loop (a loop calling `.backward()` and an
optimizer `.step()`) in the same file.

Why: every step launches the same kernels whatever the batch size; with a handful
of samples per step the GPU spends its time on launch overhead and Python, not on
arithmetic, and throughput per sample collapses. Larger batches (within memory)
are the first lever of the PyTorch Performance Tuning Guide and of Lightning's
`BatchSizeFinder`. A batch size read from a variable, a config or the command line
is never reported: it cannot be proven small.

Bad:
    BATCH_SIZE = 8
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

Good:
    BATCH_SIZE = 32  # and the learning rate scaled with it
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)

Fix (unsafe): raise the literal (or the constant's value, where it is defined) to
`min-batch-size`. Unsafe because it changes the optimisation: fewer steps per
epoch, a different gradient noise scale and a different memory footprint. Scale the
learning rate with the batch size (linear scaling rule, Goyal et al. 2017) and check
convergence; `torchlint verify --tune-batch-size` measures the largest batch that
fits on your GPU.

Options: `min-batch-size` (int, default 32).

Sources: PyTorch Performance Tuning Guide; Lightning `BatchSizeFinder`; Goyal et
al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour" (2017).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule
from torchlint.semantic.loaders import BATCH_SIZE_OPTIONS


class SmallBatchSize(Rule):
    code = "TL001"
    name = "small-batch-size"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader",)
    options = BATCH_SIZE_OPTIONS

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        minimum = int(self.option(module, "min-batch-size"))
        for loader in module.dataloaders:
            if loader.opaque or loader.arg("batch_sampler") is not MISSING:
                continue
            value = loader.arg("batch_size")
            if value is MISSING:
                continue
            found = module.constant(value, loader.call.scope)
            if found is None or found.origin not in ("literal", "name"):
                continue
            size = found.value
            if not isinstance(size, int) or isinstance(size, bool) or not 0 < size < minimum:
                continue
            if not loader.feeds_training:
                continue
            where = "`batch_size" if found.origin == "literal" else f"`{_code(value)}"
            yield self.diagnostic(
                loader.call.node,
                f"{where}={size}` feeds a training loop: batches this small leave the GPU "
                f"waiting on per-step overhead; raise it to at least {minimum} and rescale "
                "the learning rate with it (or find the largest batch that fits with "
                "`torchlint verify --tune-batch-size`)",
                fix=fix(
                    f"Raise the batch size from {size} to {minimum}",
                    Applicability.UNSAFE,
                    Replace(found.node, cst.Integer(str(minimum))),
                ),
            )


def _code(node: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(node)
