"""`TorchModule`: the facts of one file that every rule reads, built in one walk."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

import libcst as cst

from torchlint.semantic.builder import collect
from torchlint.semantic.checkpoints import Checkpoints
from torchlint.semantic.datasets import Datasets
from torchlint.semantic.devices import Devices
from torchlint.semantic.external import Environment
from torchlint.semantic.frameworks import Frameworks
from torchlint.semantic.functions import Functions
from torchlint.semantic.lattice import Device
from torchlint.semantic.loaders import DataLoaderSite, Loader, Loaders
from torchlint.semantic.loops import Training
from torchlint.semantic.models import Model, Models, ModelSite
from torchlint.semantic.networks import Networks
from torchlint.semantic.placement import Placement
from torchlint.semantic.runs import Runs
from torchlint.semantic.samples import Decoding
from torchlint.semantic.scopes import (
    Binding,
    CallSite,
    Kind,
    Loop,
    Scope,
    Store,
    Symbol,
    assigned_values,
    bindings,
)
from torchlint.semantic.syntax import MISSING
from torchlint.semantic.threads import Threads
from torchlint.semantic.values import Constant, Values
from torchlint.semantic.workload import Workload
from torchlint.settings import Settings

SET_MATMUL_PRECISION = "torch.set_float32_matmul_precision"
MATMUL_PRECISION_SETTINGS = (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.fp32_precision",
)


# Functions named for an evaluation: evaluate/eval_epoch, validate/validation, val/val_step
# (not `value`), test*, predict*, infer*/inference.
EVAL_FUNCTION = re.compile(r"^_*(eval|valid|val(?:_|\d|$)|test|predict|infer)", re.IGNORECASE)


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
        # In source order: every binding; `a.b.c = v`; `x[key] = v` (v None for `+=`).
        self.all_bindings: list[Binding] = facts.bindings
        self.attribute_stores = facts.attribute_stores
        self.item_stores = facts.item_stores
        self.functions = Functions(facts, env, settings.knowledge)
        self.values = Values(facts, self.functions)
        self.threads = Threads(facts, self.functions)
        self.devices = Devices(facts, self.functions, self.values)
        self.checkpoints = Checkpoints(facts, self.functions, self.devices)
        self.saved_parameters = self.checkpoints.saved_parameters
        self._models = Models(facts, self.functions, self.values)
        self.networks = Networks(self.functions, self.values, self._models)
        self.training = Training(facts, self.functions, self._models, self.values)
        self._loaders = Loaders(facts, self.functions, self.values)
        self.pins_memory = self._loaders.pins_memory
        self.wrappers_held = self._loaders.wrappers_held
        self.frameworks = Frameworks(
            facts, self.functions, self.values, self._loaders, self.training, self._models
        )
        self.idle_framework_loader = self.frameworks.idle_loader
        # What rules read of the parts, on the facade (each documented where it is defined).
        self.method_calls_on = self._models.method_calls_on
        self.network_calls = self._models.network_calls
        self.calls_to = facts.calls_to
        self.method_calls = facts.method_calls
        self.imports_any = facts.imports_any
        self.runs = Runs(module, self.notebook, self.functions, self.values, self.frameworks, env)
        self.conditional = self.runs.conditional
        self.outside_callers = self.runs.outside_callers
        self.disables_grad = self.runs.disables_grad
        self.grad_disabled = self.runs.grad_disabled
        self.version_guarded = self.runs.version_guarded
        self.guarded = self.runs.guarded
        self.per_step = self.runs.per_step
        self.opt_in = self.runs.opt_in
        self.period = self.runs.period
        self.workload = Workload(
            facts,
            self.functions,
            self.values,
            self._models,
            self.networks,
            self.training,
            self.frameworks,
        )
        self.autocast_refused = self.workload.autocast_refused
        self.loaded_below_float32 = self.workload.loaded_below_float32
        self.memory_bound = self.workload.memory_bound
        self.trains_memory_bound = self.workload.trains_memory_bound
        self.heavy_step = self.workload.heavy_step
        self.full_batch = self.workload.full_batch
        self.tiny_step = self.workload.tiny_step
        self.placement = Placement(
            facts, self.devices, self._models, self._loaders, self.frameworks, self.functions, env
        )
        self.handles_devices = self.placement.handles_devices
        self.model_uses = self.placement.model_uses
        self.datasets = Datasets(facts, self.functions, self.values, self.guarded, self.notebook)
        self.decoding = Decoding(self.functions, self.values)

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
        for local, target, symbol in self._imports:
            if not (qualname == target or qualname.startswith(target + ".")):
                continue
            if where.lookup(local) is not symbol:
                continue  # shadowed where the text goes
            if best is None or len(target) > best[0]:
                best = (len(target), local + qualname[len(target) :])
        return best[1] if best is not None else None

    def release(self) -> None:
        """(after the analysis) The facts' cycles undone, so that the model and its tree
        are freed as soon as the last reference goes (`Facts.release`); nothing reads
        the model after."""
        self.facts.release()

    @cached_property
    def _imports(self) -> list[tuple[str, str, Symbol]]:
        """The module-level names an import binds: (name, what it imports, its symbol)."""
        found = ((local, symbol.imported, symbol) for local, symbol in self.scope.symbols.items())
        return [(local, target, symbol) for local, target, symbol in found if target is not None]

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

    @property
    def qualnames_called(self) -> list[str]:
        return list(self.facts.calls_by_qualname)

    @property
    def imported_modules(self) -> set[str]:
        return self.facts.imported_modules

    @cached_property
    def sets_matmul_precision(self) -> bool:
        """The file chooses how float32 matmuls run (TF32 tensor cores or not), by either
        API: `torch.set_float32_matmul_precision(...)`, or a store to
        `torch.backends.cuda.matmul.allow_tf32` / `fp32_precision`."""
        return bool(
            self.calls_to(SET_MATMUL_PRECISION) or self.stores_to(*MATMUL_PRECISION_SETTINGS)
        )

    # -- what the file saves (checkpoints.py) ------------------------------------------

    @property
    def saves_cpu_state(self) -> bool:
        return self.checkpoints.saves_cpu_state

    @property
    def saved_paths(self) -> list[tuple[cst.BaseExpression, Scope]]:
        return self.checkpoints.saved_paths

    @property
    def saved_folders(self) -> list[tuple[cst.BaseExpression, Scope]]:
        return self.checkpoints.saved_folders

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

    # -- how heavy the work is (workload.py), where it goes (placement.py) --------------

    @property
    def reduced_precision(self) -> bool:
        return self.workload.reduced_precision

    @property
    def precision_opt_in(self) -> cst.BaseExpression | None:
        return self.workload.precision_opt_in

    @property
    def multi_gpu(self) -> bool:
        return self.workload.multi_gpu

    @property
    def shards_models(self) -> bool:
        return self.workload.shards_models

    @property
    def managed(self) -> bool:
        return self.placement.managed

    @property
    def uses_gpu(self) -> bool:
        return self.placement.uses_gpu

    @property
    def presumed_accelerator(self) -> bool:
        return self.placement.presumed_accelerator

    @property
    def runs_without_gpu(self) -> bool:
        return self.placement.runs_without_gpu

    # -- devices ---------------------------------------------------------------------

    def device(self, node: cst.CSTNode, scope: Scope) -> Device | None:
        """The device an expression names (see devices.py), None if not known to be one."""
        return self.devices.classify(node, scope)

    def move(self, call: CallSite) -> Device | None:
        """Where `x.to(...)`/`x.cuda(...)` moves `x`; None when not a device move."""
        return self.devices.move(call)

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

    def called_on_itself(self, call: CallSite) -> Scope | None:
        """The network class of the file whose method calls its own instance (`self(x)`)."""
        return self._models.called_on_itself(call)

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
        to a GPU (not kept on the CPU), in the order the loops call them; then those an
        ignite engine of the file trains (`frameworks.ignite_models`); then those another
        file of the project trains on a GPU."""
        found: dict[int, ModelSite] = {}
        calls = [c for loop in self.step_loops for c in self.network_calls(loop)]
        for call in calls:
            site = self.model_called(call)
            if not isinstance(site, ModelSite) or id(site) in found:
                continue  # a model built elsewhere is reported where it is built
            if self.on_gpu(site) and not self.placement.kept_on_cpu(site):
                found[id(site)] = site
        for site in self.frameworks.ignite_networks:
            if isinstance(site, ModelSite) and self.on_gpu(site):
                found.setdefault(id(site), site)
        for site in self.models:
            uses = self.model_uses(site) if site.is_network else None
            if uses is not None and uses.steps and uses.gpu:
                found.setdefault(id(site), site)
        return list(found.values())

    def where_trained(self, sites: list[ModelSite]) -> cst.CSTNode | None:
        """Where a finding about how these networks train is reported: the outermost loop
        around the first step loop that calls one (`training_loop_of`), else the ignite
        engine that trains one (`frameworks.ignite_trainer_of`)."""
        loop = self.training_loop_of(sites)
        return loop.node if loop is not None else self.frameworks.ignite_trainer_of(sites)

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

    def trained_by(self, call: CallSite) -> list[Model]:
        """Which optimizer trains which network: the models whose parameters the
        optimizer a `step()`/`zero_grad()` call acts on was given (`opt_G.step()` -> [G])."""
        return self.training.trains(call)

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

    @cached_property
    def trains(self) -> bool:
        """The file trains a network: a training loop of its own, Lightning's
        `training_step` or `trainer.fit(...)`, or a transformers Trainer's `train()`."""
        frameworks = self.frameworks
        return bool(
            self.training_loops
            or frameworks.training_steps
            or frameworks.lightning_starts
            or frameworks.train_calls(frameworks.hf_trainers)
        )

    @property
    def training_loops(self) -> list[Loop]:
        return [loop for loop in self.loops if loop.is_training]

    @property
    def step_loops(self) -> list[Loop]:
        return [loop for loop in self.loops if loop.is_step_loop]

    @cached_property
    def evaluation_loops(self) -> list[Loop]:
        """Loops over batches (a loader's, or a parameter's no visible call passes) that
        run a network forward with no backward pass, outside any training step (between
        epochs is fine): an evaluation, validation or inference pass, `.eval()` or not."""
        found = []
        for loop in self.loops:
            if loop.is_training or any(outer.is_step_loop for outer in loop.ctx.loops):
                continue
            if any(outer in found for outer in loop.ctx.loops):
                continue  # the outer evaluation loop holds it
            if not (loop.is_loader_loop or self.walks_unseen_parameter(loop)):
                continue
            if loop.takes_one or any(c.method == "backward" for c in loop.calls):
                continue
            calls = self.network_calls(loop)
            if calls and self._evaluates(loop, calls):
                found.append(loop)
        return found

    @staticmethod
    def evaluation_function(function: cst.FunctionDef | None) -> bool:
        """A function named for an evaluation (`evaluate`, `validate`, `val_step`,
        `test_epoch`, `predict`, `inference`...; not `value`)."""
        return function is not None and bool(EVAL_FUNCTION.match(function.name.value))

    def _evaluates(self, loop: Loop, calls: list[CallSite]) -> bool:
        """What shows the loop evaluates (a loop calling a helper of unknown purpose with
        its loss may train): autograd off around its network calls, a function named
        for evaluation (`evaluate`, `validate`, `test_epoch`, `predict`...), or a network
        switched to `.eval()` earlier in the function and not back to `.train()`; at the
        top level of a script or notebook, a loop after its training loops that calls
        nothing of this file but networks (features extracted, predictions made)."""
        if all(self.grad_disabled(c) for c in calls):
            return True
        function = loop.ctx.function
        if self.evaluation_function(function):
            return True
        start = min(c.order for c in loop.calls)
        if function is None and self._after_training(start, loop, calls):
            return True
        modes = [
            c
            for c in self.method_calls("eval", "train")
            if c.ctx.function is function and c.order < start and not c.node.args
        ]
        return bool(modes) and max(modes, key=lambda c: c.order).method == "eval"

    def _after_training(self, start: int, loop: Loop, calls: list[CallSite]) -> bool:
        """A top-level training loop runs before `start`, and the loop calls no function
        of this file other than its networks (a helper might train)."""
        trained = any(
            t.ctx.function is None and t.calls and t.calls[-1].order < start
            for t in self.training_loops
        )
        networks = {id(c) for c in calls}
        return trained and all(
            id(c) in networks or self.functions.target(c) is None for c in loop.calls
        )

    @property
    def dataloaders(self) -> list[DataLoaderSite]:
        return self._loaders.sites

    @property
    def factory_loaders(self) -> list[DataLoaderSite]:
        """The calls of loader factories the project's knowledge names (`factory` set)."""
        return self._loaders.made

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

    def restarts_workers(self, loader: DataLoaderSite) -> bool:
        """Workers of this loader would start again and again without
        `persistent_workers` (it is iterated every epoch here or in another file of the
        project, or `iter()`ed over and over), where the target torch has the option
        (1.7); not a DataLoader subclass that iterates its own way."""
        if loader.own_iteration or (self.target_torch or (9, 9)) < (1, 7):
            return False
        if loader.outside is not None and loader.outside.repeated:
            return True
        return self.epoch(loader) is not None or self.reiterated(loader) is not None

    def decodes(self, loader: DataLoaderSite) -> tuple[str, bool] | None:
        """What the loader's dataset decodes or augments per sample, and whether it reads
        files (`samples.Decoding.per_sample`); None where nothing shows it."""
        dataset = loader.arg("dataset")
        return None if dataset is MISSING else self.decoding.per_sample(dataset, loader.call.scope)

    # -- where code runs (runs.py) -------------------------------------------------------

    @property
    def notebook(self) -> bool:
        return self.path.endswith(".ipynb")

    def test_code(self, function: cst.FunctionDef | None) -> bool:
        """A test the test runner calls (`def test_*` in a pytest file: `test_*.py`,
        `*_test.py`, or under a `tests/` folder): it checks results, it is not a workload
        to speed up."""
        if function is None or not function.name.value.startswith("test"):
            return False
        parts = self.path.replace("\\", "/").split("/")
        name = parts[-1]
        return (
            name.startswith("test_")
            or name.endswith("_test.py")
            or any(p in ("tests", "test") for p in parts[:-1])
        )

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


def build(
    module: cst.Module,
    path: str = "<string>",
    settings: Settings | None = None,
    env: Environment | None = None,
) -> TorchModule:
    """The facts of one file; `env` tells what the rest of its project does (by default,
    nothing: the file alone)."""
    return TorchModule(module, path, settings or Settings(), env or Environment())
