"""TL104 cpu-tensor-then-moved: a tensor is created on the CPU only to be copied to the GPU.

What: a torch factory (`zeros`, `ones`, `empty`, `full`, `eye`, `arange`,
`linspace`, `tensor`, `*_like`, `rand`, `randn`, `randint`, `randperm`) whose result
is immediately moved with `.cuda()`, `.to(<device>)` (and nothing else: no dtype, no
`non_blocking`, no `copy`) or `.type_as(other)` (Lightning's idiom), through casts,
shape views (`.view`, `.reshape`...), in-place fills (`.uniform_(0, 1)`) and the
deprecated `Variable(...)`, or by the next statement (`z = torch.randn(n, d)`, then
`z = z.type_as(x)`: reported without a fix), on every training
step: in a training loop that steps
the optimizer each iteration (or a loop inside one), in the `forward` of a module, or
in a function they call (two levels). Setup code that runs once, once-per-epoch code,
code under an `if step % N == 0:` (or a helper called there: sampling images),
inference loops and tests cost a copy or two: left alone. Likewise, per step, an
array NumPy builds only to become a GPU tensor: `Tensor(np.random.normal(0, 1, shape))`
with the legacy `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor` (the
PyTorch-GAN idiom: noise and real/fake labels built every step), or
`torch.from_numpy(np.ones(shape)).cuda()`. Arrays of real data (a batch NumPy loaded)
are not built by a NumPy factory in the call: left alone.

Why: every step, the tensor is allocated and filled by the CPU, then copied over PCIe
with a synchronising host-to-device transfer, then the CPU copy is thrown away. Passing
`device=` creates it where it is used: no copy, no CPU work, no sync. The PyTorch
Performance Tuning Guide: "Create tensors directly on the target device". A copy from
pageable memory without `non_blocking` also waits for the GPU to finish its queue: a
NumPy-built tensor per step is a host-device sync per step, like `.item()` (TL401).

Bad:
    class Encoder(nn.Module):
        def forward(self, x):
            h0 = torch.zeros(1, x.size(0), self.hidden).cuda()

Good:
    class Encoder(nn.Module):
        def forward(self, x):
            h0 = torch.zeros(1, x.size(0), self.hidden, device=x.device)

Fix (sometimes safe): pass `device=` to the factory and drop the move, keeping the
casts, views and fills between them (`.cuda()` becomes
`device="cuda"`, `.cuda(1)` becomes `device="cuda:1"`). Safe for deterministic
factories whose values are exact on every device (`zeros`, `ones`, `empty`, `full`,
`eye`, `tensor`, the non-random `*_like`, `arange` of int literals). Unsafe for the
random ones (`rand`, `randn`, `randint`, `randperm`, `rand*_like`): the CPU and CUDA
generators give different numbers and draw from different seeds' streams; and for
`linspace` and non-integer `arange`, whose values are computed on the device and may
differ in the last bit; and after a random in-place fill (`.uniform_()`, `.normal_()`).
Calls that also pass `requires_grad=`, `out=`,
`pin_memory=`, a `device=` of their own or `**kwargs` are left alone (with
`requires_grad=True` the moved tensor is not a leaf: changing that changes `.grad`).
`.type_as(x)` becomes `device=x.device, dtype=x.dtype`: safe for `zeros`, `ones`,
`empty`, `eye` and their `*_like` (exact in any dtype), unsafe otherwise (a fill value,
data or random draws made in float32 then cast may round twice).
NumPy-built: `T(np.ones(shape))`, `np.zeros`, `np.full(shape, v)` with a CUDA tensor
type `T` become `T(*shape).fill_(v)` (safe: the same values, dtype and device; shapes
spelled as a tuple, `x.shape` or `x.size()`); the random ones are reported without a
fix (torch's generator draws other numbers than NumPy's: port them by hand as the
message says).

Impact: low where the tensor has at most 4096 elements and its shape is visible as int
constants (literals, names bound once, argparse defaults: `torch.zeros(BATCH,
dtype=torch.long)`, `torch.ones(opt.n_classes)`, `torch.tensor([0.5, 2.0])`,
`torch.arange(10)`, `torch.randperm(n)`...), or none at all (`torch.empty(0)`: nothing
is copied): the copy moves a few KB at most. A size that reads the first dimension of a
batch (`imgs.shape[0]`, `imgs.size(0)`, a name bound to one) counts as the constant
`batch_size` of the loader the batch comes from (`torch.ones(imgs.size(0), 1)`, labels
of a batch of 64; `np.random.randint(0, n_classes, imgs.shape[0])`), for torch factories
and NumPy-built arrays alike; so does the first dimension of a name the loop binds to a
batch as it is (`real = Variable(imgs.type(Tensor))`) and of a helper's parameter every
call of the file passes such a tensor (a WGAN-GP penalty's `real.size(0)`). A vector as
long as a batch, whatever its size, is low too (one size reading a tensor's first
dimension, or that times a small int: MoCo's `torch.zeros(logits.shape[0])`,
`torch.randperm(2 * bsz)`). Other shapes known only at run time, `*_like` and `*shape`
stay high.

Unknown device: reported where a factory is moved on every step to a device that cannot
be named (a `device` parameter, `args.device`, `x.device`): `device=` gets the same
expression, and where that is the CPU the tensor is built where it was built before, so
the advice costs nothing there.

Sources: PyTorch Performance Tuning Guide, "Create tensors directly on the target
device"; CUDA semantics notes; torch.Generator docs (per-device generators).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from itertools import pairwise

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    CallSite,
    Kind,
    Scope,
    TorchModule,
    batch_size_of,
    contains,
    int_value,
    is_periodic,
    per_sample,
)

DETERMINISTIC = {
    "zeros",
    "ones",
    "empty",
    "full",
    "eye",
    "tensor",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
}
RANDOM = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like"}
INEXACT = {"linspace", "arange"}  # `arange` of int literals is exact: see `_safe`
FACTORIES = DETERMINISTIC | RANDOM | INEXACT
# Exact in any dtype: built in the other tensor's dtype, the same values as built in
# float32 and cast (`.type_as`); a fill value or data could round twice.
EXACT_IN_ANY_DTYPE = {"zeros", "ones", "empty", "eye", "zeros_like", "ones_like", "empty_like"}
BLOCKING_KWARGS = ("device", "requires_grad", "out", "pin_memory")
# NumPy arrays built only to become a GPU tensor, and how to build them there.
NUMPY_ON_DEVICE = {
    "zeros": "`torch.zeros(shape, device=...)`",
    "ones": "`torch.ones(shape, device=...)`",
    "full": "`torch.full(shape, value, device=...)`",
    "empty": "`torch.empty(shape, device=...)`",
    "eye": "`torch.eye(n, device=...)`",
    "arange": "`torch.arange(..., device=...)`",
    "linspace": "`torch.linspace(..., device=...)`",
    "normal": "`torch.normal(mean, std, shape, device=...)`",
    "uniform": "`torch.empty(shape, device=...).uniform_(low, high)`",
    "rand": "`torch.rand(shape, device=...)`",
    "random": "`torch.rand(shape, device=...)`",
    "random_sample": "`torch.rand(shape, device=...)`",
    "randn": "`torch.randn(shape, device=...)`",
    "standard_normal": "`torch.randn(shape, device=...)`",
    "randint": "`torch.randint(low, high, shape, device=...)`",
    "permutation": "`torch.randperm(n, device=...)`",
}
RANDOM_ARRAYS = {"normal", "uniform", "rand", "random", "random_sample", "randn"}
RANDOM_ARRAYS |= {"standard_normal", "randint", "permutation"}
NUMPY_FACTORIES = [
    f"numpy.random.{n}" if n in RANDOM_ARRAYS else f"numpy.{n}" for n in NUMPY_ON_DEVICE
]
# Calls that make a CPU tensor of an array (then moved with `.cuda()`/`.to(...)`).
TO_TENSOR = {"torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.Tensor"}
TO_TENSOR |= {f"torch.{t}Tensor" for t in ("Float", "Double", "Half", "Long", "Int", "Byte")}
CASTS = {"float", "double", "half", "long", "int", "bfloat16", "contiguous"}
# Between the factory and the move, calls that keep the tensor where it is: shape views,
# in-place fills (random ones draw from the CPU generator), and the deprecated
# `Variable(t)` wrapper (the tensor itself since PyTorch 0.4).
VIEWS = {"view", "reshape", "unsqueeze", "squeeze", "flatten", "t", "expand", "repeat"}
FILLS = {"uniform_", "normal_", "fill_", "zero_", "random_", "bernoulli_", "exponential_"}
RANDOM_FILLS = {"uniform_", "normal_", "random_", "bernoulli_", "exponential_"}
VARIABLE = "torch.autograd.Variable"
# What the text of a file this rule reports in holds, at least: a factory or a call making
# a tensor of an array, called by its name (up to three levels of parentheses in its
# arguments), then moved (`.cuda`, `.to` or `.type_as`, past casts, across lines,
# comments and backslashes); or a legacy tensor type (the CUDA one a NumPy array is
# given to). A file with the tokens and neither (`x.to(device)`, `self.proj(x).to(dtype)`:
# most model code) is not parsed for this rule. Each branch starts with a character the
# search skips to (`(`, `T`).
_ARGS = r"(?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*"
_WS = r"(?:[\s\\]|#[^\n]*\n)*"
_CALLED = FACTORIES | {qualname.rpartition(".")[2] for qualname in TO_TENSOR}
_NAMED = "|".join(rf"(?<=\b{name}\()" for name in sorted(_CALLED))
_CAST = rf"{_WS}\.{_WS}(?:{'|'.join(sorted(CASTS))}){_WS}\(\s*\)"
_KEPT = rf"{_WS}\.{_WS}(?:{'|'.join(sorted(VIEWS | FILLS))}){_WS}\({_ARGS}\)|{_WS}\)"
_TYPES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
PATTERN = re.compile(
    rf"\((?:{_NAMED}){_ARGS}\)(?:{_CAST}|{_KEPT})*{_WS}"
    rf"(?:\.[\s\\]*|[ \t]*\n\s*\w+\s*=\s*\w+\s*\.\s*)(?:cuda|to|type_as)\b"
    rf"|Tensor\b(?:{'|'.join(rf'(?<={t}Tensor)' for t in _TYPES)})"
)


# At most this many elements (16 KB of float32): a tensor whose copy moves a few KB
# (labels of a batch, a mask, the noise of a small batch, a 0-element tensor).
TINY = 4096


PER_SAMPLE = "a vector of one value per sample of a batch: the copy moves a few KB"
# Factories whose one positional argument is the length of the vector they build.
VECTORS = frozenset({"zeros", "ones", "empty", "rand", "randn", "randperm"})


def _one_per_sample(name: str, factory: cst.Call, move: CallSite) -> bool:
    """A vector as long as a batch is (`torch.zeros(logits.shape[0], dtype=torch.long)`,
    `torch.randperm(batch_size_all)`), whatever the batch size."""
    sizes = [a.value for a in factory.args if a.keyword is None]
    if name not in VECTORS or len(sizes) != 1 or any(a.star for a in factory.args):
        return False
    return per_sample(sizes[0], move.scope)


def _tiny(count: int) -> str:
    if count == 0:
        return "an empty tensor: nothing is copied"
    return f"{count} element{'s' if count > 1 else ''}: the copy moves a few bytes"


# Where a NumPy constructor takes its shape: the position of `shape`/`size`, or every
# positional argument (`np.random.rand(2, 3)`).
SHAPE_AT = {"zeros": 0, "ones": 0, "empty": 0, "full": 0, "random": 0, "random_sample": 0}
SHAPE_AT |= {"standard_normal": 0, "normal": 2, "uniform": 2, "randint": 2}


def _array_numel(module: TorchModule, name: str, array: CallSite) -> int | None:
    """The elements of the array a NumPy call builds, where each size is an int constant
    or the first dimension of a batch of a loader with a constant `batch_size` (at most:
    `np.random.normal(0, 1, (imgs.shape[0], 10))`); None otherwise."""
    args = array.node.args
    if any(a.star for a in args):
        return None
    if name in ("rand", "randn"):
        sizes = [a.value for a in args]
    else:
        keyword = next(
            (a.value for a in args if a.keyword and a.keyword.value in ("size", "shape")), None
        )
        positional = [a.value for a in args if a.keyword is None]
        at = SHAPE_AT.get(name)
        if keyword is None and (at is None or len(positional) <= at):
            return None
        sizes = [keyword if keyword is not None else positional[at or 0]]
    return module.values.numel(
        sizes, array.scope, lambda size: batch_size_of(module, size, array.scope, array.ctx.loops)
    )


def _numel(module: TorchModule, name: str, factory: cst.Call, move: CallSite) -> int | None:
    """The elements of the tensor a factory builds, where its shape is visible as int
    constants or the first dimension of a batch of a loader with a constant `batch_size`
    (at most: `torch.ones(x.size(0))`); None otherwise (`*_like`, other sizes computed at
    run time)."""
    scope = move.scope
    args = [a.value for a in factory.args if a.keyword is None and not a.star]
    sized = next((a.value for a in factory.args if a.keyword and a.keyword.value == "size"), None)
    values = module.values
    if any(a.star for a in factory.args):
        return None
    if name in ("zeros", "ones", "empty", "rand", "randn"):
        return values.numel(
            [sized] if sized is not None else args,
            scope,
            lambda size: batch_size_of(module, size, scope, move.ctx.loops),
        )
    if name == "full" and args:
        return values.numel([args[0]], scope)
    if name == "randint" and (sized is not None or len(args) >= 2):
        return values.numel([sized if sized is not None else args[-1]], scope)
    picked = {"randperm": args[:1], "eye": args[:2], "linspace": args[2:3]}.get(name, [])
    if picked:
        counts = [values.numel([a], scope) for a in picked]
        known = [c for c in counts if c is not None]
        if len(known) != len(counts):
            return None
        return known[0] ** 2 if name == "eye" and len(known) == 1 else math.prod(known)
    if name == "arange" and 1 <= len(args) <= 3:
        bounds = [module.values.constant(a, scope) for a in args]
        ints = [b.value for b in bounds if b is not None and type(b.value) is int]
        return len(range(*ints)) if len(ints) == len(args) else None
    if name == "tensor" and len(args) == 1:
        return _elements(args[0])
    return None


def _elements(data: cst.BaseExpression) -> int | None:
    """The scalars of a literal (nested lists and tuples of numbers); None otherwise."""
    if isinstance(data, (cst.List, cst.Tuple)):
        counts = [
            _elements(e.value) for e in data.elements if not isinstance(e, cst.StarredElement)
        ]
        if len(counts) != len(data.elements) or None in counts:
            return None
        return sum(c for c in counts if c is not None)
    if isinstance(data, (cst.Integer, cst.Float)) or (
        isinstance(data, cst.UnaryOperation)
        and isinstance(data.expression, (cst.Integer, cst.Float))
    ):
        return 1
    return None


def _safe(name: str, factory: cst.Call) -> bool:
    if name in DETERMINISTIC:
        return True
    if name == "arange":  # integer literals only: exact on every device
        return all(
            int_value(a.value) is not None if a.keyword is None else a.keyword.value == "dtype"
            for a in factory.args
        )
    return False


def _filled(tensor_type: cst.Call, array: cst.Call, name: str) -> cst.Call | None:
    """`T(np.ones(shape))` as `T(*shape).fill_(1.0)`: the same values, dtype and device,
    with no array and no copy. Only for `ones`/`zeros`/`full` of a shape we can spread."""
    if name not in ("ones", "zeros", "full") or not array.args or array.args[0].keyword:
        return None
    if name == "full":
        if len(array.args) != 2 or array.args[1].keyword is not None:
            return None
        value: cst.BaseExpression = array.args[1].value
    elif len(array.args) == 1:
        value = cst.Float("1.0" if name == "ones" else "0.0")
    else:
        return None  # a dtype or order
    shape = array.args[0].value
    if isinstance(shape, cst.Tuple) and shape.elements:
        sizes = [
            cst.Arg(e.value, star="*" if isinstance(e, cst.StarredElement) else "")
            for e in shape.elements
        ]
    elif (isinstance(shape, cst.Attribute) and shape.attr.value == "shape") or (
        isinstance(shape, cst.Call)
        and isinstance(shape.func, cst.Attribute)
        and shape.func.attr.value == "size"
        and not shape.args
    ):
        sizes = [cst.Arg(shape, star="*")]
    else:
        return None
    built = tensor_type.with_changes(args=_commas(sizes))
    return cst.Call(cst.Attribute(built, cst.Name("fill_")), [cst.Arg(value)])


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [a.with_changes(comma=comma) for a in args[:-1]] + args[-1:]


def _peeled(
    module: TorchModule, node: cst.BaseExpression | None, scope: Scope
) -> tuple[cst.Call | None, bool]:
    """The factory call an expression is made of, through casts, shape views, in-place
    fills and `Variable(...)`; and whether a random fill is among them."""
    random_fill = False
    while isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in CASTS | VIEWS | FILLS:
            if func.attr.value in CASTS and node.args:
                return None, False  # `.float(memory_format=...)`, `.int(x)`: not a cast
            random_fill = random_fill or func.attr.value in RANDOM_FILLS
            node = func.value
        elif module.resolve(func, scope) == VARIABLE and len(node.args) == 1:
            node = node.args[0].value
        else:
            return node, random_fill
    return None, False


def _rebound(move: CallSite) -> cst.BaseExpression | None:
    """What the move's receiver was bound to by the statement just before, where the
    move binds it again (`z = torch.randn(n, d)` then `z = z.type_as(x)`), both directly
    in the body of the same loop or function."""
    receiver, statement = move.receiver, move.ctx.statement
    if not isinstance(receiver, cst.Name) or statement is None:
        return None
    owner = move.ctx.loops[-1].node if move.ctx.loops else move.ctx.function
    body = owner.body.body if owner is not None else ()
    at = next((i for i, s in enumerate(body) if s is statement), 0)
    if not at or not isinstance(body[at - 1], cst.SimpleStatementLine):
        return None
    symbol = move.scope.lookup(receiver.value)
    bindings = symbol.bindings if symbol is not None else []
    for before, binding in pairwise(bindings):
        if binding.value is move.node:
            value = before.value
            if before.kind is Kind.ASSIGN and value is not None and contains(body[at - 1], value):
                return value
            return None
    return None


def _unparenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    """The move's receiver as it stands in for the move (`(t.float()).to(d)` -> `t.float()`,
    whose own parentheses the move no longer needs)."""
    return node.with_changes(lpar=[], rpar=[]) if node.lpar else node


class CpuTensorThenMoved(Rule):
    code = "TL104"
    name = "cpu-tensor-then-moved"
    fix_safety = FixSafety.SOMETIMES
    tokens = ("cuda", ".to(")
    pattern = PATTERN

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        arrays = {id(c.node): c for c in module.calls_to(*NUMPY_FACTORIES)}
        for move in module.method_calls("cuda", "to", "type_as"):
            factory, random_fill = _peeled(module, move.receiver, move.scope)
            bound = None
            if factory is None and (bound := _rebound(move)) is not None:
                factory, random_fill = _peeled(module, bound, move.scope)
            if factory is None:
                continue
            qualname = module.resolve(factory.func, move.scope) or ""
            head, _, name = qualname.rpartition(".")
            if head != "torch" or name not in FACTORIES:
                continue
            if factory.args and id(factory.args[0].value) in arrays:
                continue  # `torch.tensor(np.zeros(n)).cuda()`: NumPy-built, below
            if any(a.star == "**" for a in factory.args) or any(
                a.keyword is not None and a.keyword.value in BLOCKING_KWARGS for a in factory.args
            ):
                continue
            device = self._device(module, move)
            if device is None or not module.runs.per_step(move.ctx) or is_periodic(move):
                continue
            safe = _safe(name, factory) and not random_fill
            spelled = module.module.code_for_node(factory.func)
            count = _numel(module, name, factory, move)
            low = None if count is None or count > TINY else _tiny(count)
            if count is None and _one_per_sample(name, factory, move):
                low = PER_SAMPLE
            if bound is not None:  # built a statement before: reported, fixed by hand
                yield self._apart(move, spelled, low)
                continue
            if move.method == "type_as":
                if factory is move.receiver:  # a cast or fill after it: its dtype is kept
                    yield self._typed(move, factory, spelled, name in EXACT_IN_ANY_DTYPE, low)
                continue
            assert move.receiver is not None
            message = (
                f"`{spelled}(...)` builds the tensor on the CPU and then copies it to the GPU; "
                "create it there with `device=`"
            )
            yield self.diagnostic(
                move.node,
                message if low is None else f"{message} (low impact: {low})",
                impact=Impact.HIGH if low is None else Impact.LOW,
                fix=fix(
                    "Pass `device=` to the factory",
                    Applicability.SAFE if safe else Applicability.UNSAFE,
                    Replace(
                        move.node,
                        _unparenthesized(move.receiver).deep_replace(
                            factory, set_kwarg(factory, "device", device)
                        ),
                    ),
                ),
            )
        if arrays:
            yield from self._from_numpy(module, arrays)

    def _from_numpy(self, module: TorchModule, arrays: dict[int, CallSite]) -> Iterator[Diagnostic]:
        """Arrays NumPy builds every step only to be copied to the GPU: `T(np.ones(s))`
        with `T` a CUDA tensor type, `torch.from_numpy(np.random.normal(...)).cuda()`."""
        for call in module.calls:
            args = call.node.args
            if len(args) != 1 or args[0].keyword is not None or args[0].star:
                continue
            array = arrays.get(id(args[0].value))
            if array is None or not module.runs.per_step(call.ctx) or is_periodic(call):
                continue
            built = module.devices.tensor_type(call.node.func, call.scope)
            if built is not None and built.is_gpu:
                yield self._numpy_built(module, call, array, call.node)
        for move in module.method_calls("cuda", "to"):
            inner = move.receiver
            while (
                isinstance(inner, cst.Call)
                and isinstance(inner.func, cst.Attribute)
                and inner.func.attr.value in CASTS
                and not inner.args
            ):
                inner = inner.func.value  # `torch.from_numpy(a).float().cuda()`
            if not isinstance(inner, cst.Call) or len(inner.args) != 1:
                continue
            array = arrays.get(id(inner.args[0].value))
            if array is None or module.resolve(inner.func, move.scope) not in TO_TENSOR:
                continue
            device = module.devices.move(move)
            if device is None or device.is_cpu or is_periodic(move):
                continue
            if module.runs.per_step(move.ctx):
                yield self._numpy_built(module, move, array, None)

    def _numpy_built(
        self, module: TorchModule, at: CallSite, array: CallSite, tensor_type: cst.Call | None
    ) -> Diagnostic:
        name = (module.resolve(array.node.func, array.scope) or "").rpartition(".")[2]
        spelled = module.module.code_for_node(array.node.func)
        message = (
            f"`{spelled}(...)` is computed by NumPy on the CPU and copied to the GPU on every "
            f"step; build it on the device: {NUMPY_ON_DEVICE[name]}"
        )
        edit = _filled(tensor_type, array.node, name) if tensor_type is not None else None
        count = _array_numel(module, name, array)
        low = None if count is None or count > TINY else _tiny(count)
        return self.diagnostic(
            at.node,
            message if low is None else f"{message} (low impact: {low})",
            fix=fix("Build the tensor on its device", Applicability.SAFE, Replace(at.node, edit))
            if edit is not None
            else None,
            impact=Impact.HIGH if low is None else Impact.LOW,
        )

    def _apart(self, move: CallSite, spelled: str, low: str | None) -> Diagnostic:
        """A factory's tensor moved by the next statement (`z = torch.randn(n, d)`, then
        `z = z.type_as(x)`): no fix (two statements to edit, and the device must be
        bound where the factory runs)."""
        message = (
            f"`{spelled}(...)` builds the tensor on the CPU and the next statement copies it "
            "to the GPU; create it there with `device=` (and `dtype=`) and drop the move"
        )
        return self.diagnostic(
            move.node,
            message if low is None else f"{message} (low impact: {low})",
            impact=Impact.HIGH if low is None else Impact.LOW,
        )

    def _typed(
        self, move: CallSite, factory: cst.Call, spelled: str, safe: bool, low: str | None
    ) -> Diagnostic:
        """`torch.randn(shape).type_as(x)`: built where `x` is, in its dtype."""
        other = move.node.args[0].value
        placed = set_kwarg(factory, "device", cst.Attribute(other, cst.Name("device")))
        typed = set_kwarg(placed, "dtype", cst.Attribute(other, cst.Name("dtype")))
        message = (
            f"`{spelled}(...)` builds the tensor on the CPU and `.type_as(...)` then copies it "
            "to the other tensor's device; create it there with `device=` and `dtype=`"
        )
        return self.diagnostic(
            move.node,
            message if low is None else f"{message} (low impact: {low})",
            impact=Impact.HIGH if low is None else Impact.LOW,
            fix=fix(
                "Pass the other tensor's `device=` and `dtype=` to the factory",
                Applicability.SAFE if safe else Applicability.UNSAFE,
                Replace(move.node, typed),
            ),
        )

    @staticmethod
    def _device(module: TorchModule, move: CallSite) -> cst.BaseExpression | None:
        """The device expression for `device=`, when the move passes only a device."""
        args = move.node.args
        if move.method == "type_as":
            return args[0].value if len(args) == 1 and args[0].keyword is None else None
        if move.method == "cuda":
            if not args:
                return cst.SimpleString('"cuda"')
            if len(args) == 1 and args[0].keyword is None:
                index = int_value(args[0].value)
                return (
                    cst.SimpleString(f'"cuda:{index}"')
                    if index is not None and index >= 0
                    else None
                )
            return None
        if len(args) != 1 or args[0].star:
            return None
        arg = args[0]
        if arg.keyword is not None and arg.keyword.value != "device":
            return None
        found = module.devices.move(move)
        if found is None or found.is_cpu:
            return None
        return arg.value
