"""Batches in loader loops: which names hold a batch's tensors, which are moved to a
device, and which meet a value computed on a model's device (its outputs) unmoved."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from torchlint.semantic.builder import COMPREHENSIONS
from torchlint.semantic.functions import wraps_items
from torchlint.semantic.lattice import ModelKind
from torchlint.semantic.loops import is_periodic
from torchlint.semantic.models import Model
from torchlint.semantic.module import TorchModule
from torchlint.semantic.scopes import BUILTINS, CallSite, Loop, Scope, bound_names
from torchlint.semantic.syntax import (
    HOST_READS,
    MISSING,
    bool_value,
    contains,
    dotted_name,
    names_read,
)
from torchlint.text.walk import children, descendants, walk

PACK_PADDED = "torch.nn.utils.rnn.pack_padded_sequence"
# Reductions an `assert` turns into a Python bool: the test waits for the GPU.
ASSERTED = frozenset({"min", "max", "all", "any", "sum", "mean"})
# torch.nn.functional losses that are not spelled `*_loss`.
FUNCTIONAL_LOSSES = frozenset(
    {"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"}
)


def loader_targets(module: TorchModule, loop: Loop) -> list[cst.BaseExpression]:
    """The parts of a `for` target bound to DataLoader batches (through enumerate,
    tqdm, iter and zip); [] where the mapping cannot be followed."""
    if not isinstance(loop.node, cst.For) or not loop.loaders:
        return []
    out: list[cst.BaseExpression] = []
    loaders = {id(site) for site in loop.loaders}
    _follow(module, loop.ctx.scope, loaders, loop.node.target, loop.node.iter, out)
    return out


def _follow(
    module: TorchModule,
    scope: Scope,
    loaders: set[int],
    target: cst.BaseExpression,
    it: cst.BaseExpression,
    out: list[cst.BaseExpression],
) -> None:
    """The parts of `target` that `it` binds to batches of `loaders`, into `out`."""
    held = module.loaders.wrappers_held(it, scope) if isinstance(it, cst.Name) else []
    for call, where in held:  # `pbar = enumerate(loader)`, `pbar = tqdm(pbar)`
        _follow(module, where, loaders, target, call, out)
    if held:
        return
    if isinstance(it, cst.Call) and it.args and not it.args[0].star:
        name = scope.resolve(it.func)
        if name == "enumerate":
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                _follow(module, scope, loaders, target.elements[1].value, it.args[0].value, out)
            return
        if wraps_items(name):
            _follow(module, scope, loaders, target, it.args[0].value, out)
            return
        given = module.loaders.handed_on(it, scope)
        if given is not None:
            _follow(module, scope, loaders, target, given, out)
            return
        if name == "zip":
            if (
                isinstance(target, (cst.Tuple, cst.List))
                and len(target.elements) == len(it.args)
                and not any(a.star for a in it.args)
            ):
                for element, arg in zip(target.elements, it.args, strict=True):
                    _follow(module, scope, loaders, element.value, arg.value, out)
            return
    mine = any(id(site) in loaders for site in module.loaders.of(it, scope))
    if mine and not any(t is target for t in out):
        out.append(target)


def _names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            if not isinstance(element, cst.StarredElement):
                yield from _names(element.value)


@dataclass(frozen=True)
class BatchTensor:
    """A name bound to one tensor of a batch, and where a move of it goes."""

    name: str
    anchor: cst.BaseStatement  # the statement the move is inserted next to
    after: bool  # after `anchor` (an unpacking `x, y = batch`), else before it


def batch_tensors(module: TorchModule, loop: Loop, rebound: bool = False) -> dict[str, BatchTensor]:
    """Names bound to the tensors of each batch, bound nowhere else in the loop: unpacked
    by the loop target (`for x, y in loader`), or by a top-level `x, y = batch` of a
    single-name target. A single-name target itself may be a dict or a list: not
    included. With `rebound`, names also bound elsewhere in the loop are kept."""
    body = loop.body
    if not isinstance(loop.node, cst.For) or not body:
        return {}
    out: dict[str, BatchTensor] = {}
    singles: set[str] = set()
    for target in loader_targets(module, loop):
        if isinstance(target, (cst.Tuple, cst.List)):
            for name in _names(target):
                if rebound or name not in loop.bound:
                    out[name] = BatchTensor(name, body[0], False)
        elif isinstance(target, cst.Name) and (rebound or target.value not in loop.bound):
            singles.add(target.value)
    for statement in body:
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
            continue
        assign = statement.body[0]
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            for name in _taken(assign.targets[0].target, assign.value, singles):
                if rebound or loop.bound.get(name) == 1:
                    out[name] = BatchTensor(name, statement, True)
    return out


def _taken(
    target: cst.BaseAssignTargetExpression, value: cst.BaseExpression, singles: set[str]
) -> list[str]:
    """The names an assignment binds to tensors of a batch a single name holds: unpacked
    (`x, y = batch`) or items of it by a constant key (`x = batch["image"]`, `x, y =
    batch[0], batch[1]`)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        if isinstance(value, cst.Name):
            return list(_names(target)) if value.value in singles else []
        if isinstance(value, cst.Tuple) and len(value.elements) == len(target.elements):
            pairs = zip(target.elements, value.elements, strict=True)
            return [
                t.value.value
                for t, v in pairs
                if isinstance(t.value, cst.Name) and _item_of(v.value, singles)
            ]
        return []
    return [target.value] if isinstance(target, cst.Name) and _item_of(value, singles) else []


