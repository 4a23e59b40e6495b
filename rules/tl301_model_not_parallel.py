"""TL301 model-not-parallel: a large CUDA model trains on one GPU, however many there are.

What: a network worth spreading over GPUs is moved to a GPU (`.cuda()`, `.to("cuda")`,
`.to(device)` with a CUDA or accelerator device) and trained (called in a loop that
runs a backward pass and an optimizer step), and nothing in the file spreads it: no
`DataParallel`, `DistributedDataParallel`, FSDP, `torch.distributed`. One finding per
file, naming every such network. Worth spreading means all of:
- a real network: a model-zoo architecture (torchvision, timm, torch.hub,
  `from_pretrained`) or a network of the file with at least 10M parameters, counted
  from the sizes its layers are built with (a network whose sizes cannot be read is
  left alone); never a loss or a layer without parameters;
- batch first: every argument of its calls in the training loop is computed from the
  batch the loader yields, and it holds no recurrent or transformer layer without
  `batch_first=True` (`DataParallel` splits every tensor argument along dimension 0: a
  hidden state `(layers, batch, hidden)` or a `(time, batch, ...)` sequence would be
  cut along the wrong axis);
- a batch of at least 16 where the loader's batch size is a constant (split across
  GPUs, smaller batches leave each one too little work).
Files whose devices are managed by PyTorch Lightning, Accelerate, DeepSpeed or the
transformers Trainer are not checked, nor notebooks (one process runs them: no torchrun,
and `DataParallel` is what PyTorch discourages), nor files where nothing says the script
runs on several GPUs: it must count them (`torch.cuda.device_count()`) or name their
number, list or a launcher's rank in an option, variable, key or string (`--ngpu`,
`n_gpu`, `gpu_ids`, `world_size`, "LOCAL_RANK"); a single-GPU script (`--gpu 0`) has no
other GPU to use.

Why: on a machine with several GPUs, plain PyTorch uses only the one the model is
on; the others idle. `torch.nn.DataParallel` is the one-line way to use them all
from one process; `DistributedDataParallel`, one process per GPU started by
`torchrun`, scales best (no per-step model replication, no single-process GIL
bottleneck) and is what the PyTorch docs recommend.

Bad:
    device = torch.device("cuda")
    n_gpu = torch.cuda.device_count()
    model = torchvision.models.resnet50().to(device)
    loader = DataLoader(train_set, batch_size=256, shuffle=True)
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()

Good (one process, all GPUs):
    device = torch.device("cuda")
    n_gpu = torch.cuda.device_count()
    model = torchvision.models.resnet50().to(device)
    if n_gpu > 1:
        model = torch.nn.DataParallel(model)
    loader = DataLoader(train_set, batch_size=256, shuffle=True)
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()

Best: `torchrun --nproc-per-node=gpu train.py` with
`dist.init_process_group("nccl")`, `DistributedDataParallel(model,
device_ids=[local_rank])` and a `DistributedSampler` (see TL302).

Fix (unsafe): after each network's device move, insert
`if torch.cuda.device_count() > 1: model = torch.nn.DataParallel(model)`. It does
nothing on a machine with one GPU or none. Not offered for a network the file calls a
method on that DataParallel does not provide (`model.generate()`: it would need
`model.module.generate()`). Unsafe because with several GPUs the model becomes a
wrapper: `state_dict()` keys gain a `module.` prefix (checkpoints no longer load into
an unwrapped model and vice versa), custom attributes and methods must be reached
through `model.module`, and BatchNorm statistics are computed per replica on a slice
of the batch.

Impact: always high where reported: the script says it runs on several GPUs and trains
a large network on one of them, leaving the others idle.

Unknown device: silent, as only a network moved to a GPU (CUDA or an accelerator, on
some branch) is checked; a device that cannot be named may be the CPU, where there are
no other GPUs to use.

Sources: PyTorch docs, "Optional: Data Parallelism" tutorial; CUDA semantics,
"Use nn.parallel.DistributedDataParallel instead of multiprocessing or
nn.DataParallel"; `torch.nn.DataParallel` docs.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import spell
from torchlint.fixes import Applicability, FixSafety, InsertAfter, fix, statements
from torchlint.rule import TRAINS, Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    CallSite,
    ModelSite,
    TorchModule,
    derived_from_batch,
    millions,
    names_read,
)

# Anything of these in a file means someone already thought about several GPUs.
PARALLEL = (
    "torch.nn.DataParallel",
    "torch.nn.parallel",
    "torch.distributed",
    "torch.multiprocessing.spawn",
)


# nn.Module methods DataParallel answers itself; any other method called on the model
# (`model.generate()`, `model.save_pretrained()`) would need `model.module.` once wrapped.
MODULE_METHODS = {
    "train", "eval", "parameters", "named_parameters", "buffers", "named_buffers",
    "children", "named_children", "modules", "named_modules", "state_dict",
    "load_state_dict", "to", "cuda", "cpu", "half", "float", "double", "bfloat16",
    "zero_grad", "requires_grad_", "apply", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_buffer",
    "register_parameter", "add_module", "get_submodule", "type", "forward",
}  # fmt: skip


def parallel_aware(module: TorchModule) -> bool:
    """The file uses or imports DataParallel, DDP, FSDP or torch.distributed."""
    names = [*module.qualnames_called, *module.imported_modules]
    return any(n == p or n.startswith(p + ".") for n in names for p in PARALLEL)


MIN_PARAMETERS = 10_000_000
MIN_BATCH = 16


class ModelNotParallel(Rule):
    code = "TL301"
    name = "model-not-parallel"
    fix_safety = FixSafety.UNSAFE
    tokens = ("cuda", "accelerator")
    pattern = TRAINS  # a step loop of its own (or the project engages the file)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if parallel_aware(module):
            self.pass_over(None, "the file already places work on several GPUs")
            return
        if module.notebook or not module.workload.multi_gpu:
            self.pass_over(None, "nothing says it runs on a host with several GPUs")
            return  # a notebook, or a script nothing says runs on several GPUs
        found: list[tuple[ModelSite, CallSite, str]] = []
        for site in module.models.sites:
            if not site.is_network or site.wrappers or not module.trained(site):
                continue
            move = next((m for m in site.moves if _to_gpu(module, m)), None)
            if move is None or module.networks.sequence_first(site):
                continue
            size = module.networks.parameters(site)
            if module.networks.well_known(site):
                what = "a model-zoo network"
            elif size is not None and size >= MIN_PARAMETERS:
                what = f"{millions(size)} parameters"
            else:
                continue
            if _batch_first_and_large(module, site):
                found.append((site, move, what))
        if not found:
            return
        names = " and ".join(f"`{site.name}` ({what})" for site, _, what in found)
        edits, imports = [], []
        for site, move, _ in found:
            statement = move.ctx.statement
            if not isinstance(statement, cst.SimpleStatementLine) or not _wrappable(module, site):
                continue
            count, imp1 = spell(module, "torch.cuda.device_count", move.scope)
            wrapper, imp2 = spell(module, "torch.nn.DataParallel", move.scope)
            code = f"if {count}() > 1:\n    {site.name} = {wrapper}({site.name})\n"
            edits.append(InsertAfter(statement, statements(code)))
            imports += [i for i in (imp1, imp2) if i is not None]
        yield self.diagnostic(
            found[0][1].node,
            f"{names} train{'s' if len(found) == 1 else ''} on one GPU and nothing in this "
            "file uses the others; wrap it in `DataParallel` when "
            "`torch.cuda.device_count() > 1`, or for best scaling run one process per GPU "
            "with `DistributedDataParallel` and torchrun",
            fix=fix(
                "Wrap in `DataParallel` when several GPUs are visible",
                Applicability.UNSAFE,
                *edits,
                imports=imports,
            )
            if edits
            else None,
        )


def _to_gpu(module: TorchModule, move: CallSite) -> bool:
    device = module.devices.move(move)
    return device is not None and device.is_gpu


def _batch_first_and_large(module: TorchModule, site: ModelSite) -> bool:
    """Every call of the network in a training loop passes only what is computed from
    the loader's batch, and the batch, where a constant, has at least MIN_BATCH samples."""
    calls = [c for loop in module.step_loops for c in loop.calls if module.models.called(c) is site]
    if not calls:
        return False
    for call in calls:
        feeding = next((lp for lp in reversed(call.ctx.loops) if lp.loaders), None)
        if feeding is None:
            return False
        derived = derived_from_batch(module, feeding)
        if not call.node.args or not all(
            derived & set(names_read(arg.value)) for arg in call.node.args
        ):
            return False
        for loader in feeding.loaders:
            size = loader.arg("batch_size")
            constant = (
                module.values.constant(size, loader.call.scope) if size is not MISSING else None
            )
            if (
                constant is not None
                and isinstance(constant.value, int)
                and constant.value < MIN_BATCH
            ):
                return False
    return True


def _wrappable(module: TorchModule, site: ModelSite) -> bool:
    """Every method the file calls on the model still works on a DataParallel."""
    return all(call.method in MODULE_METHODS for call in module.models.method_calls_on(site))
