"""TL102 model-not-on-device: a training script never puts its model on the GPU.

What: a network (an `nn.Module` built in this file, whose parameters go to an
optimizer) is called in a training loop (a loop that runs a backward pass and an
optimizer step) and is never moved with `.to(...)`/`.cuda()` (nor wrapped in
`DataParallel`), in one of two situations:
- the batches it is called with are moved to a GPU in that loop
  (`images = images.to(device)` with a CUDA or accelerator device): on a machine
  with a GPU the first step fails with "Expected all tensors to be on the same
  device", and the usual "fix" of moving the batches back leaves the GPU unused;
- the file has no device handling at all: no device is named or moved to, no
  `torch.cuda`/`torch.accelerator` call, no `device=` argument, no
  `torch.set_default_device`, and it is not Lightning/Accelerate/DeepSpeed/
  transformers Trainer code (those place the model for you). The script then
  trains on the CPU even where a GPU is free;
- a GPU device is bound to a name before the model is built (`device =
  torch.device("cuda" if torch.cuda.is_available() else "cpu")`, at the top level or
  in the model's function), but nothing in the file is moved to a GPU, the model's
  batches are not moved, and the model is handed to no function (a helper could move
  it): the device was defined and forgotten, and the script trains on the CPU.

A multilayer perceptron of fewer than 10,000 parameters the file shows how to count
(`Linear` layers and parameter-free ones: the 8-6-4-1 network of a teaching script) is
left on the CPU in the last two situations: its step takes microseconds there, and a
GPU would add launch and copy overheads for nothing.

Why: PyTorch never moves anything by itself. Files that handle devices in some other
way (a helper, `torch.set_default_device`, a `device` argument) and batches moved to
a device we cannot name (`args.device`, which may be "cpu") are left alone: the move
may happen where we cannot see it.

Bad:
    model = torchvision.models.resnet18()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

Good:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torchvision.models.resnet18().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

Fix (unsafe): in a file with no device handling, define `device =
torch.device("cuda" if torch.cuda.is_available() else "cpu")` once after the imports,
insert `model = model.to(device)` right after the model is built (so before the
optimizer is created), and, in the same edit, move what the model is called with at
the top of its loader loops (`x = x.to(device, non_blocking=True)`, as TL101 would:
a model moved alone fails its first step on a GPU; non-blocking is safe on CUDA and
does nothing on the CPU). `torch.cuda.empty_cache()` alone is not device handling.
Unsafe
because results on the GPU differ numerically from the CPU (other kernels, TF32,
non-deterministic reductions) and GPU memory may not suffice. Where the batches are
already moved, the finding says which device to move the model to; no fix is
offered (the device expression may not exist yet where the model is built). Beside a
forgotten device, the same edit as in a file without devices, moving to that device:
only where it is named `device` and every call of the model can read it.

Impact: Always high: the model trains on the CPU (or the first step fails on a device
mismatch) while the GPU sits idle: the largest loss of speed there is.

Unknown device: silent where batches are moved to a device that cannot be named
(`args.device`, a parameter, `tensor.device`): they may stay on the CPU with the model,
and naming any device is device handling, so neither case of the rule holds; its fix
would move the model to a GPU the file never asked for.

Sources: PyTorch "Training a Classifier" tutorial, "Training on GPU"; CUDA semantics
notes, "Best practices: device-agnostic code".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import spell
from torchlint.fixes import (
    Applicability,
    Definition,
    Edit,
    FixSafety,
    Import,
    InsertAfter,
    InsertBefore,
    fix,
    statements,
)
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    CallSite,
    ModelSite,
    Origin,
    TorchModule,
    batch_names,
    unmoved_batch_tensors,
)


def device_definition(module: TorchModule) -> tuple[Definition, list[Import]]:
    """`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`, spelled
    the way this file imports torch, and the imports it needs."""
    device, imp1 = spell(module, "torch.device")
    available, imp2 = spell(module, "torch.cuda.is_available")
    code = f'device = {device}("cuda" if {available}() else "cpu")\n'
    return Definition("device", code), [i for i in (imp1, imp2) if i is not None]


def batch_moves(module: TorchModule, site: ModelSite) -> list[Edit] | None:
    """Once `site` is on `device`, the moves of everything it is called with, at the top
    of its loader loops (TL101's edits, made with the model's: on a GPU a model moved
    alone fails the first step). None unless every call of the model is in a loader loop
    with batch tensors (bare names) as its arguments, and the model is built exactly
    once, under no condition those loops do not share."""
    if len(site.symbol.bindings) != 1:
        return None
    calls = [c for c in module.calls if module.models.called(c) is site]
    if not calls:
        return None
    edits: list[Edit] = []
    moved: set[tuple[int, str]] = set()
    for call in calls:
        loop = next((lp for lp in reversed(call.ctx.loops) if lp.loaders), None)
        if loop is None or not all(i in loop.ctx.ifs for i in site.binding.ctx.ifs):
            return None
        args = call.node.args
        if not args or any(a.star for a in args):
            return None
        on_device: dict[int, Origin] = {
            id(c.node): (site, None) for c in loop.calls if module.models.called(c) is site
        }
        batch, needs = unmoved_batch_tensors(module, loop, on_device)
        if not all(isinstance(a.value, cst.Name) and a.value.value in needs for a in args):
            return None
        for name, tensor in batch.items():
            if name not in needs or (id(loop.node), name) in moved:
                continue
            moved.add((id(loop.node), name))
            # The device is CUDA or the CPU: a non-blocking copy is safe on both.
            code = statements(f"{name} = {name}.to(device, non_blocking=True)\n")
            edits.append((InsertAfter if tensor.after else InsertBefore)(tensor.anchor, code))
    return edits


def batches_moved(module: TorchModule, site: ModelSite) -> CallSite | None:
    """A move of a batch to a GPU in a training loop that calls the model."""
    for loop in module.training_loops:
        if not loop.loaders or not any(module.models.called(c) is site for c in loop.calls):
            continue
        names = batch_names(module, loop)
        for call in loop.calls:
            receiver = call.receiver
            if isinstance(receiver, cst.Subscript):
                receiver = receiver.value
            if call.method not in ("to", "cuda") or not isinstance(receiver, cst.Name):
                continue
            device = module.devices.move(call) if receiver.value in names else None
            if device is not None and device.is_gpu:
                return call
    return None


def unused_gpu_device(module: TorchModule, site: ModelSite) -> CallSite | None:
    """A GPU device the file binds to a name (`device = torch.device("cuda" if ...)`)
    before the model is built, in its function or at the top level, where nothing in the
    file is moved to a GPU and the model is passed to no function (a helper could move
    it): the device is defined, then forgotten."""
    if any((device := module.devices.move(c)) is not None and device.is_gpu for c in module.calls):
        return None
    if any(_passes(call, site, module) for call in module.calls):
        return None
    built = site.construction
    for call in module.calls_to("torch.device"):
        binding = module.binding_of(call.node)
        device = module.devices.classify(call.node, call.scope)
        if binding is None or device is None or not device.is_gpu:
            continue
        if call.ctx.function not in (None, built.ctx.function) or call.order > built.order:
            continue
        return call
    return None


def _passes(call: CallSite, site: ModelSite, module: TorchModule) -> bool:
    """`call` hands the model itself to a function (`place(model, device)`); calling the
    model, or giving its parameters to an optimizer, does not."""
    if module.models.called(call) is site:
        return False
    return any(module.models.of(a.value, call.scope) is site for a in call.node.args)


class ModelNotOnDevice(Rule):
    code = "TL102"
    name = "model-not-on-device"
    fix_safety = FixSafety.UNSAFE
    tokens = ("backward",)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.calls_to("torch.set_default_device"):
            self.pass_over(None, "the file sets a default device (`torch.set_default_device`)")
            return
        handles = None
        for site in module.models.sites:
            if not site.is_network or site.wrappers or not module.trained(site):
                continue
            if not module.training.optimized(site) or not module.models.holds_only(site):
                continue
            if any(module.devices.move(m) is not None for m in site.moves):
                self.pass_over(site.construction.node, "it is moved to a device")
                continue
            moved = batches_moved(module, site)
            if moved is not None:
                yield self.diagnostic(
                    site.construction.node,
                    f"`{site.name}` is trained on batches moved to a GPU "
                    f"(`{module.module.code_for_node(moved.node)}`) but is never moved itself: "
                    "on a GPU the first step fails with a device mismatch; move the model to "
                    "the same device after building it",
                )
                continue
            if module.networks.small_perceptron(site):
                self.pass_over(site.construction.node, "a few thousand weights: a CPU is as fast")
                continue  # a few thousand weights: the CPU runs a step faster than a GPU
            if handles is None:
                handles = module.placement.handles_devices()
            moves = batch_moves(module, site)
            if moves is None:
                continue
            if handles:
                device = unused_gpu_device(module, site)
                if device is not None:
                    yield self._forgotten(module, site, device, moves)
                continue
            statement = site.binding.ctx.statement
            if not isinstance(statement, cst.SimpleStatementLine) or not any(
                small is site.binding.node for small in statement.body
            ):
                continue
            definition, imports = device_definition(module)
            yield self.diagnostic(
                site.construction.node,
                f"`{site.name}` is trained but never moved to a GPU, and nothing in this file "
                "selects a device: it trains on the CPU; define `device` and move the model "
                f"(`{site.name} = {site.name}.to(device)`) and its batches",
                fix=fix(
                    f"Move `{site.name}` and its batches to `device` (cuda when available)",
                    Applicability.UNSAFE,
                    InsertAfter(statement, statements(f"{site.name} = {site.name}.to(device)\n")),
                    *moves,
                    imports=imports,
                    definitions=[definition],
                ),
            )

    def _forgotten(
        self, module: TorchModule, site: ModelSite, device: CallSite, moves: list[Edit]
    ) -> Diagnostic:
        """The model and its batches left on the CPU beside a GPU device the file defines.
        Fixed where the device is called `device` and every call of the model can read it
        (it is bound at the top level, or in the function that calls the model)."""
        binding = module.binding_of(device.node)
        assert binding is not None
        name = binding.symbol.name
        statement = site.binding.ctx.statement
        calls = [c for c in module.calls if module.models.called(c) is site]
        visible = device.ctx.function is None or all(
            c.ctx.function is device.ctx.function for c in calls
        )
        fixed = None
        if name == "device" and visible and isinstance(statement, cst.SimpleStatementLine):
            fixed = fix(
                f"Move `{site.name}` and its batches to `{name}`",
                Applicability.UNSAFE,
                InsertAfter(statement, statements(f"{site.name} = {site.name}.to(device)\n")),
                *moves,
            )
        return self.diagnostic(
            site.construction.node,
            f"`{site.name}` is trained but never moved to `{name}`, the GPU device this file "
            f"defines, and neither are its batches: it trains on the CPU; move the model "
            f"(`{site.name} = {site.name}.to({name})`) and its batches",
            fix=fixed,
        )
