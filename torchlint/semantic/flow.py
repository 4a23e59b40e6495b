"""Where a training step's values come from: the code that runs once per step (a loop's
body, or a function a loop calls) and the straight-line data flow in it, from the calls
of the body to what a backward pass differentiates. `.detach()`, `.data`, `.item()`,
`torch.no_grad()` and `torch.autograd.grad` cut the path: no gradient flows through them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from torchlint.semantic.loops import Placed, is_periodic
from torchlint.semantic.models import ModelSite
from torchlint.semantic.module import TorchModule
from torchlint.semantic.reads import tensor_valued
from torchlint.semantic.scopes import Binding, CallSite, Kind, Loop
from torchlint.semantic.syntax import (
    HOST_READS,
    contains,
    dotted_name,
    int_value,
    names_read,
    target_names,
)
from torchlint.text.walk import children, descendants

# Reads of a tensor that leave the graph: what flows through them needs no backward.
CUTS = frozenset({"detach", "detach_", "item", "tolist", "numpy"})
# Full reductions: with no argument, a one-value tensor (`correct = (pred == y).sum()`).
REDUCTIONS = ("sum", "mean", "prod", "norm")
# A gradient penalty's path: `torch.autograd.grad(D(x_hat), x_hat, create_graph=True)`.
GRAD = "torch.autograd.grad"


@dataclass
class Region:
    """Code that runs once per training step: a loop's body, or a function's (`def
    train_step(...)`, called every step)."""

    body: cst.CSTNode
    calls: list[CallSite]
    steps: list[CallSite]  # the optimizer steps in it
    backwards: list[CallSite]


def step_regions(
    module: TorchModule, qualify: Callable[[list[CallSite]], bool]
) -> Iterator[Region]:
    """The innermost training loops whose optimizer steps qualify, then the functions
    whose steps qualify outside any loop."""
    qualified = {id(loop): qualify(loop.steps) for loop in module.training_loops}
    for loop in module.training_loops:
        if qualified[id(loop)] and not any(qualified.get(id(i)) for i in loop.inner):
            yield Region(loop.node.body, loop.calls, loop.steps, loop.backwards)
    functions: dict[int, list[CallSite]] = {}
    for call in module.method_calls("step"):
        if call.ctx.function is not None and not call.ctx.loops:
            functions.setdefault(id(call.ctx.function), []).append(call)
    for steps in functions.values():
        function = steps[0].ctx.function
        assert function is not None
        if qualify(steps):
            calls = module.training.calls_in(function)
            backwards = [c for c in calls if not c.ctx.loops and module.training.is_backward(c)]
            yield Region(function.body, calls, steps, backwards)


def losses(backward: CallSite) -> list[cst.BaseExpression]:
    """What a backward pass differentiates: the receiver of `loss.backward()` (through
    `scaler.scale(loss)`), or the tensors given to `accelerator.backward(loss)`."""
    given = [a.value for a in backward.node.args if a.keyword is None]
    return [backward.receiver, *given] if backward.receiver is not None else given


class Flow:
    """Straight-line data flow in one region's body: which calls each expression's value
    comes from, through the names its statements assign."""

    def __init__(self, module: TorchModule, region: Region) -> None:
        self.module = module
        self.region = region
        self.calls = {id(c.node): c for c in region.calls}
        self.index: dict[int, int] = {}  # id(statement) -> its rank in the body
        self.assigned: dict[str, list[tuple[int, cst.BaseExpression | None, bool]]] = {}
        for rank, line in enumerate(_lines(region.body)):
            self.index[id(line)] = rank
            for small in line.body:
                self._assign(rank, small)

    def _assign(self, rank: int, small: cst.BaseSmallStatement) -> None:
        targets: list[cst.BaseExpression] = []
        value: cst.BaseExpression | None = None
        augmented = False
        if isinstance(small, cst.Assign):
            targets, value = [t.target for t in small.targets], small.value
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            targets, value = [small.target], small.value
        elif isinstance(small, cst.AugAssign):
            targets, value, augmented = [small.target], small.value, True
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func  # `fake.detach_()`: no graph from here on
            if isinstance(func, cst.Attribute) and func.attr.value == "detach_":
                targets = [func.value]
        for target in targets:
            for name in target_names(target):
                self.assigned.setdefault(name, []).append((rank, value, augmented))

    def rank(self, call: CallSite) -> int:
        statement = call.ctx.statement
        return self.index.get(id(statement), -1) if statement is not None else -1

    def reached(self, exprs: list[cst.BaseExpression], rank: int) -> list[CallSite]:
        """The calls of the body whose value flows into `exprs` (read at `rank`)."""
        found: dict[int, CallSite] = {}
        seen: set[tuple[str, int]] = set()
        stack: list[tuple[cst.CSTNode, int]] = [(e, rank) for e in exprs]
        while stack:
            node, at = stack.pop()
            if isinstance(node, cst.Attribute) and node.attr.value == "data":
                continue
            key = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
            if key is not None and key in self.assigned:
                before = [a for a in self.assigned[key] if a[0] < at]
                if before and (key, before[-1][0]) not in seen:
                    seen.add((key, before[-1][0]))
                    where, value, augmented = before[-1]
                    if value is not None:
                        stack.append((value, where))
                    if augmented:
                        stack.append((node, where))
                continue
            if isinstance(node, cst.Call):
                call = self.calls.get(id(node))
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in CUTS:
                    continue
                if call is not None and (
                    call.qualname == GRAD or self.module.runs.grad_disabled(call)
                ):
                    continue
                if call is not None:
                    found[id(node)] = call
            if isinstance(node, (cst.Lambda, cst.FunctionDef)):
                continue
            stack.extend((c, at) for c in children(node) if isinstance(c, cst.CSTNode))
        return list(found.values())


def _lines(node: cst.CSTNode) -> Iterator[cst.SimpleStatementLine]:
    """The simple statements under `node` in source order, outside nested functions
    and classes."""
    for child in children(node):
        if isinstance(child, cst.SimpleStatementLine):
            yield child
        elif not isinstance(child, (cst.FunctionDef, cst.ClassDef)):
            yield from _lines(child)


def legacy_reads(
    losses: set[str], bindings: list[Binding], calls: list[CallSite]
) -> Iterator[tuple[cst.Subscript, Placed, str | None]]:
    """`x.data[0]`, PyTorch < 0.4's spelling of `x.item()`, in the statements of these
    bindings and calls, where `x` is a loss or a full reduction bound among them: a number
    read on the host (since PyTorch 0.5 a one-value tensor refuses the index, so such code
    runs only where it reads the value). Of a batch or an output (`out.data[0]`) it is a
    row, no read. One per statement, with the name the statement binds."""
    scalars = losses | {
        b.symbol.name
        for b in bindings
        if isinstance(b.value, cst.Call)
        and isinstance(b.value.func, cst.Attribute)
        and b.value.func.attr.value in REDUCTIONS
        and not b.value.args
    }
    places: list[tuple[Placed, str | None]] = [(b, b.symbol.name) for b in bindings]
    places += [(c, None) for c in calls]
    done: set[int] = set()
    for placed, target in places:
        statement = placed.ctx.statement
        if not isinstance(statement, cst.SimpleStatementLine) or id(statement) in done:
            continue
        done.add(id(statement))
        read = next((n for n in descendants(statement) if legacy_read(n, scalars)), None)
        if isinstance(read, cst.Subscript):
            yield read, placed, target


def legacy_read(node: cst.CSTNode, scalars: set[str]) -> bool:
    """`x.data[0]` of one of these names."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return False
    index, data = node.slice[0].slice, node.value
    return (
        isinstance(index, cst.Index)
        and int_value(index.value) == 0
        and isinstance(data, cst.Attribute)
        and data.attr.value == "data"
        and isinstance(data.value, cst.Name)
        and data.value.value in scalars
    )


