"""The PyTorch-aware facts every rule shares, computed in one traversal per file.

Names are resolved through the file's imports (``import torch as T``, ``from
torch.utils.data import DataLoader as DL``, ``from torch.utils import data``), never by
spelling alone. Scoping is per file: an import anywhere binds its name everywhere,
which is what real training scripts need and is cheap.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from torchlint.fixes import Import
from torchlint.walk import child_fields, walk

DATALOADER = "torch.utils.data.DataLoader"

# Public re-exports: the spelling a user may import from -> the canonical name.
CANONICAL = {
    "torch.utils.data.dataloader.DataLoader": DATALOADER,
    "torch.utils.data.sampler.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.utils.data.distributed.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": (
        "torch.nn.parallel.DistributedDataParallel"
    ),
    "torch.nn.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.optim.optimizer.Optimizer": "torch.optim.Optimizer",
}

# Positional parameters of torch.utils.data.DataLoader, in order.
DATALOADER_PARAMS = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)

# Iterables that wrap a loader without changing what it yields per step.
LOADER_WRAPPERS = {"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "iter"}

# Frameworks that own the device, the samplers and the process group.
MANAGED_PREFIXES = (
    "lightning",
    "pytorch_lightning",
    "accelerate",
    "deepspeed",
    "transformers.Trainer",
    "transformers.trainer",
    "transformers.Seq2SeqTrainer",
    "trl",  # SFTTrainer & co. are transformers Trainers
)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def int_value(node: cst.BaseExpression | None) -> int | None:
    """The value of an int literal (`32`, `-1`, `1_024`), else None."""
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.value.replace("_", ""), 0)
    return None


def bool_value(node: cst.BaseExpression | None) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


@dataclass(frozen=True, eq=False)
class Context:
    """Where a node sits: the statements, loops, withs and ifs around it."""

    statement: cst.BaseStatement | None
    loops: tuple[Loop, ...]  # enclosing loops of the same function, outermost first
    function: cst.FunctionDef | None
    class_: cst.ClassDef | None
    withs: tuple[cst.With, ...]
    ifs: tuple[cst.If, ...]
    decorators: tuple[cst.Decorator, ...]  # of every enclosing function


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    qualname: str | None  # resolved through imports, canonical; None when not imported
    method: str | None  # `x.to(...)` -> "to"
    receiver: cst.BaseExpression | None  # `x.to(...)` -> x
    ctx: Context

    def kwarg(self, name: str) -> cst.BaseExpression:
        for arg in self.node.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg.value
        return MISSING

    @property
    def has_star_args(self) -> bool:
        return any(arg.star for arg in self.node.args)

    @property
    def positional(self) -> list[cst.BaseExpression]:
        return [a.value for a in self.node.args if a.keyword is None and not a.star]


@dataclass(eq=False)
class Loop:
    node: cst.For | cst.While
    ctx: Context  # where the loop statement itself is
    calls: list[CallSite] = field(default_factory=list)  # in the body, nested loops included
    has_backward: bool = False
    has_step: bool = False
    loaders: list[DataLoaderSite] = field(default_factory=list)  # what the `for` iterates
    inner: list[Loop] = field(default_factory=list)  # loops nested in this one (same function)
    # Names (re)bound in the body, with how many statements bind each: assignments of
    # any shape, inner `for`/`with` targets, walrus.
    bound: dict[str, int] = field(default_factory=dict)

    @property
    def is_training(self) -> bool:
        """Calls `.backward()` and an optimizer `.step()` in its body."""
        return self.has_backward and self.has_step

    @property
    def is_loader_loop(self) -> bool:
        return bool(self.loaders)

    @property
    def is_step_loop(self) -> bool:
        """A training loop with no training loop inside it: its body runs once per step."""
        return self.is_training and not any(inner.is_training for inner in self.inner)

    @property
    def is_epoch_loop(self) -> bool:
        """A loop with a loader loop inside it."""
        return any(inner.is_loader_loop for inner in self.inner)

    @property
    def target(self) -> cst.BaseAssignTargetExpression | None:
        return self.node.target if isinstance(self.node, cst.For) else None

    def batch_names(self) -> list[str]:
        """Names bound from each batch (the index of `enumerate` excluded)."""
        if not isinstance(self.node, cst.For):
            return []
        target = self.node.target
        iter_ = self.node.iter
        if (
            isinstance(iter_, cst.Call)
            and dotted_name(iter_.func) == "enumerate"
            and isinstance(target, (cst.Tuple, cst.List))
            and len(target.elements) == 2
        ):
            target = target.elements[1].value
        return list(_bound_names(target))


def _bound_names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _bound_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _bound_names(target.value)


@dataclass(eq=False)
class Assignment:
    target: str  # a name, or a dotted attribute such as "self.loader"
    value: cst.BaseExpression
    node: cst.Assign | cst.AnnAssign | cst.AugAssign
    ctx: Context


@dataclass(eq=False)
class DataLoaderSite:
    call: CallSite
    bound_to: str | None  # the name or attribute the loader is assigned to

    def arg(self, name: str) -> cst.BaseExpression:
        """The argument for parameter `name`, keyword or positional, else MISSING."""
        value = self.call.kwarg(name)
        if value is not MISSING:
            return value
        if name in DATALOADER_PARAMS:
            index = DATALOADER_PARAMS.index(name)
            args = self.call.node.args
            for i, a in enumerate(args):
                if a.keyword is not None or a.star:
                    break
                if i == index:
                    return a.value
        return MISSING

    @property
    def opaque(self) -> bool:
        """Built from `*args`/`**kwargs`: any argument may be set where we cannot see."""
        return self.call.has_star_args

    def set_arg(self, name: str, value: cst.BaseExpression) -> cst.Call:
        """The call with parameter `name` set to `value` (keeping its position if any)."""
        return set_kwarg(self.call.node, name, value, positional=DATALOADER_PARAMS)


def set_kwarg(
    call: cst.Call,
    name: str,
    value: cst.BaseExpression,
    positional: Sequence[str] = (),
) -> cst.Call:
    """`call` with argument `name` replaced or added, following the call's layout."""
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    if name in positional:
        index = positional.index(name)
        if index < len(args) and all(a.keyword is None and not a.star for a in args[: index + 1]):
            args[index] = args[index].with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Trailing comma: one argument per line (or a deliberate trailing comma); the new
        # argument takes the last one's place in the layout and keeps the trailing comma.
        between = (
            args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else None
        )
        if between is None:
            ws = call.whitespace_before_args
            if isinstance(ws, cst.ParenthesizedWhitespace):  # the line break, not its comment
                ws = ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
            between = cst.Comma(
                whitespace_after=ws
                if isinstance(ws, cst.ParenthesizedWhitespace)
                else cst.SimpleWhitespace(" ")
            )
        args[-1] = last.with_changes(comma=between)
        args.append(new.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        args.append(new.with_changes(whitespace_after_arg=last.whitespace_after_arg))
        grown = call.with_changes(args=args)
        code = _EMPTY.code_for_node(grown)
        if len(code) > WRAP_AT and "\n" not in code:
            return _one_argument_per_line(grown)
    return call.with_changes(args=args)


# A one-line call that grows longer than this (the call alone: its line holds more) is
# laid out one argument per line with a trailing comma, as black and ruff format it.
WRAP_AT = 72
_EMPTY = cst.Module(body=[])


def _line_break(indent: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), indent=True, last_line=cst.SimpleWhitespace(indent)
    )


