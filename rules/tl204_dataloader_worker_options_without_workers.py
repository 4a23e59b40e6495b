"""TL204 dataloader-worker-options-without-workers: worker options on a loader without workers.

What: a `torch.utils.data.DataLoader` given `persistent_workers=True` or
`prefetch_factor=<int>` while `num_workers` is absent or 0.

Why: both options only mean something for worker processes, and PyTorch rejects
them at run time: `ValueError: persistent_workers option needs num_workers > 0`,
`ValueError: prefetch_factor option could only be specified in multiprocessing`.
The author clearly wanted asynchronous loading and forgot the workers; the script
crashes when the loader is built (often late, e.g. in the validation step).

Bad:
    loader = DataLoader(train_set, batch_size=64, persistent_workers=True)

Good:
    loader = DataLoader(train_set, batch_size=64, persistent_workers=True, num_workers=NUM_WORKERS)

Fix (unsafe): the TL201 fix, `num_workers=NUM_WORKERS` with `NUM_WORKERS` defined once
after the imports (CPU cores per local process minus one, at least 1), with
`persistent_workers=True` where the loader is iterated every epoch. Unsafe for
TL201's reasons: each worker holds a copy of the dataset, an `IterableDataset`
without per-worker sharding yields duplicates, and random augmentations draw from
per-worker seeds. Unlike TL201's, it is offered wherever the loader is: the script
cannot run as it is (it stops where the loader is built), so the fix cannot break a
script that ran; where workers cannot start (no `if __name__ == "__main__":` guard under
spawn, a lambda as `collate_fn`), see TL201's doc for what else the script needs.

Target torch: before PyTorch 2.0 `prefetch_factor` defaulted to 2 and only other
values raised, so with `target-torch` below 2.0 `prefetch_factor=2` is not
reported; before 1.7 neither option existed and the rule is silent.

Impact: Always high: PyTorch raises a ValueError where the loader is built, so the
script cannot run as written.

Unknown device: not read; PyTorch raises the ValueError whatever the device.

Sources: torch.utils.data.DataLoader source and docs ("prefetch_factor",
"persistent_workers"); PyTorch 2.0 release notes (prefetch_factor default None).
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.edits import WORKERS_NAME, workers_fix
from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule, bool_value, int_value


class DataLoaderWorkerOptionsWithoutWorkers(Rule):
    code = "TL204"
    name = "dataloader-worker-options-without-workers"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader", "auto_dataloader")  # ignite's factory too

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        target = module.target_torch
        if target is not None and target < (1, 7):
            return
        for loader in module.loaders.sites:
            if loader.opaque:
                continue
            workers = loader.arg("num_workers")
            if workers is not MISSING and int_value(workers) != 0:
                continue
            options = []
            if bool_value(loader.call.kwarg("persistent_workers")) is True:
                options.append("`persistent_workers=True`")
            prefetch = int_value(loader.call.kwarg("prefetch_factor"))
            if prefetch is not None and not (
                target is not None and target < (2, 0) and prefetch == 2
            ):
                options.append(f"`prefetch_factor={prefetch}`")
            if not options:
                continue
            yield self.diagnostic(
                loader.call.node,
                f"{' and '.join(options)} without worker processes: PyTorch raises ValueError "
                "when this DataLoader is built; add `num_workers`",
                fix=workers_fix(
                    loader, f"Set `num_workers={WORKERS_NAME}`", module.restarts_workers(loader)
                ),
            )