def per_step_functions(
    module: TorchModule, worth_asking: Callable[[cst.FunctionDef], bool]
) -> dict[cst.FunctionDef, str]:
    """Functions of this file that run on every training step, with why: those a step loop
    calls (not under a periodic condition), the `forward` of the networks it trains,
    Lightning's `training_step` and ignite's process function and the functions they call,
    and those another file calls every step (asked of the project only for the functions
    `worth_asking` says a rule would report in)."""
    found: dict[cst.FunctionDef, str] = {}
    ignite = module.frameworks.ignite_steps
    for step in module.frameworks.training_steps:
        by = "ignite's process function" if step in ignite else "Lightning's `training_step`"
        found.setdefault(step, f"{by}, run every step")
        for call in module.training.calls_in(step):
            target = module.functions.target(call)
            if target is not None and target.function is not step and not is_periodic(call):
                found.setdefault(target.function, f"called by {by}, every step")
    for function in module.functions.named():  # called per step by another file
        name = module.functions.local_name(function)
        if name is None or function in found:
            continue
        if not (worth_asking(function) or any(map(worth_asking, _callees(module, function)))):
            continue  # its answer would not matter (nor to what it calls): not asked
        where = module.env.stepped(name)
        if where is not None:
            found[function] = f"called every training step from {where}"
    for loop in module.step_loops:
        for call in loop.calls:
            target = module.functions.target(call)
            if target is not None and not is_periodic(call):
                found.setdefault(target.function, "called every training step")
            site = module.models.called(call)
            if not isinstance(site, ModelSite) or not site.is_network:
                continue
            cls = module.functions.class_scope(site.construction.node.func, site.construction.scope)
            forward = cls.member("forward") if cls is not None else None
            binding = forward.only(Kind.DEF) if forward is not None else None
            if binding is not None:
                assert isinstance(binding.node, cst.FunctionDef)
                found.setdefault(binding.node, "the forward pass of a network trained every step")
    return _called_from(module, found)


