"""TL602 deterministic-in-training: deterministic algorithms forced in GPU training.

What: `torch.backends.cudnn.deterministic = True` in a file whose training loop runs a
convolutional network on a GPU, or `torch.use_deterministic_algorithms(True)` in a file
that trains any network on a GPU; set unconditionally (a setting under `if args.seed:`,
or in a function only called under such a condition, is a choice the run makes). Advice,
so off by default (enable it with `--extend-select TL602`): whether a run must be
bit-for-bit reproducible is the user's requirement, which the code does not show (it
is usually part of a `set_seed` helper). Files managed by Lightning, Accelerate,
DeepSpeed or the transformers Trainer are not checked (`Trainer(deterministic=...)`).

Why: `cudnn.deterministic = True` restricts cuDNN to its deterministic convolution
algorithms, which are often not the fastest (the backward passes with atomic
additions are the usual winners), and `use_deterministic_algorithms(True)` also swaps
scatter/index/embedding backward kernels for slower deterministic ones and raises on
operations that have none. The Reproducibility notes warn that "deterministic
operation may have a negative single-run performance impact". Seeding the random
number generators alone makes runs repeatable enough for most purposes.

Bad:
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    model = torchvision.models.resnet18().cuda()
    for images, labels in loader:
        loss = criterion(model(images.cuda()), labels.cuda())
        loss.backward()
        optimizer.step()

Good:
    torch.manual_seed(0)
    if args.deterministic:  # bit-for-bit reproducibility, when it is needed
        torch.backends.cudnn.deterministic = True
    model = torchvision.models.resnet18().cuda()
    for images, labels in loader:
        loss = criterion(model(images.cuda()), labels.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): remove the statement. Unsafe because two runs with the same seed no
longer give bit-for-bit identical results.

Impact: Always high: deterministic kernels slow the convolutions (and, with
`use_deterministic_algorithms`, scatter and embedding backward passes) of every step,
for a reproducibility the file does not show it needs.

Unknown device: silent, as only files that train a network moved to a GPU are checked;
the slower deterministic kernels it warns of are cuDNN's and CUDA's.

Sources: PyTorch docs, "Reproducibility" notes (`torch.backends.cudnn.deterministic`,
`torch.use_deterministic_algorithms`); "torch.backends"; PyTorch Performance Tuning
Guide, "Enable cuDNN auto-tuner" (on the trade-off with determinism).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import lone_expression
from torchlint.fixes import Applicability, FixSafety, Remove, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule, bool_value

DETERMINISTIC = "torch.backends.cudnn.deterministic"
ALGORITHMS = "torch.use_deterministic_algorithms"
WHY = (
    "restricts the GPU to deterministic kernels, often slower ones; keep it only if this "
    "run must be bit-for-bit reproducible (seeding alone makes runs repeatable enough "
    "for most purposes)"
)


class DeterministicInTraining(Rule):
    code = "TL602"
    name = "deterministic-in-training"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False
    tokens = ("deterministic",)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not module.trained_on_gpu:
            return
        convolutional = any(module.networks.convolutional(s) for s in module.trained_on_gpu)
        for store in module.stores_to(DETERMINISTIC):
            if not convolutional or bool_value(store.value) is not True:
                continue
            if module.runs.conditional(store.ctx):
                continue
            statement = store.ctx.statement
            lone = (
                isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and isinstance(statement.body[0], cst.Assign)
                and len(statement.body[0].targets) == 1
            )
            yield self.diagnostic(
                store.target,
                f"`cudnn.deterministic = True` {WHY}",
                fix=fix("Remove the setting", Applicability.UNSAFE, Remove(statement))
                if lone and isinstance(statement, cst.SimpleStatementLine)
                else None,
            )
        for call in module.calls_to(ALGORITHMS):
            if bool_value(call.arg("mode", index=0)) is not True:
                continue
            if module.runs.conditional(call.ctx, call.node):
                continue
            statement = lone_expression(call.ctx.statement, call.node)
            yield self.diagnostic(
                call.node,
                f"`use_deterministic_algorithms(True)` {WHY}",
                fix=fix("Remove the setting", Applicability.UNSAFE, Remove(statement))
                if statement is not None
                else None,
            )
