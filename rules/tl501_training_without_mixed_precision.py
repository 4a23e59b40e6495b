"""TL501 training-without-mixed-precision: a CUDA training loop runs entirely in float32.

What: a training loop (its body calls `.backward()` and an optimizer `.step()`) that
calls a model moved to CUDA, in a file with no sign of reduced precision: no
`torch.autocast` / `torch.amp` / `torch.cuda.amp`, no `GradScaler`, no `.half()` /
`.bfloat16()`, no `torch.float16` / `torch.bfloat16` passed anywhere. Advice, so off
by default: enable it with `--extend-select TL501`. Files managed by Lightning,
Accelerate, DeepSpeed or the transformers Trainer are not checked (precision is
their `precision=` / `mixed_precision=` setting). Not reported: loops whose networks
are toys (under 1M parameters together, counted from their layers' sizes; a network
whose size the file does not show counts as large), where tensor cores have too little
to do for the cast to pay; loops that (directly or in a function of the file they
call) compute a binary cross-entropy on probabilities (`nn.BCELoss`,
`F.binary_cross_entropy`; not the `WithLogits` forms), which autocast refuses with a
RuntimeError on CUDA: mixed precision there first needs `nn.BCEWithLogitsLoss` on the
logits, a change to the model's output.

Why: on Volta and newer GPUs, matrix multiplications and convolutions in float16 or
bfloat16 run on tensor cores, typically 2-3x faster than float32, and the
activations kept for backward take half the memory (room for a larger batch).
`torch.autocast` picks the precision per operation (matmuls in low precision,
reductions and losses in float32), so most models train to the same accuracy.
bfloat16 has float32's exponent range and needs no loss scaling.

Bad:
    model = torchvision.models.resnet50().cuda()
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x.cuda())
        loss = criterion(out, y.cuda())
        loss.backward()
        optimizer.step()

Good:
    model = torchvision.models.resnet50().cuda()
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x.cuda())
            loss = criterion(out, y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): wrap the statements from the first model call to the assignment of
the backpropagated loss in `with torch.autocast("cuda", dtype=torch.bfloat16):`
(offered when those statements are directly in the loop's body, just before the
`backward()` statement). Not with `target-torch` below 1.10, which has no
`torch.autocast` (nor bfloat16 autocast on CUDA). On a machine without CUDA,
`torch.autocast("cuda")` warns and does nothing, so the script still runs on the CPU.
Unsafe because the numerics
change (results differ in the last bits, some models need float32 for specific
layers), outputs made in the region are bfloat16, and GPUs before Ampere emulate
bfloat16 slowly: use `dtype=torch.float16` with a `torch.amp.GradScaler("cuda")`
there.

Impact: Always high: the cases where mixed precision gains nothing measurable (toy
networks) or breaks the loop (a binary cross-entropy on probabilities) are not
reported, and elsewhere tensor cores speed up the matmuls and convolutions of every
step and halve the activations' memory.

Unknown device: silent, as only a model moved to a GPU is checked; a device that cannot
be named may be the CPU, where the fix's `torch.autocast("cuda")` only warns and the
loop gains nothing.

Sources: PyTorch docs, "Automatic Mixed Precision package - torch.amp" and the
"Automatic Mixed Precision" recipe; PyTorch Performance Tuning Guide, "Use mixed
precision and AMP"; NVIDIA "Train With Mixed Precision" guide.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import expression, spell
from torchlint.fixes import Applicability, Fix, FixSafety, Remove, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import CallSite, Loop, Model, TorchModule
from torchlint.semantic.networks import toy
from torchlint.semantic.syntax import contains, dotted_name


class TrainingWithoutMixedPrecision(Rule):
    code = "TL501"
    name = "training-without-mixed-precision"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False
    tokens = ("cuda", "accelerator")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.managed or module.reduced_precision:
            return
        target = module.target_torch
        wraps = target is None or target >= (1, 10)  # torch.autocast("cuda", bfloat16)
        for loop in module.step_loops:
            model_calls = [
                c
                for c in module.network_calls(loop)
                if (site := module.model_called(c)) is not None and module.on_gpu(site)
            ]
            if not model_calls:
                continue
            if toy(module.networks.parameters(s) for s in _sites(module, model_calls)):
                continue
            if module.autocast_refused(loop.calls) is not None:
                continue
            yield self.diagnostic(
                loop.node,
                "this CUDA training loop runs in float32; under "
                '`torch.autocast("cuda", dtype=torch.bfloat16)` matmuls and convolutions use '
                "tensor cores (often 2-3x faster) and activations take half the memory",
                fix=_wrap(module, loop, model_calls) if wraps else None,
            )


def _sites(module: TorchModule, calls: list[CallSite]) -> list[Model]:
    """The networks these calls run, each once."""
    found: dict[int, Model] = {}
    for call in calls:
        site = module.model_called(call)
        if site is not None:
            found.setdefault(id(site), site)
    return list(found.values())


def _wrap(module: TorchModule, loop: Loop, model_calls: list[CallSite]) -> Fix | None:
    stmts = loop.body
    if not stmts:
        return None
    for call in loop.calls:
        if call.method != "backward" or call.receiver is None or call.positional:
            continue
        loss = dotted_name(call.receiver)
        backward = call.ctx.statement
        if loss is None or not any(s is backward for s in stmts):
            continue
        b = next(i for i, s in enumerate(stmts) if s is backward)
        assigned = [i for i in range(b) if _assigns(stmts[i], loss)]
        if not assigned:
            return None
        last = assigned[-1]
        calls = [c.node for c in model_calls]
        first = next(
            (i for i in range(last + 1) if any(contains(stmts[i], n) for n in calls)), None
        )
        if first is None:
            return None
        autocast, imp1 = spell(module, "torch.autocast", loop.ctx.scope)
        bf16, imp2 = spell(module, "torch.bfloat16", loop.ctx.scope)
        region = stmts[first : last + 1]
        head = region[0]
        if not isinstance(head, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return None
        item = cst.Call(
            func=expression(autocast),
            args=[
                cst.Arg(
                    cst.SimpleString('"cuda"'),
                    comma=cst.Comma(cst.SimpleWhitespace(""), cst.SimpleWhitespace(" ")),
                ),
                cst.Arg(
                    expression(bf16),
                    keyword=cst.Name("dtype"),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                ),
            ],
        )
        wrapped = cst.With(
            items=[cst.WithItem(item)],
            body=cst.IndentedBlock([head.with_changes(leading_lines=[]), *region[1:]]),
            leading_lines=head.leading_lines,
        )
        return fix(
            'Run the forward pass and loss under `torch.autocast("cuda", dtype=torch.bfloat16)`',
            Applicability.UNSAFE,
            Replace(head, wrapped),
            *(Remove(s) for s in region[1:]),
            imports=[i for i in (imp1, imp2) if i is not None],
        )
    return None


def _assigns(stmt: cst.BaseStatement, name: str) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, cst.Assign) and any(
            dotted_name(t.target) == name for t in small.targets
        ):
            return True
        if isinstance(small, (cst.AnnAssign, cst.AugAssign)) and dotted_name(small.target) == name:
            return True
    return False
