"""TL605 optimizer-not-fused: Adam, AdamW or SGD updates a GPU model kernel by kernel.

What: `torch.optim.Adam(...)`, `AdamW(...)` or `SGD(...)` given the parameters of a
network that is moved to a GPU and trained in this file, without `fused=` or `foreach=`.
Advice, so off by default (enable it with `--extend-select TL605`): the fused kernels
need PyTorch 2.4 or newer for `SGD` and for parameters on the CPU (only `--target-torch`
tells which PyTorch runs the code; an older target silences the rule), and what they
save depends on how many parameter tensors the model has.

Why: by default the optimizers update all parameters with the "foreach" kernels, a few
launches per parameter group and operation. `fused=True` does the whole update of
Adam, AdamW or SGD in one kernel per group of tensors (and accepts a `GradScaler`'s
scale without a host sync): fewer launches and one pass over memory. The `torch.optim`
documentation ranks the implementations "fused > foreach > for-loop" in speed.

Bad:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): pass `fused=True` (not offered when the file builds sparse embeddings,
which the fused kernels reject). Unsafe because the fused kernels round differently
(results differ in the last bits), and they raise at the first step if a parameter is
on a device they do not support or is not floating point.

Impact: Always high: the fused update does the whole optimizer step in one kernel per
group of tensors, one pass over memory, where the default launches a few kernels per
operation, at every step. A clear low case, not told apart yet (reported high): toy
networks of a few parameter tensors, where the launches saved are a handful per step.

Unknown device: silent, as only optimizers of networks moved to a GPU are checked; the
fused kernels raise on a device they do not support (CPU parameters need PyTorch 2.4),
so the fix could break a run on a device that cannot be named.

Sources: PyTorch docs, "torch.optim", Algorithms (foreach and fused implementations),
`torch.optim.Adam`, `torch.optim.AdamW`, `torch.optim.SGD`; PyTorch Performance Tuning
Guide, "Fuse operations".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule, bool_value

FUSABLE = ("torch.optim.Adam", "torch.optim.AdamW", "torch.optim.SGD")


class OptimizerNotFused(Rule):
    code = "TL605"
    name = "optimizer-not-fused"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False
    tokens = ("Adam", "SGD")
    min_torch = (2, 4)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        gpu = {id(s) for s in module.trained_on_gpu}
        sparse: bool | None = None
        for call in module.calls_to(*FUSABLE):
            if call.has_star_args or any(
                call.kwarg(k) is not MISSING for k in ("fused", "foreach", "differentiable")
            ):
                continue
            if not any(id(s) in gpu for s in module.training.models_given(call)):
                continue
            if sparse is None:
                sparse = any(bool_value(c.kwarg("sparse")) for c in module.calls)
            name = (call.qualname or "").rsplit(".", 1)[-1]
            yield self.diagnostic(
                call.node,
                f"`{name}` updates this GPU model's parameters with several kernels per "
                "operation; `fused=True` does the whole update in one kernel per group of "
                "tensors",
                fix=None
                if sparse
                else fix(
                    "Pass `fused=True`",
                    Applicability.UNSAFE,
                    Replace(call.node, set_kwarg(call.node, "fused", cst.Name("True"))),
                ),
            )