def _item_of(node: cst.BaseExpression, singles: set[str]) -> bool:
    """`batch["image"]`, `batch[0]`: an item of a batch by a constant key."""
    if not (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Name)
        and node.value.value in singles
        and len(node.slice) == 1
        and isinstance(node.slice[0].slice, cst.Index)
    ):
        return False
    key = node.slice[0].slice.value
    return isinstance(key, (cst.SimpleString, cst.Integer))


def batch_names(module: TorchModule, loop: Loop) -> set[str]:
    """Names bound to a batch or to one of its tensors."""
    names = {n.value for t in loader_targets(module, loop) for n in bound_names(t)}
    return names | set(batch_tensors(module, loop, rebound=True))


def derived_from_batch(module: TorchModule, loop: Loop) -> set[str]:
    """Names bound to the batch, or in the loop to something computed from it (in
    source order: `x = x.to(device)`, `inputs = batch["x"].float()`)."""
    derived = batch_names(module, loop)
    for b in loop.assignments:
        value = b.value if b.value is not None else b.source
        if value is not None and derived & set(names_read(value)):
            derived.add(b.symbol.name)
    return derived


def visible(module: TorchModule, expr: cst.BaseExpression | None, loop: Loop) -> bool:
    """Every name `expr` reads can be read where the loop runs."""
    if expr is None:
        return True
    scope = loop.ctx.scope
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            if scope.lookup(node.value) is None and node.value not in BUILTINS:
                return False
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)  # `a.b` reads `a`
        elif isinstance(node, cst.Arg):
            stack.append(node.value)  # not the keyword
        elif isinstance(node, (cst.Lambda, *COMPREHENSIONS)):
            return False  # names bound inside: not worth following
        else:
            stack.extend(children(node))
    return True


def device_move(module: TorchModule, model: Model, loop: Loop) -> CallSite | None:
    """An unconditional move of `model` to a device other than the CPU, made before the
    loop when both are in the same function, whose device expression is visible in
    `loop`."""
    for move in model.moves:
        found = module.devices.move(move)
        if found is None or found.is_cpu:
            continue
        if not all(cond in loop.ctx.ifs for cond in move.ctx.ifs):
            continue  # `if use_cuda: model.cuda()`: the inputs would need the same test
        same_scope = move.ctx.function is loop.ctx.function and loop.calls
        if same_scope and move.order > loop.calls[0].order:
            continue  # trained on the CPU first, moved afterwards
        if visible(module, module.devices.move_expression(move), loop):
            return move
    return None


# Calls that return a `torch.device` (not a string): `.type` can be read on them.
DEVICE_OBJECTS = frozenset(
    {"torch.device", "torch.accelerator.current_accelerator", "torch.get_default_device"}
)


def blocking_copies(module: TorchModule, loop: Loop) -> list[CallSite]:
    """The loop's copies of its batches (`x.to(device)`, `batch["x"].cuda()`) to a device
    that is not the CPU, without `non_blocking`: blocking, where the loader pins memory."""
    return [c for c in batch_copies(module, loop) if c.kwarg("non_blocking") is MISSING]


def batch_copies(module: TorchModule, loop: Loop) -> list[CallSite]:
    """The loop's copies of its batches to a device that is not the CPU (`non_blocking`
    given positionally or through `**` left out)."""
    names = batch_names(module, loop)
    out: list[CallSite] = []
    for call in loop.calls if names else ():
        receiver = call.receiver
        if isinstance(receiver, cst.Subscript):
            receiver = receiver.value
        if call.method not in ("to", "cuda") or dotted_name(receiver) not in names:
            continue
        if call.has_star_args:
            continue
        if any(bool_value(a) is not None for a in call.positional):
            continue  # `x.to(device, None, True)`: non_blocking given positionally
        found = module.devices.move(call)
        if found is not None and not found.is_cpu:
            out.append(call)
    return out


