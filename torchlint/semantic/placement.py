"""Where the file puts work: on a GPU (`uses_gpu`, here or, as the project says, where
other files use what it builds), presumably on an accelerator, on the CPU too
(`runs_without_gpu`), on any device at all (`handles_devices`); the frameworks that own
the devices (`managed`)."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.devices import Devices
from torchlint.semantic.external import Environment, Uses
from torchlint.semantic.frameworks import Frameworks
from torchlint.semantic.functions import Functions
from torchlint.semantic.loaders import Loaders
from torchlint.semantic.models import Model, Models, ModelSite
from torchlint.semantic.scopes import CallSite, Context, Kind
from torchlint.semantic.syntax import MISSING

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


# GPU calls that place no work on a device.
NOT_PLACEMENT = frozenset({"torch.cuda.empty_cache"})


class Placement:
    """Where one file puts its work (see the module's docstring)."""

    def __init__(
        self,
        facts: Facts,
        devices: Devices,
        models: Models,
        loaders: Loaders,
        frameworks: Frameworks,
        functions: Functions,
        env: Environment,
    ) -> None:
        self.facts = facts
        self.devices = devices
        self.models = models
        self.loaders = loaders
        self.frameworks = frameworks
        self.functions = functions
        self.env = env

    @cached_property
    def managed(self) -> bool:
        """Lightning, Accelerate, DeepSpeed or the transformers Trainer own the devices
        (imported, or called through a plain `import transformers`)."""
        return self.facts.imports_any(*MANAGED_PREFIXES) or any(
            q == p or q.startswith(p + ".")
            for q in self.facts.calls_by_qualname
            for p in MANAGED_PREFIXES
        )

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
        if self.facts.cuda_strings or self.facts.method_calls("cuda"):
            return True
        if self._gpu_elsewhere:
            return True
        if any(
            q.startswith(("torch.cuda.", "torch.accelerator.")) and q not in ignored
            for q in self.facts.calls_by_qualname
        ):
            return True
        for call in self.facts.calls:
            if call.method == "to" or call.qualname == "torch.device":
                found = (
                    self.devices.move(call)
                    if call.method == "to"
                    else self.devices.classify(call.node, call.scope)
                )
                if found is not None and found.is_gpu:
                    return True
            device = call.kwarg("device")
            if device is not MISSING:
                found = self.devices.classify(device, call.scope)
                if found is not None and found.is_gpu:
                    return True
        return False

    @cached_property
    def _gpu_elsewhere(self) -> bool:
        """The project's other files put what this file builds on a GPU (its loaders'
        batches, its models), pass in models on a GPU, or call its functions in training
        on a GPU."""
        if any(site.outside is not None and site.outside.gpu for site in self.loaders.sites):
            return True
        if any(s.external is not None and s.external.on_gpu for s in self.models.passed):
            return True
        if any((u := self.model_uses(site)) is not None and u.gpu for site in self.models.sites):
            return True
        return self.env.any_stepped()

    @cached_property
    def presumed_accelerator(self) -> bool:
        """No call shows the device, but a training loop moves its batches to a device
        its function receives as a parameter (`def train(model, loader, optimizer,
        device)`): training code for an accelerator. Rules whose advice is harmless on a
        CPU (per-step syncs) treat it as GPU code; rules whose fix could hurt there do not."""
        for loop in self.facts.loops:
            function = loop.ctx.function
            if function is None or not loop.is_step_loop:
                continue
            for call in loop.calls:
                device = self.devices.move_expression(call) if call.method == "to" else None
                symbol = call.scope.lookup_expr(device) if device is not None else None
                param = symbol.only(Kind.PARAM) if symbol is not None else None
                if (
                    param is not None
                    and param.symbol.scope.node is function
                    and self.functions.unseen(param)
                    and self.devices.move(call) is not None
                ):
                    return True
        return False

    def model_uses(self, site: Model) -> Uses | None:
        """What the project's other files do with a model built here."""
        return self.env.uses(f"@{site.index}") if isinstance(site, ModelSite) else None

    def kept_on_cpu(self, site: Model) -> bool:
        """A model built here and kept on the CPU on purpose: moved there (`.to("cpu")`,
        `.to(device)` of a CPU device) and nowhere else, used by no other file of the
        project, in a file no framework owns the devices of. A notebook that trains on the
        CPU first and on the GPU later has such a model in its first half; a model never
        moved is one forgotten on the CPU (TL102), not kept there."""
        if not isinstance(site, ModelSite) or site.external is not None or self.managed:
            return False
        if not site.moves or not all(self.to_cpu(m) for m in site.moves):
            return False
        uses = self.model_uses(site)
        return uses is None or not uses.gpu

    def to_cpu(self, move: CallSite) -> bool:
        """The move goes to the CPU: its device is the CPU on every path, or, at a script's
        or notebook's top level, the device name's value that reaches it is (`device =
        "cpu"` in an early cell, `device = "cuda"` in a later one)."""
        device = self.devices.move(move)
        if device is not None and device.is_cpu:
            return True
        named = self.devices.move_expression(move)
        reaching = self._reaching(named, move.ctx) if isinstance(named, cst.Name) else None
        found = self.devices.classify(reaching, move.scope) if reaching is not None else None
        return found is not None and found.is_cpu

    def _reaching(self, name: cst.Name, where: Context) -> cst.BaseExpression | None:
        """The value of the last top-level assignment of `name` before the top-level
        statement holding `where`, at a module's top level where every assignment of the
        name is a top-level statement (straight-line code: a script, a notebook's cells)."""
        if where.function is not None or where.scope.parent is not None:
            return None
        symbol = where.scope.lookup(name.value)
        if symbol is None or any(
            b.kind is not Kind.ASSIGN or b.ctx.ifs or b.ctx.loops or b.ctx.withs
            for b in symbol.bindings
        ):
            return None
        rank = {id(statement): i for i, statement in enumerate(self.facts.module.body)}
        at = _top_rank(where, rank)
        before = [(_top_rank(b.ctx, rank), b.value) for b in symbol.bindings]
        earlier = [
            (r, v)
            for r, v in before
            if r is not None and v is not None and at is not None and r < at
        ]
        return max(earlier, key=lambda found: found[0])[1] if earlier else None

    @cached_property
    def runs_without_gpu(self) -> bool:
        """The script is written to run on the CPU too: it asks whether a GPU is there,
        moves to one only under a condition, or picks its device on a branch."""
        if self.facts.calls_to("torch.cuda.is_available", "torch.accelerator.is_available"):
            return True
        for call in self.facts.method_calls("to", "cuda"):
            device = self.devices.move(call)
            if device is None:
                continue
            if device.cpu_path or (device.is_gpu and call.ctx.ifs):
                return True
        return False

    def handles_devices(self) -> bool:
        """Anything in the file places work on a device: `.to(<device>)`, `.cuda()`,
        `torch.device(...)`, a `device=` argument, `torch.cuda`/`torch.accelerator` calls,
        `torch.set_default_device`, a device string, or a managed framework. Not
        `torch.cuda.empty_cache()`, which places nothing (and TL402 removes it)."""
        if self._gpu_evidence(NOT_PLACEMENT):
            return True
        for call in self.facts.calls:
            if call.kwarg("device") is not MISSING:
                return True
            if call.method == "to" and self.devices.move(call) is not None:
                return True
            if call.qualname in ("torch.device", "torch.set_default_device"):
                return True
        return False


def _top_rank(ctx: Context, rank: dict[int, int]) -> int | None:
    """The rank in the module's body of the top-level statement a context sits in."""
    around = [*(loop.node for loop in ctx.loops), *ctx.withs, *ctx.ifs, ctx.statement]
    return next((rank[id(n)] for n in around if id(n) in rank), None)