CHAIN = 4  # calls followed below a function run every step


def _callees(module: TorchModule, function: cst.FunctionDef) -> list[cst.FunctionDef]:
    """The functions of this file `function` calls (not every N steps), down to CHAIN
    calls (MoCo's `forward` calling `_dequeue_and_enqueue`)."""
    return [f for f in _called_from(module, {function: ""}) if f is not function]


def _called_from(
    module: TorchModule, found: dict[cst.FunctionDef, str]
) -> dict[cst.FunctionDef, str]:
    """`found` with the functions of this file they call (not every N steps), down to
    CHAIN calls, each with its chain of callers (`called by `step`, called by `fit`...`)."""
    frontier = list(found)
    for _ in range(CHAIN):
        reached = []
        for caller in frontier:
            for call in module.training.calls_in(caller):
                target = module.functions.target(call)
                if target is None or target.function in found or is_periodic(call):
                    continue
                why = f"called by `{caller.name.value}`, {found[caller]}"
                found[target.function] = why
                reached.append(target.function)
        frontier = reached
    return found


def _tensor_of(node: cst.BaseExpression) -> str | None:
    """The name of the tensor an expression views (`pred`, `pred.view(-1, 6)`, `pred[0]`),
    None for one copied to the host (`pred.cpu()`, `.tolist()`)."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value in HOST_READS:
                return None
            node = node.func.value
        else:
            return dotted_name(node)


def tensor_rows(loop: Loop, tensors: set[str]) -> set[str]:
    """What the loops nested in `loop` bind to the rows or elements of its tensors, as
    deep as they go: `for i, det in enumerate(pred):` then `for *box, conf, cls in
    det:` (each a tensor still on the GPU: reading one waits for it)."""
    loops = [inner.node for inner in loop.inner if isinstance(inner.node, cst.For)]
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in loops:
            if _tensor_of(_unwrapped(node.iter)) not in tensors | found:
                continue
            target: cst.BaseExpression = node.target
            if isinstance(node.iter, cst.Call) and dotted_name(node.iter.func) == "enumerate":
                if not isinstance(target, cst.Tuple) or len(target.elements) != 2:
                    continue
                target = target.elements[1].value
            new = set(names_read(target)) - found
            if new:
                found |= new
                changed = True
    # A name another nested loop binds to something else (`for cls in pred.cpu():`):
    # which one a read sees is not told here.
    others = {
        name
        for node in loops
        if _tensor_of(_unwrapped(node.iter)) is None
        for name in names_read(node.target)
    }
    return found - others


def _unwrapped(node: cst.BaseExpression) -> cst.BaseExpression:
    """`enumerate(x)` / `reversed(x)` as `x`."""
    if (
        isinstance(node, cst.Call)
        and node.args
        and dotted_name(node.func)
        in (
            "enumerate",
            "reversed",
        )
    ):
        return node.args[0].value
    return node


def under_full_batch(module: TorchModule, function: cst.FunctionDef) -> bool:
    """The step loops whose calls reach `function` (up its chains of callers, CHAIN
    deep) are all full-batch loops: each step is an epoch."""
    loops: list[Loop] = []
    frontier, seen = [function], {id(function)}
    for _ in range(CHAIN + 1):
        callers = [c for f in frontier for c, _ in module.functions.callers(f)]
        loops += [loop for c in callers for loop in c.ctx.loops if loop.is_step_loop]
        frontier = [f for c in callers if (f := c.ctx.function) and id(f) not in seen]
        seen.update(id(f) for f in frontier)
    return bool(loops) and all(module.workload.full_batch(loop) for loop in loops)


def loop_tensors(module: TorchModule, loop: Loop) -> set[str]:
    """The losses of the loop and the model outputs bound in it, the names it computes
    from them, and the rows of them nested loops walk (`tensor_rows`): tensors on the
    device, whose reads wait."""
    names = set(loop.losses)
    network_calls = [c.node for c in module.models.network_calls(loop)]
    if network_calls:
        for b in loop.assignments:
            value = b.value if b.value is not None else b.source
            if value is not None and any(contains(value, n) for n in network_calls):
                names.add(b.symbol.name)
    for _ in range(2):  # what the loop computes from them (`acc = (out.argmax(1) == y).mean()`)
        names |= {
            b.symbol.name
            for b in loop.assignments
            if b.value is not None and tensor_valued(b.value, names)
        }
    # `loss = loss.item()`: a number from then on (the `.item()` is what a rule reports).
    for b in loop.assignments:
        if b.symbol.name in names and b.value is not None and _to_number(b.value):
            names.discard(b.symbol.name)
    return names | tensor_rows(loop, names)


def fed_tensors(module: TorchModule, function: cst.FunctionDef) -> set[str]:
    """The parameters of `function` that every call of the file passes a tensor of its
    step loop (`accuracy(y_hat, y)` with `y_hat = model(x)`), and the names the function
    binds from them (`cmp = y_hat.argmax(1) == y`): judged by what the callers pass; and
    for a method, the buffers its class registers (`self.queue_ptr`)."""
    callers = [
        (call, offset, loop_tensors(module, call.ctx.loops[-1]) if call.ctx.loops else set())
        for call, offset in module.functions.callers(function)
    ]  # each caller's loop read once, for every parameter
    fed = registered_buffers(module, function)
    for index, param in enumerate(function.params.params):
        name = param.name.value
        if callers and all(
            _tensor_passed(module, _passed(call.node, index - offset, name), tensors)
            for call, offset, tensors in callers
        ):
            fed.add(name)
    scope = module.functions.scope_of(function)
    for _ in range(2):  # what the function binds from them, two steps deep
        for symbol in scope.symbols.values():
            if any(
                b.kind is Kind.ASSIGN
                and b.value is not None
                and not _to_number(b.value)
                and fed & set(names_read(b.value))
                for b in symbol.bindings
            ):
                fed.add(symbol.name)
    return fed


def registered_buffers(module: TorchModule, function: cst.FunctionDef) -> set[str]:
    """`self.<name>` for each buffer the class of a method registers
    (`self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))` in MoCo): a
    tensor that moves with the module, to the GPU with it."""
    method = module.functions.scope_of(function)
    cls = method.class_scope
    found: set[str] = set()
    for call in module.facts.calls_by_method.get("register_buffer", ()) if cls else ():
        scope = call.scope
        args = call.node.args
        if scope.class_scope is not cls or dotted_name(call.receiver) != scope.self_name:
            continue
        name = (
            args[0].value.evaluated_value
            if args and isinstance(args[0].value, cst.SimpleString)
            else None
        )
        if isinstance(name, str):
            found.add(name)
    return {f"{method.self_name}.{name}" for name in found} if method.self_name else set()


def _tensor_passed(
    module: TorchModule, value: cst.BaseExpression | None, tensors: set[str]
) -> bool:
    """A loss or a model output of the loop around the call (`y_hat`, among `tensors`),
    or a network called in place (`net(X)`)."""
    if value is None:
        return False
    site = module.functions.site(value)
    if site is not None and module.models.called(site) is not None:
        return True
    return dotted_name(value) in tensors


def _passed(call: cst.Call, index: int, name: str) -> cst.BaseExpression | None:
    """The argument a call passes for a parameter (by position or keyword)."""
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == name:
                return arg.value
        elif i == index:
            return arg.value
    return None


def _to_number(node: cst.BaseExpression) -> bool:
    """`x.item()`, `x.tolist()`, `float(x)`, `int(x)`: a number from then on."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Attribute):
        return func.attr.value in ("item", "tolist")
    return isinstance(func, cst.Name) and func.value in ("float", "int")
