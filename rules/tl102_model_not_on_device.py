"""TL102 model-not-on-device: a training script never puts its model on the GPU.

What: a model (an `nn.Module` built in this file, whose `.parameters()` go to a
`torch.optim` optimizer) is called in a training loop (a loop that calls
`.backward()` and an optimizer `.step()`), is never moved with `.to(...)`/`.cuda()`,
and the file has no device handling at all: it never mentions `cuda`, `device`,
`mps`, XLA or an accelerator, and is not Lightning/Accelerate/DeepSpeed/transformers
Trainer code (those place the model for you).

Why: PyTorch never moves anything by itself. Such a script trains on the CPU even on
a machine with a GPU: the most expensive way to leave the GPU idle. Files that
handle devices somewhere (a helper, `torch.set_default_device`, a `device` argument)
are left alone: the move may happen where we cannot see it.

Bad:
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x), y)
        ...

Good:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net()
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        ...

Fix (unsafe): define `device = torch.device("cuda" if torch.cuda.is_available() else
"cpu")` once after the imports and insert `model = model.to(device)` right after the
model is built (so before the optimizer is created); TL101 then moves the batches of
its loader loops. Unsafe because results on the GPU differ numerically from the CPU
(other kernels, TF32, non-deterministic reductions) and GPU memory may not suffice.

Sources: PyTorch "Training a Classifier" tutorial, "Training on GPU"; CUDA semantics
notes, "Best practices: device-agnostic code".
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator

import libcst as cst
from torchlint.rules.tl101_input_not_on_device import unmoved_batch_tensors

from torchlint.fixes import Applicability, Definition, FixSafety, InsertAfter, fix, statements
from torchlint.model import ModelSite, TorchModule, dotted_name
from torchlint.rule import Diagnostic, Rule

# An identifier with one of these in it, or a string naming a device, means the file
# handles devices in some way we respect (comments and docstrings do not count).
DEVICE_WORDS = re.compile(
    r"(?:^|_)(?:cuda|device|devices|gpu|gpus|ngpu|mps|xla|xpu|hpu|npu|accelerat\w*)(?:_|$)"
)
DEVICE_STRING = re.compile(r"""^[rRuU]?["']+(cuda|mps|xla|xpu|hpu|npu|meta)(:\d+)?["']+$""")


def handles_devices(module: TorchModule) -> bool:
    """Any identifier or string literal of the file speaks of devices."""
    if module.managed or module.cuda_strings:
        return True
    readline = io.StringIO(module.module.code).readline
    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.NAME and DEVICE_WORDS.search(token.string.lower()):
                return True
            if token.type == tokenize.STRING and DEVICE_STRING.match(token.string):
                return True
    except (tokenize.TokenError, SyntaxError):
        return True
    return False


def device_definition(module: TorchModule) -> tuple[Definition, list]:
    """`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`, spelled
    the way this file imports torch, and the imports it needs."""
    device, imp1 = module.spell("torch.device")
    available, imp2 = module.spell("torch.cuda.is_available")
    code = f'device = {device}("cuda" if {available}() else "cpu")\n'
    return Definition("device", code), [i for i in (imp1, imp2) if i is not None]


def _optimized(module: TorchModule, site: ModelSite) -> bool:
    """`site.parameters()` is passed to a torch.optim optimizer."""
    for call in module.calls:
        if not (call.qualname or "").startswith("torch.optim."):
            continue
        for arg in call.node.args:
            value = arg.value
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in ("parameters", "named_parameters")
                and dotted_name(value.func.value) == site.name
            ):
                return True
    return False


def inputs_follow(module: TorchModule, site: ModelSite) -> bool:
    """Once `site` is on the GPU, TL101 can move everything it is called with: every call
    of the model is in a loader loop, with batch tensors (bare names) as its arguments,
    and the model is built exactly once, under no condition those loops do not share."""
    if len(module.assigned(site.name)) != 1:
        return False
    calls = [c for c in module.calls if module.model_for_call(c) is site]
    if not calls:
        return False
    for call in calls:
        loop = next((lp for lp in reversed(call.ctx.loops) if lp.loaders), None)
        if loop is None or not all(i in loop.ctx.ifs for i in site.assignment.ctx.ifs):
            return False
        args = call.node.args
        if not args or any(a.star for a in args):
            return False
        on_device = {
            id(c.node): (site, None) for c in loop.calls if module.model_for_call(c) is site
        }
        _, needs = unmoved_batch_tensors(module, loop, on_device)
        if not all(isinstance(a.value, cst.Name) and a.value.value in needs for a in args):
            return False
    return True


class ModelNotOnDevice(Rule):
    code = "TL102"
    name = "model-not-on-device"
    fix_safety = FixSafety.UNSAFE
    tokens = ("backward",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.managed:
            return
        candidates: list[ModelSite] = []
        for loop in module.training_loops:
            for call in loop.calls:
                site = module.model_for_call(call)
                if site is None or site.moved or site in candidates:
                    continue
                qualname = site.construction.qualname or ""
                if qualname.endswith("Loss") or not _optimized(module, site):
                    continue
                if not inputs_follow(module, site):
                    continue
                candidates.append(site)
        if not candidates or handles_devices(module):
            return
        definition, imports = device_definition(module)
        for site in candidates:
            statement = site.assignment.ctx.statement
            if not isinstance(statement, cst.SimpleStatementLine) or not any(
                small is site.assignment.node for small in statement.body
            ):
                continue
            yield self.diagnostic(
                site.construction.node,
                f"`{site.name}` is trained but never moved to a GPU, and nothing in this file "
                "selects a device: it trains on the CPU; define `device` and move the model "
                f"(`{site.name} = {site.name}.to(device)`) and its batches",
                fix=fix(
                    f"Move `{site.name}` to `device` (cuda when available)",
                    Applicability.UNSAFE,
                    InsertAfter(statement, statements(f"{site.name} = {site.name}.to(device)\n")),
                    imports=imports,
                    definitions=[definition],
                ),
            )
