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
from torchlint.semantic.loaders import DataLoaderSite, Loaders
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
)
from torchlint.semantic.syntax import MISSING
from torchlint.semantic.threads import Threads
from torchlint.semantic.values import Values
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
EVAL_FUNCTION = re.compile(
    r"^_*(eval|valid|val(?:_|\d|$)|test|predict|infer"
    r"|(?:compute|calc|calculate|get|measure)_\w*(?:acc|accuracy|loss|metrics?|scores?|error))",
    re.IGNORECASE,
)


class TorchModule:
    """The facts of one file. Built by `build`; read by every rule. Each analysis is a view
    a rule asks directly (`module.loaders.pins_memory(loader)`); the module itself keeps
    the walk's records and index and the facts that combine views (docs/semantic.md)."""

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
        # The analyses: the views rules read (docs/semantic.md lists what each answers).
        self.functions = Functions(facts, env, settings.knowledge)
        self.values = Values(facts, self.functions)
        self.threads = Threads(facts, self.functions)
        self.devices = Devices(facts, self.functions, self.values)
        self.checkpoints = Checkpoints(facts, self.functions, self.devices)
        self.models = Models(facts, self.functions, self.values)
        self.networks = Networks(self.functions, self.values, self.models)
        self.training = Training(facts, self.functions, self.models, self.values)
        self.loaders = Loaders(facts, self.functions, self.values)
        self.frameworks = Frameworks(
            facts, self.functions, self.values, self.loaders, self.training, self.models
        )
        self.runs = Runs(module, self.notebook, self.functions, self.values, self.frameworks, env)
        self.workload = Workload(
            facts,
            self.functions,
            self.values,
            self.models,
            self.networks,
            self.training,
            self.frameworks,
        )
        self.placement = Placement(
            facts, self.devices, self.models, self.loaders, self.frameworks, self.functions, env
        )
        self.datasets = Datasets(
            facts, self.functions, self.values, self.runs.guarded, self.notebook
        )
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

    # -- the walk's index ------------------------------------------------------------
    # The walk's records are the module's own facts, not an analysis: rules ask the
    # module for them (`calls_to`), never the builder's `Facts`.

    def calls_to(self, *qualnames: str) -> list[CallSite]:
        """The calls of these qualified names, through the imports (in source order)."""
        return self.facts.calls_to(*qualnames)

    def method_calls(self, *methods: str) -> list[CallSite]:
        """The calls of methods by these names (`x.backward()`), in source order."""
        return self.facts.method_calls(*methods)

    def imports_any(self, *prefixes: str) -> bool:
        """The file imports one of these modules or a module inside one."""
        return self.facts.imports_any(*prefixes)

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

    # -- models ----------------------------------------------------------------------

    def on_gpu(self, site: Model) -> bool:
        """A move of the model goes to a GPU (CUDA or an accelerator, on some branch),
        here or where another file of the project builds or trains it."""
        if any((d := self.devices.move(m)) is not None and d.is_gpu for m in site.moves):
            return True
        if site.external is not None and site.external.on_gpu:
            return True
        uses = self.placement.model_uses(site)
        return uses is not None and uses.gpu

    @cached_property
    def trained_on_gpu(self) -> list[ModelSite]:
        """The networks built here that a step loop of this file calls and that are moved
        to a GPU (not kept on the CPU), in the order the loops call them; then those an
        ignite engine of the file trains (`frameworks.ignite_models`); then those another
        file of the project trains on a GPU."""
        found: dict[int, ModelSite] = {}
        calls = [c for loop in self.step_loops for c in self.models.network_calls(loop)]
        for call in calls:
            site = self.models.called(call)
            if not isinstance(site, ModelSite) or id(site) in found:
                continue  # a model built elsewhere is reported where it is built
            if self.on_gpu(site) and not self.placement.kept_on_cpu(site):
                found[id(site)] = site
        for site in self.frameworks.ignite_networks:
            if isinstance(site, ModelSite) and self.on_gpu(site):
                found.setdefault(id(site), site)
        for site in self.models.sites:
            uses = self.placement.model_uses(site) if site.is_network else None
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
            if any(self.models.called(c) in sites for c in loop.calls):
                return loop.ctx.loops[0] if loop.ctx.loops else loop
        for call in self.calls:
            if (
                call.ctx.loops
                and self.functions.external(call) is not None
                and any(self.models.of(a.value, call.scope) in sites for a in call.node.args)
            ):
                return call.ctx.loops[0]
        return None

    @cached_property
    def _trained(self) -> set[int]:
        return {
            id(m)
            for loop in self.training_loops
            for c in loop.calls
            if (m := self.models.called(c))
        }

    def trained(self, site: Model) -> bool:
        """The model is called in a training loop of this file, or of another file of the
        project it is passed to."""
        if id(site) in self._trained:
            return True
        uses = self.placement.model_uses(site)
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
            calls = self.models.network_calls(loop)
            if calls and self._evaluates(loop, calls):
                found.append(loop)
        return found

    @staticmethod
    def evaluation_function(function: cst.FunctionDef | None) -> bool:
        """A function named for an evaluation (`evaluate`, `validate`, `val_step`,
        `test_epoch`, `predict`, `inference`...; not `value`) or for a measure it
        computes (`compute_accuracy`, `get_val_loss`, `calc_error`)."""
        return function is not None and bool(EVAL_FUNCTION.match(function.name.value))

    def _evaluates(self, loop: Loop, calls: list[CallSite]) -> bool:
        """What shows the loop evaluates (a loop calling a helper of unknown purpose with
        its loss may train): autograd off around its network calls, a function named
        for evaluation (`evaluate`, `validate`, `test_epoch`, `predict`...), or a network
        switched to `.eval()` earlier in the function and not back to `.train()`; at the
        top level of a script or notebook, a loop after its training loops that calls
        nothing of this file but networks (features extracted, predictions made)."""
        if all(self.runs.grad_disabled(c) for c in calls):
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

    def walks_unseen_parameter(self, loop: Loop) -> bool:
        """A `for` loop over a parameter of its function that no visible call passes (a
        library function's batches: `def evaluate(model, loader, device)`)."""
        if not isinstance(loop.node, cst.For):
            return False
        for it in self.loaders.iterables(loop.node.iter, loop.ctx.scope):
            symbol = loop.ctx.scope.lookup_expr(it)
            param = symbol.only(Kind.PARAM) if symbol is not None else None
            if param is not None and self.functions.unseen(param):
                return True
        return False

    def restarts_workers(self, loader: DataLoaderSite) -> bool:
        """Workers of this loader would start again and again without
        `persistent_workers` (it is iterated every epoch here or in another file of the
        project, or `iter()`ed over and over), where the target torch has the option
        (1.7); not a DataLoader subclass that iterates its own way."""
        if loader.own_iteration or (self.target_torch or (9, 9)) < (1, 7):
            return False
        if loader.outside is not None and loader.outside.repeated:
            return True
        return self.loaders.epoch(loader) is not None or self.loaders.reiterated(loader) is not None

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