def _one_argument_per_line(call: cst.Call) -> cst.Call:
    args = [
        a.with_changes(
            comma=cst.Comma(whitespace_after=_line_break("    " if i < len(call.args) - 1 else "")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        for i, a in enumerate(call.args)
    ]
    return call.with_changes(whitespace_before_args=_line_break("    "), args=args)


def remove_kwarg(call: cst.Call, name: str) -> cst.Call:
    """`call` without keyword argument `name` (layout of the rest kept)."""
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            if i == len(args) - 1 and i > 0:
                prev = args[i - 1]
                args[i - 1] = prev.with_changes(
                    comma=a.comma, whitespace_after_arg=a.whitespace_after_arg
                )
            del args[i]
            return call.with_changes(args=args)
    return call


@dataclass(eq=False)
class ModelSite:
    """An nn.Module instance bound to a name, and its device moves."""

    name: str  # a name or dotted attribute ("self.model")
    construction: CallSite
    assignment: Assignment
    moves: list[CallSite] = field(default_factory=list)  # `.to(...)`, `.cuda()` on it

    @property
    def moved(self) -> bool:
        return bool(self.moves)


@dataclass
class Settings:
    """What rules may read of the configuration."""

    options: dict[str, Any] = field(default_factory=dict)
    target_torch: tuple[int, int] | None = None


class TorchModule:
    """The facts of one file. Built by `build_model`; read by every rule."""

    def __init__(self, module: cst.Module, path: str, settings: Settings) -> None:
        self.module = module
        self.path = path
        self.settings = settings
        self.aliases: dict[str, str] = {}  # local name -> qualified name
        self.calls: list[CallSite] = []
        self.calls_by_qualname: dict[str, list[CallSite]] = {}
        self.calls_by_method: dict[str, list[CallSite]] = {}
        self.loops: list[Loop] = []
        self.assignments: dict[str, list[Assignment]] = {}
        self.aug_assignments: list[Assignment] = []  # `x += y`, in source order
        self.functions: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.dataloaders: list[DataLoaderSite] = []
        self.models: list[ModelSite] = []
        self.cuda_strings: list[cst.SimpleString] = []
        self.imported_modules: set[str] = set()

    # -- names -------------------------------------------------------------------------

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """The canonical qualified name of an expression, through the file's imports."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return None
        full = f"{target}.{rest}" if rest else target
        return CANONICAL.get(full, full)

    def spell(self, qualname: str) -> tuple[str, Import | None]:
        """How to write `qualname` in this file, and the import it needs if any."""
        best: tuple[int, str] | None = None
        for local, target in self.aliases.items():
            if (qualname == target or qualname.startswith(target + ".")) and (
                best is None or len(target) > best[0]
            ):
                best = (len(target), local + qualname[len(target) :])
        if best is not None:
            return best[1], None
        top = qualname.split(".")[0]
        return qualname, Import(top)

    def option(self, name: str) -> Any:
        return self.settings.options[name]

    @property
    def target_torch(self) -> tuple[int, int] | None:
        return self.settings.target_torch

    # -- facts -----------------------------------------------------------------------

    def calls_to(self, *qualnames: str) -> list[CallSite]:
        return [c for q in qualnames for c in self.calls_by_qualname.get(q, ())]

    def method_calls(self, *methods: str) -> list[CallSite]:
        return [c for m in methods for c in self.calls_by_method.get(m, ())]

    def imports_any(self, *prefixes: str) -> bool:
        return any(m == p or m.startswith(p + ".") for m in self.imported_modules for p in prefixes)

    @property
    def managed(self) -> bool:
        """Lightning, Accelerate, DeepSpeed or the transformers Trainer own the devices
        (imported, or called through a plain `import transformers`)."""
        return self.imports_any(*MANAGED_PREFIXES) or any(
            q == p or q.startswith(p + ".")
            for q in self.calls_by_qualname
            for p in MANAGED_PREFIXES
        )

    @property
    def uses_cuda(self) -> bool:
        """The file mentions a CUDA device, or is managed (trains on the GPU if there is one)."""
        if self.cuda_strings or self.managed:
            return True
        if self.method_calls("cuda"):
            return True
        return any(q.startswith("torch.cuda.") for q in self.calls_by_qualname)

    @property
    def training_loops(self) -> list[Loop]:
        return [loop for loop in self.loops if loop.is_training]

    def loader_loops(self) -> list[Loop]:
        return [loop for loop in self.loops if loop.loaders]

    def feeds_training_loop(self, loader: DataLoaderSite) -> bool:
        """The loader is iterated by a training loop, or by a loop inside one."""
        return any(
            loader in loop.loaders
            and (loop.is_training or any(o.is_training for o in loop.ctx.loops))
            for loop in self.loops
        )

    def loops_over(self, loader: DataLoaderSite) -> list[Loop]:
        return [loop for loop in self.loops if loader in loop.loaders]

    def assigned(self, name: str) -> list[Assignment]:
        return self.assignments.get(name, [])

    def model_named(self, name: str) -> ModelSite | None:
        for model in self.models:
            if model.name == name:
                return model
        return None

    # -- devices and models in loops (TL3xx-TL5xx) ------------------------------------

    def is_cuda_device(self, node: cst.BaseExpression, _depth: int = 0) -> bool:
        """A device expression naming a CUDA device: `"cuda"`, `"cuda:0"`, `f"cuda:{rank}"`,
        `torch.device("cuda", i)`, `"cuda" if available else "cpu"` (the script means the
        GPU), `torch.cuda.current_device()`, or a name bound to one of these."""
        if _depth > 4:
            return False
        if isinstance(node, cst.SimpleString):
            text = node.evaluated_value
            return isinstance(text, str) and (text == "cuda" or text.startswith("cuda:"))
        if isinstance(node, cst.FormattedString):
            first = node.parts[0] if node.parts else None
            return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda:")
        if isinstance(node, cst.IfExp):
            return self.is_cuda_device(node.body, _depth + 1) or self.is_cuda_device(
                node.orelse, _depth + 1
            )
        if isinstance(node, cst.Call):
            qualname = self.resolve(node.func)
            if qualname == "torch.cuda.current_device":
                return True
            if qualname == "torch.device" and node.args and node.args[0].keyword is None:
                return self.is_cuda_device(node.args[0].value, _depth + 1)
            return False
        name = dotted_name(node)
        if name is None:
            return False
        return any(self.is_cuda_device(a.value, _depth + 1) for a in self.assigned(name))

    def moves_to_cuda(self, move: CallSite) -> bool:
        """`x.cuda(...)`, or `x.to(<cuda device>)` / `x.to(device=<cuda device>)`."""
        if move.method == "cuda":
            return True
        device = move.kwarg("device")
        if device is MISSING:
            positional = move.positional
            device = positional[0] if positional else MISSING
        return device is not MISSING and self.is_cuda_device(device)

    def is_model(self, name: str, function: cst.FunctionDef | None = None) -> bool:
        """`name` holds an nn.Module: a model built in this file, a receiver of `.eval()`
        or `.parameters()`, or a parameter of `function` annotated `nn.Module` or passed
        a model by a call in this file (one level)."""
        names, params = self._model_names
        return name in names or (function is not None and (id(function), name) in params)

    def model_calls(self, loop: Loop) -> list[CallSite]:
        """Calls of a model (`model(x)`) in the loop's body."""
        fn = loop.ctx.function
        return [
            c
            for c in loop.calls
            if (n := dotted_name(c.node.func)) is not None and self.is_model(n, fn)
        ]

    @property
    def _model_names(self) -> tuple[set[str], set[tuple[int, str]]]:
        cached = self.__dict__.get("_model_names_cache")
        if cached is not None:
            return cached
        names = {m.name for m in self.models}
        for call in self.method_calls("eval", "parameters"):
            receiver = dotted_name(call.receiver) if call.receiver is not None else None
            if receiver is not None and not call.positional:
                names.add(receiver)
        params: set[tuple[int, str]] = set()
        for fn in self.functions.values():
            for param in fn.params.params:
                annotation = param.annotation
                if (
                    annotation is not None
                    and self.resolve(annotation.annotation) == "torch.nn.Module"
                ):
                    params.add((id(fn), param.name.value))
        for site in self.calls:
            if not isinstance(site.node.func, cst.Name):
                continue
            fn = self.functions.get(site.node.func.value)
            if fn is None:
                continue
            fn_params = fn.params.params
            for i, arg in enumerate(site.node.args):
                if arg.star:
                    break
                value = dotted_name(arg.value)
                if value is None or value not in names:
                    continue
                if arg.keyword is not None:
                    params.add((id(fn), arg.keyword.value))
                elif i < len(fn_params):
                    params.add((id(fn), fn_params[i].name.value))
        self.__dict__["_model_names_cache"] = (names, params)
        return names, params

    # -- devices, constants, models in loops (TL0xx-TL2xx) ---------------------------------

    def device_kind(self, node: cst.BaseExpression | None, _depth: int = 0) -> str | None:
        """What a `.to(X)`/`device=X` argument provably is: "cpu", "cuda", "device" (a device,
        which one is decided at run time), or None (maybe not a device at all: a dtype, a
        tensor, an int)."""
        if node is None or _depth > 4:
            return None
        if isinstance(node, cst.SimpleString):
            text = node.value.strip("\"'rRuU")
            kind = text.split(":")[0]
            if kind == "cpu" and ":" not in text:
                return "cpu"
            if kind == "cuda":
                return "cuda"
            return "device" if kind in ("mps", "xpu", "xla", "hpu", "npu") else None
        if isinstance(node, cst.IfExp):
            kinds = {
                self.device_kind(node.body, _depth + 1),
                self.device_kind(node.orelse, _depth + 1),
            }
            if None in kinds:
                return None
            return kinds.pop() if len(kinds) == 1 else "device"
        if isinstance(node, cst.Call):
            if self.resolve(node.func) == "torch.device":
                args = [a for a in node.args if a.keyword is None and not a.star]
                return (self.device_kind(args[0].value, _depth + 1) if args else None) or "device"
            return None
        name = dotted_name(node)
        if name is None or name.split(".")[0] in self.aliases:
            return None
        cache: dict[str, str | None] = self.__dict__.setdefault("_device_kind_cache", {})
        if name in cache:
            return cache[name]
        cache[name] = None  # while computing: a name defined through itself is no device
        kinds: set[str | None] = set()
        for a in self.assigned(name):
            kinds.add(self.device_kind(a.value, _depth + 1))
            if None in kinds:
                break
        if kinds and None not in kinds:
            kind = kinds.pop() if len(kinds) == 1 else "device"
        else:
            # `device`, `self.device`, `args.device`, `accelerator.device`: named for it.
            kind = "device" if "device" in name.rsplit(".", 1)[-1].lower() else None
        cache[name] = kind
        return kind

    def move_device(self, call: CallSite) -> tuple[str, cst.BaseExpression | None] | None:
        """For `x.cuda(...)` / `x.to(...)`: the kind of device it moves to (see `device_kind`)
        and the expression naming it (None for a bare `.cuda()`); None when it is not
        provably a device move (`.to(torch.float16)`, `.to(other_tensor)`)."""
        positional = call.positional
        device = call.kwarg("device")
        if device is MISSING:
            device = positional[0] if positional else None
        if call.method == "cuda":
            if (
                device is not None
                and int_value(device) is None
                and self.device_kind(device) is None
            ):
                return None
            return "cuda", device
        if call.method == "to" and device is not None:
            kind = self.device_kind(device)
            return (kind, device) if kind is not None else None
        return None

    def pins_memory(self, loader: DataLoaderSite) -> bool:
        """`pin_memory=True`, or pinned whenever an accelerator is there to copy to."""
        value = loader.arg("pin_memory")
        if bool_value(value):
            return True
        return isinstance(value, cst.Call) and self.resolve(value.func) in (
            "torch.cuda.is_available",
            "torch.accelerator.is_available",
        )

    def int_constant(self, name: str) -> tuple[int, Assignment] | None:
        """A module-level name bound once, to an int literal, and never rebound."""
        found = self.assigned(name)
        if len(found) != 1 or any(a.target == name for a in self.aug_assignments):
            return None
        a = found[0]
        value = int_value(a.value)
        if value is None or a.ctx.function is not None or a.ctx.class_ is not None:
            return None
        return value, a

    def model_for_call(self, call: CallSite) -> ModelSite | None:
        """The model a call such as `model(x)` / `self.net(x)` invokes, where provable:
        the same binding (a module-level one not shadowed locally, one of the same
        function or, for `self.*`, of the same class), or a function parameter that every
        call of the function in this file passes the same model to."""
        name = dotted_name(call.node.func)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        fn = call.ctx.function
        if (
            fn is not None
            and head != "self"
            and any(p.name.value == head for p in fn.params.params)
        ):
            index = next(i for i, p in enumerate(fn.params.params) if p.name.value == head)
            if self.functions.get(fn.name.value) is not fn:
                return None
            found: set[int] = set()
            sites: list[ModelSite] = []
            for other in self._calls_by_name().get(fn.name.value, ()):
                passed = _argument(other.node, head, index)
                passed_name = dotted_name(passed) if passed is not None else None
                if passed_name is None:
                    return None
                site = self.model_named(f"{passed_name}.{rest}" if rest else passed_name)
                if site is None or site.assignment.ctx.function is fn:
                    return None
                found.add(id(site))
                sites.append(site)
            return sites[0] if len(found) == 1 else None
        candidates = [m for m in self.models if m.name == name]
        for site in candidates:
            where = site.assignment.ctx
            if head == "self":
                if where.class_ is call.ctx.class_ and where.class_ is not None:
                    return site
            elif where.function is fn or (
                where.function is None
                and not any(a.ctx.function is fn for a in self.assigned(head))
            ):
                return site
        return None

    def _calls_by_name(self) -> dict[str, list[CallSite]]:
        """Calls of plain names (`train(...)`), by name; built on first use."""
        cached = self.__dict__.get("_calls_by_name_cache")
        if cached is None:
            cached = {}
            for call in self.calls:
                if isinstance(call.node.func, cst.Name):
                    cached.setdefault(call.node.func.value, []).append(call)
            self.__dict__["_calls_by_name_cache"] = cached
        return cached


def _argument(call: cst.Call, keyword: str, index: int) -> cst.BaseExpression | None:
    """The argument a call passes for parameter (`keyword`, position `index`)."""
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg.value
        elif i == index:
            return arg.value
    return None


def build_model(
    module: cst.Module, path: str = "<string>", settings: Settings | None = None
) -> TorchModule:
    model = TorchModule(module, path, settings or Settings())
    builder = _Builder(model)
    walk(module, builder)  # as module.visit(builder), without rebuilding the tree
    _link(model, builder)
    return model


class _Builder(cst.CSTVisitor):
    """One traversal: imports, calls with their context, loops, assignments."""

    def __init__(self, model: TorchModule) -> None:
        super().__init__()
        self.m = model
        self.statement: list[cst.BaseStatement] = []
        self.loops: list[Loop] = []
        self.saved_loops: list[list[Loop]] = []
        self.functions: list[cst.FunctionDef] = []
        self.classes: list[cst.ClassDef] = []
        self.withs: list[cst.With] = []
        self.ifs: list[cst.If] = []
        self.decorators: list[cst.Decorator] = []
        self.params: dict[str, list[tuple[cst.FunctionDef, int]]] = {}

    def _ctx(self) -> Context:
        return Context(
            self.statement[-1] if self.statement else None,
            tuple(self.loops),
            self.functions[-1] if self.functions else None,
            self.classes[-1] if self.classes else None,
            tuple(self.withs),
            tuple(self.ifs),
            tuple(self.decorators),
        )

    # -- imports -----------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            self.m.imported_modules.add(name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.m.aliases[alias.asname.name.value] = name
            else:
                head = name.split(".")[0]
                self.m.aliases[head] = head

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        base = dotted_name(node.module) or ""
        self.m.imported_modules.add(base)
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            local = (
                alias.asname.name.value
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                else name
            )
            full = f"{base}.{name}"
            self.m.imported_modules.add(full)
            self.m.aliases[local] = CANONICAL.get(full, full)

    # -- structure -----------------------------------------------------------------------

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement.append(node)

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.statement.append(node)
        self.functions.append(node)
        self.m.functions.setdefault(node.name.value, node)
        self.decorators.extend(node.decorators)
        self.saved_loops.append(self.loops)
        self.loops = []
        for index, param in enumerate(node.params.params):
            self.params.setdefault(param.name.value, []).append((node, index))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.statement.pop()
        self.functions.pop()
        del self.decorators[len(self.decorators) - len(node.decorators) :]
        self.loops = self.saved_loops.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.statement.append(node)
        self.classes.append(node)
        self.m.classes.setdefault(node.name.value, node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.statement.pop()
        self.classes.pop()

    def _visit_loop(self, node: cst.For | cst.While) -> None:
        loop = Loop(node, self._ctx())
        if self.loops:
            self.loops[-1].inner.append(loop)
            for outer in self.loops[:-1]:
                outer.inner.append(loop)
        self.m.loops.append(loop)
        self.statement.append(node)
        self.loops.append(loop)

    def _leave_loop(self) -> None:
        self.statement.pop()
        self.loops.pop()

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)
        self._visit_loop(node)

    def leave_For(self, node: cst.For) -> None:
        self._leave_loop()

    def visit_While(self, node: cst.While) -> None:
        self._visit_loop(node)

    def leave_While(self, node: cst.While) -> None:
        self._leave_loop()

    def visit_With(self, node: cst.With) -> None:
        self.statement.append(node)
        self.withs.append(node)

    def leave_With(self, node: cst.With) -> None:
        self.statement.pop()
        self.withs.pop()

    def visit_If(self, node: cst.If) -> None:
        self.statement.append(node)
        self.ifs.append(node)

    def leave_If(self, node: cst.If) -> None:
        self.statement.pop()
        self.ifs.pop()

    def visit_Try(self, node: cst.Try) -> None:
        self.statement.append(node)

    def leave_Try(self, node: cst.Try) -> None:
        self.statement.pop()

    # -- facts ---------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = receiver = None
        if isinstance(func, cst.Attribute):
            method, receiver = func.attr.value, func.value
        site = CallSite(node, self.m.resolve(func), method, receiver, self._ctx())
        self.m.calls.append(site)
        if site.qualname is not None:
            self.m.calls_by_qualname.setdefault(site.qualname, []).append(site)
        if method is not None:
            self.m.calls_by_method.setdefault(method, []).append(site)
        for loop in self.loops:
            loop.calls.append(site)
            if method == "backward" or site.qualname in ("torch.autograd.backward",):
                loop.has_backward = True
            elif method == "step":
                loop.has_step = True

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression, node) -> None:
        name = dotted_name(target)
        if name is not None:
            self.m.assignments.setdefault(name, []).append(
                Assignment(name, value, node, self._ctx())
            )

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._assign(t.target, node.value, node)
            self._bind(t.target)

    def _bind(self, target: cst.BaseExpression) -> None:
        """Record names bound inside the enclosing loops' bodies."""
        if self.loops:
            names = [dotted_name(target)] if dotted_name(target) else list(_bound_names(target))
            for loop in self.loops:
                for n in names:
                    if n:
                        loop.bound[n] = loop.bound.get(n, 0) + 1

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)
        if node.value is not None:
            self._assign(node.target, node.value, node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        name = dotted_name(node.target)
        if name is not None:
            self.m.aug_assignments.append(Assignment(name, node.value, node, self._ctx()))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = node.value
        if "cuda" in value:
            text = value.strip("\"'rRbBuU")
            if text == "cuda" or text.startswith("cuda:"):
                self.m.cuda_strings.append(node)


# -- linking facts once the traversal is done ---------------------------------------------


def _unwrap_iterable(model: TorchModule, node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The iterables a `for` really walks: through enumerate/tqdm/zip/iter."""
    if isinstance(node, cst.Call):
        callee = dotted_name(node.func) or ""
        name = model.resolve(node.func) or callee
        if name in LOADER_WRAPPERS or callee in LOADER_WRAPPERS:
            return _unwrap_iterable(model, node.args[0].value) if node.args else []
        if name == "zip" or callee == "zip":
            return [x for a in node.args for x in _unwrap_iterable(model, a.value)]
    return [node]


def _link(model: TorchModule, builder: _Builder) -> None:
    by_node: dict[int, DataLoaderSite] = {}
    for site in model.calls_by_qualname.get(DATALOADER, ()):
        loader = DataLoaderSite(site, None)
        by_node[id(site.node)] = loader
        model.dataloaders.append(loader)
    loaders_by_name: dict[str, list[DataLoaderSite]] = {}
    for name, assignments in model.assignments.items():
        for a in assignments:
            loader = by_node.get(id(a.value))
            if loader is not None:
                loader.bound_to = loader.bound_to or name
                loaders_by_name.setdefault(name, []).append(loader)
    # One level through local functions: `def train(loader): for x in loader` called
    # as `train(train_loader)` makes the parameter stand for that loader.
    for site in model.calls:
        if not isinstance(site.node.func, cst.Name):
            continue
        fn = model.functions.get(site.node.func.value)
        if fn is None:
            continue
        params = fn.params.params
        for i, arg in enumerate(site.node.args):
            if arg.star:
                break
            param = None
            if arg.keyword is None and i < len(params):
                param = params[i].name.value
            elif arg.keyword is not None:
                param = arg.keyword.value
            if param is None:
                continue
            found = _loaders_of(arg.value, by_node, loaders_by_name)
            if found:
                loaders_by_name.setdefault(f"{fn.name.value}:{param}", []).extend(found)
    for loop in model.loops:
        if not isinstance(loop.node, cst.For):
            continue
        for it in _unwrap_iterable(model, loop.node.iter):
            found = _loaders_of(it, by_node, loaders_by_name)
            if not found and isinstance(it, cst.Name) and loop.ctx.function is not None:
                found = loaders_by_name.get(f"{loop.ctx.function.name.value}:{it.value}", [])
            loop.loaders.extend(found)
    _link_models(model)


def _loaders_of(
    node: cst.BaseExpression,
    by_node: dict[int, DataLoaderSite],
    by_name: dict[str, list[DataLoaderSite]],
) -> list[DataLoaderSite]:
    loader = by_node.get(id(node))
    if loader is not None:
        return [loader]
    name = dotted_name(node)
    return list(by_name.get(name, ())) if name else []


def is_module_class(qualname: str | None) -> bool:
    """Does this constructor build an nn.Module (torch.nn layers, torchvision/timm models,
    or a class of this file deriving from one)?"""
    if qualname is None:
        return False
    if qualname.startswith("torch.nn.") and not qualname.startswith("torch.nn.functional"):
        last = qualname.rsplit(".", 1)[-1]
        return last[:1].isupper() and last not in ("Parameter", "ParameterList", "ParameterDict")
    return qualname.startswith(("torchvision.models.", "timm.create_model"))


def _local_module_class(model: TorchModule, name: str, seen: set[str]) -> bool:
    cls = model.classes.get(name)
    if cls is None or name in seen:
        return False
    seen.add(name)
    for base in cls.bases:
        q = model.resolve(base.value)
        if q in ("torch.nn.Module",) or is_module_class(q):
            return True
        base_name = dotted_name(base.value)
        if base_name and _local_module_class(model, base_name, seen):
            return True
    return False


def constructs_module(model: TorchModule, call: cst.Call) -> bool:
    """`Net()`, `nn.Linear()`, `torchvision.models.resnet18()`, `AutoModel.from_pretrained()`."""
    qualname = model.resolve(call.func)
    if is_module_class(qualname):
        return True
    if qualname and qualname.startswith("transformers.") and qualname.endswith(".from_pretrained"):
        return True
    return isinstance(call.func, cst.Name) and _local_module_class(model, call.func.value, set())


def _link_models(model: TorchModule) -> None:
    calls_by_node = {id(c.node): c for c in model.calls}
    for name, assignments in model.assignments.items():
        for a in assignments:
            value = a.value
            # `model = Net().to(device)` / `.cuda()`: the construction is the receiver.
            inline_move = None
            while (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in ("to", "cuda")
            ):
                inline_move = inline_move or calls_by_node.get(id(value))
                value = value.func.value
            if not isinstance(value, cst.Call) or not constructs_module(model, value):
                continue
            if model.model_named(name) is not None:
                continue
            site = ModelSite(name, calls_by_node[id(value)], a)
            if inline_move is not None:
                site.moves.append(inline_move)
            model.models.append(site)
    for call in model.method_calls("to", "cuda"):
        target = dotted_name(call.receiver) if call.receiver is not None else None
        if target is None:
            continue
        site = model.model_named(target)
        if site is not None and call not in site.moves:
            site.moves.append(call)


# -- per-step or periodic (TL4xx) ---------------------------------------------------------


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The child nodes that are not trivia, in source order. (libcst's `node.children`
    rebuilds the node to find them: far too slow for rules that search subtrees.)"""
    for name in child_fields(type(node)):
        child = getattr(node, name)
        if isinstance(child, cst.CSTNode):
            yield child
        elif isinstance(child, (tuple, list)):
            yield from (c for c in child if isinstance(c, cst.CSTNode))


def names_read(node: cst.CSTNode) -> Iterator[str]:
    """Every name and dotted attribute chain in an expression (`a.b` gives `a.b`, then `a`)."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        name = dotted_name(node)
        if name is not None:
            yield name
    for child in children(node):
        yield from names_read(child)


def contains(root: cst.CSTNode, target: cst.CSTNode) -> bool:
    """`target` is `root` or inside it (identity; walks only `root`'s subtree)."""
    if root is target:
        return True
    return any(contains(child, target) for child in children(root))


def _has_modulo(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        return True
    return any(_has_modulo(child) for child in children(node))


def is_periodic(site: CallSite) -> bool:
    """The call runs every N steps, not every step: it is in the body (not the `else`) of
    an `if` whose test has a `%` (`if step % 100 == 0:`, `if not i % log_every:`)."""
    return any(_has_modulo(if_.test) and contains(if_.body, site.node) for if_ in site.ctx.ifs)
