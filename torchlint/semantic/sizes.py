"""The sizes of batches and the weight of the steps that take them: how many samples an
expression counts where it reads a batch's first dimension (`x.size(0)` for a loader of a
constant `batch_size`), loaders whose batches are too small for a copy of them to be
worth overlapping, the networks a loader trains and whether such a step is heavy."""

from __future__ import annotations

import libcst as cst

from torchlint.semantic.batches import batch_tensors
from torchlint.semantic.datasets import TINY_BATCH
from torchlint.semantic.loaders import DataLoaderSite, Loader
from torchlint.semantic.models import Model, ModelSite
from torchlint.semantic.module import TorchModule
from torchlint.semantic.networks import NOT_NETWORKS
from torchlint.semantic.scopes import Kind, Loop, Scope, assigned_values
from torchlint.semantic.syntax import MISSING, argument, handed_as_is, int_value
from torchlint.semantic.workload import HEAVY_STEP


def batch_size_of(
    module: TorchModule, expr: cst.BaseExpression, scope: Scope, loops: tuple[Loop, ...]
) -> int | None:
    """At most how many samples `expr` counts where it reads the first dimension of a
    batch (`x.shape[0]`, `x.size(0)`, `len(x)`, or a name bound once to one of those) for
    `x` a tensor one of `loops` (those around it) draws from a loader whose `batch_size`
    is a constant: that batch size (the last batch may be smaller); None otherwise."""
    values = assigned_values(expr, scope) if isinstance(expr, cst.Name) else []
    if len(values) == 1:
        expr = values[0]
    tensor = _first_dimension_of(expr)
    if tensor is None:
        return None
    return _batch_of(module, tensor, scope, loops, 0)