def host_read(module: TorchModule, loop: Loop) -> CallSite | None:
    """A read of a tensor on the host (`.item()`, `.cpu()`, `.tolist()`, `.numpy()`, or
    an `assert` on a reduction of a batch tensor the loop moved to the device: `assert
    mask.min() >= 0`) the loop's body makes on every iteration (not under `if step % N ==
    0:`): the host waits for the GPU's queue there each batch."""
    moved: set[str | None] | None = None
    for call in loop.calls:
        if is_periodic(call) or call.node.args:
            continue
        if call.method in HOST_READS:
            return call
        statement = call.ctx.statement
        if (
            call.method in ASSERTED
            and isinstance(statement, cst.SimpleStatementLine)
            and isinstance(statement.body[0], cst.Assert)
            and contains(statement.body[0].test, call.node)
        ):
            if moved is None:
                moved = moved_names(loop)
            if dotted_name(call.receiver) in moved:
                return call
    return None


def read_right_after(module: TorchModule, call: CallSite) -> bool:
    """The statement after the one holding `call` reads a tensor on the host
    (`.item()`, `.cpu()`...): the host waits for the copy there anyway."""
    statement = call.ctx.statement
    following = module.next_statement(statement) if statement is not None else None
    return following is not None and any(
        isinstance(n, cst.Call)
        and isinstance(n.func, cst.Attribute)
        and n.func.attr.value in HOST_READS
        and not n.args
        for n in descendants(following)
    )


def typed_copies(module: TorchModule, loop: Loop) -> list[CallSite]:
    """The loop's `.type(T)` of its batches with `T` a CUDA tensor type (`Tensor =
    torch.cuda.FloatTensor if cuda else torch.FloatTensor`): blocking copies."""
    names = batch_names(module, loop)
    out: list[CallSite] = []
    for call in loop.calls if names else ():
        if call.method != "type" or dotted_name(call.receiver) not in names:
            continue
        if len(call.node.args) == 1 and call.node.args[0].keyword is None:
            built = module.devices.tensor_type(call.node.args[0].value, call.scope)
            if built is not None and built.is_gpu:
                out.append(call)
    return out


def device_object(module: TorchModule, expr: cst.BaseExpression, scope: Scope) -> bool:
    """Every value `expr` may hold is a `torch.device` (a call that returns one, on each
    branch of a conditional)."""
    stack = [(origin, where) for origin, where in module.values.origins(expr, scope)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, cst.IfExp):
            stack += [(node.body, where), (node.orelse, where)]
        elif not (
            isinstance(node, cst.Call) and module.resolve(node.func, where) in DEVICE_OBJECTS
        ):
            return False
    return True


def is_loss(module: TorchModule, call: CallSite) -> bool:
    """A loss: a torch.nn.functional loss, or a call of a loss module."""
    qualname = call.qualname or ""
    if qualname.startswith("torch.nn.functional."):
        name = qualname.rsplit(".", 1)[-1]
        return name.endswith("loss") or name in FUNCTIONAL_LOSSES
    site = module.models.called(call)
    return site is not None and site.kind is ModelKind.LOSS


Origin = tuple[Model, CallSite | None]  # the model on a device, and its move


class _DeviceFlow(cst.CSTVisitor):
    """Walks a loop body in order: which values live on the model's device (its outputs
    and what is computed from them), and which batch tensors meet them (as arguments of
    the model, of a loss with such a value, or as the other operand of a comparison or
    an arithmetic operation with one)."""

    def __init__(
        self,
        module: TorchModule,
        calls: dict[int, CallSite],
        on_device: dict[int, Origin],
        batch: dict[str, BatchTensor],
    ) -> None:
        super().__init__()
        self.module = module
        self.calls = calls
        self.on_device = on_device
        self.batch = batch
        self.device_names: dict[str, Origin] = {}
        self.needs: dict[str, tuple[cst.Name, Origin]] = {}

    def origin(self, node: cst.BaseExpression) -> Origin | None:
        """The model whose device `node` is computed on, if provably any."""
        if isinstance(node, cst.Name):
            return self.device_names.get(node.value)
        if isinstance(node, cst.Call):
            found = self.on_device.get(id(node))
            if found is not None:
                return found
            func = node.func
            if isinstance(func, cst.Attribute):
                if func.attr.value in HOST_READS or func.attr.value == "to":
                    return None
                found = self.origin(func.value)
                if found is not None:
                    return found
            for arg in node.args:
                found = self.origin(arg.value)
                if found is not None:
                    return found
            return None
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            return self.origin(node.value)
        if isinstance(node, cst.UnaryOperation):
            return self.origin(node.expression)
        if isinstance(node, cst.BinaryOperation):
            return self.origin(node.left) or self.origin(node.right)
        return None

    def _meet(self, operands: list[cst.BaseExpression], origin: Origin) -> None:
        for operand in operands:
            if isinstance(operand, cst.Name) and operand.value in self.batch:
                self.needs.setdefault(operand.value, (operand, origin))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def leave_Assign(self, original_node: cst.Assign) -> None:
        found = self.origin(original_node.value)
        for target in original_node.targets:
            for name in _names(target.target):
                if found is not None:
                    self.device_names[name] = found
                else:
                    self.device_names.pop(name, None)

    def visit_Call(self, node: cst.Call) -> None:
        if any(a.star for a in node.args):
            return
        args = [a.value for a in node.args]
        found = self.on_device.get(id(node))
        if found is None:
            call = self.calls.get(id(node))
            if call is None or not is_loss(self.module, call):
                return
            found = next((o for o in map(self.origin, args) if o is not None), None)
        if found is not None:
            self._meet(args, found)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        found = next((o for o in map(self.origin, operands) if o is not None), None)
        if found is not None:
            self._meet(operands, found)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        found = self.origin(node.left) or self.origin(node.right)
        if found is not None:
            self._meet([node.left, node.right], found)


