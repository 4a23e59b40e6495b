"""`TorchModule`: the facts of one file that every rule reads, built in one walk."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

import libcst as cst

from torchlint.semantic.builder import collect
from torchlint.semantic.datasets import Datasets
from torchlint.semantic.devices import Device, Devices
from torchlint.semantic.external import Callers, Environment, Uses
from torchlint.semantic.frameworks import Frameworks
from torchlint.semantic.functions import Functions
from torchlint.semantic.loaders import DataLoaderSite, Elsewhere, Loader, Loaders
from torchlint.semantic.loops import Training, is_periodic
from torchlint.semantic.models import Model, Models, ModelSite
from torchlint.semantic.networks import BILLION, Networks, size_in_name
from torchlint.semantic.scopes import (
    Binding,
    CallSite,
    Context,
    Kind,
    Loop,
    Scope,
    Store,
    Symbol,
    assigned_values,
    bindings,
)
from torchlint.semantic.syntax import (
    MISSING,
    argument,
    bool_value,
    children,
    contains,
    str_value,
)
from torchlint.semantic.values import Constant, Values
from torchlint.settings import Settings
from torchlint.walk import descendants

# A test of the torch version, or of whether torch has something.
VERSION_TEST = re.compile(r"version|TORCH_\w*\d|hasattr\(\s*torch\b", re.IGNORECASE)

NO_GRAD = ("torch.no_grad", "torch.inference_mode")
SET_GRAD = "torch.set_grad_enabled"
LOW_PRECISION = ("torch.float16", "torch.half", "torch.bfloat16")
LOW_PRECISION_METHODS = ("half", "bfloat16", "autocast")
# `from_pretrained(..., torch_dtype="bfloat16")`: "auto" loads the checkpoint's dtype.
LOW_PRECISION_NAMES = ("float16", "half", "bfloat16", "auto")
QUANTIZED = ("load_in_8bit", "load_in_4bit", "quantization_config")
# Ops autocast refuses in float16/bfloat16 regions ("unsafe to autocast"): they raise.
AUTOCAST_REFUSED = ("torch.nn.BCELoss", "torch.nn.functional.binary_cross_entropy")
SET_MATMUL_PRECISION = "torch.set_float32_matmul_precision"
MATMUL_PRECISION_SETTINGS = (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.fp32_precision",
)
# What says a script runs on several GPUs: an option, variable or key naming their number
# or list, or a launcher's variable (`--ngpu`, `args.gpu_ids`, "LOCAL_RANK", "WORLD_SIZE").
MULTI_GPU_NAME = re.compile(
    r"^-*(n_?gpus?|num_?gpus?|gpus|gpu_ids|device_ids|world_size|local_rank|nproc_per_node"
    r"|multi_?gpus?|num_devices|n_devices)$",
    re.IGNORECASE,
)
DEVICE_COUNTS = ("torch.cuda.device_count", "torch.accelerator.device_count")
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


class TorchModule:
    """The facts of one file. Built by `build`; read by every rule."""

    def __init__(self, module: cst.Module, path: str, settings: Settings, env: Environment) -> None:
        self.module = module
        self.path = path
        self.settings = settings
        self.env = env
        facts = collect(module, env)
        self.facts = facts
        self.scope: Scope = facts.scope
        self.calls: list[CallSite] = facts.calls
        self.loops: list[Loop] = facts.loops
        self.functions = Functions(facts, env)
        self.values = Values(facts, self.functions)
        self.devices = Devices(facts, self.functions, self.values)
        self._models = Models(facts, self.functions, self.values)
        self.networks = Networks(self.functions, self.values, self._models)
        self.training = Training(facts, self.functions, self._models, self.values)
        self._loaders = Loaders(facts, self.functions, self.values)
        self.frameworks = Frameworks(facts, self.functions, self.values, self._loaders)
        self.datasets = Datasets(facts, self.functions, self.values, self.guarded, self.notebook)
        self._per_step: dict[tuple[int, ...], bool] = {}

    # -- configuration -------------------------------------------------------------------

    def option(self, name: str) -> Any:
        return self.settings.options[name]

    @property
    def target_torch(self) -> tuple[int, int] | None:
        return self.settings.target_torch

    # -- names ---------------------------------------------------------------------------

    def resolve(self, node: cst.CSTNode, scope: Scope | None = None) -> str | None:
        """The canonical qualified name of an expression, through the imports visible
        in `scope` (the module's by default); a builtin's own name (`float`)."""
        return (scope or self.scope).resolve(node)

    def spelling(self, qualname: str, scope: Scope | None = None) -> str | None:
        """How `qualname` is written in this file at `scope` (the module's by default),
        through an import visible there (`nn.Linear`); None where no import binds it."""
        where = scope or self.scope
        best: tuple[int, str] | None = None
        for local, symbol in self.scope.symbols.items():
            target = symbol.imported
            if target is None or not (qualname == target or qualname.startswith(target + ".")):
                continue
            if where.lookup(local) is not symbol:
                continue  # shadowed where the text goes
            if best is None or len(target) > best[0]:
                best = (len(target), local + qualname[len(target) :])
        return best[1] if best is not None else None

    def is_free(self, name: str) -> bool:
        """Nothing in the module's scope is called `name` (a fix may define it)."""
        return name not in self.scope.symbols

    def definable(self, name: str) -> bool:
        """A fix may define `name` after the imports: nothing holds it, or only module-level
        assignments (the definition an earlier fix added)."""
        symbol = self.scope.symbols.get(name)
        return symbol is None or all(b.kind is Kind.ASSIGN for b in symbol.bindings)

    def imports_plainly(self, name: str) -> bool:
        """`name` at module level is the module `import name` binds, or nothing yet (a fix
        may add the import)."""
        symbol = self.scope.symbols.get(name)
        return symbol is None or symbol.imported == name

    # -- calls -----------------------------------------------------------------------

    def calls_to(self, *qualnames: str) -> list[CallSite]:
        found = [c for q in qualnames for c in self.facts.calls_by_qualname.get(q, ())]
        return sorted(found, key=lambda c: c.order) if len(qualnames) > 1 else found

    def method_calls(self, *methods: str) -> list[CallSite]:
        found = [c for m in methods for c in self.facts.calls_by_method.get(m, ())]
        return sorted(found, key=lambda c: c.order) if len(methods) > 1 else found

    @property
    def qualnames_called(self) -> list[str]:
        return list(self.facts.calls_by_qualname)

    @property
    def imported_modules(self) -> set[str]:
        return self.facts.imported_modules

    def imports_any(self, *prefixes: str) -> bool:
        return any(
            m == p or m.startswith(p + ".") for m in self.facts.imported_modules for p in prefixes
        )

    @cached_property
    def managed(self) -> bool:
        """Lightning, Accelerate, DeepSpeed or the transformers Trainer own the devices
        (imported, or called through a plain `import transformers`)."""
        return self.imports_any(*MANAGED_PREFIXES) or any(
            q == p or q.startswith(p + ".")
            for q in self.facts.calls_by_qualname
            for p in MANAGED_PREFIXES
        )

    @cached_property
    def reduced_precision(self) -> bool:
        """Some computation is set to run below float32: autocast, a GradScaler, `.half()`,
        `.bfloat16()`, a float16/bfloat16 dtype passed, a model loaded in reduced precision
        or quantized (`from_pretrained(..., torch_dtype="bfloat16")`, `dtype="auto"`,
        `load_in_4bit=True`, `quantization_config=...`)."""
        for qualname in self.qualnames_called:
            last = qualname.rsplit(".", 1)[-1]
            if last in ("autocast", "GradScaler") or qualname.startswith("torch.amp."):
                return True
        if self.method_calls(*LOW_PRECISION_METHODS):
            return True
        if any(self.loaded_below_float32(site) for site in self.models):
            return True
        for call in self.calls:
            for arg in call.node.args:
                if self.resolve(arg.value, call.scope) in LOW_PRECISION:
                    return True
                name = arg.keyword.value if arg.keyword is not None else None
                if name in QUANTIZED or (
                    name in ("torch_dtype", "dtype") and str_value(arg.value) in LOW_PRECISION_NAMES
                ):
                    return True
        return False

    def autocast_refused(self, calls: list[CallSite]) -> CallSite | None:
        """The construction of a binary cross-entropy on probabilities (`nn.BCELoss()`,
        `F.binary_cross_entropy`) that one of `calls` (or of the calls in a function of
        this file one of them runs) computes: autocast refuses it with a RuntimeError on
        CUDA, so the code cannot run under mixed precision as written."""
        found = list(calls)
        for call in calls:
            target = self.functions.target(call)
            if target is not None:
                found += self.training.calls_in(target.function)
        for call in found:
            site = self.model_called(call)
            made = site.construction if isinstance(site, ModelSite) else call
            if made.qualname in AUTOCAST_REFUSED:
                return made
        return None

    def loaded_below_float32(self, site: Model) -> bool:
        """The network is loaded or cast below float32: `from_pretrained(...,
        torch_dtype=torch.bfloat16)` (through names and options), `dtype="auto"`,
        quantized, `.half()`, `.bfloat16()` or `.to(torch.float16)` on it."""
        if self.networks.loaded_precision(site) is not None:
            return True
        for call in self.method_calls_on(site):
            if call.method in ("half", "bfloat16"):
                return True
            if call.method == "to" and any(
                self.networks.dtype(a.value, call.scope) not in (None, "auto")
                for a in call.node.args
            ):
                return True
        return False

    def memory_bound(self, site: Model) -> bool:
        """The network's memory, not per-step overhead, sets its batch size: it has a
        billion parameters or more (counted from its layers, or as its pretrained model id
        says: "Llama-2-7b", a "llama") or it is loaded quantized (4/8-bit)."""
        size = self.networks.estimated_parameters(site)
        if size is not None and size >= BILLION:
            return True
        return self.networks.loaded_precision(site) == "quantized"

    def trains_memory_bound(self, arguments: CallSite) -> bool:
        """A Hugging Face trainer built with these `TrainingArguments` trains a
        `memory_bound` model: one the file builds, or a model id given as a string
        (TRL's `SFTTrainer(model="meta-llama/Llama-2-7b-hf")`) whose name says a billion
        parameters or more."""
        for trainer in self.frameworks.trainers_given(arguments):
            model = argument(trainer.node, "model", ("model",))
            if model is MISSING:
                continue
            site = self.model_of(model, trainer.scope)
            if site is not None and self.memory_bound(site):
                return True
            found = self.constant(model, trainer.scope)
            size = size_in_name(found.value) if found and isinstance(found.value, str) else None
            if size is not None and size >= BILLION:
                return True
        return False

    @cached_property
    def multi_gpu(self) -> bool:
        """Something in the file says it runs on several GPUs: it counts them
        (`torch.cuda.device_count()`), or an option, variable, attribute or string names
        their number or list or a launcher's rank (`--ngpu`, `args.gpu_ids`, `n_gpu`,
        "LOCAL_RANK", "WORLD_SIZE")."""
        if self.calls_to(*DEVICE_COUNTS):
            return True
        for node in descendants(self.module):
            if isinstance(node, cst.Name):
                text: str | None = node.value
            elif isinstance(node, cst.Attribute):
                text = node.attr.value
            elif isinstance(node, cst.SimpleString):
                text = str_value(node)
            else:
                continue
            if text and MULTI_GPU_NAME.match(text):
                return True
        return False

    @cached_property
    def sets_matmul_precision(self) -> bool:
        """The file chooses how float32 matmuls run (TF32 tensor cores or not), by either
        API: `torch.set_float32_matmul_precision(...)`, or a store to
        `torch.backends.cuda.matmul.allow_tf32` / `fp32_precision`."""
        return bool(
            self.calls_to(SET_MATMUL_PRECISION) or self.stores_to(*MATMUL_PRECISION_SETTINGS)
        )

    # -- what the file saves ----------------------------------------------------------

    @cached_property
    def saves_cpu_state(self) -> bool:
        """The script writes what it saves from the CPU: FSDP's `offload_to_cpu=True`, or a
        `torch.save` of CPU tensors (`t.cpu()`, `{k: v.cpu() for ...}`,
        `model.cpu().state_dict()`, a name bound to one of these, or a model or tensor
        moved by `.cpu()`/`.to("cpu")` earlier in the same function)."""
        if any(c.kwarg("offload_to_cpu") is not MISSING for c in self.calls):
            return True
        return any(
            (saved := save.arg("obj", index=0)) is not MISSING
            and self._on_cpu(saved, save.scope, save, 0)
            for save in self.calls_to(*SAVES)
        )

    def _on_cpu(self, node: cst.BaseExpression, scope: Scope, save: CallSite, depth: int) -> bool:
        """The saved expression holds CPU tensors only (as far as the file shows)."""
        if depth > 4:
            return False
        if isinstance(node, (cst.DictComp, cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            value = node.value if isinstance(node, cst.DictComp) else node.elt
            return self._on_cpu(value, scope, save, depth + 1)
        if isinstance(node, (cst.Dict, cst.List, cst.Tuple)):
            elements = [e for e in node.elements if isinstance(e, (cst.DictElement, cst.Element))]
            values = [e.value for e in elements]
            tensors = [v for v in values if isinstance(v, cst.Call)]
            return bool(tensors) and all(self._on_cpu(v, scope, save, depth + 1) for v in tensors)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if self._to_cpu(node, scope):
                return True
            if node.func.attr.value in KEEPS_DEVICE:  # `.state_dict()`, `.detach()`...
                return self._on_cpu(node.func.value, scope, save, depth + 1)
            return False
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return False
        symbol = scope.lookup_expr(node)
        if symbol is None:
            return False
        moved = any(  # `model.cpu()` before `torch.save(model.state_dict(), ...)`
            c.order < save.order
            and c.ctx.function is save.ctx.function
            and self._to_cpu(c.node, c.scope)
            and _receiver_symbol(c) is symbol
            for c in self.method_calls("cpu", "to")
        )
        return moved or any(
            b.kind is Kind.ASSIGN
            and b.value is not None
            and self._on_cpu(b.value, b.ctx.scope, save, depth + 1)
            for b in symbol.bindings
        )

    def _to_cpu(self, call: cst.Call, scope: Scope) -> bool:
        """`.cpu()`, or `.to(<the CPU>)`."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value == "cpu":
            return True
        if func.attr.value != "to" or not call.args:
            return False
        device = self.device(call.args[0].value, scope)
        return device is not None and device.is_cpu and not device.unknown_path

    # -- module attributes set ---------------------------------------------------------

    @cached_property
    def _stores(self) -> dict[str, list[Store]]:
        found: dict[str, list[Store]] = {}
        for target, value, ctx in self.facts.attribute_stores:
            qualname = ctx.scope.resolve(target)
            if qualname is not None:
                found.setdefault(qualname, []).append(Store(qualname, target, value, ctx))
        return found

    def stores_to(self, *qualnames: str) -> list[Store]:
        """Assignments to these module attributes, through the imports
        (`cudnn.benchmark = True` with `from torch.backends import cudnn`), in source order."""
        return [s for q in qualnames for s in self._stores.get(q, ())]

    def conditional(self, ctx: Context, node: cst.CSTNode | None = None, _depth: int = 0) -> bool:
        """The statement of `ctx` (and `node` in it) runs only when a condition holds:
        under an `if` other than the main guard or a test that a GPU is there
        (`if torch.cuda.is_available():`, the premise of every GPU rule), in a branch of
        `a if c else b` or after `c and`/`c or`, or in a function every call of which (in
        this file) is conditional. A function the file never calls is not conditional."""
        if any(not _main_guard(i) and not self._gpu_present(i.test, ctx.scope) for i in ctx.ifs):
            return True
        if node is not None and ctx.statement is not None and _branch(ctx.statement, node):
            return True
        function = ctx.function
        if function is None or _depth > 2 or self.outside_callers(function) is not None:
            return False
        callers = self.functions.callers(function)
        return bool(callers) and all(
            self.conditional(c.ctx, c.node, _depth + 1) for c, _ in callers
        )

    def outside_callers(self, function: cst.FunctionDef) -> Callers | None:
        """How the project's other files call a function of this file (None: they do not,
        or the file is checked alone)."""
        name = self.functions.local_name(function)
        return self.env.callers(name) if name is not None else None

    def _gpu_present(self, test: cst.BaseExpression, scope: Scope) -> bool:
        return isinstance(test, cst.Call) and self.resolve(test.func, scope) in (
            "torch.cuda.is_available",
            "torch.accelerator.is_available",
        )

    # -- devices ---------------------------------------------------------------------

    def device(self, node: cst.CSTNode, scope: Scope) -> Device | None:
        """The device an expression names (see devices.py), None if not known to be one."""
        return self.devices.classify(node, scope)

    def move(self, call: CallSite) -> Device | None:
        """Where `x.to(...)`/`x.cuda(...)` moves `x`; None when not a device move."""
        return self.devices.move(call)

    @cached_property
    def uses_gpu(self) -> bool:
        """The file puts work on a GPU where there is one: a device expression that is a
        GPU (CUDA or an accelerator, on some branch), `.cuda()`, `torch.cuda.*` or
        `torch.accelerator.*` calls, a "cuda" string, or a managed framework (unless
        every Lightning Trainer and TrainingArguments of the file asks for the CPU)."""
        return self._gpu_evidence(frozenset())

    def _gpu_evidence(self, ignored: frozenset[str]) -> bool:
        """`uses_gpu`, not counting calls of the `ignored` qualified names."""
        if self.managed and not self.frameworks.cpu_only:
            return True
        if self.facts.cuda_strings or self.method_calls("cuda"):
            return True
        if self._gpu_elsewhere:
            return True
        if any(
            q.startswith(("torch.cuda.", "torch.accelerator.")) and q not in ignored
            for q in self.qualnames_called
        ):
            return True
        for call in self.calls:
            if call.method == "to" or call.qualname == "torch.device":
                found = (
                    self.devices.move(call)
                    if call.method == "to"
                    else self.device(call.node, call.scope)
                )
                if found is not None and found.is_gpu:
                    return True
            device = call.kwarg("device")
            if device is not MISSING:
                found = self.device(device, call.scope)
                if found is not None and found.is_gpu:
                    return True
        return False

    @cached_property
    def _gpu_elsewhere(self) -> bool:
        """The project's other files put what this file builds on a GPU (its loaders'
        batches, its models), pass in models on a GPU, or call its functions in training
        on a GPU."""
        if any(site.outside is not None and site.outside.gpu for site in self.dataloaders):
            return True
        if any(s.external is not None and s.external.on_gpu for s in self._models.passed):
            return True
        if any((u := self.model_uses(site)) is not None and u.gpu for site in self.models):
            return True
        return bool(self.env.stepped())

    @cached_property
    def presumed_accelerator(self) -> bool:
        """No call shows the device, but a training loop moves its batches to a device
        its function receives as a parameter (`def train(model, loader, optimizer,
        device)`): training code for an accelerator. Rules whose advice is harmless on a
        CPU (per-step syncs) treat it as GPU code; rules whose fix could hurt there do not."""
        for loop in self.step_loops:
            function = loop.ctx.function
            if function is None:
                continue
            for call in loop.calls:
                device = self.devices.move_expression(call) if call.method == "to" else None
                symbol = call.scope.lookup_expr(device) if device is not None else None
                param = symbol.only(Kind.PARAM) if symbol is not None else None
                if (
                    param is not None
                    and param.symbol.scope.node is function
                    and self.functions.unseen(param)
                    and self.move(call) is not None
                ):
                    return True
        return False

    # -- models ----------------------------------------------------------------------

    @property
    def models(self) -> list[ModelSite]:
        """Every nn.Module instance built in the file: networks, losses, stateless layers."""
        return self._models.sites

    def model_of(self, node: cst.CSTNode, scope: Scope) -> Model | None:
        return self._models.of(node, scope)

    def holds_only(self, site: Model) -> bool:
        """No name holding the model is rebound to a value of another origin."""
        return self._models.holds_only(site)

    def model_called(self, call: CallSite) -> Model | None:
        """The module a call such as `model(x)` / `self.net(x)` runs."""
        return self._models.called(call)

    @cached_property
    def _method_calls_on_models(self) -> dict[int, list[CallSite]]:
        found: dict[int, list[CallSite]] = {}
        for call in self.calls:
            if call.receiver is not None:
                site = self.model_of(call.receiver, call.scope)
                if site is not None:
                    found.setdefault(id(site), []).append(call)
        return found

    def model_uses(self, site: Model) -> Uses | None:
        """What the project's other files do with a model built here."""
        return self.env.uses(f"@{site.index}") if isinstance(site, ModelSite) else None

    @property
    def passed_models(self) -> list[Model]:
        """The models the project's other files pass to functions of this file (or
        presumed so: see `Models`)."""
        return self._models.passed

    def on_gpu(self, site: Model) -> bool:
        """A move of the model goes to a GPU (CUDA or an accelerator, on some branch),
        here or where another file of the project builds or trains it."""
        if any((d := self.move(m)) is not None and d.is_gpu for m in site.moves):
            return True
        if site.external is not None and site.external.on_gpu:
            return True
        uses = self.model_uses(site)
        return uses is not None and uses.gpu

    @cached_property
    def trained_on_gpu(self) -> list[ModelSite]:
        """The networks built here that a step loop of this file calls and that are moved
        to a GPU, in the order the loops call them; then those another file of the project
        trains on a GPU."""
        found: dict[int, ModelSite] = {}
        for loop in self.step_loops:
            for call in self.network_calls(loop):
                site = self.model_called(call)
                if not isinstance(site, ModelSite) or id(site) in found:
                    continue  # a model built elsewhere is reported where it is built
                if self.on_gpu(site):
                    found[id(site)] = site
        for site in self.models:
            uses = self.model_uses(site) if site.is_network else None
            if uses is not None and uses.steps and uses.gpu:
                found.setdefault(id(site), site)
        return list(found.values())

    def training_loop_of(self, sites: list[ModelSite]) -> Loop | None:
        """The outermost loop around the first step loop that calls one of `sites` (where
        a finding about how those networks train is reported); for networks another
        file trains, the outermost loop around the first call that passes one there."""
        for loop in self.step_loops:
            if any(self.model_called(c) in sites for c in loop.calls):
                return loop.ctx.loops[0] if loop.ctx.loops else loop
        for call in self.calls:
            if (
                call.ctx.loops
                and self.functions.external(call) is not None
                and any(self.model_of(a.value, call.scope) in sites for a in call.node.args)
            ):
                return call.ctx.loops[0]
        return None

    def method_calls_on(self, site: Model) -> list[CallSite]:
        """The method calls whose receiver is the model (`model.eval()`, `model.to(...)`)."""
        return self._method_calls_on_models.get(id(site), [])

    def network_calls(self, loop: Loop) -> list[CallSite]:
        """Calls of networks (not losses) in the loop's body."""
        return [c for c in loop.calls if (m := self.model_called(c)) is not None and m.is_network]

    @cached_property
    def _optimized(self) -> set[int]:
        return self.training.optimized()

    def optimized(self, site: Model) -> bool:
        """The model's parameters are handed to an optimizer in this file."""
        return id(site) in self._optimized

    def optimizer_models(self, call: CallSite) -> list[Model]:
        """The models whose `.parameters()` a call (an optimizer's construction) is given."""
        return [
            site
            for arg in call.node.args
            for site in self.training.parameters_of(arg.value, call.scope)
        ]

    @cached_property
    def _trained(self) -> set[int]:
        return {
            id(m) for loop in self.training_loops for c in loop.calls if (m := self.model_called(c))
        }

    def trained(self, site: Model) -> bool:
        """The model is called in a training loop of this file, or of another file of the
        project it is passed to."""
        if id(site) in self._trained:
            return True
        uses = self.model_uses(site)
        return uses is not None and uses.trains

    # -- loops and loaders -----------------------------------------------------------

    @property
    def training_loops(self) -> list[Loop]:
        return [loop for loop in self.loops if loop.is_training]

    @property
    def step_loops(self) -> list[Loop]:
        return [loop for loop in self.loops if loop.is_step_loop]

    @property
    def dataloaders(self) -> list[DataLoaderSite]:
        return self._loaders.sites

    def loaders_of(self, node: cst.CSTNode, scope: Scope) -> list[Loader]:
        return self._loaders.of(node, scope)

    def iterables(self, node: cst.BaseExpression, scope: Scope) -> list[cst.BaseExpression]:
        """What a `for` walks, through enumerate/tqdm/zip and generators that hand on an
        argument's items."""
        return self._loaders.iterables(node, scope)

    def handed_on(self, node: cst.Call, scope: Scope) -> cst.BaseExpression | None:
        """The argument whose items a generator call hands on unchanged."""
        return self._loaders.handed_on(node, scope)

    def walks_unseen_parameter(self, loop: Loop) -> bool:
        """A `for` loop over a parameter of its function that no visible call passes (a
        library function's batches: `def evaluate(model, loader, device)`)."""
        if not isinstance(loop.node, cst.For):
            return False
        for it in self.iterables(loop.node.iter, loop.ctx.scope):
            symbol = loop.ctx.scope.lookup_expr(it)
            param = symbol.only(Kind.PARAM) if symbol is not None else None
            if param is not None and self.functions.unseen(param):
                return True
        return False

    def iterator_of(self, node: cst.BaseExpression, scope: Scope) -> list[Loader]:
        """The loaders an iterator name walks (`it` bound to `iter(loader)`)."""
        return self._loaders.iterator_of(node, scope)

    def epoch(self, loader: DataLoaderSite) -> tuple[Loop, Loop] | None:
        """(a loop over the loader, the loop that repeats it), if it is iterated again
        and again."""
        return self._loaders.epoch(loader)

    def reiterated(self, loader: DataLoaderSite) -> CallSite | None:
        """An `iter(loader)` run again and again (see loaders.py)."""
        return self._loaders.reiterated(loader)

    def period(self, call: CallSite, _depth: int = 0) -> int | None:
        """How many steps apart the call runs: the `N` of the `if step % N == 0:` around it
        (an int constant: a literal, a name, an argparse default), or around every call
        of the function it is in (two levels; the least of them); 0 where it runs every
        N steps for an `N` we cannot read; None where it may run every time."""
        periods = [
            p
            for if_ in call.ctx.ifs
            if (p := self._modulus(if_, call.scope)) is not None and contains(if_.body, call.node)
        ]
        if periods:
            return max(periods)
        function = call.ctx.function
        if function is None or _depth >= 2:
            return None
        callers = self.functions.callers(function)
        found = [self.period(c, _depth + 1) for c, _ in callers]
        if not found or any(p is None for p in found):
            return None
        return min(p for p in found if p is not None)

    def _modulus(self, if_: cst.If, scope: Scope) -> int | None:
        """The `N` of a `% N` in the test (0 when it is not an int constant); None
        without one."""
        for node in descendants(if_.test):
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
                found = self.values.constant(node.right, scope)
                value = found.value if found is not None else None
                return value if isinstance(value, int) and not isinstance(value, bool) else 0
        return None

    def restarts_workers(self, loader: DataLoaderSite) -> bool:
        """Workers of this loader would start again and again without
        `persistent_workers` (it is iterated every epoch here or in another file of the
        project, or `iter()`ed over and over), where the target torch has the option
        (1.7)."""
        if self.target_torch is not None and self.target_torch < (1, 7):
            return False
        if loader.outside is not None and loader.outside.repeated:
            return True
        return self.epoch(loader) is not None or self.reiterated(loader) is not None

    def pins_memory(self, loader: Loader) -> bool:
        """`pin_memory=True`, or pinned whenever an accelerator is there to copy to (as
        another file of the project says, for a loader built there)."""
        if isinstance(loader, Elsewhere):
            return loader.pinned
        value = loader.arg("pin_memory")
        if isinstance(value, cst.Name) and value.value == "True":
            return True
        return isinstance(value, cst.Call) and loader.call.scope.resolve(value.func) in (
            "torch.cuda.is_available",
            "torch.accelerator.is_available",
        )

    # -- where code runs ---------------------------------------------------------------

    def disables_grad(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`torch.no_grad()`, `torch.no_grad`, `torch.inference_mode()` (not `(False)`),
        `torch.set_grad_enabled(False)`."""
        if isinstance(expr, cst.Call):
            qualname = self.resolve(expr.func, scope)
            args = [
                a
                for a in expr.args
                if a.keyword is None or a.keyword.value in ("mode", "orig_func")
            ]
            if qualname in NO_GRAD:
                return not args or bool_value(args[0].value) is not False
            if qualname == SET_GRAD:
                return bool(args) and bool_value(args[0].value) is False
            return False
        return self.resolve(expr, scope) in NO_GRAD

    def grad_disabled(self, call: CallSite) -> bool:
        """A `with` or decorator around the call disables gradients."""
        if any(self.disables_grad(i.item, call.scope) for w in call.ctx.withs for i in w.items):
            return True
        return any(self.disables_grad(d.decorator, call.scope) for d in call.ctx.decorators)

    @property
    def notebook(self) -> bool:
        return self.path.endswith(".ipynb")

    def version_guarded(self, call: CallSite) -> bool:
        """`call` runs on one side of a test of the torch version or of what torch has
        (`if _TORCH_GREATER_EQUAL_2_4: ... else: old()`, `new() if hasattr(torch, "amp")
        else old()`): code kept for older releases on purpose."""
        tests = [i.test for i in call.ctx.ifs]
        statement = call.ctx.statement
        if statement is not None:
            tests += [
                e.test
                for e in descendants(statement)
                if isinstance(e, cst.IfExp)
                and (contains(e.body, call.node) or contains(e.orelse, call.node))
            ]
        return any(VERSION_TEST.search(self.module.code_for_node(t)) for t in tests)

    def guarded(
        self,
        ctx: Context,
        node: cst.CSTNode | None = None,
        _depth: int = 0,
        elsewhere: bool = True,
    ) -> bool:
        """`node` (by default the statement of `ctx`) runs only under `if __name__ ==
        "__main__":`, directly or in a function every call of which (in this file and, with
        `elsewhere`, in the project's other files) does: what a spawned DataLoader worker,
        which re-imports the script, never runs (so where workers may be started)."""
        target = node if node is not None else ctx.statement
        if target is not None and any(_main_guard(i) and contains(i.body, target) for i in ctx.ifs):
            return True
        function = ctx.function
        if function is None or _depth > 3 or self.notebook:
            return False
        callers = self.functions.callers(function)
        outside = self.outside_callers(function) if elsewhere else None
        if outside is not None and not outside.guarded:
            return False
        return (bool(callers) or outside is not None) and all(
            self.guarded(c.ctx, c.node, _depth + 1, elsewhere) for c, _ in callers
        )

    def per_step(self, ctx: Context, _depth: int = 0) -> bool:
        """Code here runs on every training step: in a step loop, in the `forward` of a
        network of this file, in Lightning's `training_step`, in a function another file
        of the project calls every step, or in a function called from such code (two
        levels) other than every N steps."""
        key = (id(ctx.function), *map(id, ctx.loops), _depth)
        found = self._per_step.get(key)
        if found is None:
            found = self._per_step[key] = self._runs_per_step(ctx, _depth)
        return found

    def _runs_per_step(self, ctx: Context, _depth: int) -> bool:
        if any(
            loop.is_step_loop or any(o.is_step_loop for o in loop.ctx.loops) for loop in ctx.loops
        ):
            return True
        function = ctx.function
        if function is None or _depth > 2:
            return False
        if function.name.value == "forward" and ctx.class_ is not None:
            return True
        if function in self.frameworks.training_steps:  # Lightning runs it every step
            return True
        name = self.functions.local_name(function)
        if name is not None and any(name == n for n, _ in self.env.stepped()):
            return True
        return any(
            self.per_step(c.ctx, _depth + 1)
            for c, _ in self.functions.callers(function)
            if not is_periodic(c)  # `if step % 100 == 0: sample_images()`
        )

    def opt_in(self, ctx: Context, node: cst.CSTNode, named: bool = False) -> bool:
        """`node` runs only when a flag that is off by default is on: it is in the body of
        an `if` whose test (or a term of its `and`) is an option, config entry or constant
        the file sets to False/None/0 (`if args.synchronize_step:` with
        `action="store_true"`, `DEBUG = False`). With `named`, only a flag whose name says
        it is for timing, profiling or debugging (`args.profile`, not `args.with_tracking`,
        a mode users run with)."""
        for if_ in ctx.ifs:
            if not contains(if_.body, node):
                continue
            for term in _conjuncts(if_.test):
                found = self.constant(term, ctx.scope)
                if found is None or found.origin == "literal" or found.value:
                    continue
                name = self.module.code_for_node(term)
                if not named or INSTRUMENTATION_FLAG.search(name):
                    return True
        return False

    def heavy_step(self, loop: Loop) -> bool:
        """A training step of the loop runs a large network (called, or handed to a
        function that runs it: `forward(model, batch)`): 100M parameters or more (counted,
        or as its pretrained model id says), or a Hugging Face pretrained transformer
        (`from_pretrained`, `from_config`, through `accelerator.prepare`) whose size
        nothing says is smaller."""
        for call in loop.calls:
            given = [a.value for a in call.node.args if isinstance(a.value, cst.Name)]
            for node in [call.node.func, *given]:
                if isinstance(node, (cst.Name, cst.Attribute)) and self._large(node, call.scope):
                    return True
        return False

    def _large(self, node: cst.Name | cst.Attribute, scope: Scope) -> bool:
        site = self.model_of(node, scope)
        size = self.networks.estimated_parameters(site) if site is not None else None
        if size is not None:
            return size >= HEAVY_STEP
        if isinstance(site, ModelSite) and self.networks.pretrained_transformer(
            site.construction.node, site.construction.scope
        ):
            return True
        return any(
            isinstance(value, cst.Call) and self.networks.pretrained_transformer(value, where)
            for value, where in self.values.origins(node, scope)
        )

    def full_batch(self, loop: Loop) -> bool:
        """A teaching loop that fits the whole data set every step: `for epoch in
        range(n):` iterating no loader, whose network calls read only tensors bound
        before the loop (`model(X)` on the whole in-memory `X`)."""
        node = loop.node
        if not isinstance(node, cst.For) or not isinstance(node.iter, cst.Call):
            return False
        if self.resolve(node.iter.func, loop.ctx.scope) != "range" or loop.loaders:
            return False
        if any(outer.loaders or not isinstance(outer.node, cst.For) for outer in loop.ctx.loops):
            return False
        calls = self.network_calls(loop)
        return bool(calls) and all(
            call.node.args and all(self._bound_before(a.value, loop) for a in call.node.args)
            for call in calls
        )

    def _bound_before(self, node: cst.BaseExpression, loop: Loop) -> bool:
        """A whole tensor bound outside the loop (`X`, `X.cuda()`), not a slice of it."""
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        if not isinstance(node, cst.Name) or node.value in loop.bound:
            return False
        symbol = loop.ctx.scope.lookup(node.value)
        return (
            symbol is not None
            and any(b.kind is Kind.ASSIGN for b in symbol.bindings)
            and all(b.kind in (Kind.ASSIGN, Kind.PARAM) for b in symbol.bindings)
        )

    @cached_property
    def runs_without_gpu(self) -> bool:
        """The script is written to run on the CPU too: it asks whether a GPU is there,
        moves to one only under a condition, or picks its device on a branch."""
        if self.calls_to("torch.cuda.is_available", "torch.accelerator.is_available"):
            return True
        for call in self.method_calls("to", "cuda"):
            device = self.move(call)
            if device is None:
                continue
            if device.cpu_path or (device.is_gpu and call.ctx.ifs):
                return True
        return False

    # -- values ----------------------------------------------------------------------

    def constant(self, node: cst.CSTNode, scope: Scope) -> Constant | None:
        return self.values.constant(node, scope)

    def bindings(self, node: cst.CSTNode, scope: Scope) -> list[Binding]:
        """Every binding of the name or `self.attr` an expression refers to."""
        return bindings(node, scope)

    def assigned_values(self, node: cst.CSTNode, scope: Scope) -> list[cst.BaseExpression]:
        return assigned_values(node, scope)

    def next_statement(self, statement: cst.CSTNode) -> cst.BaseStatement | None:
        """The statement after this one in the same block, if any."""
        return self.facts.following.get(id(statement))

    def binding_of(self, value: cst.CSTNode) -> Binding | None:
        """The assignment that binds exactly this expression (`x = <value>`)."""
        return self.facts.by_value.get(id(value))

    def handles_devices(self) -> bool:
        """Anything in the file places work on a device: `.to(<device>)`, `.cuda()`,
        `torch.device(...)`, a `device=` argument, `torch.cuda`/`torch.accelerator` calls,
        `torch.set_default_device`, a device string, or a managed framework. Not
        `torch.cuda.empty_cache()`, which places nothing (and TL402 removes it)."""
        if self._gpu_evidence(NOT_PLACEMENT):
            return True
        for call in self.calls:
            if call.kwarg("device") is not MISSING:
                return True
            if call.method == "to" and self.move(call) is not None:
                return True
            if call.qualname in ("torch.device", "torch.set_default_device"):
                return True
        return False


SAVES = ("torch.save", "torch.serialization.save")
# A flag for measuring or debugging the run, not for running it.
INSTRUMENTATION_FLAG = re.compile(r"sync|profil|timing|time_|bench|debug", re.IGNORECASE)
HEAVY_STEP = 100_000_000  # parameters
# Methods whose result lies where their receiver's tensors lie.
KEEPS_DEVICE = frozenset({"state_dict", "detach", "clone", "contiguous", "float", "half", "eval"})


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The terms of `a and b and c` (the test itself otherwise)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


def _receiver_symbol(call: CallSite) -> Symbol | None:
    """The symbol a method call works on, through chained calls (`model.eval().cpu()`)."""
    node = call.receiver
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    return call.scope.lookup_expr(node) if node is not None else None


# GPU calls that place no work on a device.
NOT_PLACEMENT = frozenset({"torch.cuda.empty_cache"})


def _branch(statement: cst.CSTNode, node: cst.CSTNode) -> bool:
    """`node` is in a branch of a conditional expression or past the first operand of
    `and`/`or` in the statement's own expressions (nested blocks not searched)."""
    stack = [n for n in children(statement) if not isinstance(n, cst.BaseSuite)]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.IfExp) and (contains(n.body, node) or contains(n.orelse, node)):
            return True
        if isinstance(n, cst.BooleanOperation) and contains(n.right, node):
            return True
        stack.extend(c for c in children(n) if not isinstance(c, cst.BaseSuite))
    return False


def _main_guard(node: cst.If) -> bool:
    """`if __name__ == "__main__":` (either way round)."""
    test = node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = [test.left, target.comparator]
    return any(isinstance(s, cst.Name) and s.value == "__name__" for s in sides) and any(
        str_value(s) == "__main__" for s in sides
    )


def build(
    module: cst.Module,
    path: str = "<string>",
    settings: Settings | None = None,
    env: Environment | None = None,
) -> TorchModule:
    """The facts of one file; `env` tells what the rest of its project does (by default,
    nothing: the file alone)."""
    return TorchModule(module, path, settings or Settings(), env or Environment())
