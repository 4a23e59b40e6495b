"""`TorchModule`: the facts of one file that every rule reads, built in one walk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import libcst as cst

from torchlint.fixes import Import
from torchlint.semantic.builder import collect
from torchlint.semantic.devices import Device, Devices
from torchlint.semantic.facts import CallSite, Context, Loop, Store
from torchlint.semantic.frameworks import Frameworks
from torchlint.semantic.functions import Functions
from torchlint.semantic.loaders import DataLoaderSite, Loaders
from torchlint.semantic.loops import Training, is_periodic
from torchlint.semantic.models import Models, ModelSite
from torchlint.semantic.networks import Networks
from torchlint.semantic.scopes import Binding, Kind, Scope
from torchlint.semantic.syntax import MISSING, children, contains, str_value
from torchlint.semantic.values import Constant, Values
from torchlint.walk import descendants

TENSOR_DATASET = "torch.utils.data.TensorDataset"
LOW_PRECISION = ("torch.float16", "torch.half", "torch.bfloat16")
LOW_PRECISION_METHODS = ("half", "bfloat16", "autocast")
# `from_pretrained(..., torch_dtype="bfloat16")`: "auto" loads the checkpoint's dtype.
LOW_PRECISION_NAMES = ("float16", "half", "bfloat16", "auto")
QUANTIZED = ("load_in_8bit", "load_in_4bit", "quantization_config")
SET_MATMUL_PRECISION = "torch.set_float32_matmul_precision"
MATMUL_PRECISION_SETTINGS = (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.fp32_precision",
)
# Hugging Face datasets: a function run on each sample as it is read.
HF_TRANSFORMS = ("with_transform", "set_transform")
# Libraries whose datasets decode and transform each sample.
DECODING = ("torchvision.", "torchaudio.", "torchtext.")
ITERABLE_DATASET = "torch.utils.data.IterableDataset"
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


@dataclass
class Settings:
    """What rules may read of the configuration."""

    options: dict[str, Any] = field(default_factory=dict)
    target_torch: tuple[int, int] | None = None


class TorchModule:
    """The facts of one file. Built by `build`; read by every rule."""

    def __init__(self, module: cst.Module, path: str, settings: Settings) -> None:
        self.module = module
        self.path = path
        self.settings = settings
        facts = collect(module)
        self.facts = facts
        self.scope: Scope = facts.scope
        self.calls: list[CallSite] = facts.calls
        self.loops: list[Loop] = facts.loops
        self.functions = Functions(facts)
        self.values = Values(facts, self.functions)
        self.devices = Devices(facts, self.functions, self.values)
        self._models = Models(facts, self.functions)
        self.networks = Networks(self.functions, self.values, self._models)
        self.training = Training(facts, self.functions, self._models, self.values)
        self._loaders = Loaders(facts, self.functions)
        self.frameworks = Frameworks(facts, self.functions, self.values, self._loaders)

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

    def spell(self, qualname: str, scope: Scope | None = None) -> tuple[str, Import | None]:
        """How to write `qualname` in this file (at `scope`), and the import it needs."""
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
        if best is not None:
            return best[1], None
        return qualname, Import(qualname.split(".")[0])

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

    @cached_property
    def sets_matmul_precision(self) -> bool:
        """The file chooses how float32 matmuls run (TF32 tensor cores or not), by either
        API: `torch.set_float32_matmul_precision(...)`, or a store to
        `torch.backends.cuda.matmul.allow_tf32` / `fp32_precision`."""
        return bool(
            self.calls_to(SET_MATMUL_PRECISION) or self.stores_to(*MATMUL_PRECISION_SETTINGS)
        )

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
        if function is None or _depth > 2:
            return False
        callers = self.functions.callers(function)
        return bool(callers) and all(
            self.conditional(c.ctx, c.node, _depth + 1) for c, _ in callers
        )

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

    # -- models ----------------------------------------------------------------------

    @property
    def models(self) -> list[ModelSite]:
        """Every nn.Module instance built in the file: networks, losses, stateless layers."""
        return self._models.sites

    def model_of(self, node: cst.CSTNode, scope: Scope) -> ModelSite | None:
        return self._models.of(node, scope)

    def holds_only(self, site: ModelSite) -> bool:
        """No name holding the model is rebound to a value of another origin."""
        return self._models.holds_only(site)

    def model_called(self, call: CallSite) -> ModelSite | None:
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

    def on_gpu(self, site: ModelSite) -> bool:
        """A move of the model goes to a GPU (CUDA or an accelerator, on some branch)."""
        return any((d := self.move(m)) is not None and d.is_gpu for m in site.moves)

    @cached_property
    def trained_on_gpu(self) -> list[ModelSite]:
        """The networks a step loop of this file calls that are moved to a GPU, in the
        order the loops call them."""
        found: dict[int, ModelSite] = {}
        for loop in self.step_loops:
            for call in self.network_calls(loop):
                site = self.model_called(call)
                if site is not None and id(site) not in found and self.on_gpu(site):
                    found[id(site)] = site
        return list(found.values())

    def training_loop_of(self, sites: list[ModelSite]) -> Loop | None:
        """The outermost loop around the first step loop that calls one of `sites` (where
        a finding about how those networks train is reported), or None."""
        for loop in self.step_loops:
            if any(self.model_called(c) in sites for c in loop.calls):
                return loop.ctx.loops[0] if loop.ctx.loops else loop
        return None

    def method_calls_on(self, site: ModelSite) -> list[CallSite]:
        """The method calls whose receiver is the model (`model.eval()`, `model.to(...)`)."""
        return self._method_calls_on_models.get(id(site), [])

    def network_calls(self, loop: Loop) -> list[CallSite]:
        """Calls of networks (not losses) in the loop's body."""
        return [c for c in loop.calls if (m := self.model_called(c)) is not None and m.is_network]

    @cached_property
    def _optimized(self) -> set[int]:
        return self.training.optimized()

    def optimized(self, site: ModelSite) -> bool:
        """The model's parameters are handed to an optimizer in this file."""
        return id(site) in self._optimized

    def optimizer_models(self, call: CallSite) -> list[ModelSite]:
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

    def trained(self, site: ModelSite) -> bool:
        """The model is called in a training loop of this file."""
        return id(site) in self._trained

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

    def loaders_of(self, node: cst.CSTNode, scope: Scope) -> list[DataLoaderSite]:
        return self._loaders.of(node, scope)

    def iterator_of(self, node: cst.BaseExpression, scope: Scope) -> list[DataLoaderSite]:
        """The loaders an iterator name walks (`it` bound to `iter(loader)`)."""
        return self._loaders.iterator_of(node, scope)

    def epoch(self, loader: DataLoaderSite) -> tuple[Loop, Loop] | None:
        """(a loop over the loader, the loop that repeats it), if it is iterated again
        and again."""
        return self._loaders.epoch(loader)

    def reiterated(self, loader: DataLoaderSite) -> CallSite | None:
        """An `iter(loader)` run again and again (see loaders.py)."""
        return self._loaders.reiterated(loader)

    def restarts_workers(self, loader: DataLoaderSite) -> bool:
        """Workers of this loader would start again and again without
        `persistent_workers` (it is iterated every epoch, or `iter()`ed over and over),
        where the target torch has the option (1.7)."""
        if self.target_torch is not None and self.target_torch < (1, 7):
            return False
        return self.epoch(loader) is not None or self.reiterated(loader) is not None

    def pins_memory(self, loader: DataLoaderSite) -> bool:
        """`pin_memory=True`, or pinned whenever an accelerator is there to copy to."""
        value = loader.arg("pin_memory")
        if isinstance(value, cst.Name) and value.value == "True":
            return True
        return isinstance(value, cst.Call) and loader.call.scope.resolve(value.func) in (
            "torch.cuda.is_available",
            "torch.accelerator.is_available",
        )

    # -- where code runs ---------------------------------------------------------------

    @property
    def notebook(self) -> bool:
        return self.path.endswith(".ipynb")

    def guarded(self, ctx: Context, node: cst.CSTNode | None = None, _depth: int = 0) -> bool:
        """`node` (by default the statement of `ctx`) runs only under `if __name__ ==
        "__main__":`, directly or in a function every call of which (in this file) does:
        what a spawned DataLoader worker, which re-imports the script, never runs (so
        where workers may be started)."""
        target = node if node is not None else ctx.statement
        if target is not None and any(_main_guard(i) and contains(i.body, target) for i in ctx.ifs):
            return True
        function = ctx.function
        if function is None or _depth > 3 or self.notebook:
            return False
        callers = self.functions.callers(function)
        return bool(callers) and all(self.guarded(c.ctx, c.node, _depth + 1) for c, _ in callers)

    def per_step(self, ctx: Context, _depth: int = 0) -> bool:
        """Code here runs on every training step: in a step loop, in the `forward` of a
        network of this file, or in a function called from such code (two levels) other
        than every N steps."""
        if any(
            loop.is_step_loop or any(o.is_step_loop for o in loop.ctx.loops) for loop in ctx.loops
        ):
            return True
        function = ctx.function
        if function is None or _depth > 2:
            return False
        if function.name.value == "forward" and ctx.class_ is not None:
            return True
        return any(
            self.per_step(c.ctx, _depth + 1)
            for c, _ in self.functions.callers(function)
            if not is_periodic(c)  # `if step % 100 == 0: sample_images()`
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

    # -- datasets and worker processes ----------------------------------------------------

    def dataset_values(self, loader: DataLoaderSite) -> list[tuple[cst.BaseExpression, Scope]]:
        """The dataset expression of a loader, and what the name it is holds (one level)."""
        dataset = loader.arg("dataset")
        return [] if dataset is MISSING else self.held(dataset, loader.call.scope)

    def held(
        self, node: cst.BaseExpression, scope: Scope
    ) -> list[tuple[cst.BaseExpression, Scope]]:
        """An expression, and what the name it is holds (one level)."""
        found = [(node, scope)]
        found += [
            (b.value, b.ctx.scope)
            for b in self.bindings(node, scope)
            if b.kind is Kind.ASSIGN and b.value is not None
        ]
        return found

    def _transform(self, arg: cst.Arg, scope: Scope) -> bool:
        """A transform passed to a dataset: `transform=...`, or a torchvision transform."""
        if arg.keyword is not None and "transform" in arg.keyword.value:
            return True
        value = arg.value
        return isinstance(value, cst.Call) and (self.resolve(value.func, scope) or "").startswith(
            "torchvision.transforms"
        )

    def plain_data(self, loader: DataLoaderSite) -> bool:
        """Where the dataset comes from shows it does no work per sample, so worker
        processes would only add overhead: tensors already in memory (`TensorDataset`, a
        list), a Dataset class of this file whose `__getitem__` calls nothing, or a dataset
        class from elsewhere built without any transform (`MyTrainDataset(2048)`). A
        torchvision dataset, a transform passed, or an origin we cannot see: not plain."""
        return self._dataset_is(loader, self._plain)

    def _dataset_is(
        self, loader: DataLoaderSite, test: Callable[[cst.BaseExpression, Scope], bool]
    ) -> bool:
        """Every value the loader's dataset may be passes `test` (and some is known)."""
        dataset = loader.arg("dataset")
        if dataset is MISSING:
            return False
        origins = self.values.origins(dataset, loader.call.scope)
        return bool(origins) and all(test(value, scope) for value, scope in origins)

    def _plain(self, value: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
            return True
        if not isinstance(value, cst.Call):
            return False
        qualname = self.resolve(value.func, scope)
        if qualname == TENSOR_DATASET:
            return True
        if qualname is not None:
            return not qualname.startswith(DECODING) and not any(
                self._transform(a, scope) for a in value.args
            )
        cls = self.functions.class_scope(value.func, scope)
        getitem = cls.member("__getitem__") if cls is not None else None
        method = getitem.only(Kind.DEF) if getitem is not None else None
        if method is None:
            return False
        assert isinstance(method.node, cst.FunctionDef)
        return not any(isinstance(n, cst.Call) for n in descendants(method.node.body))

    def works_per_sample(self, node: cst.BaseExpression, scope: Scope, _depth: int = 0) -> bool:
        """The dataset visibly does work per sample: a transform set on a Hugging Face
        dataset (`with_transform`, `set_transform`), a torchvision/torchaudio/torchtext
        dataset, a transform passed, or a Dataset class of this file whose `__getitem__`
        calls something (tokenizing, opening an image). Unknown origins and datasets
        processed ahead (`load_dataset(...).map(tokenize)`) do not."""
        while isinstance(node, cst.Subscript):  # `tokenized["train"]`
            node = node.value
        if _depth > 4:
            return False
        if isinstance(node, cst.Name) and any(
            isinstance(c.receiver, cst.Name) and c.receiver.value == node.value
            for c in self.method_calls(*HF_TRANSFORMS)
        ):
            return True  # `ds.set_transform(augment)`
        for value, where in self.values.origins(node, scope):
            if isinstance(value, cst.Subscript):
                if self.works_per_sample(value, where, _depth + 1):
                    return True
                continue
            if not isinstance(value, cst.Call):
                continue
            func = value.func
            qualname = self.resolve(func, where)
            if isinstance(func, cst.Attribute) and qualname is None:
                if func.attr.value in HF_TRANSFORMS:
                    return True
                if self.works_per_sample(func.value, where, _depth + 1):  # `ds.map(...)`
                    return True
            elif qualname is not None:
                if qualname.startswith(DECODING) or any(
                    self._transform(a, where) for a in value.args
                ):
                    return True
            elif self.functions.class_scope(func, where) and not self._plain(value, where):
                return True
        return False

    def iterable_dataset(self, loader: DataLoaderSite) -> bool:
        """The dataset is an `IterableDataset` (no sampler; workers need sharding)."""
        for value, scope in self.dataset_values(loader):
            if not isinstance(value, cst.Call):
                continue
            if self.resolve(value.func, scope) == ITERABLE_DATASET:
                return True
            cls = self.functions.class_scope(value.func, scope)
            if cls is not None and cls.parent is not None:
                assert isinstance(cls.node, cst.ClassDef)
                if any(cls.parent.resolve(b.value) == ITERABLE_DATASET for b in cls.node.bases):
                    return True
        return False

    def map_style(self, loader: DataLoaderSite) -> bool:
        """The loader has a length: default batching over a dataset known to define
        `__len__` (tensors in memory, a torchvision image dataset, a Dataset class of
        this file with `__len__` that is not an IterableDataset)."""
        if loader.arg("batch_sampler") is not MISSING or self.iterable_dataset(loader):
            return False
        return self._dataset_is(loader, self._sized)

    def _sized(self, value: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
            return True
        if not isinstance(value, cst.Call):
            return False
        qualname = self.resolve(value.func, scope)
        if qualname is not None:
            return qualname == TENSOR_DATASET or qualname.startswith("torchvision.datasets.")
        cls = self.functions.class_scope(value.func, scope)
        return cls is not None and cls.member("__len__") is not None

    def workers_hazard(self, loader: DataLoaderSite) -> str | None:
        """Why starting worker processes for this loader could break a script that runs
        (under the `spawn` start method of macOS and Windows, and `forkserver`, Linux's
        default from Python 3.14, each worker re-imports the script and unpickles the
        dataset and functions it is given); None when nothing stands in the way. Workers
        start in the loops over the loader, or where a framework that trains on it starts
        training (`trainer.fit(...)`)."""
        scope = loader.call.scope
        functions = [
            (n, v, scope)
            for n in ("collate_fn", "worker_init_fn")
            if (v := loader.arg(n)) is not MISSING
        ]
        starts: list[tuple[Context, cst.CSTNode]]
        if loader.loops or not loader.trained_by_framework:
            starts = [(lp.ctx, lp.node) for lp in loader.loops]
            where = "the loop over this loader"
        else:
            starts = [(c.ctx, c.node) for c in loader.starts]
            where = "`trainer.fit(...)`"
        return self.start_hazard(self.dataset_values(loader), functions, starts, where)

    def start_hazard(
        self,
        datasets: list[tuple[cst.BaseExpression, Scope]],
        functions: list[tuple[str, cst.BaseExpression, Scope]],
        starts: Sequence[tuple[Context, cst.CSTNode]],
        where: str,
    ) -> str | None:
        """Why DataLoader workers started at `starts` (named `where` in the reason) could
        break a script that runs, given the datasets and the functions (`collate_fn`...)
        they receive; None when nothing stands in the way (see `workers_hazard`)."""
        passed = [*datasets, *((v, s) for _, v, s in functions)]
        if self.notebook:
            # Spawned workers do not re-run a notebook, but they cannot import what it defines.
            if any(self._defined_here(v, s) for v, s in passed):
                return (
                    "in a notebook, workers started with spawn cannot import the classes and "
                    "functions the notebook defines: move the Dataset (and collate_fn) to a module"
                )
        elif not starts:
            return (
                f"{where} is not in this file: under spawn/forkserver each worker re-imports "
                'the script that runs it, which must do so under `if __name__ == "__main__":`'
            )
        elif not all(self.guarded(ctx, node) for ctx, node in starts):
            return (
                f'{where} is not under `if __name__ == "__main__":`: under '
                "spawn/forkserver each worker re-runs the script and fails; add the guard"
            )
        for name, value, scope in functions:
            if not self._picklable(value, scope):
                return (
                    f"`{name}` is a lambda or a nested function, which spawned workers cannot "
                    "receive: make it a module-level function"
                )
        if any(self._holds_lambda(v, s) for v, s in datasets):
            return (
                "the dataset holds a lambda (`transforms.Lambda(lambda ...)`?), which spawned "
                "workers cannot receive: use a module-level function"
            )
        return None

    def _picklable(self, node: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        if isinstance(node, cst.Lambda):
            return False
        if depth > 3:
            return True
        if isinstance(node, cst.Call):
            if self.resolve(node.func, scope) == "functools.partial" and node.args:
                return self._picklable(node.args[0].value, scope, depth + 1)
            target = self.functions.definition(node.func, scope)
            if target is not None and target.kind is Kind.DEF:
                assert isinstance(target.node, cst.FunctionDef)
                inner = self.functions.scope_of(target.node)
                return all(
                    self._picklable(r, inner, depth + 1)
                    for r in self.functions.returns(target.node)
                )
            return True
        for b in self.bindings(node, scope):
            if b.kind is Kind.DEF and b.symbol.scope.function is not None:
                return False  # a nested function (a closure)
            if (
                b.kind is Kind.ASSIGN
                and b.value is not None
                and not self._picklable(b.value, b.ctx.scope, depth + 1)
            ):
                return False
        return True

    def _defined_here(self, node: cst.CSTNode, scope: Scope, depth: int = 0) -> bool:
        """The expression uses a class or function this file defines, or a lambda (what
        the names in it hold included, two levels)."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Lambda):
                return True
            if isinstance(n, cst.Name):
                for b in self.bindings(n, scope):
                    if b.kind in (Kind.DEF, Kind.CLASS):
                        return True
                    if (
                        b.kind is Kind.ASSIGN
                        and b.value is not None
                        and depth < 2
                        and self._defined_here(b.value, b.ctx.scope, depth + 1)
                    ):
                        return True
            elif isinstance(n, cst.Attribute):
                stack.append(n.value)
                continue
            stack.extend(children(n))
        return False

    def _holds_lambda(self, node: cst.CSTNode, scope: Scope, depth: int = 0) -> bool:
        """A lambda in the expression, or in what a name in it holds (two levels)."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Lambda):
                return True
            if isinstance(n, cst.Name) and depth < 2:
                for value in self.assigned_values(n, scope):
                    if self._holds_lambda(value, scope, depth + 1):
                        return True
            elif isinstance(n, cst.Attribute):
                stack.append(n.value)
                continue
            stack.extend(children(n))
        return False

    # -- values ----------------------------------------------------------------------

    def constant(self, node: cst.CSTNode, scope: Scope) -> Constant | None:
        return self.values.constant(node, scope)

    def bindings(self, node: cst.CSTNode, scope: Scope) -> list:
        """Every binding of the name or `self.attr` an expression refers to."""
        symbol = scope.lookup_expr(node)
        return list(symbol.bindings) if symbol is not None else []

    def assigned_values(self, node: cst.CSTNode, scope: Scope) -> list[cst.BaseExpression]:
        return [b.value for b in self.bindings(node, scope) if b.kind is Kind.ASSIGN and b.value]

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
    module: cst.Module, path: str = "<string>", settings: Settings | None = None
) -> TorchModule:
    return TorchModule(module, path, settings or Settings())
