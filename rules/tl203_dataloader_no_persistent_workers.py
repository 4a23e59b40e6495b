"""TL203 dataloader-no-persistent-workers: worker processes are restarted every epoch.

What: a `torch.utils.data.DataLoader` with worker processes (`num_workers` an int
literal above 0, or the `NUM_WORKERS` constant TL201 defines) that is iterated once
per epoch (a loop over it inside another loop, or inside a function called in a
loop) and was built outside that outer loop, without `persistent_workers`.

Why: without `persistent_workers=True` every `for batch in loader` starts
`num_workers` fresh processes, each importing its modules and rebuilding its copy of
the dataset, and shuts them down at the end of the epoch. The GPU idles during the
start of every epoch (seconds to minutes with heavy datasets or many workers). A
loader built inside the epoch loop gains nothing from the option and is left alone,
as is an explicit `persistent_workers=False`.

Bad:
    loader = DataLoader(train_set, batch_size=64, num_workers=8)
    for epoch in range(epochs):
        for x, y in loader:
            ...

Good:
    loader = DataLoader(train_set, batch_size=64, num_workers=8, persistent_workers=True)

Fix (unsafe): add `persistent_workers=True`. Unsafe because the workers keep their
copy of the dataset (memory) and their state across epochs: a dataset that changes
between epochs (curriculum, `set_epoch` on the dataset rather than the sampler) is
no longer seen by them, and worker seeds are not redrawn each epoch.

Target torch: `persistent_workers` exists from PyTorch 1.7; with `target-torch`
below 1.7 the rule is silent.

Sources: torch.utils.data docs ("persistent_workers"); PyTorch Lightning's
"consider setting persistent_workers=True" warning.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from torchlint.rules.tl201_dataloader_sync_loading import WORKERS_NAME

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.model import MISSING, DataLoaderSite, Loop, TorchModule, dotted_name, int_value
from torchlint.rule import Diagnostic, Rule


def has_workers(module: TorchModule, loader: DataLoaderSite) -> bool:
    """`num_workers` is provably above 0: a positive literal, or TL201's constant."""
    value = loader.arg("num_workers")
    count = int_value(value)
    if count is not None:
        return count > 0
    if isinstance(value, cst.Name) and value.value == WORKERS_NAME:
        found = module.assigned(WORKERS_NAME)
        return len(found) == 1 and _at_least_one(found[0].value) and found[0].ctx.function is None
    return False


def _at_least_one(value: cst.BaseExpression) -> bool:
    """`max(1, ...)` or a positive literal."""
    if int_value(value) is not None:
        return int_value(value) > 0
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "max"
        and any((int_value(a.value) or 0) >= 1 for a in value.args)
    )


def _iterables(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a `for` walks, through enumerate/tqdm/iter/zip."""
    if isinstance(node, cst.Call) and node.args:
        callee = (dotted_name(node.func) or "").rsplit(".", 1)[-1]
        if callee in ("enumerate", "tqdm", "iter"):
            return _iterables(node.args[0].value)
        if callee == "zip":
            return [x for a in node.args for x in _iterables(a.value)]
    return [node]


def _passes(call: cst.Call, fn: cst.FunctionDef, param: str, loader: DataLoaderSite) -> bool:
    """`call` (of `fn`) passes `loader` for parameter `param`."""
    names = [p.name.value for p in fn.params.params]
    index = names.index(param)
    for i, arg in enumerate(call.args):
        if arg.star:
            return False
        if (arg.keyword is not None and arg.keyword.value == param) or (
            arg.keyword is None and i == index
        ):
            return loader.bound_to is not None and dotted_name(arg.value) == loader.bound_to
    return False


def epoch_loop(module: TorchModule, loader: DataLoaderSite) -> Loop | None:
    """A loop over the loader that runs again and again: nested in an outer loop that
    does not also build the loader, or in a function called inside such a loop (with
    this loader, when the function receives it as a parameter)."""
    built_in = set(map(id, loader.call.ctx.loops))
    for loop in module.loops_over(loader):
        if any(id(o) not in built_in for o in loop.ctx.loops):
            return loop
        fn = loop.ctx.function
        if loop.ctx.loops or fn is None or module.functions.get(fn.name.value) is not fn:
            continue
        if loader.call.ctx.function is fn or not isinstance(loop.node, cst.For):
            continue
        params = {p.name.value for p in fn.params.params}
        iterated = [dotted_name(n) for n in _iterables(loop.node.iter)]
        via = [n for n in iterated if n in params]
        for call in module.calls:
            if not (isinstance(call.node.func, cst.Name) and call.node.func.value == fn.name.value):
                continue
            if not call.ctx.loops or any(id(o) in built_in for o in call.ctx.loops):
                continue
            if not via or any(_passes(call.node, fn, p, loader) for p in via if p):
                return loop
    return None


class DataLoaderNoPersistentWorkers(Rule):
    code = "TL203"
    name = "dataloader-no-persistent-workers"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.target_torch is not None and module.target_torch < (1, 7):
            return
        for loader in module.dataloaders:
            if loader.opaque or loader.arg("persistent_workers") is not MISSING:
                continue
            if not has_workers(module, loader) or epoch_loop(module, loader) is None:
                continue
            yield self.diagnostic(
                loader.call.node,
                "DataLoader with worker processes is iterated every epoch without "
                "`persistent_workers`: its workers are restarted (and the dataset copied) at "
                "the start of each epoch while the GPU waits; set `persistent_workers=True`",
                fix=fix(
                    "Set `persistent_workers=True`",
                    Applicability.UNSAFE,
                    Replace(
                        loader.call.node, loader.set_arg("persistent_workers", cst.Name("True"))
                    ),
                ),
            )
