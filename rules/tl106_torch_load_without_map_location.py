"""TL106 torch-load-without-map-location: a checkpoint is loaded onto the device it was saved on.

What: `torch.load(...)` without `map_location` (keyword, or the second positional
argument) of model state: the result goes into `load_state_dict` (directly, through a
subscript such as `torch.load(p)["model"]`, or through a name), or is used as a module
(`.eval()`, `.to()`, called). Reported where it matters where the tensors land: the
script is written to run without a GPU too (it asks `torch.cuda.is_available()`, or
moves to the GPU only on a branch), or it runs as several processes
(`torch.distributed`, `DistributedDataParallel`). Left alone: loads of other things
(datasets, arrays, vocabularies: they were saved from the CPU), checkpoints the same
file saves (same path or path template: a resume on the setup that wrote them; a path
in the folder a checkpoint handler saves into: ignite's `ModelCheckpoint(dirname)` and
`DiskSaver(dirname)`, Lightning's `ModelCheckpoint(dirpath=...)`), and
files that write what they save from the CPU: `torch.save` of `t.cpu()`,
`{k: v.cpu() for ...}`, `model.cpu().state_dict()` or a name bound to one of these, a
model or tensor moved by `.cpu()`/`.to("cpu")` earlier in the same function, FSDP's
`offload_to_cpu=True`. Nor a load whose `if` maps the load of its other branch
(`if args.gpu is None: torch.load(f) else: torch.load(f, map_location=loc)`, the
ImageNet example's resume): the unmapped branch is the one process that drives every
GPU, restoring the checkpoint where it was saved on purpose.

Why: without `map_location`, every tensor is restored to the device recorded when it
was saved, usually `cuda:0`. A GPU-saved checkpoint then cannot be opened on a
machine without CUDA (the script's CPU path fails), every process of a multi-GPU job
allocates the whole checkpoint on GPU 0 (out-of-memory, or memory held for the run),
and a state dict that is copied into a model anyway makes a round trip through GPU 0.

Bad:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.load_state_dict(torch.load("checkpoint.pt"))

Good:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.load_state_dict(torch.load("checkpoint.pt", map_location="cpu"))
    checkpoint = torch.load(path, map_location=device)

Fix (safe): where the result goes straight into `load_state_dict` (directly,
or through a subscript), add `map_location="cpu"`. Safe because
`Module.load_state_dict` copies every value into the existing parameters and buffers
in place, on their own device, and `Optimizer.load_state_dict` casts its state to the
device of the parameters; the values are the same. Elsewhere the right location
depends on how the result is used, so the rule only reports.

Impact: always high where reported: the load fails on the script's own CPU path, or
fills GPU 0 in every process of a multi-GPU job.

Unknown device: the rule asks how the script runs, not where the model is: it reports
only where the script may run without a GPU (it asks `torch.cuda.is_available()`, or
moves to a GPU on some branch only) or as several processes, and a device that cannot be
named (`args.device` without a GPU default, a parameter) shows neither, so it is silent
there.

Sources: torch.load docs ("map_location"); PyTorch "Saving and Loading Models"
tutorial, "Saving & Loading Model Across Devices".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, CallSite, Kind, Scope, TorchModule, contains, str_value

LOADS = ("torch.load", "torch.serialization.load")
MODULE_USES = ("eval", "train", "to", "cuda", "parameters", "state_dict", "forward")
DISTRIBUTED = ("torch.distributed.", "torch.nn.parallel.DistributedDataParallel")
# What the text of a file this rule reports in holds, at least: a question whether a GPU
# is there, a move (where the script may take a CPU path), or the distributed package.
PATTERN = re.compile(r"is_available|\.(?:to|cuda)\b|istributed")


def _state_argument(call: CallSite) -> cst.BaseExpression:
    """What a `.load_state_dict(...)` call loads, subscripts peeled (`ckpt["model"]`)."""
    state = call.arg("state_dict", index=0)
    while isinstance(state, cst.Subscript):
        state = state.value
    return state


def _template(module: TorchModule, path: cst.BaseExpression, scope: Scope) -> str:
    """What identifies a checkpoint path: its leading string (a `%`/`.format`/f-string
    template, an f-string's fields written `{}`; a name bound to a string: the string),
    else its code."""
    found = module.values.constant(path, scope) if isinstance(path, cst.Name) else None
    if found is not None and isinstance(found.value, str):
        return found.value
    node: cst.CSTNode = path
    if isinstance(node, cst.BinaryOperation):
        node = node.left
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value  # "...".format(...)
    text = str_value(node)
    if text is None and isinstance(node, cst.FormattedString):
        text = "".join(
            p.value if isinstance(p, cst.FormattedStringText) else "{}" for p in node.parts
        )
    return text or module.module.code_for_node(path)


# A field of a path template: `%s`, `%03d`, `{}`, `{epoch:03d}`.
FIELD = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifgeExXor]|\{[^{}]*\}")


def _saved_here(loaded: str, saved: set[str], folders: set[str], code: str) -> bool:
    """The path a load reads is one the program saves to: the same template, or one a
    saved template's fields fill (`"ae_i_20_%s.pt"` of `"ae_i_%d_%s.pt"`), or a path in a
    folder a checkpoint handler of the program saves into (its template leads the path,
    or the load's expression names it: `log_path + "/model.pt"`, `last("./saved")`)."""
    if loaded in saved:
        return True
    if any(loaded.startswith(f.rstrip("/") + "/") or f in code for f in folders):
        return True
    for template in saved:
        parts = FIELD.split(template)
        if len(parts) > 1 and re.fullmatch(".*".join(map(re.escape, parts)), loaded):
            return True
    return False


def _mapped_beside(call: CallSite, loads: list[CallSite]) -> bool:
    """The other branch of the `if` around the load maps its own load: where the file
    leaves this one unmapped is the author's choice (ImageNet-style scripts map to
    `cuda:{gpu}` for one process per GPU, and restore to the saved devices where one
    process drives every GPU)."""
    if not call.ctx.ifs:
        return False
    branch = call.ctx.ifs[-1]
    inside = contains(branch.body, call.node)
    return any(
        other.ctx.ifs[-1:] == (branch,)
        and contains(branch.body, other.node) != inside
        and (other.kwarg("map_location") is not MISSING or len(other.positional) >= 2)
        for other in loads
    )


# Why a load without `map_location` is left alone in a whole file.
SAME_DEVICE = (
    "one process, with no CPU-only path: the tensors come back to the device they were "
    "saved from, where this program runs"
)


class TorchLoadWithoutMapLocation(Rule):
    code = "TL106"
    name = "torch-load-without-map-location"
    fix_safety = FixSafety.SAFE
    tokens = ("load(",)
    pattern = PATTERN

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        loads = module.calls_to(*LOADS)
        if not loads:
            return
        distributed = any(q.startswith(DISTRIBUTED) for q in module.qualnames_called)
        if not distributed and not module.placement.runs_without_gpu:
            self.pass_over(None, SAME_DEVICE)
            return
        if module.checkpoints.saves_cpu_state:
            self.pass_over(None, "the checkpoints this program writes hold CPU tensors")
            return  # the checkpoints this script writes, and reads back, hold CPU tensors
        direct = {id(_state_argument(c)) for c in module.method_calls("load_state_dict")}
        states = {  # names whose value is loaded into a module
            id(symbol)
            for c in module.method_calls("load_state_dict")
            if (symbol := c.scope.lookup_expr(_state_argument(c))) is not None
        }
        saved = {_template(module, path, scope) for path, scope in module.checkpoints.saved_paths}
        folders = {
            _template(module, path, scope) for path, scope in module.checkpoints.saved_folders
        }
        folders = {f for f in folders if f.strip("./")}  # "." or "./": too vague to match
        for call in loads:
            if call.has_star_args or call.kwarg("map_location") is not MISSING:
                continue
            if len(call.positional) >= 2:
                continue  # torch.load(f, map_location)
            if _mapped_beside(call, loads):
                self.pass_over(call.node, "a load beside it maps the same file")
                continue  # `if args.gpu is None: load(f) else: load(f, map_location=loc)`
            path = call.arg("f", index=0)
            if path is not MISSING and _saved_here(
                _template(module, path, call.scope),
                saved,
                folders,
                module.module.code_for_node(path),
            ):
                self.pass_over(call.node, "this program's own checkpoint, read back where saved")
                continue  # this program's own checkpoint, reloaded on the setup that wrote it
            into_state = id(call.node) in direct
            if not into_state and not self._model_state(module, call, states):
                continue
            where = "every process fills GPU 0" if distributed else "it fails on the CPU-only path"
            message = (
                "`torch.load` without `map_location` restores every tensor to the device it "
                f"was saved from (usually cuda:0): {where}; pass `map_location`"
            )
            if not into_state:
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

    @staticmethod
    def _model_state(module: TorchModule, call: CallSite, states: set[int]) -> bool:
        """The load is bound to a name that goes into `load_state_dict`, or that is used
        as a module (`model = torch.load(path); model.eval()`)."""
        binding = module.binding_of(call.node)
        if binding is None or binding.kind is not Kind.ASSIGN:
            return False
        if id(binding.symbol) in states:
            return True
        return any(
            c.receiver is not None and c.scope.lookup_expr(c.receiver) is binding.symbol
            for c in module.method_calls(*MODULE_USES)
        ) or any(c.scope.lookup_expr(c.node.func) is binding.symbol for c in module.calls)
