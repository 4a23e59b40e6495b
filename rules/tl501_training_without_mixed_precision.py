"""TL501 training-without-mixed-precision: a CUDA training loop runs entirely in float32.

What: a training loop (its body calls `.backward()` and an optimizer `.step()`) that
calls a model moved to CUDA, in a file with no sign of reduced precision: no
`torch.autocast` / `torch.amp` / `torch.cuda.amp`, no `GradScaler`, no `.half()` /
`.bfloat16()`, no `torch.float16` / `torch.bfloat16` passed anywhere; or where the only
sign is an autocast and a GradScaler given `enabled=` a flag off by default (`--amp`
with `action="store_true"`, a config entry or a parameter default set to False): the
default run trains in float32, and the finding says mixed precision is opt-in (no fix:
the flag's default is the user's to change). PyTorch-Ignite's training too: a process
function of an `Engine` that trains (reported at its `def`, no fix) and
`create_supervised_trainer(model, ...)` without `amp_mode` (fix, unsafe:
`amp_mode="amp", scaler=True`), for a network on a GPU that is not a toy. Apex's
`amp.initialize` counts as reduced precision. On by default since 2026-12-06: judged on
the development corpus, none of its 94 findings was wrong, and 30 of the 43 it shows
(the cases below hidden) were worth the change. Files managed by Lightning, Accelerate,
DeepSpeed or the transformers Trainer are not checked (precision is their `precision=` /
`mixed_precision=` setting; Lightning Fabric's `Fabric()` takes it from `fabric run
--precision` where the call leaves it out). Not reported: loops whose networks are toys
(under 1M parameters together, counted from their layers' sizes; a network whose size
the file does not show counts as large), where tensor cores have too little to do for
the cast to pay; loops that (directly or in a function of the file they call) compute a
binary cross-entropy on probabilities (`nn.BCELoss`, `F.binary_cross_entropy`; not the
`WithLogits` forms), which autocast refuses with a RuntimeError on CUDA: mixed precision
there first needs `nn.BCEWithLogitsLoss` on the logits, a change to the model's output.

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

Impact: high: tensor cores speed up the matmuls and convolutions of every step and halve
the activations' memory. The cases where mixed precision gains nothing measurable (toy
networks) or breaks the loop (a binary cross-entropy on probabilities) are not
reported. Low where the gain is small or the change is a risk the author weighs: a step
on small images (every loader of the loop a torchvision MNIST/CIFAR-like dataset, at
most 64x64 after a constant resize or crop: activations too small to keep tensor cores
busy); recurrent networks (an LSTM, GRU or RNN layer, no convolution, transformer or
attention layer: one small kernel per time step); a gradient penalty in the step
(`torch.autograd.grad(..., create_graph=True)`, directly or in a function of the file
it calls: a double backward that reduced precision may destabilise, as in WGAN-GP);
code for PyTorch 0.3 (`loss.data[0]` in the loop), which must be ported first.

Unknown device: silent, as only a model moved to a GPU is checked; a device that cannot
be named may be the CPU, where the fix's `torch.autocast("cuda")` only warns and the
loop gains nothing. A model kept on the CPU is not checked: moved there and nowhere else,
or, at a script's or notebook's top level, moved with a `device` name whose value that
reaches the move is the CPU (`device = "cpu"` in an early cell, `"cuda"` in a later one).

Sources: PyTorch docs, "Automatic Mixed Precision package - torch.amp" and the
"Automatic Mixed Precision" recipe; PyTorch Performance Tuning Guide, "Use mixed
precision and AMP"; NVIDIA "Train With Mixed Precision" guide.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import expression, set_kwarg, spell
from torchlint.fixes import Applicability, Fix, FixSafety, Remove, Replace, fix
from torchlint.results import Impact
from torchlint.rule import TRAINS, Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    CallSite,
    Loop,
    Model,
    TorchModule,
    bool_value,
    contains,
    dotted_name,
    int_value,
    is_none,
    toy,
)
from torchlint.text.walk import descendants

GRAD = "torch.autograd.grad"
_TRUE = cst.Name("True")


def _str(text: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{text}"')


RECURRENT_LAYERS = frozenset(("LSTM", "GRU", "RNN"))
DENSE_LAYERS = frozenset(
    ("Transformer", "TransformerEncoder", "TransformerDecoder", "MultiheadAttention")
)
RECURRENT_WHY = (
    "recurrent networks, whose steps run one small kernel per time step: tensor cores gain little"
)
LEGACY_WHY = "code written for PyTorch 0.3 (`.data[0]`), which must be ported before autocast"
PENALTY = (
    "a gradient penalty (`torch.autograd.grad(..., create_graph=True)`) in the step: a double "
    "backward that reduced precision may destabilise"
)
SMALL_IMAGES = (
    "a step on small images (MNIST, CIFAR: at most 64x64), whose activations give tensor "
    "cores little to do"
)


class TrainingWithoutMixedPrecision(Rule):
    code = "TL501"
    name = "training-without-mixed-precision"
    fix_safety = FixSafety.UNSAFE
    tokens = ("cuda", "accelerator")
    pattern = TRAINS  # a step loop of its own (or the project engages the file)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        opt_in = module.workload.precision_opt_in  # `autocast(enabled=args.amp)`, off by default
        if module.workload.reduced_precision and opt_in is None:
            self.pass_over(None, "the file already trains in reduced precision (autocast, half)")
            return
        target = module.target_torch
        wraps = target is None or target >= (1, 10)  # torch.autocast("cuda", bfloat16)
        for loop in module.step_loops:
            model_calls = [
                c
                for c in module.models.network_calls(loop)
                if (site := module.models.called(c)) is not None
                and module.on_gpu(site)
                and not module.placement.kept_on_cpu(site)  # the CPU half of a notebook
            ]
            if not model_calls:
                self.pass_over(loop.node, "none of its networks is seen on a GPU")
                continue
            if toy(module.networks.parameters(s) for s in _sites(module, model_calls)):
                self.pass_over(loop.node, "its networks hold under a million parameters")
                continue
            if module.workload.autocast_refused(loop.calls) is not None:
                self.pass_over(loop.node, "autocast refuses its loss (BCELoss on probabilities)")
                continue
            why = _low(module, loop) or _recurrent(module, _sites(module, model_calls))
            flag = module.module.code_for_node(opt_in) if opt_in is not None else None
            yield self.diagnostic(
                loop.node,
                (
                    f"this CUDA training loop runs in float32 by default: its autocast is "
                    f"opt-in (`{flag}` is off unless asked), so "
                    if flag is not None
                    else "this CUDA training loop runs in float32; under "
                    '`torch.autocast("cuda", dtype=torch.bfloat16)` '
                )
                + "matmuls and convolutions use tensor cores (often 2-3x faster) and "
                "activations take half the memory"
                + (" only when asked; make mixed precision the default" if flag else "")
                + (f" (low impact: {why})" if why else ""),
                fix=_wrap(module, loop, model_calls) if wraps and flag is None else None,
                impact=Impact.LOW if why else Impact.HIGH,
            )
        if opt_in is None:
            yield from self._ignite(module)

    def _ignite(self, module: TorchModule) -> Iterator[Diagnostic]:
        """Ignite's training in float32: a process function that runs a GPU network (at
        its `def`), `create_supervised_trainer(...)` without `amp_mode` (at the call)."""
        for function in module.frameworks.ignite_steps:
            calls = module.training.calls_in(function)
            sites = _sites(module, [c for c in calls if _on_gpu(module, c)])
            if not sites or toy(module.networks.parameters(s) for s in sites):
                continue
            if module.workload.autocast_refused(calls) is not None:
                continue
            why = _recurrent(module, sites)
            yield self.diagnostic(
                function.name,
                f"ignite's process function `{function.name.value}` trains in float32; under "
                '`torch.autocast("cuda", dtype=torch.bfloat16)` matmuls and convolutions use '
                "tensor cores (often 2-3x faster) and activations take half the memory"
                + (f" (low impact: {why})" if why else ""),
                impact=Impact.LOW if why else Impact.HIGH,
            )
        for trainer in module.frameworks.ignite_supervised:
            mode = trainer.kwarg("amp_mode")
            if (mode is not MISSING and not is_none(mode)) or not trainer.node.args:
                continue
            site = module.models.of(trainer.node.args[0].value, trainer.scope)
            if site is None or not module.on_gpu(site) or toy([module.networks.parameters(site)]):
                continue
            why = _recurrent(module, [site])
            fixed = set_kwarg(set_kwarg(trainer.node, "amp_mode", _str("amp")), "scaler", _TRUE)
            yield self.diagnostic(
                trainer.node,
                "`create_supervised_trainer` without `amp_mode` trains in float32; with "
                '`amp_mode="amp", scaler=True` it runs the step under autocast with a '
                "GradScaler: tensor cores for matmuls and convolutions (often 2-3x faster)"
                + (f" (low impact: {why})" if why else ""),
                fix=fix(
                    'Train with `amp_mode="amp", scaler=True`',
                    Applicability.UNSAFE,
                    Replace(trainer.node, fixed),
                ),
                impact=Impact.LOW if why else Impact.HIGH,
            )


def _on_gpu(module: TorchModule, call: CallSite) -> bool:
    site = module.models.called(call)
    return site is not None and site.is_network and module.on_gpu(site)


def _low(module: TorchModule, loop: Loop) -> str | None:
    """Why mixed precision gains little in this loop, or is a risk the author weighs."""
    if any(_legacy(node) for node in descendants(loop.node)):
        return LEGACY_WHY
    calls = list(loop.calls)
    for call in loop.calls:  # and the functions of the file the step calls
        target = module.functions.target(call)
        if target is not None:
            calls += module.training.calls_in(target.function)
    if any(c.qualname == GRAD and bool_value(c.kwarg("create_graph")) for c in calls):
        return PENALTY
    return SMALL_IMAGES if module.datasets.small_images(loop) else None


def _sites(module: TorchModule, calls: list[CallSite]) -> list[Model]:
    """The networks these calls run, each once."""
    found: dict[int, Model] = {}
    for call in calls:
        site = module.models.called(call)
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


def _recurrent(module: TorchModule, sites: list[Model]) -> str | None:
    """The step's networks are recurrent (an LSTM, GRU or RNN layer) and neither convolve
    nor hold transformer or attention layers: a step bound by one small kernel per time
    step, where tensor cores gain little."""
    layers = [module.networks.layers(s) for s in sites]
    if not layers or not all(RECURRENT_LAYERS & found for found in layers):
        return None
    if any(
        found & DENSE_LAYERS or module.networks.convolutional(s)
        for s, found in zip(sites, layers, strict=True)
    ):
        return None
    return RECURRENT_WHY


def _legacy(node: cst.CSTNode) -> bool:
    """`loss.data[0]`: how PyTorch 0.3 read a scalar (an error on any torch since 0.5)."""
    return (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Attribute)
        and node.value.attr.value == "data"
        and len(node.slice) == 1
        and isinstance(node.slice[0].slice, cst.Index)
        and int_value(node.slice[0].slice.value) == 0
    )
