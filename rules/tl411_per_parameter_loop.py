"""TL411 per-parameter-loop: a training step updates a network's tensors one by one in Python.

What: a `for` loop over a network's parameters, buffers or state dict
(`model.parameters()`, `zip(ema.parameters(), model.parameters())`,
`ema.state_dict().items()`) that runs on every training step (in the step loop, or in a
function the step calls, here or in another file of the project: an EMA's `update`
method called as `ema.update(model)` on an instance of a class of another file, whose
finding names the caller) and changes each tensor in place: an in-place method (`mul_`,
`add_`, `lerp_`, `copy_`, `clamp_`, `zero_`...) on the loop's tensor, its `.data` or its
`.grad`, an augmented assignment to it (`v *= d`), arithmetic on it assigned to its
`.data` (MoCo's `param_k.data = param_k.data * m + param_q.data * (1 - m)`: each
operation a kernel and a new tensor), or a call writing it through `out=`. Loops that
run once (weight initialisation, freezing with `requires_grad_(False)`), loops that only
read (norms for logging) and `p.grad = None` (no kernel) are left alone.

Why: each operation on each tensor is a kernel launch, paid for on the CPU (several
microseconds each) however small the tensor: an EMA of a detector with a thousand
tensors launches thousands of kernels every step, and the GPU waits on the launches.
torch's foreach ops take the whole list of tensors at once and run in a few launches
(horizontally fused kernels): what torch's own optimizers, `clip_grad_norm_` and
`AveragedModel`'s EMA use.

Bad:
    model = torchvision.models.resnet50().cuda()
    ema = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for p_ema, p in zip(ema.parameters(), model.parameters()):
                p_ema.mul_(0.999).add_(p, alpha=0.001)

Good:
    model = torchvision.models.resnet50().cuda()
    ema = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.001)

Fix: none offered; the message names the foreach ops for the operations the loop does
(`torch._foreach_mul_`, `_foreach_lerp_` for an average, `_foreach_clamp_min_` and
`_foreach_clamp_max_` for weight clipping, `torch.nn.utils.clip_grad_value_(...,
foreach=True)` for gradients, `torch.optim.swa_utils.AveragedModel` with
`get_ema_multi_avg_fn` for an EMA).

Impact: high for an average of the weights (an EMA: `lerp_`, or a scale then an add),
kept for large models, and for networks known to be large (a model zoo's, or 10M
parameters or more counted from their layers): hundreds of tensors. Low for other
networks (tens of tensors, tens of launches a step: weight clipping of a small critic,
a hand-written SGD update of a small language model), toys under 1M parameters above all.

Unknown device: the loop launches kernels on any accelerator, so a device that cannot be
named does not silence it; code that places no work on any device (a CPU script) is left
alone, where a launch costs little.

Sources: PyTorch docs, "torch.optim" (the foreach and fused implementations),
`torch.optim.swa_utils.get_ema_multi_avg_fn`; PyTorch Performance Tuning Guide.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.results import Impact
from torchlint.rule import TRAINS, Diagnostic, Rule
from torchlint.semantic import Loop, Model, TorchModule, bound_names, dotted_name, toy
from torchlint.text.walk import descendants

# What walks a network's tensors: `m.parameters()`, `m.state_dict().items()`.
TENSORS = ("parameters", "named_parameters", "buffers", "named_buffers")
STATE = ("items", "values")
# In-place methods with a foreach op of the same name (`torch._foreach_mul_`).
FOREACH = (
    *("add_", "sub_", "mul_", "div_", "lerp_", "copy_", "zero_", "addcmul_", "addcdiv_"),
    *("sqrt_", "neg_", "abs_", "exp_", "sign_", "clamp_min_", "clamp_max_", "maximum_"),
)
# Other in-place methods that launch a kernel per tensor.
IN_PLACE = (*FOREACH, "clamp_", "clip_", "fill_", "nan_to_num_", "normal_", "uniform_")
AUGMENTED = {
    "MultiplyAssign": "*=",
    "AddAssign": "+=",
    "SubtractAssign": "-=",
    "DivideAssign": "/=",
}
# Operators of an expression assigned to a tensor's `.data`.
OPERATORS = {"Multiply": "*", "Add": "+", "Subtract": "-", "Divide": "/"}
TOY = "a toy network (under 1M parameters): a few dozen small launches a step"
FEW = "a network not known to be large: likely tens of tensors, tens of launches a step"
LARGE = 10_000_000  # parameters: hundreds of tensors


class PerParameterLoop(Rule):
    code = "TL411"
    name = "per-parameter-loop"
    tokens = ("parameters()", "buffers()", "state_dict()")
    pattern = TRAINS  # a step loop of its own (or the project reaches the file)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not (
            module.placement.uses_gpu
            or module.placement.presumed_accelerator
            or module.placement.handles_devices()
        ):
            return
        for loop in module.loops:
            if not isinstance(loop.node, cst.For):
                continue
            walked = _walked(module, loop)
            if walked is None:
                continue
            ops = _in_place(loop)
            if not ops or not module.runs.per_step(loop.ctx):
                continue
            if loop.calls and module.runs.period(loop.calls[0]) is not None:
                continue  # every N steps: `if step % 100 == 0:`
            function = loop.ctx.function
            if function is not None and function.name.value == "forward":
                continue  # a network's forward runs in evaluation too (a metric's sampler)
            sites = [s for r in walked if (s := module.models.of(r, loop.ctx.scope)) is not None]
            why = _low(module, sites, ops)
            yield self.diagnostic(
                loop.node,
                f"`{_head(module, loop)}`{_elsewhere(module, loop)} runs "
                f"{', '.join(f'`{o}`' for o in ops)} on each "
                "tensor every training step, one kernel launch per tensor and operation, "
                f"paid on the CPU however small the tensor; {_advice(ops, loop)} do it in "
                "a few launches over the whole list" + (f" (low impact: {why})" if why else ""),
                impact=Impact.LOW if why else Impact.HIGH,
            )


def _elsewhere(module: TorchModule, loop: Loop) -> str:
    """Where another file runs the loop's function every step (` in `update` (called
    every training step from `main` in train.py)`), if that is why it runs per step."""
    function = loop.ctx.function
    if function is None or any(o.is_step_loop for o in (*loop.ctx.loops, loop)):
        return ""
    if function in module.frameworks.training_steps:
        return ""
    name = module.functions.local_name(function)
    where = module.env.stepped(name) if name is not None else None
    if where is None:
        return ""
    return f" in `{name}` (called every training step from {where})"


def _low(module: TorchModule, sites: list[Model], ops: list[str]) -> str | None:
    """Why the launches cost little: a network not known to hold many tensors. An average
    of the weights (an EMA) is high whatever the size: it is kept for large models."""
    if _averages(ops):
        return None
    sizes = [module.networks.estimated_parameters(s) for s in sites]
    if any(module.networks.well_known(s) for s in sites):
        return None
    if sizes and all(n is not None for n in sizes):
        if toy(sizes):
            return TOY
        if sum(n for n in sizes if n is not None) >= LARGE:
            return None
    return FEW


def _walked(module: TorchModule, loop: Loop) -> list[cst.BaseExpression] | None:
    """The networks whose tensors the loop walks (`ema` of `ema.state_dict().items()`),
    None where it walks something else."""
    assert isinstance(loop.node, cst.For)
    found = []
    for it in module.loaders.iterables(loop.node.iter, loop.ctx.scope):
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute)):
            continue
        method, receiver = it.func.attr.value, it.func.value
        if method in STATE and isinstance(receiver, cst.Call):
            inner = receiver.func
            if isinstance(inner, cst.Attribute) and inner.attr.value == "state_dict":
                found.append(inner.value)
        elif method in TENSORS:
            found.append(receiver)
    return found or None


def _root(node: cst.BaseExpression) -> str | None:
    """The name an expression starts from (`p` of `p.grad.data`), through attributes."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _in_place(loop: Loop) -> list[str]:
    """The in-place operations the body does on the loop's tensors (in IN_PLACE's order,
    then the augmented assignments')."""
    assert isinstance(loop.node, cst.For)
    names = {n.value for n in bound_names(loop.node.target)}  # `p_ema, p`; `k, v`
    found: list[str] = []
    for call in loop.calls:
        func = call.node.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        chain = func.value if isinstance(func, cst.Attribute) else None
        while isinstance(chain, cst.Call) and isinstance(chain.func, cst.Attribute):
            chain = chain.func.value  # `p_ema.mul_(d).add_(p)`: rooted at p_ema
        written = method in IN_PLACE and chain is not None and _root(chain) in names
        out = call.kwarg("out")
        if written or (out is not None and _root(out) in names):
            op = method if written and method else f"{dotted_name(func) or 'a call'}(out=...)"
            if op not in found:
                found.append(op)
    for node in descendants(loop.node.body):
        if isinstance(node, cst.AugAssign) and _root(node.target) in names:
            op = AUGMENTED.get(type(node.operator).__name__, "an augmented assignment")
            if op not in found:
                found.append(op)
        elif isinstance(node, cst.Assign) and any(
            _rebinds_data(t.target, names) for t in node.targets
        ):
            # MoCo's `param_k.data = param_k.data * m + param_q.data * (1 - m)`: each
            # operation a kernel (and a new tensor) per parameter
            for op in _operators(node.value, names):
                if op not in found:
                    found.append(op)
    order = [*IN_PLACE, *AUGMENTED.values(), *OPERATORS.values()]
    return sorted(found, key=lambda op: order.index(op) if op in order else len(order))


def _rebinds_data(target: cst.BaseExpression, names: set[str]) -> bool:
    """`p.data = ...` for a tensor `p` of the loop: its storage replaced by a new one."""
    return (
        isinstance(target, cst.Attribute)
        and target.attr.value == "data"
        and _root(target.value) in names
    )


def _operators(value: cst.BaseExpression, names: set[str]) -> list[str]:
    """The arithmetic operators of an expression that take a tensor of the loop (each a
    kernel; `1.0 - m` on Python numbers is none)."""
    found = [
        op
        for n in descendants(value)
        if isinstance(n, cst.BinaryOperation)
        and (op := OPERATORS.get(type(n.operator).__name__)) is not None
        and _on_tensors(n, names)
    ]
    return list(dict.fromkeys(found))


def _on_tensors(node: cst.BaseExpression, names: set[str]) -> bool:
    """`node` computes with a tensor of the loop (`p.data`, `p.data * m`)."""
    if isinstance(node, cst.BinaryOperation):
        return _on_tensors(node.left, names) or _on_tensors(node.right, names)
    return _root(node) in names


def _averages(ops: list[str]) -> bool:
    """The loop averages weights (an EMA: `lerp_`, or a scale then an add)."""
    return (
        "lerp_" in ops
        or {"mul_", "add_"} <= set(ops)
        or {"*=", "+="} <= set(ops)
        or {"*", "+"} <= set(ops)
    )


def _head(module: TorchModule, loop: Loop) -> str:
    assert isinstance(loop.node, cst.For)
    return f"for ... in {module.module.code_for_node(loop.node.iter)}"


def _advice(ops: list[str], loop: Loop) -> str:
    """The foreach ops (or utilities) that do what the loop does."""
    if _averages(ops):
        return (
            "`torch._foreach_lerp_(ema_tensors, tensors, 1 - decay)` (or "
            "`torch.optim.swa_utils.AveragedModel` with `get_ema_multi_avg_fn`) would"
        )
    grads = any(
        isinstance(n, cst.Attribute) and n.attr.value == "grad" for n in descendants(loop.node)
    )
    if grads and any(o in ("clamp_", "clip_") for o in ops):
        return "`torch.nn.utils.clip_grad_value_(params, value, foreach=True)` would"
    names = []
    for op in ops:
        if op in ("clamp_", "clip_"):
            names += ["torch._foreach_clamp_min_", "torch._foreach_clamp_max_"]
        elif op in FOREACH:
            names.append(f"torch._foreach_{op}")
    if not names:
        return "torch's `_foreach_*` ops would"
    return " and ".join(f"`{n}`" for n in names) + " would"
