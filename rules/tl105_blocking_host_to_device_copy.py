"""TL105 blocking-host-to-device-copy: a pinned batch is copied to the GPU synchronously.

What: in a loop over a DataLoader that pins memory (`pin_memory=True`, or
`pin_memory=torch.cuda.is_available()`), a `.to(<device>)` or `.cuda()` of a batch
(a name bound by the loop target, or an item of one such as `batch["x"]`) without
`non_blocking=`.

Why: pinning memory only pays off with asynchronous copies. Without
`non_blocking=True` every host-to-device copy blocks the Python thread until the
transfer is done, so the copy of the next tensor cannot overlap the previous
one, nor queued kernels the copy.

Bad:
    loader = DataLoader(train_set, batch_size=64, pin_memory=True)
    for x, y in loader:
        x, y = x.to(device), y.to(device)

Good:
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)

Fix (safe): add `non_blocking=True`. Safe for host-to-device copies: later work on
the same stream is ordered after the copy, and the caching host allocator keeps the
pinned source alive until it completes. Never applied to `.cpu()` or `.to("cpu")`
(a non-blocking device-to-host copy may be read before it has landed). Files where
Lightning, Accelerate, DeepSpeed or the transformers Trainer move batches are left
alone.

Sources: PyTorch Performance Tuning Guide; CUDA semantics notes, "Use pinned memory
buffers"; "A guide on good usage of non_blocking and pin_memory() in PyTorch".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule
from torchlint.semantic.batches import batch_names
from torchlint.semantic.syntax import bool_value, dotted_name


class BlockingHostToDeviceCopy(Rule):
    code = "TL105"
    name = "blocking-host-to-device-copy"
    fix_safety = FixSafety.SAFE
    tokens = ("DataLoader",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.managed:
            return
        seen: set[int] = set()
        for loop in module.loops:
            if not loop.loaders or not all(module.pins_memory(loader) for loader in loop.loaders):
                continue
            names = batch_names(module, loop)
            if not names:
                continue
            for call in loop.calls:
                if call.method not in ("to", "cuda") or id(call.node) in seen:
                    continue
                receiver = call.receiver
                if isinstance(receiver, cst.Subscript):
                    receiver = receiver.value
                if receiver is None or dotted_name(receiver) not in names:
                    continue
                if call.has_star_args or call.kwarg("non_blocking") is not MISSING:
                    continue
                if any(bool_value(a) is not None for a in call.positional):
                    continue  # `x.to(device, None, True)`: non_blocking given positionally
                found = module.move(call)
                if found is None or found.is_cpu:
                    continue
                seen.add(id(call.node))
                yield self.diagnostic(
                    call.node,
                    "the batch comes from a pinned-memory DataLoader but is copied to the GPU "
                    "synchronously; add `non_blocking=True` so the copy overlaps other work",
                    fix=fix(
                        "Add `non_blocking=True`",
                        Applicability.SAFE,
                        Replace(call.node, set_kwarg(call.node, "non_blocking", cst.Name("True"))),
                    ),
                )
