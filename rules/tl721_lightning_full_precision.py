"""TL721 lightning-full-precision: the Lightning Trainer trains in float32.

What: a PyTorch Lightning `Trainer(...)` (`lightning`, `lightning.pytorch` or
`pytorch_lightning`) on a GPU run (not `accelerator="cpu"`) whose `precision` is left at
its default (`"32-true"`) or set to 32 (`32`, `"32"`, `"32-true"`: a literal or a
constant the file shows). Left alone: a value the file cannot read or an option the user
sets (`precision=args.precision`), precision plugins (`plugins=`), files that already run
below float32 (autocast, `.half()`, a model loaded in bfloat16, quantization) or choose
the float32 matmul precision (`torch.set_float32_matmul_precision("high")`,
`torch.backends.cuda.matmul.allow_tf32 = True`), and Trainers built from
`*args`/`**kwargs`. In files that import `pytorch_lightning` (which may be 1.x, where a
Trainer without `gpus`/`accelerator`/`devices` trains on the CPU), only Trainers that ask
for a device are checked. Not reported where the LightningModules of the file that the
Trainer's `fit` is given are toys (under 1M parameters, counted from their layers'
sizes; a module passed in from elsewhere, or of a size the file does not show, counts
as large), nor where their `training_step` computes a binary cross-entropy on
probabilities (`nn.BCELoss`, `F.binary_cross_entropy`, directly or in a method it
calls; not the `WithLogits` forms), which autocast refuses with a RuntimeError: with
`precision="bf16-mixed"` training would raise. Off by default: whether the model is big
enough for tensor cores to matter is often not in the file (many Lightning scripts
train small MLPs, GRUs and MNIST CNNs, where the gain is small; see docs/precision.md),
as for TL501; enable it with `--extend-select TL721`.

Why: in float32 the GPU's tensor cores sit idle: bf16 or fp16 mixed precision runs
matmuls and convolutions 2-3x faster on Volta and newer GPUs and halves activation
memory. Lightning switches it on with one argument.

Bad:
    trainer = L.Trainer(max_epochs=10)

Good:
    trainer = L.Trainer(max_epochs=10, precision="bf16-mixed")  # Ampere and newer

Fix (unsafe): set `precision=PRECISION`, defined once after the imports as `"bf16-mixed"`
where the GPU has bfloat16 tensor cores (`torch.cuda.get_device_capability()` 8.0 or
newer: Ampere) and `"32-true"` elsewhere (`"bf16"` and `32` in files that import
`pytorch_lightning`, which may be 1.x, where the `-mixed` names do not exist): an older
GPU (T4, V100; there `"16-mixed"` is the speed-up), a CPU or MPS run is left as it was
(Lightning would otherwise run bfloat16 autocast on the CPU too). Unsafe because
numerics change (results differ in the last bits; a few models need float32 layers).

Impact: Always high: the Trainers whose modules gain nothing measurable (toys) or
would raise under autocast (a binary cross-entropy on probabilities) are not reported;
elsewhere tensor cores speed up every step and activations take half the memory.

Unknown device: Lightning picks the device, so a Trainer is a GPU run unless it asks for
the CPU (`accelerator="cpu"`, read through constants), and an `accelerator=` the file
cannot read counts as a GPU where there is one (Lightning's default, "auto", takes it);
with `pytorch_lightning` (1.x trains on the CPU by default) only a Trainer that asks for
a device counts. The fix's `PRECISION` is "32-true" without an Ampere GPU, so such a run
is unchanged.

Sources: Lightning docs, "N-Bit Precision (Basic)" (`precision="bf16-mixed"`,
`"16-mixed"`) and "Speed Up Model Training", "Mixed Precision (16-bit) Training"
("upto +3X speedups on modern GPUs"); PyTorch Performance Tuning Guide, "Use mixed
precision and AMP".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import AMPERE, set_kwarg
from torchlint.fixes import Applicability, Definition, Fix, FixSafety, Import, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, CallSite, TorchModule, opaque, toy

FULL = (32, "32", "32-true")
NAME = "PRECISION"
COMMENT = (
    "# Lightning precision: bfloat16 mixed precision where the GPU has bfloat16 tensor\n"
    "# cores (Ampere and newer), else float32 as before.\n"
)
DEFINITIONS = {
    package: Definition(
        NAME, f"{COMMENT}{NAME} = (\n    {bf16}\n    if {AMPERE}\n    else {fp32}\n)\n"
    )
    for package, bf16, fp32 in (
        ("lightning", '"bf16-mixed"', '"32-true"'),
        ("pytorch_lightning", '"bf16"', "32"),
    )
}


class LightningFullPrecision(Rule):
    code = "TL721"
    name = "lightning-full-precision"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False
    tokens = ("Trainer",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        frameworks = module.frameworks
        if (
            not frameworks.trainers
            or module.workload.reduced_precision
            or module.sets_matmul_precision
        ):
            return
        for trainer in frameworks.trainers:
            if opaque(trainer, 0) or not frameworks.on_gpu(trainer):
                continue
            if _toy(module, trainer):
                continue
            if _refused_by_autocast(module, trainer):
                continue
            if trainer.kwarg("plugins") is not MISSING:
                continue
            precision = trainer.kwarg("precision")
            if precision is not MISSING:
                found = module.values.constant(precision, trainer.scope)
                if found is None or found.value not in FULL or found.origin == "argparse":
                    continue
            yield self.diagnostic(
                trainer.node,
                "this Lightning Trainer trains in float32: on the GPU, "
                '`precision="bf16-mixed"` runs matmuls on tensor cores (often 2-3x faster) '
                'with half the activation memory (Ampere or newer; `"16-mixed"` on older GPUs)',
                fix=_fix(module, trainer),
            )


def _fix(module: TorchModule, trainer: CallSite) -> Fix | None:
    package = (trainer.qualname or "").split(".", 1)[0]
    definition = DEFINITIONS.get(package)
    if definition is None or not module.definable(NAME):
        return None
    if not module.imports_plainly("torch"):
        return None  # the definition writes `torch.cuda`
    return fix(
        f"Set `precision={NAME}` (bf16 mixed precision on Ampere and newer GPUs)",
        Applicability.UNSAFE,
        Replace(trainer.node, set_kwarg(trainer.node, "precision", cst.Name(NAME))),
        imports=[Import("torch")],
        definitions=[definition],
    )


def _toy(module: TorchModule, trainer: CallSite) -> bool:
    """The LightningModules the Trainer trains hold fewer than a million parameters."""
    classes = module.frameworks.trained_modules(trainer)
    return toy(module.networks.class_parameters(c) for c in classes)


def _refused_by_autocast(module: TorchModule, trainer: CallSite) -> bool:
    """Every `training_step` the Trainer runs computes a binary cross-entropy on
    probabilities, which autocast refuses: mixed precision would raise."""
    classes = module.frameworks.trained_modules(trainer)
    steps = module.frameworks.training_steps_of(classes)
    return bool(steps) and all(
        module.workload.autocast_refused(module.training.calls_in(s)) is not None for s in steps
    )
