"""TL606 model-not-compiled: a GPU training loop runs its model eagerly.

What: a training loop calls a network that is moved to a GPU (reported once per file,
at the first such network), in a file that never calls `torch.compile` (nor a model's
`.compile()`, nor `torch.jit.script`/`trace`).
Advice, so off by default (enable it with `--extend-select TL606`): whether compiling
pays depends on facts known at run time (a PyTorch 2 build with a working compiler,
Triton on the GPU; input shapes that do not change at every step; a run long enough
to repay the compile time; code without constructs that break the graph). Not reported
with `--target-torch` below 2.0. Files managed by Lightning, Accelerate, DeepSpeed or
the transformers Trainer are not checked. Not reported either: networks whose `forward`
runs a Python loop over a length read from its inputs (a decoder stepping through
`range(1, trg.shape[0])` or `range(max_len)`): `torch.compile` unrolls the loop and
compiles again for each new length, and each step is a few small kernels fusion cannot
join across; and toy networks (under 1M parameters together, counted from their
layers' sizes; a network whose size the file does not show counts as large), whose
steps are bound by Python and launch overhead that one compile does not repay.

Why: in eager mode every operation of the forward and backward pass is a separate
kernel that reads its inputs from GPU memory and writes its result back.
`torch.compile` captures the model's graph and generates fused kernels (pointwise
operations, normalizations, activations folded into one pass), and with
`mode="reduce-overhead"` replays them as CUDA graphs, removing launch overhead. The
Performance Tuning Guide's "Fuse operations" and "Use CUDA Graphs" items both point to
it; speed-ups of 1.3-2x in training are typical for the models PyTorch benchmarks.

Bad:
    model = torchvision.models.resnet50().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    model = torchvision.models.resnet50().cuda()
    model.compile()  # in place: state_dict keys unchanged (PyTorch 2.2+)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix: none. Compiling can fail where eager mode ran (no C++ compiler or Triton, an
unsupported operation), and the first steps take minutes: a choice for the user.

Impact: Always high: the networks where compiling gains nothing measurable (toys) or
recompiles at every new length (Python time loops) are not reported; elsewhere fused
kernels shorten every step of the training.

Unknown device: silent, as only networks moved to a GPU are checked; the gains it cites
(fused kernels, CUDA graphs) are a GPU's, and compiling can fail where eager mode ran.

Sources: PyTorch Performance Tuning Guide, "Fuse operations" and "Use CUDA Graphs";
PyTorch docs, `torch.compile` and `torch.nn.Module.compile`; "Introduction to
torch.compile" tutorial.
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule, toy

COMPILERS = ("torch.compile", "torch.jit.script", "torch.jit.trace")


class ModelNotCompiled(Rule):
    code = "TL606"
    name = "model-not-compiled"
    fix_safety = FixSafety.NONE
    default_enabled = False
    tokens = ("cuda", "accelerator")
    min_torch = (2, 0)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.calls_to(*COMPILERS) or any(
            c.receiver is not None and module.models.of(c.receiver, c.scope) is not None
            for c in module.method_calls("compile")
        ):
            return
        networks = module.networks
        sites = [s for s in module.trained_on_gpu if not networks.steps_over_input(s)]
        if not sites or toy(networks.parameters(s) for s in sites):
            return
        others = f" (and {', '.join(f'`{s.name}`' for s in sites[1:])})" if sites[1:] else ""
        assert sites[0].construction is not None  # `trained_on_gpu` holds sites built here
        yield self.diagnostic(
            sites[0].construction.node,
            f"`{sites[0].name}`{others} runs in a GPU training loop in eager mode, one "
            "kernel per operation; `model.compile()` (or `torch.compile(model)`) fuses them into "
            "generated kernels, often 1.3-2x faster once compiled",
        )
