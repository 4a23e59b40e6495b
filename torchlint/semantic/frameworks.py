"""Training that a framework runs for the user. PyTorch Lightning: the LightningModule
and LightningDataModule classes of the file, the `training_step` Lightning calls once per
optimizer step, the loaders a `train_dataloader` hook returns or `trainer.fit` is given
(marked on their `DataLoaderSite`: the framework trains on them), `Trainer(...)` and the
calls that start training. PyTorch-Ignite: the engines that train (`Engine(step)` of a
function of the file that steps an optimizer, `create_supervised_trainer(...)`), their
process functions (run once per iteration) and the loaders their `.run(...)` is given.
Hugging Face: `TrainingArguments(...)`, the `Trainer`s given them and their `.train()`
calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.functions import Functions
from torchlint.semantic.loaders import DataLoaderSite, Loaders
from torchlint.semantic.loops import Training
from torchlint.semantic.models import Model, Models
from torchlint.semantic.scopes import CallSite, Kind, Scope, ScopeKind
from torchlint.semantic.syntax import (
    MISSING,
    argument,
    bool_value,
    int_value,
    str_value,
    target_names,
)
from torchlint.semantic.values import Constant, Values
from torchlint.text.walk import descendants

LIGHTNING = ("lightning", "pytorch_lightning")
TRAINING_ARGUMENTS = (
    "transformers.TrainingArguments",
    "transformers.Seq2SeqTrainingArguments",
    "transformers.training_args.TrainingArguments",
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
)
# `Trainer.fit(model, train_dataloaders, val_dataloaders, datamodule, ckpt_path)`
FIT_PARAMS = ("model", "train_dataloaders")
MAX_BASES = 4
SHORT_RUN_STEPS = 100  # `max_steps`: a demo or benchmark run
SMOKE_BATCHES = 10  # `limit_train_batches` up to this: a test run, not training
IGNITE_ENGINES = (
    "ignite.engine.Engine",
    "ignite.engine.engine.Engine",
    "ignite.engine.DeterministicEngine",
    "ignite.engine.deterministic.DeterministicEngine",
)
IGNITE_TRAINERS = (
    "ignite.engine.create_supervised_trainer",
    "ignite.engine.create_supervised_tbptt_trainer",
    "ignite.contrib.engines.create_supervised_tbptt_trainer",
)


def lightning(qualname: str | None, name: str) -> bool:
    """`qualname` is Lightning's `name`, however imported (`lightning.pytorch.Trainer`,
    `lightning.Trainer`, `pytorch_lightning.core.LightningModule`...)."""
    return (
        qualname is not None
        and qualname.split(".", 1)[0] in LIGHTNING
        and qualname.rsplit(".", 1)[-1] == name
    )


def hf_trainer(qualname: str | None) -> bool:
    """A Hugging Face trainer class (`transformers.Trainer`, `Seq2SeqTrainer`, TRL's)."""
    return (
        qualname is not None
        and qualname.split(".", 1)[0] in ("transformers", "trl")
        and qualname.endswith("Trainer")
    )


DATALOADER_CONFIGURATION = frozenset(
    {"accelerate.DataLoaderConfiguration", "accelerate.utils.DataLoaderConfiguration"}
)


class Frameworks:
    def __init__(
        self,
        facts: Facts,
        functions: Functions,
        values: Values,
        loaders: Loaders,
        training: Training,
        models: Models,
    ) -> None:
        self.facts = facts
        self.functions = functions
        self.values = values
        self.training = training
        self.models = models
        classes = [s for s in facts.scopes.values() if s.kind is ScopeKind.CLASS]
        self.lightning_modules = [c for c in classes if self._derives(c, "LightningModule")]
        self.data_modules = [c for c in classes if self._derives(c, "LightningDataModule")]
        for hook in self._methods(self.lightning_modules + self.data_modules, "train_dataloader"):
            inner = functions.scope_of(hook)
            for value in functions.returns(hook):
                for site in loaders.of(value, inner):
                    if isinstance(site, DataLoaderSite):
                        site.trained_by_framework = True
                        site.starts = self.lightning_starts
        for fit in self.fits:
            loader = self.fitted(fit)
            if loader is not MISSING:
                for site in loaders.of(loader, fit.scope):
                    if isinstance(site, DataLoaderSite):
                        site.trained_by_framework = True
                        if fit not in site.starts:
                            site.starts = [*site.starts, fit]
        for run in self.ignite_runs:
            data = argument(run.node, "data", ("data",))
            for site in loaders.of(data, run.scope) if data is not MISSING else ():
                if isinstance(site, DataLoaderSite):
                    site.trained_by_framework = True
                    site.starts = [*site.starts, run]

    def _derives(self, cls: Scope, name: str, depth: int = 0) -> bool:
        """The class subclasses Lightning's `name`, directly or through classes of the file."""
        assert isinstance(cls.node, cst.ClassDef) and cls.parent is not None
        for base in cls.node.bases:
            if lightning(cls.parent.resolve(base.value), name):
                return True
            parent = self.functions.class_scope(base.value, cls.parent)
            if parent is not None and depth < MAX_BASES and self._derives(parent, name, depth + 1):
                return True
        return False

    @staticmethod
    def _methods(classes: list[Scope], name: str) -> list[cst.FunctionDef]:
        found: dict[int, cst.FunctionDef] = {}
        for cls in classes:
            symbol = cls.member(name)
            binding = symbol.only(Kind.DEF) if symbol is not None else None
            if binding is not None:
                assert isinstance(binding.node, cst.FunctionDef)
                found.setdefault(id(binding.node), binding.node)
        return list(found.values())

    # -- Lightning ---------------------------------------------------------------------

    @cached_property
    def training_steps(self) -> list[cst.FunctionDef]:
        """The functions a framework runs once per optimizer step (per batch): the
        `training_step` of each LightningModule of the file, the process function of
        each ignite Engine that trains."""
        return self.training_steps_of(self.lightning_modules) + self.ignite_steps

    def training_steps_of(self, classes: list[Scope]) -> list[cst.FunctionDef]:
        """The `training_step` of each of these classes (or of their bases)."""
        return self._methods(classes, "training_step")

    @cached_property
    def trainers(self) -> list[CallSite]:
        """`Trainer(...)` constructions of Lightning."""
        return self._calls(lambda q: lightning(q, "Trainer"))

    def idle(self, trainer: CallSite) -> bool:
        """A Lightning Trainer that trains no GPU workload: it asks for the CPU, or runs a
        handful of batches (`fast_dev_run`, `limit_train_batches` of at most
        SMOKE_BATCHES: a test or a bug-report template)."""
        return self.on_cpu(trainer) or self._few_batches(trainer)

    def idle_loader(self, site: DataLoaderSite) -> bool:
        """Only a framework trains on the loader, and every Lightning Trainer (or CLI)
        that starts training on it is `idle`: no GPU workload."""
        if not site.trained_by_framework or site.feeds_training:
            return False
        trainers = [
            trainer
            for start in site.starts
            for trainer in (self._fit_trainers(start) if start in self.fits else [start])
        ]
        return bool(trainers) and all(self.idle(t) for t in trainers)

    def _fit_trainers(self, fit: CallSite) -> list[CallSite]:
        """The Trainers of the file a `trainer.fit(...)` call may be made on."""
        assert fit.receiver is not None
        return [t for t in self.trainers if self._built(fit.receiver, fit.scope, [t])]

    @cached_property
    def single_epoch(self) -> bool:
        """Every Lightning Trainer of the file stops after its first epoch (`max_epochs=1`,
        or a smoke run): no epoch starts the loaders' workers again."""
        return bool(self.trainers) and all(
            self._few_batches(t) or self._setting(t, "max_epochs") == 1 for t in self.trainers
        )

    def _few_batches(self, trainer: CallSite) -> bool:
        """A smoke run (`fast_dev_run`, `limit_train_batches` of at most 10) or a short
        one (`max_steps` of at most 100: a demo or a benchmark, which may not finish its
        first epoch)."""
        fast = self._setting(trainer, "fast_dev_run")
        limit = self._setting(trainer, "limit_train_batches")
        steps = self._setting(trainer, "max_steps")
        return (
            bool(fast)
            or (type(limit) is int and 0 < limit <= SMOKE_BATCHES)
            or (type(steps) is int and 0 < steps <= SHORT_RUN_STEPS)
        )

    def _setting(self, call: CallSite, name: str) -> object:
        """A keyword's value where the file shows it as a constant, else None."""
        value = call.kwarg(name)
        found = self.values.constant(value, call.scope) if value is not MISSING else None
        return found.value if found is not None else None

    @cached_property
    def fits(self) -> list[CallSite]:
        """`trainer.fit(...)` on a Lightning Trainer of the file."""
        return [
            c
            for c in self.facts.calls_by_method.get("fit", ())
            if c.receiver is not None and self._built(c.receiver, c.scope, self.trainers)
        ]

    def trained_modules(self, trainer: CallSite) -> list[Scope]:
        """The LightningModule classes of this file a Trainer's `fit` calls are given;
        none when some model given is not one of them (a parameter, a class of another
        file) or the Trainer is not fit here: what it trains is not known."""
        found: dict[int, Scope] = {}
        for fit in self.fits:
            if fit.receiver is None or not self._built(fit.receiver, fit.scope, [trainer]):
                continue
            given = self.fit_model(fit)
            if given is MISSING:
                return []
            for value, scope in self.values.origins(given, fit.scope):
                cls = self._constructed(value, scope)
                if cls is None:
                    return []
                found[id(cls)] = cls
        return list(found.values())

    def _constructed(self, node: cst.BaseExpression, scope: Scope) -> Scope | None:
        """The LightningModule class of this file `node` builds (`LitModel(...)`)."""
        if not isinstance(node, cst.Call):
            return None
        cls = self.functions.class_scope(node.func, scope)
        return cls if cls is not None and cls in self.lightning_modules else None

    @staticmethod
    def fit_model(fit: CallSite) -> cst.BaseExpression:
        """The model `trainer.fit(...)` is given, or MISSING."""
        return argument(fit.node, "model", FIT_PARAMS)

    @staticmethod
    def fitted(fit: CallSite) -> cst.BaseExpression:
        """The training loaders `trainer.fit(...)` is given, or MISSING."""
        loader = argument(fit.node, "train_dataloaders", FIT_PARAMS)
        return fit.kwarg("train_dataloader") if loader is MISSING else loader  # 1.x spelling

    @cached_property
    def lightning_starts(self) -> list[CallSite]:
        """Where Lightning training starts in this file: `trainer.fit(...)`, `LightningCLI(...)`."""
        return sorted(self.fits + self.clis, key=lambda c: c.order)

    # -- PyTorch-Ignite ----------------------------------------------------------------

    @cached_property
    def _ignite_engines(self) -> list[tuple[CallSite, cst.FunctionDef]]:
        """Each ignite `Engine(f)` of this file whose process function `f`, a function of
        the file, steps an optimizer (`def train_step(engine, batch): ... opt.step()`)."""
        found = []
        for engine in self._calls(lambda q: q in IGNITE_ENGINES):
            process = argument(engine.node, "process_function", ("process_function",))
            if process is MISSING:
                continue
            target = self.functions.definition(process, engine.scope)
            node = target.node if target is not None else None
            if isinstance(node, cst.FunctionDef) and self.training.does(node, "step"):
                found.append((engine, node))
        return found

    @cached_property
    def ignite_steps(self) -> list[cst.FunctionDef]:
        """The process functions of the ignite engines that train (run every iteration)."""
        return list({id(f): f for _, f in self._ignite_engines}.values())

    @cached_property
    def ignite_trainers(self) -> list[CallSite]:
        """The ignite engines of this file that train: `Engine(f)` of an `ignite_steps`
        function, `create_supervised_trainer(...)`."""
        built = [e for e, _ in self._ignite_engines] + self._calls(lambda q: q in IGNITE_TRAINERS)
        return sorted(built, key=lambda c: c.order)

    def ignite_output(self, function: cst.FunctionDef) -> set[int]:
        """ids of the statements of an ignite process function that make its output: its
        `return` statements and the assignments of the names they return. Ignite's
        handlers (`RunningAverage`, `TerminateOnNan`, progress bars, loggers) read the
        output every iteration and call `.item()` on a tensor themselves."""
        returned = self.functions.returned_names(function)
        found: set[int] = set()
        for line in descendants(function.body):
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for small in line.body:
                assigned = small.targets if isinstance(small, cst.Assign) else ()
                names = {n for t in assigned for n in target_names(t.target)}
                if isinstance(small, cst.Return) or names & returned:
                    found.add(id(line))
        return found

    @cached_property
    def ignite_supervised(self) -> list[CallSite]:
        """`create_supervised_trainer(model, optimizer, loss_fn, ...)` calls of the file
        that are given a model."""
        return [c for c in self._calls(lambda q: q in IGNITE_TRAINERS) if c.node.args]

    @cached_property
    def ignite_networks(self) -> list[Model]:
        """The networks the ignite engines of the file train: those a process function
        calls, the model `create_supervised_trainer` is given."""
        found = [
            site
            for function in self.ignite_steps
            for call in self.training.calls_in(function)
            if (site := self.models.called(call)) is not None and site.is_network
        ]
        for trainer in self.ignite_supervised:
            site = self.models.of(trainer.node.args[0].value, trainer.scope)
            if site is not None and site.is_network:
                found.append(site)
        return found

    def ignite_trainer_of(self, sites: Sequence[Model]) -> cst.CSTNode | None:
        """Where an ignite engine trains one of `sites`: its process function's `def`
        name, or the `create_supervised_trainer(...)` call."""
        for function in self.ignite_steps:
            if any(self.models.called(c) in sites for c in self.training.calls_in(function)):
                return function.name
        for trainer in self.ignite_supervised:
            if self.models.of(trainer.node.args[0].value, trainer.scope) in sites:
                return trainer.node
        return None

    @cached_property
    def ignite_runs(self) -> list[CallSite]:
        """`trainer.run(loader, max_epochs=...)` on an ignite engine that trains."""
        return [
            c
            for c in self.facts.calls_by_method.get("run", ())
            if c.receiver is not None and self._built(c.receiver, c.scope, self.ignite_trainers)
        ]

    # -- Hugging Face ------------------------------------------------------------------

    @cached_property
    def training_arguments(self) -> list[CallSite]:
        """`TrainingArguments(...)` / `Seq2SeqTrainingArguments(...)` of transformers."""
        return self._calls(lambda q: q in TRAINING_ARGUMENTS)

    @cached_property
    def readable_gpu_arguments(self) -> list[CallSite]:
        """The `training_arguments` a rule can judge: every setting readable (only the
        output directory positional, nothing spread) and not asking for the CPU."""
        return [a for a in self.training_arguments if not opaque(a, 1) and not self.on_cpu(a)]

    @cached_property
    def hf_trainers(self) -> list[CallSite]:
        return self._calls(hf_trainer)

    def trainers_given(self, arguments: CallSite) -> list[CallSite]:
        """The Hugging Face trainers built with these arguments (`args=`, or second)."""
        found = []
        for trainer in self.hf_trainers:
            given = argument(trainer.node, "args", ("model", "args"))
            if given is not MISSING and self._built(given, trainer.scope, [arguments]):
                found.append(trainer)
        return found

    def train_calls(self, trainers: list[CallSite]) -> list[CallSite]:
        """`trainer.train()` on these trainers."""
        return [
            c
            for c in self.facts.calls_by_method.get("train", ())
            if c.receiver is not None and self._built(c.receiver, c.scope, trainers)
        ]

    def batch_size(self, args: CallSite) -> Constant | int | None:
        """`per_device_train_batch_size` of `args`, as `integer` reads it (default 8)."""
        return self.integer(args, "per_device_train_batch_size", 8)

    def integer(self, args: CallSite, name: str, default: int) -> Constant | int | None:
        """An integer setting of `args`: `default` when not given, its constant when the
        file shows one (`Constant.origin` says where it is written), else None."""
        value = args.kwarg(name)
        if value is MISSING:
            return default
        found = self.values.constant(value, args.scope)
        if found is None or not isinstance(found.value, int) or isinstance(found.value, bool):
            return None
        return found

    # -- helpers -----------------------------------------------------------------------

    def _calls(self, test: Callable[[str], bool]) -> list[CallSite]:
        found = [c for q, calls in self.facts.calls_by_qualname.items() if test(q) for c in calls]
        return sorted(found, key=lambda c: c.order)

    def _built(self, node: cst.BaseExpression, scope: Scope, calls: list[CallSite]) -> bool:
        """`node` may hold what one of `calls` builds (through names, parameters, helpers)."""
        nodes = {id(c.node) for c in calls}
        return any(id(value) in nodes for value, _ in self.values.origins(node, scope))

    @cached_property
    def reloads_loaders(self) -> bool:
        """A Lightning Trainer of the file reloads its loaders every N epochs
        (`reload_dataloaders_every_n_epochs`): with persistent workers, Lightning advises
        against pinning memory (pytorch/pytorch#91252)."""
        return any(
            (reload := t.kwarg("reload_dataloaders_every_n_epochs")) is not MISSING
            and int_value(reload) != 0
            for t in self.trainers
        )

    @cached_property
    def non_blocking_copies(self) -> bool:
        """Accelerate moves batches with non-blocking copies: a `DataLoaderConfiguration`
        of the file says `non_blocking=True` (its default is False: blocking copies)."""
        return any(
            (value := c.kwarg("non_blocking")) is not MISSING and bool_value(value) is not False
            for c in self.facts.calls
            if c.qualname in DATALOADER_CONFIGURATION
        )

    @cached_property
    def cpu_only(self) -> bool:
        """The file configures framework training, and every configuration runs on the CPU
        (`Trainer(accelerator="cpu")`, `TrainingArguments(use_cpu=True)`)."""
        configs = self.trainers + self.training_arguments + self.clis
        return bool(configs) and all(self.on_cpu(c) for c in configs)

    @cached_property
    def clis(self) -> list[CallSite]:
        """`LightningCLI(...)` constructions: they build a Trainer from `trainer_defaults`."""
        return self._calls(lambda q: lightning(q, "LightningCLI"))

    def on_cpu(self, call: CallSite) -> bool:
        """A Lightning Trainer or TrainingArguments that asks for the CPU: `accelerator=
        "cpu"`, `use_cpu=True` (`no_cuda=True` before transformers 4.34), read through
        constants; a value we cannot read (`use_cpu=not torch.cuda.is_available()`) is a GPU
        where there is one."""
        defaults = call.kwarg("trainer_defaults")  # LightningCLI's Trainer arguments
        if isinstance(defaults, cst.Dict):
            for element in defaults.elements:
                if isinstance(element, cst.DictElement) and str_value(element.key) == "accelerator":
                    found = self.values.constant(element.value, call.scope)
                    return found is not None and found.value == "cpu"
        for name, wanted in (("accelerator", "cpu"), ("use_cpu", True), ("no_cuda", True)):
            value = call.kwarg(name)
            found = self.values.constant(value, call.scope) if value is not MISSING else None
            if found is not None and found.value == wanted:
                return True
        return False

    def on_gpu(self, trainer: CallSite) -> bool:
        """A Lightning Trainer that trains on a GPU where there is one: not on the CPU, and,
        for `pytorch_lightning` (1.x trains on the CPU by default), one that asks for a
        device (`accelerator=`, `gpus=`, `devices=`)."""
        if self.on_cpu(trainer):
            return False
        package = (trainer.qualname or "").split(".", 1)[0]
        return package != "pytorch_lightning" or _asks_for_device(trainer)


def _asks_for_device(call: CallSite) -> bool:
    return any(call.kwarg(k) is not MISSING for k in ("accelerator", "gpus", "devices"))


def opaque(call: CallSite, positional: int) -> bool:
    """Settings we cannot read: `*args`/`**kwargs`, or more than `positional` positional
    arguments (their order changes between versions)."""
    return any(a.star for a in call.node.args) or len(call.positional) > positional
