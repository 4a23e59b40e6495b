"""TL202 dataloader-no-pin-memory: batches for the GPU are loaded into pageable memory.

What: a `torch.utils.data.DataLoader` without `pin_memory` (or with
`pin_memory=False` on a loader that feeds a training loop in the same file), in a
file that uses CUDA: it mentions a CUDA device (`"cuda"`, `.cuda()`,
`torch.cuda.*`), or is Lightning/Accelerate/DeepSpeed/transformers Trainer code,
which trains on the GPU when there is one.

Why: a host-to-device copy from pageable memory is staged through a pinned buffer
by the driver and cannot be asynchronous; with `pin_memory=True` the loader's pin
thread puts batches in page-locked memory, the copy runs at full PCIe bandwidth and
`non_blocking=True` copies (TL105) overlap compute. An explicit `pin_memory=False`
on an evaluation loader, or in a CPU-only file, is a choice and left alone.

Bad:
    loader = DataLoader(dataset, batch_size=64, shuffle=True)

Good:
    loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=torch.cuda.is_available())

Fix (safe): set `pin_memory=torch.cuda.is_available()`: pinned where there is a GPU
to copy to, and no warning (nor wasted page-locked memory) on CPU-only machines.
Safe: pinning changes where a batch lives in host memory, never its values.

Sources: PyTorch Performance Tuning Guide; CUDA semantics notes, "Use pinned memory
buffers"; torch.utils.data docs, "Memory Pinning".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule
from torchlint.semantic.syntax import bool_value


class DataLoaderNoPinMemory(Rule):
    code = "TL202"
    name = "dataloader-no-pin-memory"
    fix_safety = FixSafety.SAFE
    tokens = ("DataLoader",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not module.dataloaders or not module.uses_gpu:
            return
        for loader in module.dataloaders:
            if loader.opaque:
                continue
            pin = loader.arg("pin_memory")
            if pin is MISSING:
                what = "DataLoader without `pin_memory`"
            elif bool_value(pin) is False and loader.feeds_training:
                what = "`pin_memory=False` on a training DataLoader"
            else:
                continue
            spelled, imp = module.spell("torch.cuda.is_available", loader.call.scope)
            yield self.diagnostic(
                loader.call.node,
                f"{what} in a file that trains on the GPU: host-to-device copies go through "
                f"pageable memory and cannot overlap compute; set `pin_memory={spelled}()`",
                fix=fix(
                    f"Set `pin_memory={spelled}()`",
                    Applicability.SAFE,
                    Replace(
                        loader.call.node,
                        loader.set_arg("pin_memory", cst.parse_expression(f"{spelled}()")),
                    ),
                    imports=[imp] if imp is not None else [],
                ),
            )
