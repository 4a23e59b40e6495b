"""TL105 blocking-host-to-device-copy: a pinned batch is copied to the GPU synchronously.

What: in a loop over a DataLoader that pins memory (`pin_memory=True`,
`pin_memory=torch.cuda.is_available()`, or a constant, option or environment switch that
is True by default: yolov5's `PIN_MEMORY = str(os.getenv("PIN_MEMORY", "true")).lower()
== "true"`), also a DataLoader subclass that takes DataLoader's arguments, a
`.to(<device>)` or `.cuda()` of a batch (a name bound by the loop target, an item of one
such as `batch["x"]`, or a name the loop's body binds to such an item first: `images,
masks = batch["image"], batch["mask"]`) without `non_blocking=`. Not reported inside a
`with` block of a timer given the device (ultralytics' `Profile(device=...)`, a
`*Timer`, `*Stopwatch`): it synchronizes the device where the block begins and ends, so
the copy has nothing to overlap.

Why: pinning memory only pays off with asynchronous copies. Without
`non_blocking=True` every host-to-device copy blocks the Python thread until the
transfer is done, so the copy of the next tensor cannot overlap the previous
one, nor queued kernels the copy.

Bad:
    loader = DataLoader(train_set, batch_size=64, pin_memory=True)
    for x, y in loader:
        x, y = x.to(device), y.to(device)

Good:
    loader = DataLoader(train_set, batch_size=64, pin_memory=True)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)

Good, where the device may be an accelerator other than CUDA:
    device = torch.accelerator.current_accelerator()
    loader = DataLoader(train_set, batch_size=64, pin_memory=True)
    for x, y in loader:
        x = x.to(device, non_blocking=device.type == "cuda")

Fix (safe): add `non_blocking=True` where the destination is CUDA (`.cuda()`,
`"cuda"`, or a device that is CUDA where there is one and the CPU otherwise, where the
option does nothing). Safe for CUDA host-to-device copies: later work on the same
stream is ordered after the copy, and the caching host allocator keeps the pinned
source alive until it completes. That argument holds for CUDA only: a non-blocking
copy to MPS can read its source after it is freed (open PyTorch issues), so where the
device is chosen at run time (`torch.accelerator.current_accelerator()`, `"mps"` on
some path, a `--device` option) the fix writes a value that is true on CUDA only,
`non_blocking=device.type == "cuda"` for a `torch.device`,
`non_blocking=torch.device(args.device).type == "cuda"` for what may be a string or an
index (a rank); where the device is not a name, no fix is offered. Never applied to
`.cpu()` or `.to("cpu")` (a non-blocking device-to-host copy may be read before it has
landed). Files where Lightning, Accelerate, DeepSpeed or the transformers Trainer move
batches are left alone.

Impact: low where the copy has nothing to overlap because the host waits for the GPU
right after it anyway: the next statement reads a tensor on the host (`.item()`,
`.cpu()`, `.tolist()`, `.numpy()`), or the loop over the loader is an evaluation loop
(no optimizer step) that makes such a read on every batch (not under `if i % N == 0:`;
an `assert` on a reduction of a moved batch tensor, `assert mask.min() >= 0`, is one);
TL401 asks to remove per-step syncs in training loops only, so there the sync stays;
or a training loop makes such a read every step (`running += loss.item()`): the GPU is
idle when the next copy starts, so until TL401's sync goes the copy has nothing to
overlap.
Low too where the batches are small images: a torchvision MNIST/CIFAR-like dataset (at
most 64x64 after a resize or crop of a constant size) whose batches, at the loader's
constant `batch_size`, hold at most 1 MB: the copy takes microseconds. Training loops
over other data, and evaluation loops that keep their results on the GPU, stay high.

Unknown device: reported where a pinned batch is copied to a device that cannot be
named; where the device is a name the fix writes `non_blocking=torch.device(<name>).type
== "cuda"` (true on CUDA only; on the CPU it does nothing). Silent in a loop over a
parameter no visible call passes: whether its loader pins memory is not known.

Sources: PyTorch Performance Tuning Guide; CUDA semantics notes, "Use pinned memory
buffers"; "A guide on good usage of non_blocking and pin_memory() in PyTorch".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from torchlint.edits import non_blocking, set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    CallSite,
    Loop,
    TorchModule,
    blocking_copies,
    dotted_name,
    host_read,
    keyword,
    read_right_after,
    tiny_batches,
)

TIMERS = re.compile(r"(Profile|Timer|Stopwatch)\w*$")


# Why a blocking copy of a loader's batch is not reported.
UNPINNED = (
    "its loader does not pin memory: from pageable memory `non_blocking` overlaps nothing "
    "(TL202 says where to pin it)"
)


class BlockingHostToDeviceCopy(Rule):
    code = "TL105"
    name = "blocking-host-to-device-copy"
    fix_safety = FixSafety.SAFE
    tokens = ("DataLoader",)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        seen: set[int] = set()
        for loop in module.loops:
            if not loop.loaders:
                continue
            if not all(module.loaders.pins_memory(loader) for loader in loop.loaders):
                for call in blocking_copies(module, loop) if self.explaining else ():
                    self.pass_over(call.node, UNPINNED)
                continue
            nothing_to_overlap = _loop_low(module, loop)
            for call in blocking_copies(module, loop):
                if id(call.node) in seen:
                    continue
                if _timed(module, call):
                    self.pass_over(call.node, "the copy is timed: a blocking copy measures it")
                    continue
                seen.add(id(call.node))
                found = non_blocking(module, call)
                spelled = "True" if found is None else module.module.code_for_node(found[0])
                message = (
                    "the batch comes from a pinned-memory DataLoader but is copied to the GPU "
                    f"synchronously; add `non_blocking={spelled}` so the copy overlaps other "
                    "work" + (" where the device is CUDA" if found is None else "")
                )
                low = (
                    "the next statement waits for the GPU anyway (`.item()`, `.cpu()`)"
                    if read_right_after(module, call)
                    else nothing_to_overlap
                )
                yield self.diagnostic(
                    call.node,
                    message if low is None else f"{message} (low impact: {low})",
                    fix=None
                    if found is None
                    else fix(
                        f"Add `non_blocking={spelled}`",
                        Applicability.SAFE,
                        Replace(call.node, set_kwarg(call.node, "non_blocking", found[0])),
                        imports=[found[1]] if found[1] is not None else [],
                    ),
                    impact=Impact.HIGH if low is None else Impact.LOW,
                )


def _timed(module: TorchModule, call: CallSite) -> bool:
    """The copy runs in a `with` block of a timer given the device (`with dt[0]:` with `dt
    = Profile(device=device), ...`: ultralytics' `Profile` synchronizes the device where
    the block begins and ends): nothing is left for a non-blocking copy to overlap."""
    for item in (i for w in call.ctx.withs for i in w.items):
        node = item.item.value if isinstance(item.item, cst.Subscript) else item.item
        for value, _ in module.values.origins(node, call.scope):
            made = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
            if any(
                isinstance(c, cst.Call)
                and TIMERS.search(dotted_name(c.func) or "")
                and keyword(c, "device") is not MISSING
                for c in made
            ):
                return True
    return False


def _loop_low(module: TorchModule, loop: Loop) -> str | None:
    """Why no copy of the loop has anything to overlap (a copy followed by a host read
    has nothing either): the batches are of small images (MNIST, CIFAR: a copy of
    microseconds), or an evaluation loop (no optimizer step) reads a tensor on the host
    every batch (TL401 does not ask to remove that sync outside training)."""
    tiny = tiny_batches(module, loop.loaders)
    if tiny is not None:
        return tiny
    read = host_read(module, loop)
    if read is not None and not loop.is_training:
        return f"an evaluation loop that waits for the GPU every batch (`.{read.method}()`)"
    if read is not None:
        return (
            f"the loop waits for the GPU every step anyway (`.{read.method}()`): the copy "
            "lands on an idle GPU until that sync goes (TL401)"
        )
    return None