def per_sample(expr: cst.BaseExpression, scope: Scope) -> bool:
    """`expr` counts the samples of a batch, whatever its size: the first dimension of a
    tensor (`x.shape[0]`, `x.size(0)`, `len(x)`, or a name bound once to one), or that
    times a small int literal (`2 * bsz`: both views of a contrastive batch)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        small = [int_value(side) for side in (expr.left, expr.right)]
        other = expr.right if small[0] is not None else expr.left
        factor = small[0] if small[0] is not None else small[1]
        return factor is not None and 0 < factor <= 8 and per_sample(other, scope)
    values = assigned_values(expr, scope) if isinstance(expr, cst.Name) else []
    if len(values) == 1:
        expr = values[0]
    return _first_dimension_of(expr) is not None


MAX_BATCH_DEPTH = 3


def _batch_of(
    module: TorchModule, tensor: str, scope: Scope, loops: tuple[Loop, ...], depth: int
) -> int | None:
    """The constant batch size of the loader whose batches `tensor` holds: a batch tensor
    of one of `loops`, a name a loop binds to one (`real = Variable(imgs.type(T))`), or a
    parameter every call passes one (`gradient_penalty(D, real.data, fake.data)`)."""
    for loop in reversed(loops):
        if tensor in batch_tensors(module, loop, rebound=True):
            sizes = {_constant_batch(module, loader) for loader in loop.loaders}
            return sizes.pop() if len(sizes) == 1 else None
        values = [b.value for b in loop.assignments if b.symbol.name == tensor]
        if len(values) == 1 and values[0] is not None and depth < MAX_BATCH_DEPTH:
            inner = handed_as_is(values[0])
            if inner is not None:
                return _batch_of(module, inner, scope, loops, depth + 1)
    symbol = scope.lookup(tensor)
    param = symbol.only(Kind.PARAM) if symbol is not None else None
    function = param.symbol.scope.node if param is not None else None
    if param is None or param.index is None or not isinstance(function, cst.FunctionDef):
        return None
    callers = module.functions.callers(function)
    if not callers or depth >= MAX_BATCH_DEPTH:
        return None
    sizes = set()
    for call, offset in callers:
        inner = handed_as_is(argument(call.node, tensor, index=param.index - offset))
        sizes.add(
            _batch_of(module, inner, call.scope, call.ctx.loops, depth + 1) if inner else None
        )
    return sizes.pop() if len(sizes) == 1 else None


def _first_dimension_of(expr: cst.BaseExpression) -> str | None:
    """The name whose first dimension `expr` reads: `x.shape[0]`, `x.size(0)`, `len(x)`."""
    if (
        isinstance(expr, cst.Subscript)
        and isinstance(expr.value, cst.Attribute)
        and expr.value.attr.value == "shape"
        and isinstance(expr.value.value, cst.Name)
        and len(expr.slice) == 1
        and isinstance(expr.slice[0].slice, cst.Index)
        and int_value(expr.slice[0].slice.value) == 0
    ):
        return expr.value.value.value
    if isinstance(expr, cst.Call) and len(expr.args) == 1:
        func, arg = expr.func, expr.args[0].value
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "size"
            and isinstance(func.value, cst.Name)
            and int_value(arg) == 0
        ):
            return func.value.value
        if isinstance(func, cst.Name) and func.value == "len" and isinstance(arg, cst.Name):
            return arg.value
    return None


def _constant_batch(module: TorchModule, loader: Loader) -> int | None:
    if not isinstance(loader, DataLoaderSite):
        return None  # built in another file: its arguments are not read here
    size = loader.arg("batch_size")
    found = module.values.constant(size, loader.call.scope) if size is not MISSING else None
    value = found.value if found is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def tiny_batches(module: TorchModule, loaders: list[Loader]) -> str | None:
    """Why copying these loaders' batches costs nothing worth overlapping, said as a
    finding's low-impact reason: every batch of each is at most `TINY_BATCH` bytes (small
    images: `Datasets.batch_bytes`; a loader another file builds is not known small);
    None otherwise."""
    sizes = [
        module.datasets.batch_bytes(loader) if isinstance(loader, DataLoaderSite) else None
        for loader in loaders
    ]
    if not sizes or any(size is None or size > TINY_BATCH for size in sizes):
        return None
    largest = max(size for size in sizes if size is not None)
    return f"batches of at most {-(-largest // 1024)} KB of small images: a copy of microseconds"


def trained_on(module: TorchModule, loader: DataLoaderSite) -> list[Model]:
    """The networks the training loops over the loader call, and those a framework is
    given to train on it (`trainer.fit(model, loader)`)."""
    found = [
        site
        for loop in loader.loops
        if loop.is_training
        for c in module.models.network_calls(loop)
        if (site := module.models.called(c)) is not None
    ]
    frameworks = module.frameworks
    for fit in frameworks.fits:
        given = frameworks.fitted(fit)
        if given is MISSING or loader not in module.loaders.of(given, fit.scope):
            continue
        model = frameworks.fit_model(fit)
        site = module.models.of(model, fit.scope) if model is not MISSING else None
        if site is not None:
            found.append(site)
    return found


def fine_tuned(module: TorchModule, trained: list[Model]) -> bool:
    """One of these networks is a Hugging Face pretrained model (`from_pretrained`), or
    the file loads one, which the networks it trains may hold or wrap (a LightningModule,
    a classifier head over `DistilBertModel`)."""
    return any(_pretrained(site) for site in trained) or _loads_pretrained(module)


def heavy_training(module: TorchModule, loader: DataLoaderSite) -> str | None:
    """Why a training step over the loader's batches is heavy (tens of ms or more, beside
    which a copy, a sync or a worker restart is a small share), said as a finding's
    low-impact reason: it fine-tunes a Hugging Face pretrained model (one it trains, or
    one the file loads where what it trains is of unknown size: a LightningModule that
    wraps it), or runs a network of 100M parameters or more (counted, or as its
    pretrained id says; `Workload.heavy_step` for the loop's calls). None where nothing
    says so: an unknown step is not heavy."""
    if not loader.trains:
        return None
    trained = trained_on(module, loader)
    sizes = [module.networks.estimated_parameters(site) for site in trained]
    if any(_pretrained(site) for site in trained) or (
        (not trained or None in sizes) and _loads_pretrained(module)
    ):
        return "a step that fine-tunes a pretrained transformer"
    largest = max((size for size in sizes if size is not None), default=0)
    if largest >= HEAVY_STEP:
        return f"a step of a network of {largest // 1_000_000}M parameters"
    if any(module.workload.heavy_step(loop) for loop in loader.loops if loop.is_training):
        return "a heavy step (a network of 100M parameters or a pretrained transformer)"
    return None


def _pretrained(site: Model) -> bool:
    return isinstance(site, ModelSite) and _hf_pretrained(site.construction.qualname or "")


def _loads_pretrained(module: TorchModule) -> bool:
    return any(_hf_pretrained(q) for q in module.qualnames_called)


def _hf_pretrained(qualname: str) -> bool:
    """`transformers.<Model>.from_pretrained`, not a tokenizer's, processor's or config's."""
    head, _, name = qualname.removesuffix(".from_pretrained").rpartition(".")
    return (
        qualname.endswith(".from_pretrained")
        and head.startswith("transformers")
        and not any(n in name for n in NOT_NETWORKS)
    )