def moved_names(loop: Loop) -> set[str | None]:
    """Names of the loop that are moved with `.to(...)`/`.cuda(...)` in it."""
    return {
        dotted_name(c.receiver)
        for c in loop.calls
        if c.method in ("to", "cuda") and c.receiver is not None
    }


def numpy_value(module: TorchModule, node: cst.BaseExpression, scope: Scope) -> bool:
    """`np.mean(x)` in `np.mean(x).item()`: a NumPy value (or a number), not a tensor."""
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Call):
            qualname = module.resolve(node.func, scope) or ""
            if qualname.startswith("numpy.") or qualname in ("float", "int"):
                return True
            node = node.func
        else:
            node = node.value
    return False


def read_inside(node: cst.BaseExpression) -> bool:
    """A host read inside the expression (`x.cpu()` in `x.cpu().numpy()`): that one waits."""
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in HOST_READS
        ):
            return True
        node = node.func if isinstance(node, cst.Call) else node.value
    return False


def left_on_host(module: TorchModule, loop: Loop) -> set[str]:
    """Batch tensors the loop never moves nor rebinds while it moves another tensor of
    the same batch (`x = x.to(device)`, not `y`): they stay where the loader put them,
    on the CPU, so reading them on the host (`y.cpu()`) waits for nothing."""
    batch = batch_tensors(module, loop, rebound=True)
    moved = moved_names(loop)
    if not any(name in moved for name in batch):
        return set()
    return {name for name in batch if name not in moved and name not in loop.bound}


def host_lengths(loop: Loop) -> set[str | None]:
    """Names the loop passes as the lengths of `pack_padded_sequence`: they must stay on
    the CPU (a list of ints, or a CPU tensor), wherever the padded batch goes."""
    lengths = [
        c.arg("lengths", ("input", "lengths")) for c in loop.calls if c.qualname == PACK_PADDED
    ]
    return {dotted_name(n) for n in lengths if n is not MISSING}


def packed_lengths(module: TorchModule, call: CallSite) -> bool:
    """The call gives `pack_padded_sequence` its lengths, which must be on the CPU: in
    the argument (`lengths.cpu()`), or bound to the name passed there in the same loop
    (`lengths = lengths.cpu()`)."""
    statement = call.ctx.statement
    bound = set()
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign) and contains(small.value, call.node):
                bound |= {n for t in small.targets for n in names_read(t.target)}
    for pack in module.calls_to(PACK_PADDED):
        lengths = pack.arg("lengths", ("input", "lengths"))
        if lengths is MISSING:
            continue
        if contains(lengths, call.node):
            return True
        same_loop = pack.ctx.loops[-1:] == call.ctx.loops[-1:]
        if same_loop and set(names_read(lengths)) & bound:
            return True
    return False


def unmoved_batch_tensors(
    module: TorchModule, loop: Loop, on_device: dict[int, Origin]
) -> tuple[dict[str, BatchTensor], dict[str, tuple[cst.Name, Origin]]]:
    """The loop's batch tensors with no `.to`/`.cuda` on them, and those of them that
    meet a value on the device of a model in `on_device` (call node id -> origin)."""
    kept = moved_names(loop) | host_lengths(loop)
    batch = {n: b for n, b in batch_tensors(module, loop).items() if n not in kept}
    if not batch or not on_device or not loop.body:
        return batch, {}
    flow = _DeviceFlow(module, {id(c.node): c for c in loop.calls}, on_device, batch)
    for statement in loop.body:
        walk(statement, flow)  # a read-only walk of the loop body only
    return batch, flow.needs
