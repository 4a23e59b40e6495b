"""TL201 dataloader-sync-loading: DataLoader loads batches on the main process.

What: a `torch.utils.data.DataLoader` built without `num_workers` (or with
`num_workers=0`) loads and collates every batch in the training process itself.

Why: while the main process decodes, augments and collates a batch, the GPU has no
work; with worker processes the next batches are prepared while the current one
trains. The PyTorch Performance Tuning Guide puts "enable async data loading"
first. An explicit `num_workers=0` is a deliberate choice in tests and debugging,
so it is reported only when that loader feeds a training loop in the same file.

Bad:
    loader = DataLoader(train_set, batch_size=64, shuffle=True)

Good:
    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=NUM_WORKERS)

Fix (unsafe): set `num_workers=NUM_WORKERS`, defined once after the imports as the
CPU cores this process may use (`os.sched_getaffinity`, else `os.cpu_count()`),
shared among the processes torchrun starts on the machine (`LOCAL_WORLD_SIZE`),
minus one for the main process, and at least 1. Unsafe because each worker holds a
copy of the dataset (memory), an `IterableDataset` without per-worker sharding
yields duplicates, and random augmentations draw from per-worker seeds.

Sources: PyTorch Performance Tuning Guide, "Enable async data loading and
augmentation"; torch.utils.data docs, "Single- and Multi-process Data Loading".
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.edits import WORKERS_NAME
from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule
from torchlint.semantic.syntax import int_value


class DataLoaderSyncLoading(Rule):
    code = "TL201"
    name = "dataloader-sync-loading"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for loader in module.dataloaders:
            if loader.opaque:
                continue
            workers = loader.arg("num_workers")
            if workers is MISSING:
                what = "DataLoader without `num_workers` loads every batch on the main process"
            elif int_value(workers) == 0 and loader.feeds_training:
                what = (
                    "`num_workers=0` on a training DataLoader loads every batch on the main process"
                )
            else:
                continue
            yield self.diagnostic(
                loader.call.node,
                f"{what} while the GPU waits; set `num_workers` to the CPU cores per process "
                "minus one so batches are prepared in parallel",
                fix=loader.workers_fix(f"Set `num_workers={WORKERS_NAME}`"),
            )
