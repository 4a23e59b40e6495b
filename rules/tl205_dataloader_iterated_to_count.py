"""TL205 dataloader-iterated-to-count: a whole pass over the data to count its batches.

What: `len(list(loader))`, `len(tuple(loader))`, `len([b for b in loader])` or
`sum(1 for _ in loader)` where `loader` is a `DataLoader` built in the file, or the
iterable a loop of the same function walks batch by batch (the loop moves its batches
to a device, or trains: a backward pass and an optimizer step) — the PyTorch examples'
`return losses / len(list(train_dl))`.

Why: the loader has no idea it is only being counted: it loads, decodes, augments,
collates (and, with workers, starts processes for) every batch of the epoch a second
time and throws them away, while the GPU waits. For a map-style dataset `len(loader)`
is the same number (it honours `batch_size` and `drop_last`) at no cost; otherwise
count the batches in the loop that already walks them.

Bad:
    def train(model, train_dl, optimizer):
        losses = 0.0
        for src, tgt in train_dl:
            loss = model(src, tgt)
            loss.backward()
            optimizer.step()
            losses += loss.item()
        return losses / len(list(train_dl))

Good:
    def train(model, train_dl, optimizer):
        losses = 0.0
        for src, tgt in train_dl:
            loss = model(src, tgt)
            loss.backward()
            optimizer.step()
            losses += loss.item()
        return losses / len(train_dl)

Fix (unsafe): `len(loader)`, offered only for a loader of the file with default
batching over a dataset known to have a length (tensors, a list, a torchvision dataset,
a Dataset class of the file with `__len__`): `len()` of a loader over an
`IterableDataset` raises TypeError (or gives the dataset's estimate), and a custom
`batch_sampler` must define a matching `__len__`. Unsafe because a `__len__` of the
file may not match what `__getitem__` serves. Elsewhere (a loader from another module)
the finding says to count the batches in the loop.

Impact: Always high: the extra pass loads, transforms and collates every batch of an
epoch only to count them, while the GPU waits.

Unknown device: not read; loading every batch to count them costs a pass over the data
on any device; a loop that trains, or moves its batches to any device (one that cannot
be named included), shows that what it walks is a loader.

Sources: torch.utils.data docs, "DataLoader.__len__" and "Dataset Types".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import CallSite, DataLoaderSite, Loop, TorchModule, bound_names, int_value

MATERIALIZE = ("list", "tuple")


class DataLoaderIteratedToCount(Rule):
    code = "TL205"
    name = "dataloader-iterated-to-count"
    fix_safety = FixSafety.UNSAFE
    tokens = ("len(list(", "len(tuple(", "len([", "sum(1 for")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        loops: dict[int, list[Loop]] = {}  # id(function or None) -> its `for` loops
        for loop in module.loops:
            if isinstance(loop.node, cst.For):
                loops.setdefault(id(loop.ctx.function), []).append(loop)
        for call in module.calls_to("len", "sum"):
            walked = _counted(module, call)
            if walked is None or not _a_loader(module, call, walked, loops):
                continue
            spelled = module.module.code_for_node(walked)
            counted = module.module.code_for_node(call.node)
            sites = module.loaders.of(walked, call.scope)
            if sites and all(
                isinstance(site, DataLoaderSite) and module.datasets.map_style(site)
                for site in sites
            ):
                advice = f"use `len({spelled})`"
                fixed = fix(
                    f"Use `len({spelled})`",
                    Applicability.UNSAFE,
                    Replace(call.node, cst.Call(cst.Name("len"), [cst.Arg(walked)])),
                )
            else:
                advice = (
                    f"count the batches in the loop that walks them (or `len({spelled})` if its "
                    "dataset defines `__len__`)"
                )
                fixed = None
            yield self.diagnostic(
                call.node,
                f"`{counted}` loads every batch of `{spelled}` again only to count them; {advice}",
                fix=fixed,
            )


def _counted(module: TorchModule, call: CallSite) -> cst.BaseExpression | None:
    """The iterable `len(list(x))`, `len([... for ... in x])` or `sum(1 for _ in x)` walks."""
    args = call.node.args
    if len(args) != 1 or args[0].keyword is not None or args[0].star:
        return None
    inner = args[0].value
    if call.qualname == "len":
        if isinstance(inner, cst.Call) and module.resolve(inner.func, call.scope) in MATERIALIZE:
            if len(inner.args) == 1 and not inner.args[0].keyword and not inner.args[0].star:
                return inner.args[0].value
            return None
        if isinstance(inner, cst.ListComp) and inner.for_in.inner_for_in is None:
            return inner.for_in.iter if not inner.for_in.ifs else None
        return None
    if isinstance(inner, cst.GeneratorExp) and int_value(inner.elt) == 1:
        return inner.for_in.iter if not inner.for_in.ifs and not inner.for_in.inner_for_in else None
    return None


def _a_loader(
    module: TorchModule,
    call: CallSite,
    walked: cst.BaseExpression,
    loops: dict[int, list[Loop]],
) -> bool:
    """A DataLoader of the file, or what a batch loop of the same function walks."""
    if module.loaders.of(walked, call.scope):
        return True
    symbol = call.scope.lookup_expr(walked)
    if symbol is None:
        return False
    for loop in loops.get(id(call.ctx.function), ()):
        assert isinstance(loop.node, cst.For)
        walks = any(
            loop.ctx.scope.lookup_expr(it) is symbol
            for it in module.loaders.iterables(loop.node.iter, loop.ctx.scope)
        )
        if walks and (loop.is_training or _moves_batches(module, loop)):
            return True
    return False


def _moves_batches(module: TorchModule, loop: Loop) -> bool:
    """The loop copies what it walks to a device (`src = src.to(DEVICE)`, `batch[0].cuda()`)."""
    assert isinstance(loop.node, cst.For)
    targets = {n.value for n in bound_names(loop.node.target)}
    for call in loop.calls:
        if call.method not in ("to", "cuda") or call.receiver is None:
            continue
        base = call.receiver
        while isinstance(base, (cst.Subscript, cst.Attribute)):
            base = base.value
        if (
            isinstance(base, cst.Name)
            and base.value in targets
            and module.devices.move(call) is not None
        ):
            return True
    return False
