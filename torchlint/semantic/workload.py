"""How heavy the work is: computation below float32 (autocast, a GradScaler, `.half()`, a
model loaded in reduced precision or quantized) and what refuses it; networks whose
memory sets the batch size; steps that run a large network; full-batch teaching loops;
a file that says it runs on several GPUs."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.frameworks import Frameworks
from torchlint.semantic.functions import Functions
from torchlint.semantic.loops import Training
from torchlint.semantic.models import Model, Models, ModelSite
from torchlint.semantic.networks import BILLION, Networks, size_in_name, toy
from torchlint.semantic.scopes import CallSite, Kind, Loop, Scope
from torchlint.semantic.syntax import (
    MISSING,
    argument,
    contains,
    dotted_name,
    names_read,
    str_value,
)
from torchlint.semantic.values import Values

LOW_PRECISION = ("torch.float16", "torch.half", "torch.bfloat16")
LOW_PRECISION_METHODS = ("half", "bfloat16")
# `from_pretrained(..., torch_dtype="bfloat16")`: "auto" loads the checkpoint's dtype.
LOW_PRECISION_NAMES = ("float16", "half", "bfloat16", "auto")
QUANTIZED = ("load_in_8bit", "load_in_4bit", "quantization_config")
APEX = ("apex.amp.initialize",)  # NVIDIA apex's mixed precision (O1-O3)
# Ops autocast refuses in float16/bfloat16 regions ("unsafe to autocast"): they raise.
AUTOCAST_REFUSED = ("torch.nn.BCELoss", "torch.nn.functional.binary_cross_entropy")
DEVICE_COUNTS = ("torch.cuda.device_count", "torch.accelerator.device_count")
HEAVY_STEP = 100_000_000  # parameters
# Building a model without allocating it, or sharding it across GPUs: done for models too
# large for one GPU, whose batch is a memory budget.
SHARDING = (
    "accelerate.init_empty_weights",
    "deepspeed.initialize",
    "deepspeed.zero.Init",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
    "torch.distributed.tensor.parallel.parallelize_module",
    "lightning.fabric.strategies.FSDPStrategy",
    "lightning.fabric.strategies.ModelParallelStrategy",
    "lightning.pytorch.strategies.FSDPStrategy",
    "lightning.pytorch.strategies.ModelParallelStrategy",
)


class Workload:
    """How heavy one file's work is (see the module's docstring)."""

    def __init__(
        self,
        facts: Facts,
        functions: Functions,
        values: Values,
        models: Models,
        networks: Networks,
        training: Training,
        frameworks: Frameworks,
    ) -> None:
        self.facts = facts
        self.functions = functions
        self.values = values
        self.models = models
        self.networks = networks
        self.training = training
        self.frameworks = frameworks

    @cached_property
    def reduced_precision(self) -> bool:
        """Some computation is set to run below float32: autocast, a GradScaler, `.half()`,
        `.bfloat16()`, a float16/bfloat16 dtype passed, a model loaded in reduced precision
        or quantized (`from_pretrained(..., torch_dtype="bfloat16")`, `dtype="auto"`,
        `load_in_4bit=True`, `quantization_config=...`)."""
        return bool(self._amp_calls) or self._cast_below_float32()

    @cached_property
    def precision_opt_in(self) -> cst.BaseExpression | None:
        """The flag that turns mixed precision on, where it is the file's only way to it:
        every autocast and GradScaler is given `enabled=` a flag the file sets to False
        by default (an option, a config entry, a parameter's default: `--amp` with
        `action="store_true"`), and nothing else runs below float32. The default run then
        trains in float32. None otherwise."""
        calls = self._amp_calls
        if not calls or self._cast_below_float32():
            return None
        for call in calls:
            enabled = call.kwarg("enabled")
            found = self.values.constant(enabled, call.scope) if enabled is not MISSING else None
            if found is None or found.origin == "literal" or found.value:
                return None
        return calls[0].kwarg("enabled")

    @cached_property
    def autocasts(self) -> list[CallSite]:
        """The calls that open an autocast region: `torch.autocast(...)`,
        `torch.cuda.amp.autocast()`, `amp.autocast()` however imported."""
        found = list(self.facts.method_calls("autocast"))
        for qualname, calls in self.facts.calls_by_qualname.items():
            if qualname.rsplit(".", 1)[-1] == "autocast":
                found += [c for c in calls if c not in found]
        return found

    @cached_property
    def _amp_calls(self) -> list[CallSite]:
        """`autocasts`, `GradScaler(...)` and the rest of `torch.amp`."""
        found = list(self.autocasts)
        for qualname, calls in self.facts.calls_by_qualname.items():
            if qualname.rsplit(".", 1)[-1] == "GradScaler" or qualname.startswith("torch.amp."):
                found += [c for c in calls if c not in found]
        return sorted(found, key=lambda c: c.order)

    def _cast_below_float32(self) -> bool:
        """`.half()`, `.bfloat16()`, apex's `amp.initialize`, a reduced dtype passed (not
        to autocast), a model loaded in reduced precision or quantized."""
        if self.facts.method_calls(*LOW_PRECISION_METHODS) or self.facts.calls_to(*APEX):
            return True
        if any(self.loaded_below_float32(site) for site in self.models.sites):
            return True
        amp = {id(c) for c in self._amp_calls}
        for call in self.facts.calls:
            for arg in call.node.args if id(call) not in amp else ():
                if call.scope.resolve(arg.value) in LOW_PRECISION:
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
            site = self.models.called(call)
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
        for call in self.models.method_calls_on(site):
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
        says: "Llama-2-7b", a "llama"), it is loaded quantized (4/8-bit), or the file
        builds its models without allocating them or shards them (`shards_models`)."""
        if self.shards_models:
            return True
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
            site = self.models.of(model, trainer.scope)
            if site is not None and self.memory_bound(site):
                return True
            found = self.values.constant(model, trainer.scope)
            size = size_in_name(found.value) if found and isinstance(found.value, str) else None
            if size is not None and size >= BILLION:
                return True
        return False

    @cached_property
    def shards_models(self) -> bool:
        """The file builds a model without allocating it (on the meta device, under
        `init_empty_weights`, Fabric's `init_module(empty_init=True)`) or shards one
        across GPUs (FSDP, DeepSpeed, tensor parallelism): what is done for models too
        large for one GPU."""
        if self.facts.calls_to(*SHARDING):
            return True
        for call in self.facts.method_calls("init_module"):
            empty = call.kwarg("empty_init")
            if isinstance(empty, cst.Name) and empty.value == "True":
                return True
        return any(
            str_value(a.value) == "meta"
            for call in self.facts.calls_to("torch.device")
            for a in call.node.args[:1]
        )

    @cached_property
    def multi_gpu(self) -> bool:
        """Something in the file says it runs on several GPUs: it counts them
        (`torch.cuda.device_count()`), or an option, variable, attribute or string names
        their number or list or a launcher's rank (`--ngpu`, `args.gpu_ids`, `n_gpu`,
        "LOCAL_RANK", "WORLD_SIZE")."""
        return self.facts.multi_gpu_name or bool(self.facts.calls_to(*DEVICE_COUNTS))

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
        site = self.models.of(node, scope)
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

    def tiny_step(self, loop: Loop) -> bool:
        """The loop's step runs networks whose sizes are all counted and together hold
        under a million parameters (`networks.toy`): microseconds of GPU work a step,
        nothing for the CPU to run ahead of."""
        sites = [s for c in self.models.network_calls(loop) if (s := self.models.called(c))]
        return bool(sites) and toy(self.networks.parameters(s) for s in sites)

    def full_batch(self, loop: Loop) -> bool:
        """A teaching loop that fits the whole data set every step: `for epoch in
        range(n):` iterating no loader, whose network calls read only tensors bound
        before the loop (`model(X)` on the whole in-memory `X`); or, calling none, whose
        step function of this file gets only such tensors besides the counter
        (`train_iter(epoch + 1, model, optimizer, (features, adj), labels, ...)`)."""
        node = loop.node
        if not isinstance(node, cst.For) or not isinstance(node.iter, cst.Call):
            return False
        if loop.ctx.scope.resolve(node.iter.func) != "range" or loop.loaders:
            return False
        if any(outer.loaders or not isinstance(outer.node, cst.For) for outer in loop.ctx.loops):
            return False
        calls = self.models.network_calls(loop)
        if not calls:
            return self._whole_data_step(loop)
        return all(
            call.node.args and all(self._bound_before(a.value, loop) for a in call.node.args)
            for call in calls
        )

    def micro_batches(self, loop: Loop, node: cst.CSTNode) -> int | None:
        """How many micro-batches the step loop runs per pass around `node` (which runs
        once per pass): a loop nested in it, not holding `node`, runs the backward pass
        and no optimizer step `range(K)` times, K a constant of at least 4 (0: a name
        for accumulation, `gradient_accumulation_steps`, whose value cannot be read);
        None otherwise."""
        for inner in loop.inner:
            step = inner.node
            if not inner.backwards or inner.steps or contains(step, node):
                continue  # accumulating: backward passes, the optimizer steps after
            if not isinstance(step, cst.For):
                continue
            source = step.iter
            if not isinstance(source, cst.Call) or len(source.args) != 1:
                continue
            if inner.ctx.scope.resolve(source.func) != "range":
                continue
            count = source.args[0].value
            found = self.values.constant(count, inner.ctx.scope)
            if found is not None and type(found.value) is int and found.value >= 4:
                return found.value
            if found is None and "accum" in (dotted_name(count) or "").lower():
                return 0
        return None

    def _whole_data_step(self, loop: Loop) -> bool:
        """The loop's calls of functions of this file that train (a backward pass) pass
        only names bound before the loop, tuples of them and the loop's counter."""
        assert isinstance(loop.node, cst.For)
        counter = set(names_read(loop.node.target))
        steps = [
            call
            for call in loop.calls
            if (target := self.functions.target(call)) is not None
            and any(self.training.is_backward(c) for c in self.training.calls_in(target.function))
        ]
        return bool(steps) and all(
            not a.star and self._whole(a.value, loop, counter)
            for call in steps
            for a in call.node.args
        )

    def _whole(self, value: cst.BaseExpression, loop: Loop, counter: set[str]) -> bool:
        """An argument of the whole data: a name bound before the loop, an option, a
        constant, the counter (`epoch + 1`), or a tuple of those."""
        if isinstance(value, cst.Tuple):
            return all(self._whole(e.value, loop, counter) for e in value.elements)
        if isinstance(value, (cst.Attribute, cst.Integer, cst.Float, cst.SimpleString)):
            return True
        read = set(names_read(value))
        return (bool(read) and read <= counter) or self._bound_before(value, loop)

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
