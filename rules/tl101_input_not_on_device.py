"""TL101 input-not-on-device: a batch from the DataLoader reaches a model on the GPU unmoved.

What: in a loop over a DataLoader, a tensor bound by the loop target (`for x, y in
loader`) is passed to a model that the file moved to a device (`model.to(device)`,
`model.cuda()`), or to a loss (`criterion(...)`, `F.cross_entropy(...)`) together
with that model's output, without a `.to(...)`/`.cuda()` on it first.

Why: a DataLoader yields CPU tensors. Feeding them to a CUDA model raises "Expected
all tensors to be on the same device" on the first step; the usual "fix" of moving
the model back to the CPU leaves the GPU unused. Moving each batch once, at the top
of the loop body, is the pattern of the PyTorch tutorials.

Only what can be proven is reported: the model must be moved unconditionally (a
move under `if args.cuda:` would need the same condition) and before the loop, the
device expression must be visible where the loop is, and the name must not be
rebound in the loop. Batch tensors are the names a loop target unpacks
(`for x, y in loader`, through `enumerate`/`tqdm`/`zip`) or that a first-level
`x, y = batch` unpacks; a whole batch (`for batch in loader`) may be a dict or a
list, and is left alone. Besides model and loss arguments, a batch tensor compared
or combined with a value computed from the model's output (`predicted == labels`)
counts too. Models wrapped in `DataParallel`/`DistributedDataParallel` (which
scatter CPU inputs themselves) and files where Lightning, Accelerate, DeepSpeed or
the transformers Trainer place batches on the device are never reported.

Bad:
    device = torch.device("cuda")
    model = torchvision.models.resnet18().to(device)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for images, labels in train_loader:
        loss = criterion(model(images), labels)

Good:
    device = torch.device("cuda")
    model = torchvision.models.resnet18().to(device)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for images, labels in train_loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        loss = criterion(model(images), labels)

Fix (safe): insert `name = name.to(<the model's device>)` (or `name.cuda()` when the
model was moved with `.cuda()`) at the top of the loop body for each such name, with
`non_blocking=True` when the loader pins memory and the device is CUDA (a value true
on CUDA only where the device is chosen at run time: see TL105). Safe: it is a no-op
where the tensor already is on that device, and the original crashes otherwise.

Impact: Always high: the script stops with a device mismatch at its first step on a GPU,
or, "fixed" by keeping the model on the CPU, never uses the GPU.

Unknown device: reported where the model is moved to a device that cannot be named
(`args.device`, a parameter, `tensor.device`): that is still a move, and the fix moves
the batches to the same device expression, which changes nothing where it is the CPU.
Silent in a loop over a parameter no visible call passes (a library function's
`loader`): its batches are not known to come from a DataLoader.

Sources: PyTorch "Training a Classifier" tutorial, "Training on GPU"; CUDA semantics
notes, "Use pinned memory buffers".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import move_statement, pinned_by_workers_fix
from torchlint.fixes import Applicability, FixSafety, InsertAfter, InsertBefore, fix, statements
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import Origin, TorchModule, device_move, unmoved_batch_tensors


class InputNotOnDevice(Rule):
    code = "TL101"
    name = "input-not-on-device"
    fix_safety = FixSafety.SAFE
    tokens = ("DataLoader",)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for loop in module.loops:
            if not loop.loaders or not isinstance(loop.node, cst.For):
                continue
            on_device: dict[int, Origin] = {}
            for call in loop.calls:
                site = module.models.called(call)
                if site is None or not site.is_network or site.wrappers:
                    continue  # DataParallel/DDP scatter CPU inputs themselves
                move = device_move(module, site, loop)
                if move is not None:
                    on_device[id(call.node)] = (site, move)
            if not on_device:
                continue
            batch, needs = unmoved_batch_tensors(module, loop, on_device)
            pinned = all(
                module.loaders.pins_memory(loader) or pinned_by_workers_fix(module, loader)
                for loader in loop.loaders
            )
            for name, tensor in batch.items():
                if name not in needs:
                    continue
                node, (site, move) = needs[name]
                assert move is not None
                code, imp = move_statement(module, name, move, pinned)
                where = "after the unpacking" if tensor.after else "at the top of the loop"
                edit = (InsertAfter if tensor.after else InsertBefore)(
                    tensor.anchor, statements(code)
                )
                yield self.diagnostic(
                    node,
                    f"`{name}` comes from the DataLoader on the CPU but `{site.name}` was moved "
                    f"to a device: move the batch first (`{code.strip()}` {where})",
                    fix=fix(
                        f"Move `{name}` to the model's device",
                        Applicability.SAFE,
                        edit,
                        imports=[imp] if imp is not None else [],
                    ),
                )
