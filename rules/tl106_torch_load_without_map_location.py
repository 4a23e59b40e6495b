"""TL106 torch-load-without-map-location: a checkpoint is loaded onto the device it was saved on.

What: `torch.load(...)` without `map_location` (keyword, or the second positional
argument).

Why: without `map_location`, every tensor is restored to the device recorded when it
was saved, usually `cuda:0`. Every process of a multi-GPU job then allocates the
whole checkpoint on GPU 0 (out-of-memory, or memory held for the whole run), a
GPU-saved checkpoint cannot be opened on a machine without CUDA, and a state dict
that is copied into a model anyway makes a useless round trip through GPU 0.

Bad:
    model.load_state_dict(torch.load("checkpoint.pt"))
    checkpoint = torch.load(path)

Good:
    model.load_state_dict(torch.load("checkpoint.pt", map_location="cpu"))
    checkpoint = torch.load(path, map_location=device)

Fix (sometimes safe): where the result goes straight into `load_state_dict` (directly,
or through a subscript such as `torch.load(p)["model"]`), add `map_location="cpu"`.
Safe because `Module.load_state_dict` copies every value into the existing
parameters and buffers in place, on their own device, and `Optimizer.load_state_dict`
casts its state to the device of the parameters; the values are the same. Elsewhere
the right location depends on how the result is used, so the rule only reports.

Sources: torch.load docs ("map_location"); PyTorch "Saving and Loading Models"
tutorial, "Saving & Loading Model Across Devices".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule


def _into_load_state_dict(module: TorchModule) -> set[int]:
    """ids of expressions passed as the state dict of a `.load_state_dict(...)` call."""
    found: set[int] = set()
    for call in module.method_calls("load_state_dict"):
        args = call.node.args
        state = call.kwarg("state_dict")
        if state is MISSING and args and args[0].keyword is None and not args[0].star:
            state = args[0].value
        while isinstance(state, cst.Subscript):
            state = state.value
        if state is not MISSING:
            found.add(id(state))
    return found


class TorchLoadWithoutMapLocation(Rule):
    code = "TL106"
    name = "torch-load-without-map-location"
    fix_safety = FixSafety.SOMETIMES
    tokens = ("load(",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        loads = module.calls_to("torch.load", "torch.serialization.load")
        if not loads:
            return
        into_state = _into_load_state_dict(module)
        for call in loads:
            if call.has_star_args or call.kwarg("map_location") is not MISSING:
                continue
            if len(call.positional) >= 2:
                continue  # torch.load(f, map_location)
            message = (
                "`torch.load` without `map_location` restores every tensor to the device it "
                "was saved from (usually cuda:0): each process fills GPU 0 and CPU-only "
                "machines cannot load it; pass `map_location`"
            )
            if id(call.node) not in into_state:
                yield self.diagnostic(call.node, message)
                continue
            yield self.diagnostic(
                call.node,
                message + ' ("cpu" when the result goes into `load_state_dict`)',
                fix=fix(
                    'Add `map_location="cpu"`',
                    Applicability.SAFE,
                    Replace(
                        call.node,
                        set_kwarg(call.node, "map_location", cst.SimpleString('"cpu"')),
                    ),
                ),
            )
