"""TL723 lightning-data-parallel: Lightning's `strategy="dp"` (DataParallel).

What: a PyTorch Lightning `Trainer(...)` with `strategy="dp"` (or its older spellings
`accelerator="dp"` and `distributed_backend="dp"`, or a `DataParallelStrategy(...)`).
On by default: Lightning itself discourages DP and removed it. DP kept on purpose for
Windows, where NCCL does not exist and DDP needs
`DDPStrategy(process_group_backend="gloo")`, is reported too; the fix does not know
that, which is one reason it is unsafe.

Why: DataParallel runs every GPU from one Python process: each step it copies the model to
every GPU, scatters the batch and gathers the outputs on the first GPU, which stays busier
than the others and holds the whole output. Lightning's own docs warn: "DP use is
discouraged by PyTorch and Lightning ... Use DDP which is more stable and at least 3x
faster"; Lightning 2.0 removed it (`strategy="dp"` raises there).

Bad:
    trainer = pl.Trainer(gpus=4, strategy="dp")

Good:
    trainer = pl.Trainer(gpus=4, strategy="ddp")

Fix (unsafe): the same argument set to `"ddp"`. Unsafe because DP split each batch across
the GPUs while DDP gives each GPU a whole batch (the global batch grows by the GPU count:
halve `batch_size` per device or rescale the learning rate), `*_step_end` hooks receive
per-process outputs, logged metrics need `sync_dist=True`, and the script is started
once per GPU. Not offered in notebooks, where DDP needs `strategy="ddp_notebook"` and a
notebook that has not touched CUDA yet.

Impact: Always high: DataParallel is several times slower than DDP on the same GPUs, and
Lightning 2.0 removed it: the script stops with a newer Lightning.

Unknown device: not read; `strategy="dp"` is a multi-GPU strategy whatever the Trainer's
accelerator.

Sources: Lightning 1.x docs, "GPU training (Intermediate)", "Data Parallel" (the warning
quoted above); Lightning 2.0 release notes (DP removed); PyTorch docs,
`torch.nn.DataParallel` ("It is recommended to use DistributedDataParallel").
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule, lightning, str_value

SPELLINGS = ("strategy", "accelerator", "distributed_backend")


class LightningDataParallel(Rule):
    code = "TL723"
    name = "lightning-data-parallel"
    fix_safety = FixSafety.UNSAFE
    tokens = ('"dp"', "'dp'", "DataParallelStrategy")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for trainer in module.frameworks.trainers:
            for name in SPELLINGS:
                value = trainer.kwarg(name)
                if value is MISSING:
                    continue
                if isinstance(value, cst.SimpleString) and str_value(value) == "dp":
                    new: cst.BaseExpression | None = value.with_changes(
                        value=value.value.replace("dp", "ddp", 1)
                    )
                elif isinstance(value, cst.Call) and lightning(
                    module.resolve(value.func, trainer.scope), "DataParallelStrategy"
                ):
                    new = None  # its arguments are DP's own: rewrite by hand
                else:
                    continue
                yield self.diagnostic(
                    value,
                    "DataParallel drives every GPU from one process and gathers on the first "
                    '(Lightning: DDP is "at least 3x faster"; Lightning 2 removed `dp`); '
                    'use `strategy="ddp"` and mind the per-GPU batch size',
                    fix=None
                    if new is None or module.notebook
                    else fix('Use `"ddp"`', Applicability.UNSAFE, Replace(value, new)),
                )
