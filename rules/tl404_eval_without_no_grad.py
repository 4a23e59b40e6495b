"""TL404 eval-without-no-grad: an evaluation loop records autograd graphs it never uses.

What: a loop over a DataLoader that calls a model, after `model.eval()` (in the same
function, with no `model.train()` in between) or inside a function named
`eval*`/`valid*`/`val`/`val_*`/`test*`/`predict*`/`infer*` or for a measure it computes
(`compute_accuracy`, `get_val_loss`, `calc_*_error`), with no `torch.no_grad()`,
`torch.inference_mode()` or `torch.set_grad_enabled(False)` around the model call (as a
`with`, as a decorator of the function, or around every call of the function; a
project's own wrapper named for one counts: yolov5's `@smart_inference_mode()`), and no
`.backward()` / `torch.autograd.grad` in the loop; or, at the top level of a script or
notebook, such a loop after its training loop that calls nothing of the file but
networks (features extracted for another model, predictions made), `.eval()` or not.
Also a function the training loop calls (a sampling helper every N steps) that switches
a network to `.eval()` and then runs it, with gradients on, no backward pass and no
value returned (a returned output may be backpropagated by the caller). A network of
another file (`from models import *`) counts when the file switches it between
`.train()` and `.eval()`. Also `Variable(x, volatile=True)`, PyTorch < 0.4's no-grad
mode, ignored since then, in a function (or a loop) that runs a network: the forward
pass records the graph the author meant to skip (one finding per function; in an
evaluation loop the loop's finding sits on the Variable). Not reported in a test (`def
test_*` in a pytest file: it checks results, it is not a workload) or in code that
places no work on any device (no device, `.cuda()` or `torch.cuda` call here, and no
file of the project running it on a GPU): a CPU script.

Why: `model.eval()` only switches dropout and batch norm to inference behaviour; it
does not turn off autograd. Every forward pass in the loop still records the graph
and keeps the activations each output needs for a backward pass that never comes:
more GPU memory (a smaller batch fits), more allocator work, slower steps. Under
`torch.no_grad()` (or the stricter `torch.inference_mode()`) none of that happens.

Bad:
    model = torchvision.models.resnet18().cuda()
    val_loader = DataLoader(val_set, batch_size=256)
    model.eval()
    for x, y in val_loader:
        correct += (model(x.cuda()).argmax(1) == y.cuda()).sum()

Good:
    model = torchvision.models.resnet18().cuda()
    val_loader = DataLoader(val_set, batch_size=256)
    model.eval()
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x.cuda()).argmax(1) == y.cuda()).sum()

Fix (safe): wrap the loop in `with torch.no_grad():`; decorate the helper with
`@torch.no_grad()`. A volatile Variable outside an evaluation loop gets no fix: where
its no-grad block ends is the author's choice. Values are unchanged; the outputs just no
longer require grad. Not reported when a value computed in the loop may be
backpropagated later (a name bound in the loop feeds a `.backward()` outside a loop that
recomputes it).

Impact: high: every evaluated batch records a graph and keeps its activations, memory
and time that `torch.no_grad()` saves at no cost. Low for a network counted at under a
million parameters: its graph and activations are small.

Unknown device: a graph nobody backpropagates costs memory and time on any device, so
any device counts, unknown ones too; only code that names none is left alone. In a
function no visible call runs (`def evaluate(model, loader, device)` in a library), a
parameter switched with `.eval()`/`.train()` (or giving its `.parameters()`) and called
counts as a network, and a loop over a parameter as a loop over batches.

Sources: PyTorch docs, "Locally disabling gradient computation" (autograd
mechanics: "evaluation mode is not a mechanism for disabling gradient computation");
`torch.no_grad` and `torch.inference_mode` docs; PyTorch Performance Tuning Guide.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import spell
from torchlint.fixes import Applicability, Fix, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    CallSite,
    Loop,
    Model,
    TorchModule,
    bool_value,
    dotted_name,
    names_read,
    toy,
)

SET_GRAD = "torch.set_grad_enabled"


GRAD_OFF = "autograd is off there (no_grad, set_grad_enabled(False), a frozen model)"
VARIABLE = ("torch.autograd.Variable", "torch.autograd.variable.Variable")
VOLATILE = "`volatile=True` has had no effect since PyTorch 0.4"
TOY = "a network of under a million parameters: its graph and activations are small"


class EvalWithoutNoGrad(Rule):
    code = "TL404"
    name = "eval-without-no-grad"
    fix_safety = FixSafety.SAFE
    # A loader loop, or a helper the training loop (hence a backward pass) calls.
    tokens = ("DataLoader", ".backward(", "volatile")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not (
            module.placement.uses_gpu
            or module.placement.presumed_accelerator
            or module.placement.handles_devices()
        ):
            self.pass_over(None, "the file names no device, nor does its project: CPU code")
            return  # CPU-only code: no device anywhere, here or where it is called from
        backprop = _backprop_calls(module)
        backprop_ids = {id(c) for c in backprop}
        volatile = _volatile_calls(module)
        reported: list[Loop] = []
        for loop in module.loops:
            if not isinstance(loop.node, cst.For) or not loop.calls or loop.takes_one:
                continue  # a peek at one batch (`...; break`) records one graph, once
            if any(outer in reported for outer in loop.ctx.loops):
                continue
            if module.test_code(loop.ctx.function):
                self.pass_over(loop.node, "a test: it checks results, not a workload")
                continue
            if any(id(c) in backprop_ids for c in loop.calls):
                continue  # a training loop
            calls = [c for c in module.models.network_calls(loop) if _evaluated(module, loop, c)]
            if not calls:
                continue
            if any(module.runs.grad_disabled(c) for c in calls):
                self.pass_over(loop.node, GRAD_OFF)
                continue
            if not (loop.is_loader_loop or module.walks_unseen_parameter(loop)):
                self.pass_over(loop.node, "the loop walks no DataLoader's batches")
                continue
            if _feeds_backward(loop, backprop):
                self.pass_over(loop.node, "a value it computes feeds a backward pass later")
                continue
            site = module.models.called(calls[0])
            assert site is not None
            if _grad_disabled_in_function(module, loop, site):
                self.pass_over(loop.node, GRAD_OFF)
                continue
            reported.append(loop)
            name = dotted_name(calls[0].node.func) or site.name
            low = toy([module.networks.parameters(site)])
            # `Variable(x, volatile=True)` in the loop: where the author meant no graph
            marked = next((c for c in loop.calls if id(c) in volatile), None)
            yield self.diagnostic(
                marked.node if marked is not None else loop.node,
                (f"{VOLATILE}: the " if marked is not None else "")
                + f"evaluation loop calls `{name}` with autograd on: `.eval()` does not "
                "disable gradients, so every batch records a graph and keeps its activations; "
                "wrap the loop in `with torch.no_grad():` (or `torch.inference_mode()`)"
                + (f" (low impact: {TOY})" if low else ""),
                fix=_wrap(module, loop),
                impact=Impact.LOW if low else Impact.HIGH,
            )
        yield from self._volatile(module, volatile, reported)
        yield from self._helpers(module, backprop_ids, {id(loop.ctx.function) for loop in reported})

    def _volatile(
        self, module: TorchModule, volatile: dict[int, CallSite], reported: list[Loop]
    ) -> Iterator[Diagnostic]:
        """`Variable(x, volatile=True)` whose function runs a network, outside a loop
        reported above: PyTorch < 0.4's no-grad mode, ignored since, so the forward
        pass records a graph the author meant to skip (one finding per function)."""
        done: set[int] = set()
        for call in volatile.values():
            fn = call.ctx.function
            if id(fn) in done or any(loop in reported for loop in call.ctx.loops):
                continue
            if module.test_code(fn) or module.runs.grad_disabled(call):
                continue
            body = module.training.calls_in(fn) if fn is not None else _loop_calls(call)
            sites = [s for c in body if (s := module.models.called(c)) is not None and s.is_network]
            if not sites:
                continue  # nothing here records a graph from it
            done.add(id(fn))
            low = toy([module.networks.parameters(s) for s in sites])
            yield self.diagnostic(
                call.node,
                f"{VOLATILE}: the forward pass that takes this Variable records the autograd "
                "graph the flag was meant to skip; compute it under `with torch.no_grad():`"
                + (f" (low impact: {TOY})" if low else ""),
                impact=Impact.LOW if low else Impact.HIGH,
            )

    def _helpers(
        self, module: TorchModule, backprop_ids: set[int], reported: set[int]
    ) -> Iterator[Diagnostic]:
        """Functions the training loop calls that switch a network to eval and run it
        (a sampling helper every N steps), returning nothing a caller could backprop."""
        done: set[int] = set()
        trained = {
            id(symbol)
            for c in module.method_calls("train")
            if c.receiver is not None and (symbol := c.scope.lookup_expr(c.receiver)) is not None
        }
        for mode in module.method_calls("eval"):
            fn = mode.ctx.function
            if fn is None or id(fn) in done or mode.receiver is None:
                continue
            site = module.models.of(mode.receiver, mode.scope)
            symbol = mode.scope.lookup_expr(mode.receiver)
            if site is None:
                # A module of another file (`from models import *`): an nn.Module by use,
                # switched between `.train()` and `.eval()`.
                if symbol is None or id(symbol) not in trained:
                    continue
            elif not site.is_network:
                continue
            if mode.node.args or module.functions.returns(fn) or _decorated(module, fn):
                continue
            body = module.training.calls_in(fn)
            if id(fn) in reported or any(id(c) in backprop_ids for c in body):
                continue
            calls = [
                c
                for c in body
                if c.order > mode.order
                and (
                    module.models.called(c) is site
                    if site is not None
                    else c.scope.lookup_expr(c.node.func) is symbol
                )
            ]
            if not calls or any(module.runs.grad_disabled(c) for c in calls):
                continue
            callers = module.functions.callers(fn)
            if not any(module.runs.per_step(c.ctx) for c, _ in callers):
                continue
            if any(module.runs.grad_disabled(c) for c, _ in callers):
                continue
            if any(
                c.ctx.function is fn and module.runs.disables_grad(c.node, c.scope)
                for c in module.calls_to(SET_GRAD)
            ):
                continue
            done.add(id(fn))
            name = dotted_name(calls[0].node.func) or "the model"
            yield self.diagnostic(
                calls[0].node,
                f"`{fn.name.value}` runs `{name}` after `.eval()` with autograd on, from the "
                "training loop: the forward pass records a graph nothing backpropagates; "
                "decorate the function with `@torch.no_grad()`",
                fix=_decorate(module, fn),
            )


def _volatile_calls(module: TorchModule) -> dict[int, CallSite]:
    """`Variable(x, volatile=True)` calls, by id."""
    return {id(c): c for c in module.calls_to(*VARIABLE) if bool_value(c.kwarg("volatile")) is True}


def _loop_calls(call: CallSite) -> list[CallSite]:
    """The calls of the innermost loop around a module-level call (none outside one)."""
    return call.ctx.loops[-1].calls if call.ctx.loops else []


def _backprop_calls(module: TorchModule) -> list[CallSite]:
    return [
        *module.method_calls("backward"),
        *module.calls_to("torch.autograd.backward", "torch.autograd.grad"),
    ]


def _evaluated(module: TorchModule, loop: Loop, call: CallSite) -> bool:
    """The model is in eval mode here: `<model>.eval()` (or `.train(False)`) earlier in the
    function or in the loop, and no `.train()` after it; or the function is an evaluation
    function by its name."""
    fn = loop.ctx.function
    if module.evaluation_function(fn):
        return True
    if fn is None and loop in module.evaluation_loops:
        return True  # a script's pass after its training: features, predictions
    site = module.models.called(call)
    if site is None:
        return False
    end = loop.calls[-1].order
    last_eval = last_train = -1
    for mode in module.models.method_calls_on(site):
        if mode.method not in ("eval", "train") or mode.ctx.function is not fn:
            continue
        if mode.order > end:
            continue
        args = mode.positional
        if mode.method == "eval" and not mode.node.args:
            last_eval = max(last_eval, mode.order)
        elif mode.method == "train" and not mode.node.args:
            last_train = max(last_train, mode.order)
        elif mode.method == "train" and len(args) == 1 and bool_value(args[0]) is not None:
            if bool_value(args[0]):
                last_train = max(last_train, mode.order)
            else:
                last_eval = max(last_eval, mode.order)
    return last_eval > last_train


def _grad_disabled_in_function(module: TorchModule, loop: Loop, site: Model) -> bool:
    """`torch.set_grad_enabled(False)` as a statement in the function, a call of the
    function under no_grad (in this file or another of the project), or the model frozen
    with `model.requires_grad_(False)`."""
    fn = loop.ctx.function
    for call in module.calls_to(SET_GRAD):
        if call.ctx.function is fn and module.runs.disables_grad(call.node, call.scope):
            return True
    if any(
        c.method == "requires_grad_"
        and c.positional
        and bool_value(c.positional[0]) is False
        and c.ctx.function in (fn, None)
        for c in module.models.method_calls_on(site)
    ):
        return True
    if fn is None:
        return False
    outside = module.runs.outside_callers(fn)  # calls from other files of the project
    if outside is not None and outside.no_grad:
        return True
    return any(module.runs.grad_disabled(c) for c, _ in module.functions.callers(fn))


def _feeds_backward(loop: Loop, backprop: list[CallSite]) -> bool:
    """A name bound in the loop reaches a `.backward()` elsewhere that does not recompute it."""
    escaping = set(loop.bound)
    for call in loop.calls:
        if call.method in ("append", "extend") and call.receiver is not None:
            name = dotted_name(call.receiver)
            if name is not None:
                escaping.add(name)
    for call in backprop:
        if call in loop.calls:
            continue
        for name in names_read(call.node):
            if name not in escaping:
                continue
            recomputed = call.ctx.loops and name in call.ctx.loops[-1].bound
            if not recomputed:
                return True
    return False


def _decorated(module: TorchModule, fn: cst.FunctionDef) -> bool:
    scope = module.functions.scope_of(fn).parent or module.scope
    return any(module.runs.disables_grad(d.decorator, scope) for d in fn.decorators)


def _decorate(module: TorchModule, fn: cst.FunctionDef) -> Fix:
    scope = module.functions.scope_of(fn).parent or module.scope
    spelled, imp = spell(module, "torch.no_grad", scope)
    decorator = cst.Decorator(cst.Call(cst.parse_expression(spelled)))
    return fix(
        "Decorate the function with `@torch.no_grad()`",
        Applicability.SAFE,
        Replace(fn, fn.with_changes(decorators=[decorator, *fn.decorators])),
        imports=[imp] if imp else [],
    )


def _wrap(module: TorchModule, loop: Loop) -> Fix:
    spelled, imp = spell(module, "torch.no_grad", loop.ctx.scope)
    node = loop.node
    assert isinstance(node, cst.For)
    wrapped = cst.With(
        items=[cst.WithItem(cst.Call(cst.parse_expression(spelled)))],
        body=cst.IndentedBlock([node.with_changes(leading_lines=[])]),
        leading_lines=node.leading_lines,
    )
    return fix(
        "Wrap the loop in `with torch.no_grad():`",
        Applicability.SAFE,
        Replace(node, wrapped),
        imports=[imp] if imp else [],
    )
