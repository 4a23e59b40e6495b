"""TL301 model-not-parallel: a CUDA model trains on one GPU, however many there are.

What: a model is moved to CUDA (`.cuda()`, `.to("cuda")`, `.to(device)` with a CUDA
device) and called in a training loop, and nothing in the file spreads it over
GPUs: no `DataParallel`, `DistributedDataParallel`, FSDP, `torch.distributed`
(`init_process_group`...). Files whose devices are managed by PyTorch Lightning,
Accelerate, DeepSpeed or the transformers Trainer are not checked.

Why: on a machine with several GPUs, plain PyTorch uses only the one the model is
on; the others idle. `torch.nn.DataParallel` is the one-line way to use them all
from one process; `DistributedDataParallel`, one process per GPU started by
`torchrun`, scales best (no per-step model replication, no single-process GIL
bottleneck) and is what the PyTorch docs recommend.

Bad:
    model = Net().to(device)
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()

Good (one process, all GPUs):
    model = Net().to(device)
    if torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)

Best: `torchrun --nproc-per-node=gpu train.py` with
`dist.init_process_group("nccl")`, `DistributedDataParallel(model,
device_ids=[local_rank])` and a `DistributedSampler` (see TL302).

Fix (unsafe): after the device move, insert
`if torch.cuda.device_count() > 1: model = torch.nn.DataParallel(model)`. It does
nothing on a machine with one GPU or none. Not offered when the file calls a method
on the model that DataParallel does not provide (`model.generate()`: it would need
`model.module.generate()`). Unsafe because with several GPUs the
model becomes a wrapper: `state_dict()` keys gain a `module.` prefix (checkpoints
no longer load into an unwrapped model and vice versa), custom attributes and
methods must be reached through `model.module`, and BatchNorm statistics are
computed per replica on a slice of the batch.

Sources: PyTorch docs, "Optional: Data Parallelism" tutorial; CUDA semantics,
"Use nn.parallel.DistributedDataParallel instead of multiprocessing or
nn.DataParallel"; `torch.nn.DataParallel` docs.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, InsertAfter, fix, statements
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import ModelSite, TorchModule

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


class ModelNotParallel(Rule):
    code = "TL301"
    name = "model-not-parallel"
    fix_safety = FixSafety.UNSAFE
    tokens = ("cuda", "accelerator")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.managed or parallel_aware(module):
            return
        for site in module.models:
            if not site.is_network or not module.trained(site):
                continue
            move = next((m for m in site.moves if _to_gpu(module, m)), None)
            if move is None:
                continue
            statement = move.ctx.statement
            count, imp1 = module.spell("torch.cuda.device_count", move.scope)
            wrapper, imp2 = module.spell("torch.nn.DataParallel", move.scope)
            yield self.diagnostic(
                move.node,
                f"`{site.name}` trains on one GPU and nothing in this file uses the others; "
                f"wrap it in `DataParallel` when `torch.cuda.device_count() > 1`, or for best "
                "scaling run one process per GPU with `DistributedDataParallel` and torchrun",
                fix=fix(
                    f"Wrap `{site.name}` in `DataParallel` when several GPUs are visible",
                    Applicability.UNSAFE,
                    InsertAfter(
                        statement,
                        statements(
                            f"if {count}() > 1:\n    {site.name} = {wrapper}({site.name})\n"
                        ),
                    ),
                    imports=[i for i in (imp1, imp2) if i is not None],
                )
                if isinstance(statement, cst.SimpleStatementLine) and _wrappable(module, site)
                else None,
            )


def _to_gpu(module: TorchModule, move) -> bool:
    device = module.move(move)
    return device is not None and device.is_gpu


def _wrappable(module: TorchModule, site: ModelSite) -> bool:
    """Every method the file calls on the model still works on a DataParallel."""
    return all(call.method in MODULE_METHODS for call in module.method_calls_on(site))
